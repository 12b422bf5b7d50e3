"""A citizen's state versions, kept as ``CitizenState`` nodes in the citizen's N1 graph.

Why there: the state belongs to the citizen, so it lives, moves and is
replicated with the citizen's own memories (one key: on a cluster, the same
master).  No :class:`~llama_consciousness.storage.level_store` query matches
this label, so retrieval never sees it.

Times are integer microseconds since 1970 (UTC): a chatbot records feedback
after every turn, and two versions in one second must stay two versions.
Each write is one query, so the read of the state it builds on and the new
version are one transaction: two threads' feedback on one citizen both count.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from llama_consciousness.schema.citizen import CitizenState
from llama_consciousness.schema._time import to_utc
from llama_consciousness.storage.level_store import Query

LABEL = "CitizenState"
PROPS = ("version_id", "energy", "emotion_names", "emotion_values", "goal", "mindstate", "valid_at",
         "created_at", "expired_at", "source", "reason", "stream_id")
DEFAULT_ENERGY = 0.5
"""The energy of a citizen with no stored state (the spec's S6 example starts there)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
Plan = Generator[Any, Any, Any]


def micros(value: datetime) -> int:
    return (to_utc(value) - _EPOCH) // timedelta(microseconds=1)


def from_micros(value: int | None) -> datetime | None:
    return None if value is None else _EPOCH + timedelta(microseconds=int(value))


def _projection(var: str) -> str:
    return "[" + ", ".join(f"{var}.{p}" for p in PROPS) + "]"


def _state(citizen_id: str, row: Sequence[Any], invalid_at: int | None) -> CitizenState:
    data = dict(zip(PROPS, row))
    names, values = data.pop("emotion_names") or [], data.pop("emotion_values") or []
    return CitizenState(
        citizen_id=citizen_id, emotion_vector=dict(zip(names, map(float, values))),
        **{k: v for k, v in data.items() if k not in ("valid_at", "created_at", "expired_at") and v is not None},
        valid_at=from_micros(data["valid_at"]), created_at=from_micros(data["created_at"]),
        expired_at=from_micros(data["expired_at"]), invalid_at=from_micros(invalid_at),
    )


# Believed at record time $known (written by then, not yet corrected), in force at valid time $at.
_BELIEVED = "s.created_at <= $known AND (s.expired_at IS NULL OR s.expired_at > $known)"
# ``s``: the version in force at $at as believed at $known (prefixed by MATCH, or OPTIONAL MATCH for none)
_IN_FORCE = (f"(s:{LABEL}) WHERE s.valid_at <= $at AND {_BELIEVED} "
             "WITH s ORDER BY s.valid_at DESC, s.created_at DESC LIMIT 1 ")
_NEXT = (f"OPTIONAL MATCH (n:{LABEL}) WHERE n.valid_at > s.valid_at AND n.created_at <= $known "
         "AND (n.expired_at IS NULL OR n.expired_at > $known) ")


def state_as_of(citizen_id: str, at: datetime, known: datetime) -> Plan:
    """The version in force at ``at`` as recorded by ``known``; None when there is none."""
    rows = yield Query("MATCH " + _IN_FORCE + _NEXT + f"RETURN {_projection('s')}, min(n.valid_at)",
                       {"at": micros(at), "known": micros(known)}, read_only=True)
    return _state(citizen_id, rows[0][0], rows[0][1]) if rows else None


def history(citizen_id: str, known: datetime | None = None) -> Plan:
    """Every version, in valid time (then record time) order; with ``known``, as believed then."""
    where = f"WHERE {_BELIEVED} " if known is not None else ""
    params = {"known": micros(known)} if known is not None else {}
    rows = yield Query(f"MATCH (s:{LABEL}) {where}RETURN {_projection('s')} ORDER BY s.valid_at, s.created_at",
                       params, read_only=True)
    states = [list(r[0]) for r in rows]
    # invalid_at: the next version in valid time among those still believed
    cut = None if known is None else micros(known)
    expired, valid = PROPS.index("expired_at"), PROPS.index("valid_at")

    def believed(row: list) -> bool:  # at `known` (or now): not yet corrected then
        return row[expired] is None or (cut is not None and row[expired] > cut)

    live = [r for r in states if believed(r)]
    out = []
    for row in states:
        later = [r[valid] for r in live if r[valid] > row[valid]]
        out.append(_state(citizen_id, row, min(later) if later and believed(row) else None))
    return out


def record(state: CitizenState, carry: dict[str, bool]) -> Plan:
    """Write ``state`` as a new version; fields whose ``carry`` is True take the value of the version in
    force at its ``valid_at`` instead (None if there is none).  A version already in force from the very
    same ``valid_at`` is a correction's target: it is expired, not deleted.  Returns the version written."""
    names = list(state.emotion_vector)
    params = {
        "vid": state.version_id, "at": micros(state.valid_at), "now": micros(state.created_at),
        "known": micros(state.created_at), "energy": state.energy, "names": names,
        "values": [float(state.emotion_vector[n]) for n in names], "goal": state.goal,
        "mindstate": state.mindstate, "source": state.source, "reason": state.reason,
        "stream": state.stream_id,
        **{f"carry_{k}": bool(carry.get(k)) for k in ("energy", "emotions", "goal", "mindstate")},
    }
    cypher = (
        "OPTIONAL MATCH " + _IN_FORCE +
        # a carried energy needs a version to carry it from: none, nothing is written (the caller says so)
        "WITH s WHERE s IS NOT NULL OR NOT $carry_energy "
        f"CREATE (v:{LABEL} {{version_id: $vid, valid_at: $at, created_at: $now, source: $source}}) "
        "SET v.energy = CASE WHEN $carry_energy THEN s.energy ELSE $energy END, "
        "v.emotion_names = CASE WHEN $carry_emotions THEN s.emotion_names ELSE $names END, "
        "v.emotion_values = CASE WHEN $carry_emotions THEN s.emotion_values ELSE $values END, "
        "v.goal = CASE WHEN $carry_goal THEN s.goal ELSE $goal END, "
        "v.mindstate = CASE WHEN $carry_mindstate THEN s.mindstate ELSE $mindstate END, "
        "v.reason = $reason, v.stream_id = $stream "
        "WITH v, s "
        # the correction: the version it replaces held from the same instant
        "FOREACH (old IN CASE WHEN s IS NOT NULL AND s.valid_at = $at THEN [s] ELSE [] END | "
        "SET old.expired_at = $now) "
        f"RETURN {_projection('v')}"
    )
    rows = yield Query(cypher, params)
    if not rows:
        raise ValueError(f"citizen {state.citizen_id!r} has no state in force at {state.valid_at.isoformat()}: "
                         "give its energy")
    return _state(state.citizen_id, rows[0][0], None)


def apply_delta(citizen_id: str, version_id: str, stream_id: str, delta: float, now: datetime,
                reason: str) -> Plan:
    """Add ``delta`` to the latest energy (``DEFAULT_ENERGY`` when none), clamped to [0, 1], as a new
    ``feedback`` version carrying the rest; nothing when this stream's feedback is already recorded.

    The new version follows the latest one in valid time (``now``, or a microsecond after it): feedback
    from threads whose clocks read a little apart still builds each on the one before, so none is lost.
    Returns ``(applied, energy_before, energy_after, started_from_default)``."""
    cypher = (
        f"OPTIONAL MATCH (d:{LABEL} {{stream_id: $stream, source: 'feedback'}}) "
        "WITH count(d) AS done "
        f"OPTIONAL MATCH (s:{LABEL}) WHERE s.expired_at IS NULL "  # whatever any clock said: all recorded
        "WITH done, s ORDER BY s.valid_at DESC, s.created_at DESC LIMIT 1 "
        "WITH done, s, coalesce(s.energy, $default) AS before, "
        "CASE WHEN s.valid_at >= $at THEN s.valid_at + 1 ELSE $at END AS vat "
        "WITH done, s, before, vat, CASE WHEN before + $delta > 1.0 THEN 1.0 WHEN before + $delta < 0.0 THEN 0.0 "
        "ELSE before + $delta END AS after "
        "FOREACH (_ IN CASE WHEN done = 0 THEN [1] ELSE [] END | "
        f"CREATE (:{LABEL} {{version_id: $vid, valid_at: vat, created_at: $at, source: 'feedback', "
        "energy: after, emotion_names: s.emotion_names, emotion_values: s.emotion_values, goal: s.goal, "
        "mindstate: s.mindstate, reason: $reason, stream_id: $stream})) "
        "RETURN done = 0, before, CASE WHEN done = 0 THEN after ELSE before END, s IS NULL"
    )
    at = micros(now)
    rows = yield Query(cypher, {"stream": stream_id, "at": at, "default": DEFAULT_ENERGY,
                                "delta": float(delta), "vid": version_id, "reason": reason})
    applied, before, after, fresh = rows[0]
    return bool(applied), float(before), float(after), bool(fresh)
