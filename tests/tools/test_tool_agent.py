"""A stock LlamaIndex FunctionAgent using the memory through ConsciousnessToolSpec, as a user would: a scripted
function-calling LLM decides which tool to call each turn (no network), the agent runs the calls, and the
memory is checked directly afterwards."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory

from llama_consciousness import ConsciousnessToolSpec

from tool_helpers import first_id, ids_in, scripted_llm

# llama-index-workflows reads every attribute of the agent (a pydantic model) on each run: pydantic's warnings
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:inspect")


def plan(user: str, history: list[ChatMessage]) -> list[tuple[str, dict[str, Any]]]:
    """The decisions a model would make for each user turn of the conversation below."""
    if user.startswith("My dentist is"):
        return [("remember", {"text": "Ada's dentist is Dr Moss on Rue Cler.", "rationale": "to book visits"})]
    if user.startswith("Who is my dentist"):
        return [("recall", {"query": "Ada's dentist"})]
    if user.startswith("Correction"):
        return [("remember", {"text": "Ada's dentist is now Dr Okafor in Belleville.", "kind": "Fact"})]
    if user.startswith("How did"):
        return [("what_changed", {"topic": "Ada's dentist"})]
    if user.startswith("I feel"):
        return [("update_state", {"energy": 0.4, "emotions": {"tired": 0.7}, "goal": "rest"}), ("state", {})]
    if user.startswith("Forget my dentist"):  # the id of the current dentist, read off an earlier recall
        return [("forget", {"memory_id": ids_in(history, "Okafor")[-1], "reason": "user_requested"})]
    if user.startswith("Oops"):  # two bad calls: an unknown reason, then a wrong type
        return [("forget", {"query": "dentist", "reason": "because"}), ("recall", {"query": "x", "k": "all"})]
    return []


def test_function_agent_stores_recalls_corrects_and_forgets_through_the_tools(memory, citizen) -> None:
    spec = ConsciousnessToolSpec(memory, citizen, token_budget=600)
    llm, script = scripted_llm(plan)
    agent = FunctionAgent(tools=spec.to_tool_list(), llm=llm, system_prompt="You are Ada's assistant.")
    chat = Memory.from_defaults(session_id=f"tools-{citizen}", token_limit=20_000)

    async def say(text: str) -> str:
        return str(await agent.run(user_msg=text, memory=chat))

    async def conversation() -> list[str]:
        return [await say(turn) for turn in (
            "My dentist is Dr Moss on Rue Cler.", "Who is my dentist?",
            "Correction: Dr Moss retired, my dentist is now Dr Okafor.", "Who is my dentist?",
            "How did my dentist change?", "I feel tired today.", "Forget my dentist, please.",
            "Who is my dentist?", "Oops.")]

    answers = asyncio.run(conversation())
    stored, first, corrected, now, changed, state, forgotten, after, oops = answers
    moss = first_id(stored)
    okafor = first_id(corrected)
    assert "Dr Moss" in first and f"id={moss}" in first
    assert "replaces an earlier memory" in corrected and moss in corrected
    assert "Okafor" in now and "Moss" not in now  # current mode: the replaced version is not recalled
    assert "[past" in changed and "[current]" in changed and changed.index(moss) < changed.index(okafor)
    assert "tired 0.7" in state and "goal: rest" in state
    assert forgotten.startswith("Forgotten (user requested)") and okafor in forgotten
    assert "Okafor" not in after and "Moss" not in after
    assert oops.count("Error: invalid arguments") == 2  # answered as tool output: the agent went on

    # what the agent did, read from the memory itself
    old, new = memory.get_node(moss, "N1", citizen), memory.get_node(okafor, "N1", citizen)
    assert old.superseded_by == okafor and old.formation_trigger == "to book visits"
    assert new.node_type == "Fact" and new.forgotten_by == "agent" and new.forgotten_reason.value == "user_requested"
    assert memory.citizen_state(citizen).emotion_vector == {"tired": 0.7}
    assert len(script.tool_outputs) == 11


def test_the_tools_example_runs_offline() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "agent_tools.py"
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "-> remember(text=\"Ada's dentist is Dr Moss on Rue Cler.\"" in out
    assert "It replaces an earlier memory, now shown as past: \"Ada's dentist is Dr Moss on Rue Cler.\"" in out
    assert "[past, until" in out and "reality changed" in out  # what_changed
    assert "Forgotten (incorrect)" in out and "Restored, remembered again as before" in out
    assert "Agent: From what you told me: Ada is allergic to penicillin." in out  # restored, recalled again
    assert "state: \"plan tomorrow's errands\"" in out
