"""Configuration precedence: argument, then ROLLSCOPE_* / OTEL_* variables, then the default."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollscope.collectors.settings import Settings


@pytest.mark.parametrize(
    ("env", "arguments", "expected"),
    [
        ({}, {}, {"store": Path("runs"), "role": "rollout", "devices": 0.0, "max_queue_size": 65_536}),
        (
            {"ROLLSCOPE_STORE": "/data/rs", "ROLLSCOPE_ROLE": "train"},
            {},
            {"store": Path("/data/rs"), "role": "train"},
        ),
        ({"ROLLSCOPE_ROLE": "train"}, {"role": "judge"}, {"role": "judge"}),
        ({"OTEL_BSP_MAX_QUEUE_SIZE": "4096"}, {}, {"max_queue_size": 4096}),
        ({"OTEL_BSP_MAX_QUEUE_SIZE": "lots"}, {}, {"max_queue_size": 65_536}),  # bad env: logged, default
        ({"ROLLSCOPE_ROLE": "chef"}, {}, {"role": "rollout"}),
        ({"ROLLSCOPE_DEVICES": "-3"}, {"devices": 4}, {"devices": 4}),
        ({"OTEL_SERVICE_NAME": "trainer-0"}, {}, {"service_name": "trainer-0"}),
    ],
)
def test_precedence(monkeypatch, env, arguments, expected):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = Settings.resolve(**arguments)
    assert {k: getattr(settings, k) for k in expected} == expected


@pytest.mark.parametrize("arguments", [{"role": "chef"}, {"devices": -1}, {"colour": "red"}])
def test_a_bad_argument_raises(arguments):
    with pytest.raises(ValueError):
        Settings.resolve(**arguments)


def test_attach_reads_the_run_id_from_otel_resource_attributes(monkeypatch, tmp_path):
    from rollscope.collectors import attach

    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "rl.run.id=from-env,deployment.environment=prod")
    rl = attach(store=tmp_path, set_global=False)
    try:
        assert rl.run_id == "from-env"
    finally:
        rl.shutdown()
