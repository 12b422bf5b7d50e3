"""Vocabulary shared by all schema models, so that every layer agrees on the spec's literals and limits."""

from __future__ import annotations

import math
import numbers
import re
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BeforeValidator

__all__ = [
    "CITIZEN_ID_PATTERN", "CitizenId", "EmotionVector", "InvalidationReason", "LevelName", "SupersessionSource",
    "MAX_EMBEDDING_COMPONENT", "MAX_EMOTIONS", "MAX_EMOTION_NAME_CHARS", "MAX_LIST_ITEMS", "MAX_QUERY_CHARS",
    "MAX_RESULTS_PER_LEVEL", "ResolutionState", "TemporalMode", "check_order", "check_temporal_request",
    "check_vector", "validate_citizen_id",
]

LevelName = Literal["N1", "N2", "N3"]
TemporalMode = Literal["current", "point_in_time", "evolution", "full_history"]
ResolutionState = Literal["resolved", "in_progress", "blocked"]
InvalidationReason = Literal["reality_changed", "discovered_false"]
# What decided that a memory replaces another: ids (``supersedes``, a base identity), or a judge of their texts.
SupersessionSource = Literal["explicit", "offline_judge", "llm_judge"]

# Citizen ids end up in file paths, graph names and Cypher parameters; a
# conservative alphabet keeps them from ever escaping any of those contexts.
CITIZEN_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
_CITIZEN_ID_RE = re.compile(CITIZEN_ID_PATTERN)

# Hard caps that protect the stores from accidental (or hostile) huge requests.
MAX_RESULTS_PER_LEVEL = 1000
MAX_QUERY_CHARS = 32768
MAX_EMOTIONS = 64
"""Emotions in one emotion vector (or a retrieval's required emotions): every similarity is computed over them."""
MAX_EMOTION_NAME_CHARS = 64
MAX_LIST_ITEMS = 256
"""Items in a memory's ``concepts`` or ``surfaces_when``, and keys of its ``sensory_details``."""
MAX_EMBEDDING_COMPONENT = 1e6
"""Largest absolute value of an embedding component: real ones are near unit length, and one beyond
is a broken model (the store keeps float32)."""


def check_vector(values: Any, what: str = "embedding") -> list[float]:
    """``values`` as floats, refused when a component is not finite or out of range (one NaN makes every
    cosine against it NaN, and the vector index then ranks arbitrarily instead of failing)."""
    out = [float(v) for v in values]
    if not all(map(math.isfinite, out)) or any(abs(v) > MAX_EMBEDDING_COMPONENT for v in out):
        for index, component in enumerate(out):
            if not math.isfinite(component) or abs(component) > MAX_EMBEDDING_COMPONENT:
                raise ValueError(f"{what}[{index}] is {component!r}; components must be finite and within "
                                 f"+-{MAX_EMBEDDING_COMPONENT:g}")
    return out


def check_order(model: Any, earlier: str, later: str) -> None:
    """Refuse an interval whose end (``later``) comes before its start: queries over it would return nonsense."""
    start, end = getattr(model, earlier), getattr(model, later)
    if start is not None and end is not None and end < start:
        raise ValueError(f"{later} ({end.isoformat()}) must be >= {earlier} ({start.isoformat()})")


def validate_citizen_id(value: str) -> str:
    """Reject any citizen id that could be used for path or query injection."""
    if not isinstance(value, str) or _CITIZEN_ID_RE.fullmatch(value) is None:
        raise ValueError(f"invalid citizen_id {value!r}: must match {CITIZEN_ID_PATTERN} "
                         "(1-64 characters: letters, digits, '_' or '-')")
    return value


CitizenId = Annotated[str, AfterValidator(validate_citizen_id)]
"""A string validated against :data:`CITIZEN_ID_PATTERN`."""


def _reject_non_numeric_emotions(value: Any) -> Any:
    # Runs before pydantic's lax float coercion, which would otherwise turn
    # True into 1.0 or "0.5" into 0.5 and hide a caller's mistake.
    if isinstance(value, dict):
        for emotion, intensity in value.items():
            if type(intensity) is float or type(intensity) is int:  # the common case, without the ABC check
                continue
            if isinstance(intensity, bool) or not isinstance(intensity, numbers.Real):
                raise ValueError(f"emotion {emotion!r} has non-numeric intensity {intensity!r}; "
                                 "intensities must be numbers in [0, 1]")
    return value


def _check_emotion_vector(value: dict[str, float]) -> dict[str, float]:
    # Emotional resonance scoring assumes intensities in [0, 1]; a single
    # out-of-range value would dominate every similarity computed from it.
    if len(value) > MAX_EMOTIONS:
        raise ValueError(f"an emotion vector has {len(value)} emotions; at most {MAX_EMOTIONS} allowed")
    cleaned: dict[str, float] = {}
    for emotion, intensity in value.items():
        name = emotion.strip()
        if not name:
            raise ValueError(f"emotion names must be non-empty, got {emotion!r}")
        if len(name) > MAX_EMOTION_NAME_CHARS:
            raise ValueError(f"emotion name {name[:20]!r}... has {len(name)} characters; at most "
                             f"{MAX_EMOTION_NAME_CHARS} allowed")
        if name in cleaned:
            raise ValueError(f"emotion {name!r} appears more than once (after stripping)")
        if math.isnan(intensity) or not 0.0 <= intensity <= 1.0:
            raise ValueError(f"emotion {name!r} has intensity {intensity!r}; must be in [0, 1]")
        cleaned[name] = float(intensity)
    return cleaned


EmotionVector = Annotated[dict[str, float], BeforeValidator(_reject_non_numeric_emotions),
                          AfterValidator(_check_emotion_vector)]
"""Emotion name -> intensity in [0, 1], names stripped and non-empty."""


_TEMPORAL_MODE_NAMES: tuple[str, ...] = get_args(TemporalMode)
_RANGE_MODES = ("evolution", "full_history")


def check_temporal_mode(mode: Any) -> str:
    """Reject an unknown temporal mode with the list of known ones."""
    if mode not in _TEMPORAL_MODE_NAMES:
        allowed = ", ".join(repr(m) for m in _TEMPORAL_MODE_NAMES)
        raise ValueError(f"temporal_mode must be one of {allowed}; got {mode!r}")
    return mode


def check_temporal_request(mode: str, as_of_time: Any, time_range_start: Any, time_range_end: Any) -> None:
    """The cross-field rules of a temporal request, shared by intentions and windows: a parameter the mode
    would ignore is an error (an ``as_of_time`` with ``current`` almost always means a forgotten mode)."""
    check_temporal_mode(mode)
    if mode == "point_in_time" and as_of_time is None:
        raise ValueError("temporal_mode 'point_in_time' requires as_of_time")
    if as_of_time is not None and mode != "point_in_time":
        raise ValueError("as_of_time is only allowed with temporal_mode 'point_in_time' "
                         f"(got temporal_mode {mode!r})")
    has_range = time_range_start is not None or time_range_end is not None
    if has_range and mode not in _RANGE_MODES:
        raise ValueError("time_range_start/time_range_end are only allowed with temporal_mode "
                         f"'evolution' or 'full_history' (got temporal_mode {mode!r})")
    if time_range_start is not None and time_range_end is not None and time_range_start > time_range_end:
        raise ValueError(f"time_range_start ({time_range_start.isoformat()}) must be <= "
                         f"time_range_end ({time_range_end.isoformat()}): the start is after the end")
