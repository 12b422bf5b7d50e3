"""``ConsciousnessRanker``: the spec's consciousness-aware ranking as a node postprocessor.

The spec's pre-LLM algorithmic ranking (Component 5), for when results must be
cut down before the LLM weighs them.  The base is ``node.score`` (else the
``relevance_score`` metadata); energy, confidence, emotions and completeness come
from the metadata (completeness computed when no earlier step wrote it); the
query's emotional intent comes from the offline lexicon or an LLM (the lexicon
on any failure), merged with what the intention states (``required_emotions`` at
the lexicon's base intensity, a state's ``current_emotions``).  Each node gets
the ranking keys in its metadata, ``ranking_base_score`` included so that ranking
twice does not add the adjustments twice.  Missing energy or confidence count as
0.0; values outside [0, 1] are clamped and non-numbers ignored, so one badly
written memory cannot poison the order.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Literal, Optional

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_consciousness.postprocessors.base import StepResult, StreamPostprocessor, hide_from_text, query_text
from llama_consciousness.postprocessors.quality import validate_retrieved_node
from llama_consciousness.scoring.emotional_intent import BASE_INTENSITY, extract_emotional_intent
from llama_consciousness.scoring.cognitive import finite_number
from llama_consciousness.scoring.emotions import canonical_vector
from llama_consciousness.scoring.ranking import (
    calculate_emotional_similarity,
    consciousness_adjusted_score,
    priority_score,
)

__all__ = ["DEFAULT_EMOTION_PROMPT", "RANKING_KEYS", "ConsciousnessRanker", "intention_emotions",
           "parse_emotion_json"]

logger = logging.getLogger(__name__)

RANKING_KEYS = ("consciousness_adjusted_score", "emotional_resonance", "priority_score", "ranking_base_score")

DEFAULT_EMOTION_PROMPT = (
    "You read the emotional intent of a query to a memory store: which feelings should the "
    "memories it asks for carry?\n"
    "Answer with ONLY a JSON object that maps emotion names (single lower-case nouns such as "
    '"excitement", "caution", "frustration") to intensities between 0 and 1. '
    "Answer with an empty object when the query names no feeling.\n\n"
    "Query: {query}\n"
    "JSON:"
)


def _unit(value: Any) -> Optional[float]:
    """``value`` as a float clamped to [0, 1]; None when it is not a finite number."""
    number = finite_number(value)
    return None if number is None else max(0.0, min(1.0, number))


def _clean_vector(value: Any) -> dict[str, float]:
    """An emotion vector from metadata (a dict or its JSON text); bad entries dropped."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, float] = {}
    for name, intensity in value.items():
        number = _unit(intensity)
        if isinstance(name, str) and name.strip() and number is not None:
            out[name] = number
    return out


def parse_emotion_json(text: str) -> dict[str, float]:
    """The emotion vector an LLM answered (canonical names, intensities in [0, 1]), from its outermost ``{...}``.

    Raises ``ValueError`` when there is no JSON object or an entry is not ``name: number``:
    the caller then falls back to the lexicon rather than rank with half an answer.
    """
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError(f"no JSON object in the LLM answer: {text[:200]!r}")
    data = json.loads(text[start:end + 1])
    if not isinstance(data, dict):
        raise ValueError(f"the LLM answer is not a JSON object: {data!r}")
    for name, intensity in data.items():
        if not isinstance(name, str) or not name.strip() or _unit(intensity) is None:
            raise ValueError(f"bad emotion entry in the LLM answer: {name!r}: {intensity!r}")
    return _merge({name: _unit(intensity) for name, intensity in data.items()})


def intention_emotions(intention: Any) -> dict[str, float]:
    """The emotions an intention states outright (canonical names): ``required_emotions`` at the
    lexicon's base intensity, as if the query had named them, ``current_emotions`` at their own."""
    required = getattr(intention, "required_emotions", None) or []
    return _merge({name: BASE_INTENSITY for name in required if isinstance(name, str) and name.strip()},
                  _clean_vector(getattr(intention, "current_emotions", None)))


def _merge(*vectors: Mapping[str, float]) -> dict[str, float]:
    """The vectors by canonical name, each emotion at its strongest."""
    out: dict[str, float] = {}
    for vector in vectors:
        for key, value in canonical_vector(dict(vector)).items():
            out[key] = max(out.get(key, 0.0), value)
    return dict(sorted(out.items()))


class ConsciousnessRanker(StreamPostprocessor):
    """Re-scores and sorts nodes by the spec's consciousness-adjusted score."""

    reality_pressure: float = Field(
        default=0.5, ge=0.0, le=1.0,
        description="External urgency / deadline pressure in [0, 1] (the spec's current_reality_pressure).",
    )
    emotion_source: Literal["lexicon", "llm"] = Field(
        default="lexicon",
        description="How the query's emotional intent is read: offline lexicon, or an LLM (lexicon on failure).",
    )
    llm: Any = Field(
        default=None, exclude=True,
        description="The LLM for emotion_source='llm' (None: llama_index Settings.llm).",
    )
    emotion_prompt: str = Field(
        default=DEFAULT_EMOTION_PROMPT,
        description="Prompt for the LLM; '{query}' is replaced by the query text.",
    )
    top_n: Optional[int] = Field(default=None, ge=0, description="Keep only the best n nodes (None: all).")

    # query text -> emotions the LLM answered (a cache any caller may share: same text, same answer)
    _emotion_cache: dict[str, dict[str, float]] = PrivateAttr(default_factory=dict)

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises the class under."""
        return "ConsciousnessRanker"

    def query_emotions(self, text: str, intention: Any = None) -> dict[str, float]:
        """The query's emotional intent (canonical names), with the intention's emotions merged."""
        if self.emotion_source == "lexicon" or not text.strip():
            found = extract_emotional_intent(text)
        elif text in self._emotion_cache:
            found = dict(self._emotion_cache[text])
        else:
            try:
                from llama_index.core import Settings

                llm = Settings.llm if self.llm is None else self.llm
                answer = llm.complete(self.emotion_prompt.replace("{query}", text))
                found = parse_emotion_json(str(getattr(answer, "text", answer)))
                if len(self._emotion_cache) > 256:
                    self._emotion_cache.clear()
                self._emotion_cache[text] = dict(found)
            except Exception as exc:  # any failure: the lexicon answers (not remembered: the LLM may next time)
                logger.warning("LLM emotion extraction failed (%s: %s); using the lexicon", type(exc).__name__, exc)
                found = extract_emotional_intent(text)
        return _merge(found, intention_emotions(intention)) if intention is not None else found

    def score_node(self, node: NodeWithScore, query_emotions: Mapping[str, float]) -> float:
        """Score one node (writing the ranking keys into its metadata); returns the score."""
        meta = node.node.metadata
        base = node.score
        # Already ranked by a ConsciousnessRanker: start again from the score it started from.
        previous = meta.get("consciousness_adjusted_score")
        if base is not None and previous is not None and base == previous and "ranking_base_score" in meta:
            base = meta["ranking_base_score"]
        if base is None:
            base = meta.get("relevance_score")
        base = finite_number(base) or 0.0
        energy = _unit(meta.get("energy")) or 0.0
        confidence = _unit(meta.get("confidence")) or 0.0
        resonance = calculate_emotional_similarity(query_emotions, _clean_vector(meta.get("emotion_vector")))
        completeness = _unit(meta.get("metadata_completeness"))
        if completeness is None:
            completeness = validate_retrieved_node(node).metadata_completeness
        adjusted = consciousness_adjusted_score(
            base, energy, confidence, resonance, completeness, reality_pressure=self.reality_pressure
        )
        meta["ranking_base_score"] = base
        meta["priority_score"] = priority_score(energy, self.reality_pressure)
        meta["emotional_resonance"] = resonance
        meta["consciousness_adjusted_score"] = adjusted
        hide_from_text(node, RANKING_KEYS)
        node.score = adjusted
        return adjusted

    def rank(self, nodes: list[NodeWithScore], query_emotions: Mapping[str, float]) -> list[NodeWithScore]:
        """Score every node and sort by the adjusted score (stable; ``top_n`` applied)."""
        scores = [self.score_node(node, query_emotions) for node in nodes]
        ranked = [nodes[i] for i in sorted(range(len(nodes)), key=lambda i: -scores[i])]
        return ranked if self.top_n is None else ranked[: self.top_n]

    def process(self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None,
                intention: Any = None) -> StepResult:
        """Rank by the query's emotions, merged with the intention's (required or current emotions)."""
        text = query_text(query_bundle) or (getattr(intention, "query_text", None) or "")
        return StepResult(self.rank(nodes, self.query_emotions(text, intention)))
