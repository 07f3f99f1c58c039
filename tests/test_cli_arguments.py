"""A mistyped number or port on the command line: argparse's usage error naming the option and the value, exit
status 2, nothing started and nothing written, never a Python traceback or a type's internal name."""

from __future__ import annotations

import io
from contextlib import redirect_stderr

import pytest

from rollscope.app.cli import build_parser, main


def usage_error(*args: str) -> str:
    err = io.StringIO()
    with redirect_stderr(err), pytest.raises(SystemExit) as exit_:
        main(list(args))
    assert exit_.value.code == 2
    return err.getvalue().strip().splitlines()[-1]


@pytest.mark.parametrize(
    "args, message",
    [
        (("collect", "--port", "99999"), "argument --port: a port is 0-65535, not '99999'"),
        (("collect", "--grpc-port", "grpc"), "argument --grpc-port: a port is 0-65535 or 'off', not 'grpc'"),
        (("collect", "--commit-window", "-1"), "argument --commit-window: must be at least 0, not -1"),
        (("collect", "--max-request-mib", "0"), "argument --max-request-mib: must be more than 0, not 0"),
        (("dashboard", "--port", "0"), "argument --port: a port is 1-65535, not '0'"),
        (("simulate", "--run-id", "a", "--spans", "1.5"), "argument --spans: '1.5' is not a whole number"),
        (("simulate", "--run-id", "a", "--spans", "lots"), "argument --spans: 'lots' is not a number"),
        (("simulate", "--run-id", "a", "--pace", "-2"), "argument --pace: must be at least 0, not -2"),
        (("simulate", "--run-id", "a", "--pace", "inf"), "argument --pace: 'inf' is not a number"),
        (("compact", "--grace", "nan"), "argument --grace: 'nan' is not a number"),
    ],
)
def test_a_bad_number_is_a_usage_error(tmp_path, args, message):
    command = args[0]
    assert usage_error(*args, "--store", str(tmp_path / "store")) == f"rollscope {command}: error: {message}"
    assert not (tmp_path / "store").exists()


def test_good_numbers_still_parse():
    """What the errors above must not refuse: any free port (0) where a command binds one, spans as 1e6."""
    args = build_parser().parse_args(["collect", "--port", "0", "--grpc-port", "off", "--commit-window", "0"])
    assert (args.port, args.grpc_port, args.commit_window) == (0, "off", 0)
    args = build_parser().parse_args(["simulate", "--run-id", "a", "--spans", "1e6", "--pace", "0.5"])
    assert (args.spans, args.pace) == (1_000_000, 0.5)
    assert isinstance(args.spans, int)
