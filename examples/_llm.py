"""The LLM the examples use: OpenAI's when ``OPENAI_API_KEY`` is set (and ``llama-index-llms-openai`` is
installed), else the offline stand-in each example brings."""

from __future__ import annotations

import os
import sys
from typing import Any


def openai_or(offline: Any) -> Any:
    """OpenAI's chat model (``OPENAI_MODEL``, default gpt-4o-mini) when a key is set, else ``offline``."""
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from llama_index.llms.openai import OpenAI  # optional dependency

            return OpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
        except ImportError:
            print("OPENAI_API_KEY is set but llama-index-llms-openai is not installed; using the offline stand-in",
                  file=sys.stderr)
    return offline
