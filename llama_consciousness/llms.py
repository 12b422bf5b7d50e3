"""Which LLM the package's LLM paths use when the caller names none: OpenAI's, when a key is set.

Everything works offline: the entity extractor, the update judge and the examples each have an offline
path, and the LLM is an upgrade.  ``resolve_llm`` turns what a caller may pass into a LlamaIndex ``LLM``:

* any object with ``complete`` (a LlamaIndex LLM, or a scripted one in tests): as is;
* ``"openai"`` or ``"openai:<model>"``: OpenAI's chat model through ``llama-index-llms-openai`` (the
  ``openai`` extra), which needs ``OPENAI_API_KEY``; a clear error without either;
* ``"auto"``: OpenAI's when ``OPENAI_API_KEY`` is set and the extra installed, else None (offline).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["DEFAULT_OPENAI_MODEL", "LLMUnavailableError", "openai_llm", "resolve_llm"]

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
OPENAI_TIMEOUT_S = 60.0


class LLMUnavailableError(RuntimeError):
    """The LLM asked for cannot be made here (no key, or the extra is not installed)."""


def openai_llm(model: str | None = None, *, temperature: float = 0.0, timeout_s: float = OPENAI_TIMEOUT_S) -> Any:
    """OpenAI's chat model (``model``, else ``$OPENAI_MODEL``, else ``DEFAULT_OPENAI_MODEL``), with a timeout."""
    if not os.environ.get("OPENAI_API_KEY"):
        raise LLMUnavailableError("OpenAI was asked for but OPENAI_API_KEY is not set")
    try:
        from llama_index.llms.openai import OpenAI  # type: ignore[import-not-found]
    except ImportError:
        raise LLMUnavailableError("OpenAI needs the openai extra: pip install 'llama-consciousness[openai]' "
                                  "(or pass any LlamaIndex LLM)") from None
    return OpenAI(model=model or os.environ.get("OPENAI_MODEL") or DEFAULT_OPENAI_MODEL, temperature=temperature,
                  timeout=timeout_s)


def resolve_llm(spec: Any) -> Any:
    """A LlamaIndex LLM from ``spec`` (see the module docstring); None stays None."""
    if spec is None or hasattr(spec, "complete"):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"an LLM is a LlamaIndex LLM, 'openai', 'openai:<model>' or 'auto', not {type(spec).__name__}")
    name, _, model = spec.strip().partition(":")
    if name == "openai":
        return openai_llm(model or None)
    if name == "auto" and not model:
        try:
            return openai_llm()
        except LLMUnavailableError:
            return None
    raise ValueError(f"unknown LLM {spec!r}: use 'openai', 'openai:<model>', 'auto' or a LlamaIndex LLM")
