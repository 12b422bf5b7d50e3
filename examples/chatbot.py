"""A chatbot whose memory is llama-consciousness, inside a stock LlamaIndex query engine.

Run:  python examples/chatbot.py                # offline: an extractive stand-in answers
      OPENAI_API_KEY=... python examples/chatbot.py   # with llama-index-llms-openai installed

The retriever is an ordinary LlamaIndex ``BaseRetriever``: the query engine,
its response synthesizer and any postprocessor work with it unchanged, and
every source node carries the memory's consciousness metadata (energy,
emotions, goal, resolution state, validity) for the LLM to weigh.
``ConsciousnessQueryEngine`` is LlamaIndex's ``RetrieverQueryEngine`` that also
marks each answer's memories as used (access counts, co-activation of their
links), on a background thread; at the end the example shows what use taught
the memory.
"""

from __future__ import annotations

import sys
import tempfile
from typing import Any

from llama_index.core import Settings
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback

from _llm import openai_or

from llama_consciousness import ConsciousnessMemory, ConsciousnessQueryEngine
from llama_consciousness.ingestion import demo_memory_file
from llama_consciousness.retrievers import SEVEN_WAY_CONCATENATION, SixWayHybridRetriever


class ExtractiveLLM(CustomLLM):
    """An offline stand-in for an LLM: answers with the context lines it was given.

    Good enough to see what the memory retrieves without an API key; not a
    language model.
    """

    max_lines: int = 6

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="extractive-offline", context_window=100_000, num_output=512)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        context = prompt.split("---------------------")[1] if "---------------------" in prompt else prompt
        lines = [line.strip() for line in context.splitlines() if line.strip() and ":" not in line[:25]]
        answer = "From memory:\n" + "\n".join(f"- {line}" for line in lines[: self.max_lines])
        return CompletionResponse(text=answer)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        yield self.complete(prompt, formatted=formatted, **kwargs)


def choose_llm() -> Any:
    return openai_or(ExtractiveLLM())


def main() -> None:
    questions = sys.argv[1:] or [
        "What did we decide about the V2 architecture?",
        "What is blocking the retrieval work?",
        "How does Luca's approach differ from Felix's?",
    ]
    Settings.llm = choose_llm()
    with tempfile.TemporaryDirectory(prefix="lcchat", dir="/tmp") as data_dir:
        with ConsciousnessMemory(data_dir=data_dir) as memory:
            memory.ingest(demo_memory_file())
            retriever = SixWayHybridRetriever(memory, citizen_id="ada", config=SEVEN_WAY_CONCATENATION,
                                              intention_defaults={"max_results_per_level": 5})
            engine = ConsciousnessQueryEngine.from_args(retriever, llm=Settings.llm)
            for question in questions:
                response = engine.query(question)
                print(f"\nQ: {question}\nA: {response}\n   sources:")
                for source in response.source_nodes[:5]:
                    meta = source.node.metadata
                    print(f"   {source.score:.3f} {meta['retrieval_sources']} {meta['name']}"
                          f" (energy {meta['energy']}, {meta['resolution_state']})")
            memory.flush_uses(30)
            used = {m: n for m, (n, _) in memory.access_stats("N1", [
                s.node.metadata["node_id"] for s in response.source_nodes
                if s.node.metadata["level"] == "N1"], "ada").items()}
            print("\nN1 memories the answers were given from, and how often:",
                  ", ".join(f"{m} x{n}" for m, n in sorted(used.items(), key=lambda kv: -kv[1])) or "-")


if __name__ == "__main__":
    main()
