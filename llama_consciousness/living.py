"""The living memory: what a retrieval gives back to the memory and to the citizen.

* **Use** (``record_use``): the memories a caller used (a stream's focus tier,
  or the nodes an answer was given from) count one more access, and links
  between two of them one more co-activation (spec 004).  Written by one
  background thread in batches, off the query's path; one retrieval counts
  once however often it is recorded.
* **Feedback** (``apply_feedback``): the spec's energy feedback applied to the
  citizen's stored energy, with a potential that does not shrink with the
  number of items retrieved (``scoring.energy.feedback_potential``).
* **State** (``citizen_state`` and friends): versions of how a citizen feels,
  valid-time and record-time queryable (``storage.citizen_states``).

Memories superseded or deleted between the retrieval and its use or feedback
count for nothing, and the report says which.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import uuid4

from llama_index.core.schema import NodeWithScore

from llama_consciousness.levels import graph_name
from llama_consciousness.postprocessors.base import memory_key
from llama_consciousness.schema import ConsciousnessStream
from llama_consciousness.schema._time import to_utc, utcnow
from llama_consciousness.schema.citizen import CitizenState, FeedbackReport, SkippedMemory, UseReport
from llama_consciousness.schema.stream import LEVEL_KEYS
from llama_consciousness.scoring.energy import energy_feedback_delta, feedback_potential
from llama_consciousness.storage import citizen_states, usage
from llama_consciousness.storage.reader import MemoryKeeper


logger = logging.getLogger(__name__)

_LEVEL_OF_KEY = {key: level for level, key in LEVEL_KEYS.items()}
Member = tuple[str, str | None, str]
"""A used memory: ``(level, citizen_id or None, node_id)``."""


# -- what was used ---------------------------------------------------------------------------------------


def _level_of(node: Any, fallback: str | None = None) -> str | None:
    level = getattr(node, "level", None)
    if level is None:  # a channel that did not know the level still named its source: "N2_vector"
        source = str(getattr(node, "retrieval_source", "") or "")
        level = source[:2] if source[:2] in LEVEL_KEYS else None
    return level or fallback


def _stream_nodes(stream: ConsciousnessStream) -> list[tuple[str | None, Any]]:
    """The memories a stream puts before its reader: its focus tier, else (no tiers) everything it holds."""
    if stream.activation_tiers:
        return [(_level_of(n), n) for n in stream.activation_tiers.get("focus", [])]
    out = []
    for key, results in stream.levels.items():
        for channel in (results.vector_results, results.graph_results, results.keyword_results):
            out += [(_level_of(n, _LEVEL_OF_KEY.get(key)), n) for n in channel]
    return out


def used_members(used: Any, use_id: str | None = None) -> tuple[str, list[Member]]:
    """``(use_id, members)`` of a stream, a list of ``NodeWithScore`` (a query engine's source nodes), or a
    LlamaIndex response (its ``source_nodes``).

    Of nodes, those of the focus tier when a tier postprocessor labelled them, else all; the use id is the
    retrieval's (``metadata["retrieval_id"]``) unless given.
    """
    if isinstance(used, ConsciousnessStream):
        members = [(lv, getattr(n, "citizen_id", None) if lv == "N1" else None, n.node_id)
                   for lv, n in _stream_nodes(used) if lv is not None]
        return use_id or used.intention_id, list(dict.fromkeys(members))
    nodes = getattr(used, "source_nodes", used)
    if not isinstance(nodes, (list, tuple)) or not all(isinstance(n, NodeWithScore) for n in nodes):
        raise TypeError("record_use/apply_feedback take a ConsciousnessStream, a list of NodeWithScore or a "
                        f"response with source_nodes, not {type(used).__name__}")
    if any("activation_tier" in n.node.metadata for n in nodes):
        nodes = [n for n in nodes if n.node.metadata.get("activation_tier") == "focus"]
    nodes = [n for n in nodes if n.node.metadata.get("level") in LEVEL_KEYS and n.node.metadata.get("node_id")]
    ids = {n.node.metadata.get("retrieval_id") for n in nodes} - {None}
    if use_id is None:
        if len(ids) != 1:
            raise ValueError("these nodes do not name one retrieval (metadata 'retrieval_id'): pass use_id=...")
        use_id = ids.pop()
    return str(use_id), list(dict.fromkeys(memory_key(n) for n in nodes))


def _by_graph(members: Iterable[Member]) -> dict[str, tuple[str, str | None, list[str]]]:
    out: dict[str, tuple[str, str | None, list[str]]] = {}
    for level, citizen, node_id in members:
        out.setdefault(graph_name(level, citizen), (level, citizen, []))[2].append(node_id)
    return out


# -- use, written in the background ----------------------------------------------------------------------


USE_RETENTION = timedelta(days=30)
"""How long a recorded use is kept (and ``record_use`` idempotent for it); its counts stay for good."""
PRUNE_EVERY_S = 3600.0


@dataclass
class _Pending:
    use_id: str
    at: int
    members: list[Member]
    future: Future
    seq: int = 0


def _settle(future: Future, report: UseReport | None = None, exc: BaseException | None = None) -> None:
    """Give a caller its answer, unless it stopped waiting (a cancelled future takes no result)."""
    if future.done():
        return
    try:
        future.set_exception(exc) if exc is not None else future.set_result(report)
    except Exception:  # cancelled in between: nobody is listening
        pass


class UseRecorder:
    """One thread that writes uses in batches: a caller's ``record_use`` returns at once with a future.

    A batch takes every use waiting (up to ``max_batch``) and writes each graph's share in one query, so a
    busy chatbot pays one write per graph per batch, not per answer.  Started on first use; ``close``
    writes what is waiting, then stops it.  A use whose caller cancelled its future before the write
    started is not written; one failing use (its graph down) fails alone.
    """

    def __init__(self, memory: MemoryKeeper, max_batch: int = 64,
                 retention: timedelta = USE_RETENTION) -> None:
        self.memory = memory
        self.max_batch = max_batch
        self.retention = retention
        self._pruned: dict[str, float] = {}  # graph -> when its old uses were last pruned (monotonic)
        self._waiting: deque[_Pending] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._submitted = 0  # uses handed in, and the last of them settled: flush waits for its own
        self._settled = 0
        self._closed = False

    def submit(self, use_id: str, members: list[Member], at: datetime | None = None) -> Future:
        for level, citizen, _ in members:  # a bad member fails its caller, not the batch it would join
            graph_name(level, citizen)
        future: Future = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("the memory is closed: nothing more can be recorded")
            self._submitted += 1
            self._waiting.append(_Pending(use_id, citizen_states.micros(at or utcnow()), members, future,
                                          self._submitted))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="llama-consciousness-uses", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return future

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every use submitted before this call is written (later ones are not waited for);
        False on timeout."""
        with self._cond:
            upto = self._submitted
            return self._cond.wait_for(lambda: self._settled >= upto, timeout)

    def close(self, timeout: float = 30.0) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._waiting or self._closed)
                if not self._waiting:
                    return
                batch = [self._waiting.popleft() for _ in range(min(self.max_batch, len(self._waiting)))]
            # from here a caller's cancel no longer stops the write (asyncio's wait_for, say, cancels it)
            live = [p for p in batch if p.future.set_running_or_notify_cancel()]
            try:
                self._write(live)
            except BaseException as exc:  # never lose the thread: each caller left hears of the failure
                logger.exception("recording uses failed")
                for p in live:
                    _settle(p.future, exc=exc)
            finally:
                with self._cond:
                    self._settled = max(self._settled, max(p.seq for p in batch))
                    self._cond.notify_all()

    def _write(self, batch: list[_Pending]) -> None:
        # uses with the same id go in separate rounds: the second must see what the first counted
        rounds: list[list[_Pending]] = []
        for p in batch:
            for r in rounds:
                if all(q.use_id != p.use_id for q in r):
                    r.append(p)
                    break
            else:
                rounds.append([p])
        for r in rounds:
            try:
                self._write_round(r)
            except Exception as exc:  # this round's uses fail; the next rounds are still written
                logger.exception("recording uses failed")
                for p in r:
                    _settle(p.future, exc=exc)

    def _write_round(self, round_: list[_Pending]) -> None:
        reports = {p.use_id: UseReport(use_id=p.use_id) for p in round_}
        graphs: dict[str, tuple[str, str | None, list[tuple[str, int, list[str]]]]] = {}
        for p in round_:
            for graph, (level, citizen, ids) in _by_graph(p.members).items():
                graphs.setdefault(graph, (level, citizen, []))[2].append((p.use_id, p.at, ids))
        for graph, (level, citizen, uses) in graphs.items():
            try:
                outcome, linked = self.memory.writable(level, citizen).run(usage.record_uses(uses))
            except Exception as exc:
                for use_id, _, _ in uses:
                    reports[use_id].errors.append(f"{graph}: {exc}")
                continue
            for use_id, _, ids in uses:
                report, states = reports[use_id], outcome.get(use_id, {})
                for node_id in ids:
                    what = states.get(node_id, "already_recorded")
                    if what == "counted":
                        report.counted.append((level, node_id))
                    else:
                        report.skipped.append(SkippedMemory(level=level, node_id=node_id, reason=what))
                report.co_activated_links += linked.get(use_id, 0)
        for p in round_:
            report = reports[p.use_id]
            if report.skipped or report.errors:
                logger.info("record_use: %s", report.message)
            _settle(p.future, report)
        for graph, (level, citizen, _) in graphs.items():  # after the answers: nobody waits for this
            self._prune(graph, level, citizen)

    def _prune(self, graph: str, level: str, citizen: str | None) -> None:
        """Delete a graph's uses older than the retention, at most once per ``PRUNE_EVERY_S`` per graph."""
        now = time.monotonic()
        if now - self._pruned.get(graph, float("-inf")) < PRUNE_EVERY_S:
            return
        self._pruned[graph] = now
        try:
            before = citizen_states.micros(utcnow() - self.retention)
            deleted = self.memory.writable(level, citizen).run(usage.prune_uses(before))
            if deleted:
                logger.info("record_use: %d uses older than %s pruned from %s", deleted, self.retention, graph)
        except Exception as exc:  # the next batch tries again later; nothing recorded depends on it
            logger.warning("pruning old uses of %s failed: %s", graph, exc)


# -- feedback ---------------------------------------------------------------------------------------------


def stream_citizen(stream: ConsciousnessStream) -> str | None:
    """The citizen a stream was retrieved for, from its personal (N1) memories."""
    results = stream.levels.get(LEVEL_KEYS["N1"])
    if results is None:
        return None
    return next((n.citizen_id for n in (*results.vector_results, *results.graph_results, *results.keyword_results)
                 if n.citizen_id), None)


def apply_feedback(memory: MemoryKeeper, stream: ConsciousnessStream, citizen_id: str | None,
                   feedback_weight: float) -> FeedbackReport:
    if not isinstance(stream, ConsciousnessStream):
        raise TypeError(f"apply_feedback takes a ConsciousnessStream, not {type(stream).__name__}")
    if not 0.0 <= feedback_weight <= 1.0:
        raise ValueError(f"feedback_weight must be in [0, 1], got {feedback_weight!r}")
    citizen = citizen_id or stream_citizen(stream)
    if citizen is None:
        raise ValueError("this stream holds no personal (N1) memory to tell whose it is: pass citizen_id=...")
    nodes = [(lv, n) for lv, n in _stream_nodes(stream) if lv is not None]
    rels = [(_LEVEL_OF_KEY.get(key), r) for key, res in stream.levels.items() for r in res.relationships]
    # what is still current, per level: memories, and the relationships' ends
    wanted: dict[tuple[str, str | None], set[str]] = {}
    for lv, n in nodes:
        wanted.setdefault((lv, citizen if lv == "N1" else None), set()).add(n.node_id)
    for lv, r in rels:
        if lv is not None:
            wanted.setdefault((lv, citizen if lv == "N1" else None), set()).update((r.source_id, r.target_id))
    state: dict[tuple[str, str], str] = {}
    for (lv, cid), ids in wanted.items():
        for node_id, what in memory.level(lv, cid).run(usage.memory_states(sorted(ids))).items():
            state[(lv, node_id)] = what
    skipped = [SkippedMemory(level=lv, node_id=n.node_id, reason=state[(lv, n.node_id)])
               for lv, n in nodes if state.get((lv, n.node_id), "deleted") != "current"]
    live = [n for lv, n in nodes if state.get((lv, n.node_id)) == "current"]
    live += [r for lv, r in rels if lv is not None and state.get((lv, r.source_id)) == "current"
             and state.get((lv, r.target_id)) == "current" and r.expired_at is None]
    potential = feedback_potential(live)
    now = utcnow()
    if not live:
        current = memory.citizen_state(citizen)
        energy = current.energy if current else citizen_states.DEFAULT_ENERGY
        return FeedbackReport(citizen_id=citizen, stream_id=stream.intention_id, applied=False,
                              energy_before=energy, energy_after=energy, potential=potential,
                              spec_potential=stream.energy_feedback_potential, counted=0, skipped=skipped,
                              started_from_default=current is None,
                              message="nothing to feed back: every retrieved memory was superseded or deleted "
                                      "since the retrieval" if skipped else "nothing to feed back: the stream "
                                      "holds no memory")
    delta = energy_feedback_delta(potential, feedback_weight)  # added, and clamped, inside the write
    reason = f"feedback of retrieval {stream.intention_id}: potential {potential:.3f} from {len(live)} items"
    applied, before, after, fresh = memory.writable("N1", citizen).run(citizen_states.apply_delta(
        citizen, "cs_" + uuid4().hex, stream.intention_id, delta, now, reason))
    message = (f"energy {before:.3f} -> {after:.3f}" if applied else
               f"feedback of retrieval {stream.intention_id} was already applied: energy stays {after:.3f}")
    if skipped:
        message += f"; {len(skipped)} memories superseded or deleted since the retrieval did not count"
    return FeedbackReport(citizen_id=citizen, stream_id=stream.intention_id, applied=applied,
                          energy_before=before, energy_after=after, potential=potential,
                          spec_potential=stream.energy_feedback_potential, counted=len(live), skipped=skipped,
                          started_from_default=fresh and applied, message=message)


# -- state ------------------------------------------------------------------------------------------------

UNSET: Any = object()


def update_state(memory: MemoryKeeper, citizen_id: str, *, energy: Any, emotion_vector: Any, goal: Any,
                 mindstate: Any, valid_at: datetime | None, reason: str | None) -> CitizenState:
    carry = {"energy": energy is UNSET, "emotions": emotion_vector is UNSET, "goal": goal is UNSET,
             "mindstate": mindstate is UNSET}
    if all(carry.values()):
        raise ValueError("update_citizen_state needs at least one of energy, emotion_vector, goal, mindstate")
    now = utcnow()
    at = now if valid_at is None else to_utc(valid_at)
    state = CitizenState(  # validates every given field (the carried ones are placeholders)
        citizen_id=citizen_id, energy=0.0 if energy is UNSET else energy,
        emotion_vector={} if emotion_vector is UNSET else (emotion_vector or {}),
        goal=None if goal is UNSET else goal, mindstate=None if mindstate is UNSET else mindstate,
        valid_at=at, created_at=now, reason=reason)
    return memory.writable("N1", citizen_id).run(citizen_states.record(state, carry))
