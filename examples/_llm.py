"""The LLM the examples use: OpenAI's when ``OPENAI_API_KEY`` is set (and ``llama-index-llms-openai`` is
installed), else the offline stand-in each example brings."""

from __future__ import annotations

import os
import sys
from typing import Any


def openai_or(offline: Any) -> Any:
    """OpenAI's chat model (``OPENAI_MODEL``, default gpt-4o-mini) when a key is set, else ``offline``
    (``llama_consciousness.llms.resolve_llm("auto")``)."""
    from llama_consciousness.llms import resolve_llm

    if os.environ.get("OPENAI_API_KEY"):
        llm = resolve_llm("auto")
        if llm is not None:
            return llm
        print("OPENAI_API_KEY is set but llama-index-llms-openai is not installed "
              "(pip install 'llama-consciousness[openai]'); using the offline stand-in", file=sys.stderr)
    return offline
