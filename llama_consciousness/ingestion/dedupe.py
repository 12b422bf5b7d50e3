"""``NearDuplicateFilter``: the same memory twice is one memory.

Chat logs and importers repeat themselves ("Sounds good!" after every
plan).  A memory whose embedding has cosine similarity above the threshold
(0.9 by default) with a current memory of its level, or with an earlier
memory of the same batch, is either linked to it as DUPLICATE_OF
(``action="link"``, the default: nothing is lost) or not written at all
(``action="skip"``).

Not duplicates: the same ``node_id`` (re-ingesting is an update, handled by
the writer) and versions of one belief (same base identity), which are
supersessions, not repetitions.

The filter embeds the memories it checks and leaves the embedding on the
node, so the writer does not embed them again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np
from llama_index.core.schema import BaseNode
from pydantic import Field

from llama_consciousness.ingestion.nodes import is_relationship, text_node_to_memory
from llama_consciousness.ingestion.report import IngestReport, ReportingTransform
from llama_consciousness.ingestion.writer import DUPLICATE_KEY
from llama_consciousness.memory import memory_text
from llama_consciousness.scoring.identity import base_identity


class _Version(NamedTuple):
    """What ``base_identity`` reads of a memory."""

    node_id: str
    supersedes: str | None
    extra: Mapping[str, Any]


def _home(node: BaseNode) -> tuple[tuple[str, str | None], _Version]:
    """A memory's (level, citizen) graph key and version fields, read from its metadata.

    Why not the whole model: a chunk's memories are parsed again by the
    writer, and the filter needs three fields.  A memory whose home fields
    are not valid is parsed, so that it fails with the model's own error.
    """
    meta = node.metadata
    node_id, level, citizen = meta.get("node_id", node.node_id), meta.get("level"), meta.get("citizen_id")
    supersedes, extra = meta.get("supersedes"), meta.get("extra")
    if (type(node_id) is not str or level not in ("N1", "N2", "N3") or (level == "N1" and type(citizen) is not str)
            or not (supersedes is None or type(supersedes) is str) or not (extra is None or type(extra) is dict)):
        memory = text_node_to_memory(node)
        node_id, level, citizen = memory.node_id, memory.level, memory.citizen_id
        supersedes, extra = memory.supersedes, memory.extra
    return (level, citizen if level == "N1" else None), _Version(node_id, supersedes, extra or {})


class NearDuplicateFilter(ReportingTransform):
    """Link or skip memories nearly identical to one already in their level."""

    memory: Any = Field(exclude=True, description="the ConsciousnessMemory to compare against")
    threshold: float = Field(default=0.9, gt=0.0, le=1.0, description="cosine similarity above which two memories are one")
    action: Literal["link", "skip"] = "link"

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[BaseNode]:
        self._report = IngestReport()
        memories = [n for n in nodes if not is_relationship(n)]
        self._embed(memories)
        groups: dict[tuple[str, str | None], list[BaseNode]] = {}
        versions: dict[str, _Version] = {}
        for node in memories:
            key, versions[node.node_id] = _home(node)
            groups.setdefault(key, []).append(node)
        dropped: set[str] = set()
        for (level, citizen), group in groups.items():
            dropped |= self._check_level(level, citizen, group, versions)
        return [n for n in nodes if n.node_id not in dropped]

    def _embed(self, nodes: list[BaseNode]) -> None:
        todo = [n for n in nodes if n.embedding is None]
        if not todo:
            return
        texts = [memory_text(text_node_to_memory(n)) for n in todo]
        vectors = self.memory.embed_model.get_text_embedding_batch(texts)
        for node, vector in zip(todo, vectors):
            node.embedding = list(vector)

    def _check_level(self, level: str, citizen: str | None, group: list[BaseNode], versions: dict) -> set[str]:
        """Judge the memories of one level; returns the ids to drop.

        A memory already stored under its id was judged when it was first
        written: re-ingesting it keeps that judgement (otherwise the kept
        original would now find its own duplicate in the store and link
        back to it).  It still counts as "seen" for the new memories.
        """
        store = self.memory.level(level, citizen)
        bases = {n.node_id: base_identity(versions[n.node_id], versions) for n in group}
        stored_ids = store.existing_ids([n.node_id for n in group])
        new = [n for n in group if n.node_id not in stored_ids]
        stored = store.nearest([(n.node_id, n.embedding) for n in new], k=3) if store.plans.store_vectors and new else {}
        dim = len(group[0].embedding) if group else 0
        seen_vecs = np.empty((len(group), dim), dtype=np.float32)
        seen_ids: list[str] = []
        dropped: set[str] = set()

        def remember(node_id: str, vec: np.ndarray) -> None:
            seen_vecs[len(seen_ids)] = vec
            seen_ids.append(node_id)

        for node in group:
            vec = np.asarray(node.embedding, dtype=np.float32)
            vec = vec / (np.linalg.norm(vec) or 1.0)
            if node.node_id in stored_ids:
                remember(node.node_id, vec)
                continue
            duplicate_of = None
            for other_id, other_base, similarity in stored.get(node.node_id, []):
                if other_id != node.node_id and other_base != bases[node.node_id] and similarity > self.threshold:
                    duplicate_of = other_id
                    break
            if duplicate_of is None and seen_ids:
                sims = seen_vecs[: len(seen_ids)] @ vec
                best = int(np.argmax(sims))
                other = seen_ids[best]
                if sims[best] > self.threshold and bases[other] != bases[node.node_id]:
                    duplicate_of = other
            if duplicate_of is None:
                remember(node.node_id, vec)
                continue
            self._report.duplicates += 1
            if self.action == "skip":
                dropped.add(node.node_id)
                self._report.warn(node.node_id, f"skipped: near-duplicate of {duplicate_of}")
            else:
                node.metadata[DUPLICATE_KEY] = duplicate_of
                remember(node.node_id, vec)
        return dropped
