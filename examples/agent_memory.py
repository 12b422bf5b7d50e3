"""An agent with long-term memory: LlamaIndex's FunctionAgent and Memory, with a ConsciousnessMemoryBlock.

Run:  python examples/agent_memory.py                       # offline: a scripted stand-in answers
      OPENAI_API_KEY=... python examples/agent_memory.py    # with llama-index-llms-openai installed

Two conversations of one citizen.  In the first, the agent is told a few facts
(and one of them changes: the dentist retired).  The short-term queue is
small, so the turns flow into the memory block as they leave it, and the
rest when the session ends.  The second
conversation starts with an empty short-term memory, as a new session would,
and the block recalls what the first one said; the rendered recall is printed
so that you can see what the LLM is given.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory

from _llm import openai_or

from llama_consciousness import ConsciousnessMemory, ConsciousnessMemoryBlock

FIRST = [
    "Hi! I'm Ada. My dentist is Dr Moss on Rue Cler.",
    "I'm allergic to penicillin, please remember that.",
    "We're planning a trip to Kyoto in April.",
    "Update: Dr Moss retired, my new dentist is Dr Okafor in Belleville.",
]
SECOND = ["Can you book my dentist for next week?", "Which medicine am I allergic to, again?"]


def scripted_answer(messages: Any, **kwargs: Any) -> ChatMessage:
    """An offline stand-in for an LLM: answers with the remembered lines that share a word with the question."""
    system = "\n".join(m.content or "" for m in messages if m.role == MessageRole.SYSTEM)
    question = next((m.content or "" for m in reversed(messages) if m.role == MessageRole.USER), "")
    words = {w.strip("?.,!").lower() for w in question.split() if len(w) > 3}
    said = [re.sub(r"^(?:- )?(?:\[[^\]]*\] )+", "", line).split(" (energy")[0]
            for line in system.splitlines() if line.startswith("- [") and "[past:" not in line]
    said = [text for text in said if text.startswith("Ada:") and words & {
        w.strip("?.,!:;()").lower() for w in text.split()}]
    return ChatMessage(role="assistant", content=f"You told me: {said[0].removeprefix('Ada: ')}" if said else "Noted.")


def choose_llm() -> Any:
    return openai_or(MockFunctionCallingLLM(response_generator=scripted_answer, is_chat_model=True))


async def converse(agent: FunctionAgent, chat: Memory, turns: list[str]) -> None:
    for turn in turns:
        response = await agent.run(user_msg=turn, memory=chat)
        print(f"\nAda: {turn}\nAgent: {response}")


async def main() -> None:
    llm = choose_llm()
    with tempfile.TemporaryDirectory(prefix="lcagent", dir="/tmp") as data_dir:
        with ConsciousnessMemory(data_dir=data_dir) as memory:
            block = ConsciousnessMemoryBlock(memory=memory, citizen_id="ada", user_name="Ada", token_budget=800)
            agent = FunctionAgent(tools=[], llm=llm, system_prompt="You are Ada's assistant. Use what you remember.")

            print("== first conversation")
            first = Memory.from_defaults(session_id="monday", token_limit=3000, chat_history_token_ratio=0.02,
                                         token_flush_size=40, memory_blocks=[block])
            await converse(agent, first, FIRST)
            # The session ends: what is still in its short-term queue goes to long-term memory too (the
            # turns already flushed are the same memories: putting them again changes nothing).
            await block.aput(await first.aget_all(), session_id="monday")

            print("\n== second conversation (a new session: nothing in short-term memory)")
            second = Memory.from_defaults(session_id="tuesday", token_limit=3000, memory_blocks=[block])
            await converse(agent, second, SECOND)

            print("\n== what the block gives the LLM for 'who is my dentist?'\n")
            print(await block.aget([ChatMessage(role="user", content="who is my dentist?")]))


if __name__ == "__main__":
    asyncio.run(main())
