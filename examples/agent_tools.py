"""An agent that decides for itself what to remember, look up, correct and forget: LlamaIndex's FunctionAgent
with the memory's tools (ConsciousnessToolSpec).

Run:  python examples/agent_tools.py                       # offline: a scripted stand-in picks the tools
      OPENAI_API_KEY=... python examples/agent_tools.py    # with llama-index-llms-openai installed

One conversation with Ada.  The agent stores what she says with ``remember`` (a new dentist replaces the old
one, kept as past), answers with ``recall``, explains a change with ``what_changed``, takes an allergy back
with ``forget`` when she says it was a mistake and puts it back with ``restore`` when she corrects herself,
and records how she feels with ``update_state``.  Every tool call and its answer is printed, so you can see
what the LLM is given.  The same tools are served to any MCP client by ``llama-consciousness mcp``
(examples/mcp_server.md).
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory

from _llm import openai_or

from llama_consciousness import ConsciousnessMemory, ConsciousnessToolSpec

SYSTEM = ("You are Ada's assistant with a long-term memory. When she tells you something worth keeping, call "
          "remember with one self-contained statement about her. Before answering from memory, call recall. When "
          "she asks you to forget something, or says it was wrong, call forget with the memory_id recall gave you. "
          "Answer in one or two sentences.")

TURNS = [
    "Hi, I'm Ada. My dentist is Dr Moss on Rue Cler.",
    "I'm allergic to penicillin.",
    "Update: Dr Moss retired, my new dentist is Dr Okafor in Belleville.",
    "Who is my dentist?",
    "How has my dentist changed?",
    "Please forget what I said about penicillin, that was a mistake.",
    "Sorry, I mixed things up: I really am allergic to penicillin. Put it back.",
    "I'm exhausted today, let's only plan tomorrow's errands.",
    "What do you know about my health?",
]

ID = re.compile(r"\bmem_[0-9a-f]{20}\b")


def decide(user: str, history: list[ChatMessage]) -> list[tuple[str, dict[str, Any]]]:
    """The offline stand-in's choice of tools for a user message (a real LLM decides from the tool descriptions)."""
    text = user.lower()
    if "forget" in text:
        found = [ID.findall(line) for m in history if m.role == MessageRole.TOOL
                 for line in (m.content or "").splitlines() if "penicillin" in line]
        ids = [i for group in found for i in group]
        if ids:
            return [("forget", {"memory_id": ids[-1], "reason": "incorrect", "note": "Ada said it was a mistake"})]
        return [("forget", {"query": "penicillin", "reason": "incorrect"})]
    if "put it back" in text:
        return [("restore", {"query": "penicillin"})]
    if "how has" in text or "changed" in text:
        return [("what_changed", {"topic": "Ada's dentist"})]
    if re.search(r"\b(exhausted|tired)\b", text):
        return [("update_state", {"energy": 0.3, "emotions": {"tired": 0.8}, "goal": "plan tomorrow's errands",
                                  "reason": "Ada said she is exhausted"})]
    if text.endswith("?"):
        topic = "Ada's health and allergies" if "health" in text else "Ada's dentist"
        return [("recall", {"query": topic})]
    statement = re.sub(r"^(hi, i'm ada\. |update: )", "", user, flags=re.I)
    statement = statement.replace("I'm", "Ada is").replace("my ", "Ada's ").replace("My ", "Ada's ")
    return [("remember", {"text": statement, "rationale": "Ada told me"})]


def scripted(messages: Any, **kwargs: Any) -> ChatMessage:
    """An offline stand-in for a function-calling LLM: picks tools for a user message (``decide``), then answers
    from what they returned."""
    messages = list(messages)
    last = messages[-1]
    if last.role != MessageRole.TOOL:
        calls = decide(last.content or "", messages)
        return ChatMessage(role="assistant", blocks=[
            ToolCallBlock(tool_call_id=f"call_{len(messages)}_{i}", tool_name=name, tool_kwargs=args)
            for i, (name, args) in enumerate(calls)])
    output = last.content or ""
    remembered = [re.sub(r"^- \[[^\]]*\] (\[[^\]]*\] )*", "", line).split(" (energy")[0]
                  for line in output.splitlines() if line.startswith("- [")]
    if remembered:
        return ChatMessage(role="assistant", content="From what you told me: " + "; ".join(remembered[:2]))
    return ChatMessage(role="assistant", content=" ".join([x for x in output.splitlines() if x.strip()][:2]) or "Done.")


async def main() -> None:
    llm = openai_or(MockFunctionCallingLLM(response_generator=scripted, is_chat_model=True))
    with tempfile.TemporaryDirectory(prefix="lctools", dir="/tmp") as data_dir:
        with ConsciousnessMemory(data_dir=data_dir) as memory:
            tools = ConsciousnessToolSpec(memory, citizen_id="ada", token_budget=600).to_tool_list()
            agent = FunctionAgent(tools=tools, llm=llm, system_prompt=SYSTEM)
            chat = Memory.from_defaults(session_id="ada-1", token_limit=16_000)
            for turn in TURNS:
                print(f"\nAda: {turn}")
                handler = agent.run(user_msg=turn, memory=chat)
                async for event in handler.stream_events():
                    if isinstance(event, ToolCallResult):
                        args = ", ".join(f"{k}={v!r}" for k, v in event.tool_kwargs.items())
                        print(f"  -> {event.tool_name}({args})")
                        print("     " + str(event.tool_output).replace("\n", "\n     "))
                print(f"Agent: {await handler}")
            print(f"\nStored: {memory.counts('N1', 'ada')[0]} memories of ada (entities included); state: "
                  f"{memory.citizen_state('ada').goal!r}")


if __name__ == "__main__":
    asyncio.run(main())
