"""``LLMUpdateJudge``: an LLM confirms or rejects the knowledge updates the offline judge finds.

The offline judge (``scoring.updates``) is precise but literal; an LLM reads
"we finally left Lyon for Berlin" as well as "we moved to Berlin".  It is
asked about each pair the offline judge found (never about every pair: the
candidates stay few and the cost bounded), through LlamaIndex's ``LLM``
interface (``complete``), so any LlamaIndex LLM works; without one given,
OpenAI's when ``OPENAI_API_KEY`` is set and ``llama-index-llms-openai`` is
installed.  The answer is JSON in :class:`UpdateVerdict`'s schema; a timeout,
an error or an answer that does not parse raises :class:`UpdateJudgeError`,
which the detector reports, storing the memories without a decision.
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llama_consciousness.scoring.updates import Statement

__all__ = ["UPDATE_JUDGE_PROMPT", "LLMUpdateJudge", "UpdateJudgeError", "UpdateVerdict"]


class UpdateVerdict(BaseModel):
    """The answer schema: is the later statement an update of the earlier one, of which type, how sure."""

    model_config = ConfigDict(extra="ignore")

    verdict: Literal["update", "not_update", "unsure"]
    type: Literal["reality_changed", "discovered_false"] = "reality_changed"
    confidence: float = Field(ge=0.0, le=1.0)
    why: str = ""


UPDATE_JUDGE_PROMPT = """You maintain the long-term memory of an assistant. Two memories of the same \
person or project were recorded at different times. Decide whether the LATER memory updates the EARLIER \
one, i.e. whether the earlier statement is no longer true once the later one is known.

It is an update only when both talk about the same subject and the same attribute that holds one value \
at a time (where someone lives or works, a status, a date, a favourite, ...) and the later memory gives \
another value or says the earlier value no longer holds. It is not an update when they are about \
different people or things, when the later one is hypothetical, a plan, a wish or a question, when it \
tells about the past ("I used to ..."), or when both can be true at once.

type: "reality_changed" when the world changed (moved, switched, quit, rescheduled); \
"discovered_false" when the earlier statement was a mistake ("actually it was", "I was wrong").

EARLIER memory ({older_time}): {older}
LATER memory ({newer_time}): {newer}

Answer with one JSON object and nothing else:
{{"verdict": "update" | "not_update" | "unsure", "type": "reality_changed" | "discovered_false", \
"confidence": <number from 0 to 1>, "why": "<one short sentence>"}}"""


class UpdateJudgeError(RuntimeError):
    """The LLM judge gave no usable answer (timeout, error, or not the schema)."""


_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$", re.IGNORECASE)
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="lc-update-judge")


def parse_verdict(text: str) -> UpdateVerdict:
    """The verdict in an LLM's answer: the first JSON object in it (code fences allowed)."""
    body = _FENCE.sub("", text.strip())
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        raise UpdateJudgeError(f"the update judge's answer holds no JSON object: {text[:200]!r}")
    try:
        return UpdateVerdict.model_validate(json.loads(body[start:end + 1]))
    except (ValueError, ValidationError) as exc:
        raise UpdateJudgeError(f"the update judge's answer is not an UpdateVerdict: {exc}") from None


def default_llm() -> Any:
    """OpenAI's LLM through LlamaIndex, when a key is set; else a clear error."""
    from llama_consciousness.llms import LLMUnavailableError, openai_llm

    try:
        return openai_llm(os.environ.get("LLAMA_CONSCIOUSNESS_JUDGE_MODEL") or "gpt-4o-mini", timeout_s=30.0)
    except LLMUnavailableError as exc:
        raise UpdateJudgeError(f"no LLM given to LLMUpdateJudge: {exc}") from None


class LLMUpdateJudge:
    """Confirm or reject a knowledge update with an LLM (any LlamaIndex ``LLM``), within ``timeout_s``."""

    def __init__(self, llm: Any = None, *, timeout_s: float = 30.0, prompt: str = UPDATE_JUDGE_PROMPT) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.llm = llm if llm is not None else default_llm()
        self.timeout_s = float(timeout_s)
        self.prompt = prompt

    def message(self, older: Statement, newer: Statement) -> str:
        def when(s: Statement) -> str:
            return (s.valid_at or s.created_at).isoformat() if (s.valid_at or s.created_at) else "time unknown"

        def said(s: Statement) -> str:
            return f"{s.speaker}: {s.text}" if s.speaker else s.text

        return self.prompt.format(older=said(older), newer=said(newer), older_time=when(older),
                                  newer_time=when(newer))

    def judge(self, older: Statement, newer: Statement) -> UpdateVerdict:
        """The LLM's verdict on ``older`` -> ``newer``; ``UpdateJudgeError`` when it gives none in time."""
        future = _POOL.submit(self.llm.complete, self.message(older, newer))
        try:
            response = future.result(timeout=self.timeout_s)
        except FutureTimeout:
            future.cancel()
            raise UpdateJudgeError(f"the update judge gave no answer within {self.timeout_s:g} s") from None
        except Exception as exc:  # noqa: BLE001 - any failure of the LLM is the judge's error
            raise UpdateJudgeError(f"the update judge failed: {type(exc).__name__}: {exc}") from exc
        return parse_verdict(getattr(response, "text", None) or str(response))
