"""``ConsciousnessRanker``: the spec's consciousness-aware ranking as a node postprocessor.

The spec prefers letting the LLM weigh the metadata, and keeps an
algorithmic ranking for when the results must be cut down first (Component
5, "Alternative: Pre-LLM Algorithmic Ranking").  This postprocessor is that
ranking, usable in any LlamaIndex query engine:

* the base score is ``node.score`` (the retriever's relevance; the
  ``relevance_score`` metadata when the score is missing),
* energy, confidence, the emotion vector and the metadata completeness come
  from ``node.metadata`` (where the six-way retriever puts every field of the
  memory); completeness is the metadata value when there is one (e.g.
  written by ``MetadataQualityPostprocessor``), else it is computed with
  :func:`~llama_consciousness.scoring.validation.validate_consciousness_node`,
* emotional resonance is the cosine of the memory's emotions with the
  query's emotional intent - read offline with the lexicon of
  :mod:`llama_consciousness.scoring.emotional_intent`, or asked of an LLM
  (``emotion_source="llm"``) with the lexicon as the fallback on any failure,
* the score is :func:`~llama_consciousness.scoring.ranking.consciousness_adjusted_score`.

On each node it writes ``metadata["consciousness_adjusted_score"]``,
``metadata["emotional_resonance"]``, ``metadata["priority_score"]`` and
``metadata["ranking_base_score"]`` (the score it started from, so ranking a
node twice does not add the adjustments twice), sets ``node.score`` to the
adjusted score, and returns the nodes sorted by it (ties keep their order).

Missing energy or confidence count as 0.0 (no evidence, no boost; the
completeness penalty already marks the gap).  Values outside [0, 1] are
clamped and non-numbers ignored, so one badly written memory cannot poison
the order.

With an intention (``process(nodes, bundle, intention)``, as
``complete_stream`` calls it), what the query text cannot say - a
``RetrievalIntention``'s ``required_emotions`` (at the lexicon's base
intensity) and a ``StateBasedRetrieval``'s ``current_emotions`` - joins the
query's emotions.  The ranking's result is the order of the nodes.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from typing import Any, Literal, Optional

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_consciousness.postprocessors.base import StepResult, StreamPostprocessor, hide_from_text, query_text
from llama_consciousness.postprocessors.quality import validate_retrieved_node
from llama_consciousness.scoring.emotional_intent import BASE_INTENSITY, extract_emotional_intent
from llama_consciousness.scoring.emotions import canonical_emotion
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


# -- pure helpers -------------------------------------------------------------------


def _unit(value: Any) -> Optional[float]:
    """``value`` as a float clamped to [0, 1]; None when it is not a finite number."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number):
        return None
    return max(0.0, min(1.0, number))


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
    """The emotion vector an LLM answered (canonical names, intensities in [0, 1]).

    Takes the outermost ``{...}`` of the answer (models like to add prose or
    code fences).  Raises ``ValueError`` when there is no JSON object or an
    entry is not ``name: number`` - the caller then falls back to the lexicon
    rather than rank with half an answer.
    """
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError(f"no JSON object in the LLM answer: {text[:200]!r}")
    data = json.loads(text[start:end + 1])
    if not isinstance(data, dict):
        raise ValueError(f"the LLM answer is not a JSON object: {data!r}")
    out: dict[str, float] = {}
    for name, intensity in data.items():
        number = _unit(intensity)
        if not isinstance(name, str) or not name.strip() or number is None:
            raise ValueError(f"bad emotion entry in the LLM answer: {name!r}: {intensity!r}")
        key = canonical_emotion(name)
        out[key] = max(out.get(key, 0.0), number)
    return dict(sorted(out.items()))


def intention_emotions(intention: Any) -> dict[str, float]:
    """The emotions an intention states outright (canonical names).

    ``required_emotions`` (a list of names) count at the lexicon's base
    intensity, as if the query had named them; ``current_emotions`` (a
    ``StateBasedRetrieval``'s emotion vector) count at their own intensity.
    """
    out: dict[str, float] = {}
    for name in getattr(intention, "required_emotions", None) or []:
        if isinstance(name, str) and name.strip():
            key = canonical_emotion(name)
            out[key] = max(out.get(key, 0.0), BASE_INTENSITY)
    for name, intensity in _clean_vector(getattr(intention, "current_emotions", None)).items():
        key = canonical_emotion(name)
        out[key] = max(out.get(key, 0.0), intensity)
    return out


def _merge(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
    out = dict(a)
    for key, value in b.items():
        out[key] = max(out.get(key, 0.0), value)
    return dict(sorted(out.items()))


# -- the postprocessor ----------------------------------------------------------------


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
        return "ConsciousnessRanker"

    # -- the query's emotions ---------------------------------------------------------

    def _prompt(self, text: str) -> str:
        return self.emotion_prompt.replace("{query}", text)

    def _resolve_llm(self) -> Any:
        if self.llm is not None:
            return self.llm
        from llama_index.core import Settings

        return Settings.llm

    def _remember(self, text: str, emotions: dict[str, float]) -> dict[str, float]:
        if len(self._emotion_cache) > 256:
            self._emotion_cache.clear()
        self._emotion_cache[text] = emotions
        return dict(emotions)

    def _fallback(self, text: str, exc: BaseException) -> dict[str, float]:
        logger.warning("LLM emotion extraction failed (%s: %s); using the lexicon", type(exc).__name__, exc)
        return extract_emotional_intent(text)

    def query_emotions(self, text: str, intention: Any = None) -> dict[str, float]:
        """The query's emotional intent (canonical names), with the intention's emotions merged."""
        if self.emotion_source == "lexicon" or not text.strip():
            found = extract_emotional_intent(text)
        elif text in self._emotion_cache:
            found = dict(self._emotion_cache[text])
        else:
            try:
                answer = self._resolve_llm().complete(self._prompt(text))
                found = self._remember(text, parse_emotion_json(str(getattr(answer, "text", answer))))
            except Exception as exc:  # any failure: the lexicon still answers
                found = self._fallback(text, exc)  # not remembered: the LLM may answer next time
        return _merge(found, intention_emotions(intention)) if intention is not None else found

    # -- scoring ------------------------------------------------------------------------

    @staticmethod
    def _base_score(node: NodeWithScore) -> float:
        meta = node.node.metadata
        score = node.score
        # Already ranked by a ConsciousnessRanker: start again from the score it started from.
        previous = meta.get("consciousness_adjusted_score")
        if score is not None and previous is not None and score == previous and "ranking_base_score" in meta:
            score = meta["ranking_base_score"]
        if score is None:
            score = meta.get("relevance_score")
        try:
            value = float(score) if score is not None and not isinstance(score, bool) else 0.0
        except (TypeError, ValueError):
            value = 0.0
        return value if math.isfinite(value) else 0.0

    @staticmethod
    def _completeness(node: NodeWithScore) -> float:
        meta = node.node.metadata
        stored = _unit(meta.get("metadata_completeness"))
        if stored is not None:
            return stored
        return validate_retrieved_node(node).metadata_completeness

    def score_node(self, node: NodeWithScore, query_emotions: Mapping[str, float]) -> float:
        """Score one node (writing the ranking keys into its metadata); returns the score."""
        meta = node.node.metadata
        base = self._base_score(node)
        energy = _unit(meta.get("energy")) or 0.0
        confidence = _unit(meta.get("confidence")) or 0.0
        resonance = calculate_emotional_similarity(query_emotions, _clean_vector(meta.get("emotion_vector")))
        completeness = self._completeness(node)
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
        order = sorted(range(len(nodes)), key=lambda i: -scores[i])  # sorted() is stable
        ranked = [nodes[i] for i in order]
        return ranked if self.top_n is None else ranked[: self.top_n]

    # -- the postprocessor's one entry point ---------------------------------------------

    def process(self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None,
                intention: Any = None) -> StepResult:
        """Rank by the query's emotions, merged with the intention's (required or current emotions)."""
        text = query_text(query_bundle) or (getattr(intention, "query_text", None) or "")
        return StepResult(self.rank(nodes, self.query_emotions(text, intention)))
