"""verl's agent loops, with what only the loop sees noted for rollscope: each model call's times and speculative
counts, and each tool call's name, times, outcome, arguments and result.

One config entry puts them in place of verl's own loops of the same names (``tool_agent``,
``single_turn_agent``), in every agent-loop worker (Ray actor) verl starts::

    actor_rollout_ref.rollout.agent.agent_loop_config_path=$(python -m rollscope.integrations.verl_agent)

They behave exactly as verl's loops (they are subclasses; every call is passed on unchanged) and add one entry
to the rollout's ``extra_fields``, ``"rollscope"``, which verl carries into the batch (``non_tensor_batch``)
the trainer receives; there ``rollscope.integrations.verl.instrument`` turns it into the times of the
rollout's turns and tool calls. Without these loops the trainer-side adapter still records every rollout,
turn (from ``response_mask``), reward and sample; with them, turns and tools carry their own times and names.

This module imports verl (it subclasses its loops), so only verl's workers import it, through the config entry.
Noting never raises into the rollout: a failure is logged once and the rollout goes on.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop as _SingleTurn
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop as _ToolAgent

log = logging.getLogger("rollscope.integrations.verl")

KEY = "rollscope"  # the extra_fields entry, read by rollscope.integrations.verl
CONFIG = Path(__file__).with_name("verl_agent_loops.yaml")
_SPEC = ("spec_num_draft_tokens", "spec_num_accepted_tokens", "spec_num_verify_steps")
# The texts verl's ToolAgentLoop._call_tool answers with when a call fails (it never raises): the tool raised,
# the model named an unknown tool, or its arguments were not JSON.
_TOOL_FAILURES = ("Error executing tool", "Unknown function", "Invalid JSON in arguments")
_warned = False


class _TimedServer:
    """verl's server manager as the loop sees it, timing each ``generate`` (everything else passed through)."""

    def __init__(self, server, calls: list):
        self._server = server
        self._calls = calls

    def __getattr__(self, name):
        return getattr(self._server, name)

    async def generate(self, *args, **kwargs):
        started = time.time_ns()
        output = await self._server.generate(*args, **kwargs)
        _note(self._calls.append, _call(output, started, time.time_ns()))
        return output


def _call(output, started: int, ended: int) -> dict:
    extra = getattr(output, "extra_fields", None) or {}
    call = {"start_ns": started, "end_ns": ended, "stop_reason": getattr(output, "stop_reason", None)}
    call.update({key: int(extra[key]) for key in _SPEC if extra.get(key) is not None})
    return call


def _note(fn, *args) -> None:
    global _warned
    try:
        fn(*args)
    except Exception:
        if not _warned:
            _warned = True
            log.warning(
                "rollscope: could not note a verl rollout's calls; the rollout goes on", exc_info=True
            )


class _Noted:
    """The shared part: the timed server manager, and the note added to the rollout's ``extra_fields``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._rollscope_calls: list = []
        self._rollscope_tools: list = []
        self.server_manager = _TimedServer(self.server_manager, self._rollscope_calls)

    async def run(self, sampling_params, **kwargs):
        started = time.time_ns()
        output = await super().run(sampling_params, **kwargs)
        _note(self._attach_note, output, started)
        return output

    def _attach_note(self, output, started: int) -> None:
        output.extra_fields[KEY] = {
            "start_ns": started,
            "end_ns": time.time_ns(),
            "calls": self._rollscope_calls,
            "tools": self._rollscope_tools,
        }


class ToolAgentLoop(_Noted, _ToolAgent):
    """verl's ``ToolAgentLoop``, noting each model call and tool call."""

    async def _call_tool(self, tool_call, tools_kwargs, agent_data):
        started = time.time_ns()
        response, reward, result = await super()._call_tool(tool_call, tools_kwargs, agent_data)
        _note(self._note_tool, tool_call, response, started)
        return response, reward, result

    def _note_tool(self, tool_call, response, started: int) -> None:
        text = getattr(response, "text", None) or ""
        self._rollscope_tools.append(
            {
                "turn": len(self._rollscope_calls) - 1,  # the model call that asked for it
                "name": str(tool_call.name),
                "id": getattr(tool_call, "tool_call_id", None),
                "start_ns": started,
                "end_ns": time.time_ns(),
                "failed": text.startswith(_TOOL_FAILURES),
                "arguments": tool_call.arguments,
                "result": text,
            }
        )


class SingleTurnAgentLoop(_Noted, _SingleTurn):
    """verl's ``SingleTurnAgentLoop``, noting its model call."""


if __name__ == "__main__":  # the value of agent_loop_config_path
    print(CONFIG)
