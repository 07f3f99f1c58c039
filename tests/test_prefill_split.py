"""Repeated prefill by remedy (docs/metrics.md): the prefill split, compaction's samples, the what-ifs and a
rollout's continuity marks, held to the simulator's ground truth through a reader that derives a run from scratch
and one that catches up as segments arrive, and to hand-written runs for the rules the simulator does not exercise.
"""

from __future__ import annotations

import pandas as pd
import pytest

from rollscope import attach
from rollscope.queries import Reader, analyses, connect, trace
from rollscope.simulator.groundtruth import PREFILL_SPLIT
from rollscope.store.layout import SegmentWriter
from tests.simulated_runs import simulated
from tests.test_reader_incremental import stored_spans

# the ground truth's keys under the analysis's names (compactions: each starts an extra sample); the tokens the
# extra samples train on are checked on their own (the analysis counts those of usable rollouts)
TRUTH = {
    ("extra_samples" if key == "compactions" else key): key
    for key in PREFILL_SPLIT
    if key != "compaction_after_tokens"
}


def expected(piece: dict) -> dict:
    return {column: piece["prefill_split"][key] for column, key in TRUTH.items()}


def got(row) -> dict:
    return {column: int(row[column]) for column in TRUTH}


def assert_split_is_the_truth(con, run_id: str, truth: dict) -> None:
    """The split for the run, per environment, per consuming step and per turn index, as the plan made it."""
    whole = analyses.record(analyses.prefill_split(con, run_id))
    assert got(whole) == expected(truth["run"])
    assert whole["prefill_tokens"] == truth["run"]["prefill_decode"]["input_tokens"]
    assert whole["reprefill_tokens"] == truth["run"]["prefill_decode"]["reprefill_waste_tokens"]
    by_env = analyses.prefill_split(con, run_id, by="environment").set_index("environment")
    assert {env: got(row) for env, row in by_env.iterrows()} == {
        env: expected(piece) for env, piece in truth["by_environment"].items()
    }
    by_step = analyses.prefill_split(con, run_id, by="step").set_index("step")
    assert {step: got(row) for step, row in by_step.iterrows()} == {
        s["train_step"]: expected(s) for s in truth["by_step"]
    }
    by_turn = analyses.prefill_split(con, run_id, by="turn_index").set_index("turn_index")
    assert {index: got(row) for index, row in by_turn.iterrows()} == {
        t["turn_index"]: expected(t) for t in truth["by_turn_index"]
    }


@pytest.mark.long
@pytest.mark.parametrize("name", ["samples", "derived"])
def test_the_split_is_the_ground_truth_whether_or_not_the_trainer_records_samples(name):
    store, truth = simulated(name)
    split = truth["run"]["prefill_split"]
    # the run shows every remedy: re-rendered, evicted and moved turns, members prefilling their group's prompt
    # again, compactions
    assert all(value > 0 for value in split.values())
    assert_split_is_the_truth(connect(store), name, truth)


@pytest.mark.long
def test_a_reader_catching_up_segment_by_segment_holds_the_ground_truth(tmp_path):
    """The run's spans published in time order, a few segments, the reader caught up after each: incremental
    catch-ups (not a derivation from scratch) end where the plan did."""
    source, truth = simulated("samples")
    spans = stored_spans(source, "samples").sort_by("start_ns")
    writer, live = SegmentWriter(tmp_path), None
    cuts = [spans.num_rows * i // 5 for i in range(6)]
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        writer.publish("samples", spans.slice(lo, hi - lo))
        live = live or Reader(tmp_path)
        live.refresh()
    assert live.derived_how["incremental"] >= 2, live.derived_how
    assert_split_is_the_truth(live.con, "samples", truth)


@pytest.mark.long
def test_compaction_makes_more_samples_but_the_funnel_counts_each_rollout_once():
    store, truth = simulated("samples")
    con = connect(store)
    funnel = analyses.record(analyses.funnel(con, "samples"))
    assert funnel["dispatched"] == truth["run"]["funnel"]["dispatched"]
    assert funnel["usable"] == truth["run"]["funnel"]["usable"]
    steps = analyses.trainer_steps(con, "samples")
    assert steps["train_samples"].sum() == truth["run"]["trainer"]["train_samples"] > funnel["usable"]
    # each compacted rollout: one rl.sample per sample, named as its compacted turns name the samples they start
    per_rollout = con.execute(
        "SELECT rollout_id, count(*), list(sample_id ORDER BY sample_id) FROM samples "
        "WHERE run_id = 'samples' AND sample_id IS NOT NULL GROUP BY rollout_id"
    ).fetchall()
    started = dict(
        con.execute(
            "SELECT rollout_id, list(sample_id ORDER BY turn_index) FROM turns "
            "WHERE run_id = 'samples' AND compaction_tokens_before IS NOT NULL GROUP BY rollout_id"
        ).fetchall()
    )
    assert (
        per_rollout and sum(n - 1 for _, n, _ in per_rollout) == truth["run"]["prefill_split"]["compactions"]
    )
    for rollout, n, ids in per_rollout:
        assert ids == [f"{rollout}/{i}" for i in range(n)]
        assert started[rollout] == ids[1:]


@pytest.mark.long
def test_a_part_costs_its_tokens_at_the_measured_prefill_rate_in_fleet_device_seconds():
    store, truth = simulated("samples")
    con = connect(store)
    row = analyses.record(analyses.prefill_split(con, "samples"))
    base = analyses.advice_base(con, "samples")
    per_token = 1 / truth["config"]["prefill_tokens_per_s"]  # the simulator's one prefill rate
    u = base["rollout_device_s"] / base["rollout_work_s"]
    for part in (
        "reprefill_retokenized",
        "reprefill_evicted",
        "reprefill_server_changed",
        "prompt_reprefill",
    ):
        assert row[f"{part}_device_s"] == pytest.approx(row[f"{part}_tokens"] * per_token * u, rel=1e-3)
    train = base["train_device_s"] / base["train_work_s"] * base["train_s_per_token"]
    assert row["compaction_train_device_s"] == pytest.approx(row["compaction_train_tokens"] * train)
    net = row["compaction_prefill_device_s"] + row["compaction_train_device_s"]
    assert row["compaction_net_device_s"] == pytest.approx(net)
    effect = row["compaction_usable_tokens_per_device_s_change"]
    assert effect == pytest.approx(-net / base["device_seconds"])


@pytest.mark.long
def test_the_what_ifs_are_the_advisors_levers_pulled_alone():
    store, _ = simulated("samples")
    con = connect(store)
    what_if = analyses.prefill_what_if(con, "samples")
    assert list(what_if) == list(analyses.PREFILL_LEVERS)
    ranked = {row["lever"]: row for row in analyses.advice(con, "samples")}
    for lever, row in what_if.items():
        assert row["applies"], row["why_not"]
        assert row["gain"] == pytest.approx(ranked[lever]["gain"])
        assert row["device_seconds_after"] == pytest.approx(ranked[lever]["device_seconds_after"])
    assert what_if["prefix_continuity"]["gain"] > 0 and what_if["prompt_sharing"]["gain"] > 0
    # turning compaction off gives back what it costs and takes back what it saved: the split's net, negated
    # (every rollout of the simulated run was consumed: the split's turns are the consumed steps' the levers read)
    split = analyses.record(analyses.prefill_split(con, "samples"))
    base = analyses.advice_base(con, "samples")
    assert what_if["compaction"]["device_seconds_after"] == pytest.approx(
        base["device_seconds"] - split["compaction_net_device_s"], rel=1e-9
    )


@pytest.mark.long
def test_a_rollout_is_marked_where_continuity_broke_and_where_it_was_compacted():
    store, _ = simulated("samples")
    con = connect(store)
    (rollout,) = con.execute(
        "SELECT rollout_id FROM turns WHERE run_id = 'samples' AND compaction_tokens_before IS NOT NULL "
        "ORDER BY rollout_id LIMIT 1"
    ).fetchone()
    marks = trace.continuity(con, "samples", rollout)
    turns = con.execute(
        "SELECT turn_index, context_tokens, cached_input_tokens, compaction_tokens_before FROM turns "
        "WHERE run_id = 'samples' AND rollout_id = ? ORDER BY turn_index",
        [rollout],
    ).fetchall()
    assert marks["turn_index"].tolist() == [t[0] for t in turns]
    compacted = marks[marks["compaction_tokens_before"].notna()]
    assert compacted["turn_index"].tolist() == [t[0] for t in turns if t[3] is not None]
    assert set(compacted["continuity_break"]) == {"compacted"}
    assert marks["sample"].tolist() == [
        sum(t[3] is not None for t in turns[: i + 1]) for i in range(len(turns))
    ]
    again = {t[0]: max(0, (t[1] or 0) - (t[2] or 0)) for t in turns}
    for mark in marks.itertuples():
        if not pd.isna(mark.continuity_break):
            assert again[mark.turn_index] > 0
        assert mark.reprefill_tokens == again[mark.turn_index]


# --- the rules, on hand-written runs ------------------------------------------------------------------------


def _write(store, rollouts: list[tuple[str, str | None, dict, list[dict]]]) -> None:
    """Rollouts as a job writes them: (id, group, rollout fields, turn fields), one second apart."""
    rl = attach(store=store, run_id="hand", role="rollout", devices=8, set_global=False)
    for i, (rid, group, fields, turns) in enumerate(rollouts):
        start = (1_800_000_000 + 10 * i) * 10**9
        with rl.rollout(
            rid, group_id=group, environment="env", start_time=start, end_time=start + 9 * 10**9, **fields
        ):
            for k, turn in enumerate(turns):
                at = start + k * 10**9
                with rl.turn(k, start_time=at, end_time=at + 5 * 10**8, **turn):
                    pass
    rl.shutdown()


def _split(store) -> dict:
    return analyses.record(analyses.prefill_split(connect(store), "hand"))


def test_why_history_was_prefilled_again_compaction_first_then_the_record_then_the_prefix(tmp_path):
    first = {"input_tokens": 1000, "cached_input_tokens": 0}
    later = {"input_tokens": 3000, "context_tokens": 2000}
    _write(
        tmp_path,
        [
            (
                "recorded",
                None,
                {},
                [first, {**later, "cached_input_tokens": 1500, "continuity_break": "evicted"}],
            ),
            ("inferred", None, {}, [first, {**later, "cached_input_tokens": 1200, "prefix_tokens": 1200}]),
            ("engine-only", None, {}, [first, {**later, "cached_input_tokens": 1900}]),
            (
                "unknown-word",
                None,
                {},
                [first, {**later, "cached_input_tokens": 1000, "continuity_break": "gremlins"}],
            ),
            (
                "compacted",
                None,
                {},
                [
                    first,
                    {
                        **later,
                        "cached_input_tokens": 1000,
                        "continuity_break": "evicted",  # the compaction the turn records wins
                        "compaction_tokens_before": 9000,
                        "compaction_tokens_after": 2000,
                        "sample_id": "compacted/1",
                    },
                ],
            ),
            ("no-context", None, {}, [first, {"input_tokens": 3000, "cached_input_tokens": 500}]),
        ],
    )
    row = _split(tmp_path)
    assert (row["reprefill_evicted_tokens"], row["reprefill_retokenized_tokens"]) == (500, 800)
    assert row["reprefill_unattributed_tokens"] == 100 + 1000  # no reason recorded; a word it does not know
    assert (row["reprefill_compacted_tokens"], row["compaction_removed_tokens"], row["extra_samples"]) == (
        1000,
        7000,
        1,
    )
    assert row["reprefill_server_changed_tokens"] == 0
    # a turn whose history is not recorded prefilled nothing again, as far as anyone can tell: all of it new
    assert row["new_tokens"] == 6 * 1000 + 5 * 1000 + 2500
    assert row["new_tokens"] + row["cached_tokens"] + row["reprefill_tokens"] == row["prefill_tokens"]


def test_a_group_prefills_its_task_prompt_once_and_members_without_the_cache_again(tmp_path):
    prompt = {"task_prompt_tokens": 800}

    def member(cached):
        return [{"input_tokens": 1000, "cached_input_tokens": cached}]

    _write(
        tmp_path,
        [
            ("a", "g", prompt, member(0)),  # the task prompt (800 tokens) of 1,000: prefilled by the first
            ("b", "g", prompt, member(784)),  # found it, but for its last partial block
            ("c", "g", prompt, member(0)),  # prefilled it again
            ("d", "h", {}, member(0)),  # no task_prompt_tokens: the first turn's input is the prompt
            ("e", "h", {}, member(400)),
            ("f", None, {}, member(0)),  # no group: nothing to share
            (
                "i",
                "k",
                prompt,
                [{"input_tokens": 1000}],
            ),  # no cached count reported: the engine may have shared it
            ("j", "k", prompt, [{"input_tokens": 1000}]),
        ],
    )
    row = _split(tmp_path)
    assert row["prompt_reprefill_tokens"] == 16 + 800 + 600
    assert row["new_tokens"] == row["prefill_tokens"] - row["cached_tokens"] - row["prompt_reprefill_tokens"]
    by_turn = analyses.prefill_split(connect(tmp_path), "hand", by="turn_index")
    assert by_turn["turn_index"].tolist() == [0]


def test_a_few_tokens_of_history_again_for_no_reason_are_a_cache_block_not_a_mark(tmp_path):
    first = {"input_tokens": 1000, "cached_input_tokens": 0}
    _write(
        tmp_path,
        [
            (
                "r",
                None,
                {},
                [
                    first,
                    {"input_tokens": 2000, "context_tokens": 1500, "cached_input_tokens": 1488},
                    {"input_tokens": 3000, "context_tokens": 2500, "cached_input_tokens": 1000},
                ],
            )
        ],
    )
    marks = trace.continuity(connect(tmp_path), "hand", "r").set_index("turn_index")
    assert marks.loc[1, "reprefill_tokens"] == 12 and pd.isna(marks.loc[1, "continuity_break"])
    assert marks.loc[2, "reprefill_tokens"] == 1500 and marks.loc[2, "continuity_break"] == "unattributed"
    assert trace.BREAK_MIN_TOKENS > 12


def test_an_unconsumed_spans_only_run_splits_all_its_turns_and_costs_none_without_prefill_times(tmp_path):
    _write(tmp_path, [("r", None, {}, [{"input_tokens": 100, "cached_input_tokens": 0}])])
    row = _split(tmp_path)
    assert (row["turns"], row["new_tokens"]) == (1, 100)
    assert row["new_device_s"] is None  # no turn recorded its prefill time
    what_if = analyses.prefill_what_if(connect(tmp_path), "hand")
    assert not any(r["applies"] for r in what_if.values())
