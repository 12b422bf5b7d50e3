"""What a retrieval lets through, as one parameterised Cypher predicate.

The spec wants every consciousness filter of an intention applied *inside*
the query (decision #2): the temporal window, ``min_energy``,
``min_confidence`` and ``required_emotions``.  Quarantined memories (a
suspected prompt injection kept for audit) never pass.  Building all of it
in one place keeps the vector, graph and keyword channels in agreement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llama_consciousness.scoring.emotions import canonical_emotion
from llama_consciousness.temporal import Predicate, TemporalWindow, cypher_predicate


@dataclass(frozen=True)
class MemoryFilter:
    """The filters of one retrieval.

    ``required_emotions`` are matched by canonical name (``excited`` meets
    ``excitement``, see ``scoring.emotions``): a memory passes when it
    carries at least one of them, as the spec's own test expects.
    """

    window: TemporalWindow = field(default_factory=TemporalWindow)
    min_energy: float | None = None
    min_confidence: float | None = None
    required_emotions: tuple[str, ...] = ()
    include_quarantined: bool = False
    include_entities: bool = False

    @classmethod
    def from_intention(cls, intention: Any, window: TemporalWindow | None = None) -> MemoryFilter:
        return cls(
            window=window or TemporalWindow.from_intention(intention),
            min_energy=intention.min_energy,
            min_confidence=intention.min_confidence,
            required_emotions=tuple(intention.required_emotions or ()),
        )

    @property
    def hides_forgotten(self) -> bool:
        """Whether memories taken back with ``memory.forget`` are left out beyond what the window says: in
        ``evolution``, which shows replaced beliefs (a chatbot's recall, marked past), a forgotten memory was not
        replaced but retracted, and must not come back to an LLM.  ``current`` and ``point_in_time`` leave it out
        by its expiry already; ``full_history`` shows it."""
        return self.window.mode == "evolution"

    @property
    def canonical_emotions(self) -> list[str]:
        return sorted({canonical_emotion(e) for e in self.required_emotions})

    def cypher(self, var: str = "n", prefix: str = "f_", *, entities: bool | None = None) -> Predicate:
        """The filter over node variable ``var``; parameter names start with ``prefix``.

        Entity hubs (``is_entity``) are left out of answers unless
        ``include_entities``; ``entities=True`` lets them through regardless,
        for the start points of a traversal.
        """
        temporal = cypher_predicate(self.window, var, prefix + "t_")
        clauses = [temporal.text]
        params: dict[str, Any] = dict(temporal.params)
        if not self.include_quarantined:
            clauses.append(f"coalesce({var}.quarantined, false) = false")
        if self.hides_forgotten:
            clauses.append(f"{var}.forgotten_at IS NULL")
        if not (self.include_entities if entities is None else entities):
            clauses.append(f"coalesce({var}.is_entity, false) = false")
        if self.min_energy is not None:
            clauses.append(f"{var}.energy >= ${prefix}min_energy")
            params[f"{prefix}min_energy"] = float(self.min_energy)
        if self.min_confidence is not None:
            clauses.append(f"{var}.confidence >= ${prefix}min_confidence")
            params[f"{prefix}min_confidence"] = float(self.min_confidence)
        if self.required_emotions:
            clauses.append(f"any(e IN coalesce({var}.emotion_canonical, []) WHERE e IN ${prefix}emotions)")
            params[f"{prefix}emotions"] = self.canonical_emotions
        return Predicate(" AND ".join(c for c in clauses if c != "true") or "true", params)

    def accepts(self, node: Any) -> bool:
        """The same rule in Python, for records already in hand (and for tests)."""
        from llama_consciousness.scoring.emotions import canonical_vector
        from llama_consciousness.temporal import is_visible

        if not is_visible(self.window, node):
            return False
        if not self.include_quarantined and getattr(node, "quarantined", False):
            return False
        if self.hides_forgotten and getattr(node, "forgotten_at", None) is not None:
            return False
        if not self.include_entities and getattr(node, "is_entity", False):
            return False
        if self.min_energy is not None and node.energy < self.min_energy:
            return False
        if self.min_confidence is not None and node.confidence < self.min_confidence:
            return False
        if self.required_emotions:
            have = set(canonical_vector(node.emotion_vector))
            if not have.intersection(self.canonical_emotions):
                return False
        return True
