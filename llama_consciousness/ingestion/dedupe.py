"""``NearDuplicateFilter``: the same memory twice is one memory.

A memory whose embedding has cosine similarity above the threshold with a
current memory of its level, or an earlier one of the run, is linked to the
most similar (wherever it is, so chunking changes nothing) as DUPLICATE_OF
(``"link"``) or not written (``"skip"``).  Not duplicates: the same
``node_id`` (an update), versions of one base identity, entities.  A memory
already stored keeps the judgement of its first write.  Embeddings stay on
the nodes, so the writer does not embed them again.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from llama_index.core.schema import BaseNode
from pydantic import Field, SkipValidation

from llama_consciousness.blas import one_blas_thread
from llama_consciousness.ingestion.plan import PlannedVersion
from llama_consciousness.ingestion.steps import embed_memories
from llama_consciousness.ingestion.updates import STORED_KEY
from llama_consciousness.nodes import is_relationship, text_node_to_memory
from llama_consciousness.ingestion.report import IngestReport, ReportingTransform
from llama_consciousness.ingestion.writer import DUPLICATE_KEY
from llama_consciousness.levels import home_key
from llama_consciousness.scoring.identity import base_identity
from llama_consciousness.storage.reader import MemoryReader


def _home(node: BaseNode) -> tuple[tuple[str, str | None], PlannedVersion]:
    """A memory's graph key and version fields, read from its metadata (the writer parses the model; three
    fields are needed here).  Invalid fields are parsed, to fail with the model's error."""
    meta = node.metadata
    node_id, level, citizen = meta.get("node_id", node.node_id), meta.get("level"), meta.get("citizen_id")
    supersedes, extra = meta.get("supersedes"), meta.get("extra")
    if (type(node_id) is not str or level not in ("N1", "N2", "N3") or (level == "N1" and type(citizen) is not str)
            or not (supersedes is None or type(supersedes) is str) or not (extra is None or type(extra) is dict)):
        memory = text_node_to_memory(node)
        node_id, level, citizen = memory.node_id, memory.level, memory.citizen_id
        supersedes, extra = memory.supersedes, memory.extra
    return home_key(level, citizen), PlannedVersion(node_id, supersedes, extra, None)


class _Judged:
    """The memories of one level graph that a run has kept so far (unit vectors)."""

    def __init__(self, empty_at_start: bool) -> None:
        self.empty_at_start = empty_at_start
        self.ids: list[str] = []
        self.id_set: set[str] = set()
        self.bases: list[str] = []
        self.of_base: dict[str, list[int]] = {}  # base identity -> its positions
        self.vectors = np.empty((0, 0), dtype=np.float32)
        # for the knowledge-update detector: the run's latest statements by what they are about
        self.update_keys: dict[str, list[Any]] = {}

    def add(self, ids: list[str], bases: list[str], vectors: np.ndarray) -> None:
        if not ids:
            return
        self.vectors = vectors.copy() if not self.ids else np.concatenate([self.vectors, vectors])
        for position, base in enumerate(bases, start=len(self.ids)):
            self.of_base.setdefault(base, []).append(position)
        self.ids += ids
        self.id_set.update(ids)
        self.bases += bases


class DuplicateMemo:
    """What one ingestion run has already judged, per level graph, to compare chunks with exactly.  In a
    level empty when the run reached it (a bulk load), the server's lookups are skipped."""

    def __init__(self) -> None:
        self._graphs: dict[tuple[str, str | None], _Judged] = {}
        self._lock = threading.Lock()

    def judged(self, key: tuple[str, str | None], store: Any) -> _Judged:
        with self._lock:
            found = self._graphs.get(key)
        if found is None:
            # Lanes write each graph from one thread at a time, so the check
            # below runs before this run writes anything into the graph.
            found = _Judged(empty_at_start=not store.has_current_memories())
            with self._lock:
                found = self._graphs.setdefault(key, found)
        return found


class NearDuplicateFilter(ReportingTransform):
    """Link or skip memories nearly identical to one already in their level (or, given a
    :class:`DuplicateMemo`, to one that earlier calls of the run kept)."""

    memory: SkipValidation[MemoryReader] = Field(exclude=True, description="the ConsciousnessMemory to compare against")
    threshold: float = Field(default=0.9, gt=0.0, le=1.0, description="cosine similarity above which two memories are one")
    action: Literal["link", "skip"] = "link"
    memo: Any = Field(default=None, exclude=True, description="a DuplicateMemo shared by the calls of one run")
    plan: Any = Field(default=None, exclude=True, description=(
        "the call's CallPlan: a stored memory of the call is compared through the memo (as it was in the run "
        "that wrote it), so a rerun after a kill judges as the first run did"))

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[BaseNode]:
        self._report = IngestReport()
        memories = [n for n in nodes if not is_relationship(n)]
        embed_memories(self.memory.embed_model, memories)
        groups: dict[tuple[str, str | None], list[BaseNode]] = {}
        versions: dict[str, PlannedVersion] = {}
        for node in memories:
            key, versions[node.node_id] = _home(node)
            groups.setdefault(key, []).append(node)
        dropped: set[str] = set()
        # One BLAS thread: the products below are large, and the helper
        # threads numpy would start keep spinning afterwards on a core that
        # the rest of the ingestion needs (see ``blas``).
        with one_blas_thread():
            for (level, citizen), group in groups.items():
                dropped |= self._check_level(level, citizen, group, versions)
        return [n for n in nodes if n.node_id not in dropped]

    def _check_level(self, level: str, citizen: str | None, group: list[BaseNode], versions: dict) -> set[str]:
        """Judge the memories of one level; returns the ids to drop.  A memory stored under its id keeps the
        judgement of its first write (else it would find its own duplicate and link back to it)."""
        store = self.memory.level(level, citizen)
        bases = {n.node_id: base_identity(versions[n.node_id], versions) for n in group}
        earlier = self.memo.judged((level, citizen), store) if self.memo is not None else None
        if earlier is not None and earlier.empty_at_start:
            stored_ids = earlier.id_set.intersection(n.node_id for n in group)
            stored: dict = {}
        else:
            stored_ids = store.existing_ids([n.node_id for n in group])
            new = [n for n in group if n.node_id not in stored_ids]
            stored = store.nearest([(n.node_id, n.embedding) for n in new], k=3) if store.plans.store_vectors and new else {}
        for n in group:  # for the knowledge-update detector: a stored memory was judged at its first write
            n.metadata[STORED_KEY] = n.node_id in stored_ids
        vectors = np.asarray([n.embedding for n in group], dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors /= np.where(norms == 0, 1.0, norms)
        # The best match of each memory among the run's earlier memories, in one product.
        best_earlier = best_earlier_sim = sims = None
        if earlier is not None and earlier.ids:
            sims = vectors @ earlier.vectors.T
            best_earlier = sims.argmax(axis=1)
            best_earlier_sim = sims[np.arange(len(group)), best_earlier]
        # Each memory's best match among the chunk's memories before it, in
        # one product and one masked argmax: a match that was dropped (skip)
        # is looked past in the loop, where only then the kept ones are scanned.
        within = vectors @ vectors.T
        before = np.where(np.tri(len(group), k=-1, dtype=bool), within, -np.inf)
        best_before = before.argmax(axis=1)
        best_before_sim = before[np.arange(len(group)), best_before]
        kept: list[int] = []
        dropped: set[str] = set()
        # Memories of this call already stored (a run resumed after a kill wrote them) are compared through
        # the memo, as in the run that wrote them, not through the server's index.
        plan = self.plan.graphs.get(store.plans.graph) if self.plan is not None and earlier is not None else None
        ours = plan.ids if plan is not None else ()

        for i, node in enumerate(group):
            if node.node_id in stored_ids:
                kept.append(i)
                continue
            base = bases[node.node_id]

            def differs(other_id: str, other_base: str) -> bool:
                return other_id != node.node_id and other_base != base

            # The most similar memory of another identity among the stored ones, the run's earlier ones
            # and the chunk's earlier ones, whichever holds it (so chunk boundaries change nothing).
            found: list[tuple[float, str]] = []
            for other_id, other_base, similarity in stored.get(node.node_id, []):
                if other_id not in ours and similarity > self.threshold and differs(other_id, other_base):
                    found.append((similarity, other_id))
                    break
            if best_earlier is not None and best_earlier_sim[i] > self.threshold:
                j = int(best_earlier[i])
                if not differs(earlier.ids[j], earlier.bases[j]):  # the best is a version: the best of the others
                    row = sims[i].copy()
                    row[earlier.of_base.get(base, [])] = -np.inf
                    j = int(row.argmax())
                if sims[i, j] > self.threshold and differs(earlier.ids[j], earlier.bases[j]):
                    found.append((float(sims[i, j]), earlier.ids[j]))
            if best_before_sim[i] > self.threshold:
                j = int(best_before[i])
                other = group[j].node_id
                if other in dropped or not differs(other, bases[other]):  # the best of those kept that differ
                    candidates = [k for k in kept if differs(group[k].node_id, bases[group[k].node_id])]
                    j = candidates[int(np.argmax(within[i, candidates]))] if candidates else -1
                if j >= 0 and within[i, j] > self.threshold:
                    found.append((float(within[i, j]), group[j].node_id))
            # the first of the most similar: stored, then the run's earlier memories, then the chunk's
            duplicate_of = max(found, key=lambda f: f[0])[1] if found else None
            if duplicate_of is None:
                kept.append(i)
                continue
            self._report.duplicates += 1
            if self.action == "skip":
                dropped.add(node.node_id)
                self._report.warn(node.node_id, f"skipped: near-duplicate of {duplicate_of}")
            else:
                node.metadata[DUPLICATE_KEY] = duplicate_of
                kept.append(i)
        if earlier is not None:
            fresh = [i for i in kept if group[i].node_id not in earlier.id_set]
            earlier.add([group[i].node_id for i in fresh], [bases[group[i].node_id] for i in fresh], vectors[fresh])
        return dropped
