"""A real LlamaIndex LLM with scripted answers, shared by the tests of the LLM paths (entities, ingestion)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_completion_callback


class FixedLLM(CustomLLM):
    """Answers every prompt with ``answer``, or with ``script(prompt)`` when given (or raises, ``fail``);
    keeps the prompts."""

    answer: str = "[]"
    script: Optional[Callable[[str], str]] = None
    fail: bool = False
    prompts: list[str] = []

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="fixed")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        if self.fail:
            raise RuntimeError("model unavailable")
        return CompletionResponse(text=self.answer if self.script is None else self.script(prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt, formatted=formatted, **kwargs)
