"""The verifiers adapter reads prefix continuity and compaction from an episode's message graph (docs/integrations.md):
a saved episode record (the JSON `traces.jsonl` holds), written by hand in verifiers' own shape, so the rules run
without the package; `tests/test_integration_verifiers.py` runs the real package."""

from __future__ import annotations

import pytest

from rollscope import attach
from rollscope.integrations.verifiers import record_episode
from rollscope.queries import analyses, connect, trace

TOKENS = {  # node -> tokens it adds to the conversation
    0: 40,  # system
    1: 200,  # user: the task
    2: 30,  # assistant, call 0
    3: 500,  # tool result
    4: 25,  # assistant, call 1
    5: 300,  # tool result (its branch then ends: the harness rewrote the history below)
    6: 20,  # assistant, as the harness re-rendered call 1's reply (reasoning stripped)
    7: 300,  # tool result, again
    8: 35,  # assistant, call 2
    9: 15,  # user: "summarize"
    10: 400,  # assistant, call 3: the summary
    11: 40,  # system, the compacted conversation's root
    12: 610,  # user: the task and the summary
    13: 45,  # assistant, call 4, resumed from the compaction
}
PARENTS = {0: None, 1: 0, 2: 1, 3: 2, 4: 3, 5: 4, 6: 3, 7: 6, 8: 7, 9: 8, 10: 9, 11: None, 12: 11, 13: 12}
ROLES = {0: "system", 1: "user", 3: "tool", 5: "tool", 7: "tool", 9: "user", 11: "system", 12: "user"}
CALLS = (2, 4, 8, 10, 13)  # each call's committed node


def path(node: int | None) -> list[int]:
    out = []
    while node is not None:
        out.append(node)
        node = PARENTS[node]
    return out[::-1]


def episode(with_token_ids: bool) -> dict:
    nodes = [
        {
            "parent": PARENTS[n],
            "message": {"role": ROLES.get(n, "assistant"), "content": f"m{n}"},
            "sampled": n in CALLS,
            "token_ids": list(range(TOKENS[n])) if with_token_ids else [],
            "semantic_parents": [{"node": 10, "type": "compaction"}] if n == 13 else [],
        }
        for n in range(len(TOKENS))
    ]
    calls = []
    for i, node in enumerate(CALLS):
        prompt = sum(TOKENS[n] for n in path(PARENTS[node]))
        cached = prompt // 2
        usage = {
            "prompt_tokens": prompt - cached,
            "cached_input_tokens": cached,
            "completion_tokens": TOKENS[node],
        }
        calls.append({"node": node, "usage": usage, "time": {"start": 100.0 + 10 * i, "end": 105.0 + 10 * i}})
    trace = {"id": "t1", "task": {"key": "task-1"}, "ok": True, "nodes": nodes, "calls": calls, "timing": {}}
    return {"env": {"name": "vf"}, "group": {"id": "g1"}, "traces": [trace]}


def turns(store) -> list[dict]:
    columns = "turn_index, input_tokens, context_tokens, prefix_tokens, continuity_break, "
    columns += "compaction_tokens_before, compaction_tokens_after, sample_id"
    cursor = connect(store).execute(f"SELECT {columns} FROM turns ORDER BY turn_index")
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


@pytest.mark.parametrize("with_token_ids", [True, False], ids=["renderer", "relayed"])
def test_a_verifiers_trace_records_where_its_prefix_continued_broke_and_was_compacted(
    tmp_path, with_token_ids
):
    rl = attach(store=tmp_path, run_id="vf", role="rollout", set_global=False)
    assert record_episode(rl, episode(with_token_ids))["turns"] == len(CALLS)
    rl.shutdown()
    got = turns(tmp_path)

    def tokens(nodes):
        return sum(TOKENS[n] for n in nodes)

    ended = [tokens(path(node)) for node in CALLS]  # the tokens each call ended with: prompt and completion
    exact = (lambda value: value) if with_token_ids else (lambda value: None)
    assert got[0]["context_tokens"] is None and got[0]["continuity_break"] is None  # the first call
    # call 1 extends call 0's conversation: all of it is its history, an exact prefix with token ids
    assert (got[1]["context_tokens"], got[1]["prefix_tokens"], got[1]["continuity_break"]) == (
        ended[0],
        exact(ended[0]),
        None,
    )
    # call 2's prompt re-rendered call 1's reply: the history is rewritten from there on
    history = tokens([0, 1, 2, 3, 6]) if with_token_ids else ended[1]
    assert (got[2]["context_tokens"], got[2]["prefix_tokens"], got[2]["continuity_break"]) == (
        history,
        exact(tokens([0, 1, 2, 3])),
        "retokenized",
    )
    # call 3, the summary, extends call 2
    assert (got[3]["context_tokens"], got[3]["continuity_break"]) == (ended[2], None)
    # call 4 resumes from the compaction: call 2's conversation replaced by its own prompt, a new branch
    assert got[4] == {
        "turn_index": 4,
        "input_tokens": tokens([11, 12]),
        "context_tokens": tokens([11, 12]),
        "prefix_tokens": exact(0),
        "continuity_break": "compacted",
        "compaction_tokens_before": ended[2],
        "compaction_tokens_after": tokens([11, 12]),
        "sample_id": "t1/2",  # branches by leaf, in node order: 5, 10, 13
    }
    split = analyses.record(analyses.prefill_split(connect(tmp_path), "vf"))
    assert split["extra_samples"] == 1
    assert split["compaction_removed_tokens"] == ended[2] - tokens([11, 12])
    assert split["reprefill_retokenized_tokens"] > 0 and split["reprefill_compacted_tokens"] > 0
    marks = trace.continuity(connect(tmp_path), "vf", "t1")
    assert marks["sample"].tolist() == [0, 0, 0, 0, 1]
    assert marks["continuity_break"].tolist()[2] == "retokenized"
