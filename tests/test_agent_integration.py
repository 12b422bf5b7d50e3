"""The memory inside stock LlamaIndex machinery, each with a scripted LLM (no network): FunctionAgent and
AgentWorkflow with ``Memory`` + ``ConsciousnessMemoryBlock``, SimpleChatEngine with that memory,
CondensePlusContextChatEngine and RetrieverQueryEngine with our retriever."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.chat_engine import CondensePlusContextChatEngine, SimpleChatEngine
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.tools import FunctionTool

from llama_consciousness.memory_block import ConsciousnessMemoryBlock


class Scripted:
    """An LLM's answers: says what the first remembered line about the dentist was, and keeps every prompt."""

    def __init__(self) -> None:
        self.seen: list[list[ChatMessage]] = []

    def __call__(self, messages: Any, **kwargs: Any) -> ChatMessage:
        self.seen.append(list(messages))
        text = "\n".join(m.content or "" for m in messages)
        remembered = [line for line in text.splitlines() if "Dr Moss" in line and "?" not in line]
        return ChatMessage(role="assistant", content=f"From memory: {remembered[0]}" if remembered else "No idea.")

    def prompt_text(self) -> str:
        return "\n".join(m.content or "" for m in self.seen[-1])


def llm_and_script() -> tuple[MockFunctionCallingLLM, Scripted]:
    script = Scripted()
    return MockFunctionCallingLLM(response_generator=script, is_chat_model=True), script


@pytest.fixture
def remembering(memory, citizen) -> ConsciousnessMemoryBlock:
    block = ConsciousnessMemoryBlock(memory=memory, citizen_id=citizen, user_name="Ada", token_budget=500)
    report = block.put_messages([ChatMessage(role="user", content="My dentist is Dr Moss on Rue Cler."),
                                 ChatMessage(role="user", content="I am allergic to penicillin.")],
                                session_id="earlier")
    assert len(report.stored) == 2
    return block


def chat_memory(block: ConsciousnessMemoryBlock, session: str) -> Memory:
    return Memory.from_defaults(session_id=session, token_limit=4000, memory_blocks=[block])


def test_function_agent_remembers_through_the_memory_block(remembering) -> None:
    llm, script = llm_and_script()
    agent = FunctionAgent(tools=[], llm=llm, system_prompt="You are Ada's assistant.")

    async def ask() -> Any:
        return await agent.run(user_msg="Who is my dentist?", memory=chat_memory(remembering, "agent-1"))

    response = asyncio.run(ask())
    assert "Dr Moss" in str(response) and "Rue Cler" in script.prompt_text()
    assert "<consciousness_memory>" in script.prompt_text()


def test_agent_workflow_with_a_tool_remembers_too(remembering) -> None:
    def clinic_hours() -> str:
        """Opening hours of the dentist's clinic."""
        return "9 to 5"

    llm, script = llm_and_script()
    agent = FunctionAgent(name="helper", description="helps Ada", tools=[FunctionTool.from_defaults(clinic_hours)],
                          llm=llm, system_prompt="You are Ada's assistant.")
    workflow = AgentWorkflow(agents=[agent], root_agent="helper")

    async def ask() -> Any:
        return await workflow.run(user_msg="When can I see my dentist?", memory=chat_memory(remembering, "wf-1"))

    asyncio.run(ask())
    assert any("Dr Moss" in (m.content or "") for messages in script.seen for m in messages)


def test_simple_chat_engine_with_the_memory(remembering) -> None:
    llm, script = llm_and_script()
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=chat_memory(remembering, "engine-1"))
    answer = engine.chat("Who is my dentist?")
    assert "Dr Moss" in str(answer)
    # and async, on a fresh event loop
    answer = asyncio.run(engine.achat("And who is my dentist, again?"))
    assert "Dr Moss" in str(answer)


def test_condense_plus_context_chat_engine_with_our_retriever(memory, remembering, citizen) -> None:
    llm, script = llm_and_script()
    engine = CondensePlusContextChatEngine.from_defaults(retriever=memory.retriever(citizen), llm=llm)
    answer = engine.chat("Who is my dentist?")
    assert "Dr Moss" in str(answer)
    system = [m for m in script.seen[-1] if m.role == MessageRole.SYSTEM]
    assert system and "Dr Moss" in system[0].content


def test_retriever_query_engine_with_our_retriever(memory, remembering, citizen) -> None:
    llm, script = llm_and_script()
    engine = RetrieverQueryEngine.from_args(memory.retriever(citizen), llm=llm)
    engine.query("Who is my dentist?")
    assert "Dr Moss" in script.prompt_text()


def test_the_agent_example_runs_offline() -> None:
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "agent_memory.py"
    env = {k: v for k, v in __import__("os").environ.items() if k != "OPENAI_API_KEY"}
    done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr
    assert "Agent: You told me: Update: Dr Moss retired" in done.stdout  # the second session recalls the first
    assert "[current] Ada: Update: Dr Moss retired" in done.stdout
    assert "[past: replaced by a later memory] Ada: Hi! I'm Ada. My dentist is Dr Moss" in done.stdout
