"""``ConsciousnessGraphWriter``: the last step of an ingestion pipeline, writing memories and relationships.

**Supersession**: a memory that ``supersedes`` another, or a new version of
its base identity, expires the older one (nothing is deleted) and links to
it with SUPERSEDES; without a reason, a later ``valid_at`` means reality
changed, else the old belief was false.  **Entities**: names are matched
fuzzily against the level's, or created, and linked with MENTIONS.  One
transaction per batch: a rerun after a failure completes the work.  Given the
call's ``CallPlan``, a file ingested once, twice, after a kill, or with any
``chunk_size`` and ``batch_size`` leaves the same graph and vector rows.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import ChainMap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from llama_index.core.schema import BaseNode
from pydantic import Field, SkipValidation

from llama_consciousness.errors import StorageError
from llama_consciousness.entities import ENTITY_TYPES
from llama_consciousness.ingestion.cognitive import COMPUTED_KEY
from llama_consciousness.ingestion.plan import GraphPlan, HeldMention, version_order
from llama_consciousness.nodes import is_relationship, text_node_to_memory, text_node_to_relationship
from llama_consciousness.ingestion.report import IngestReport, ReportingTransform
from llama_consciousness.ingestion.updates import UPDATES_KEY, UpdateDecision, decisions_of
from llama_consciousness.levels import graph_name, home_key
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode
from llama_consciousness.scoring.identity import base_identity
from llama_consciousness.scoring.names import EntityIndex, EntityMatch, best_per_entity, normalize_entity_name
from llama_consciousness.storage.level_store import LevelGraphStore, Supersession
from llama_consciousness.storage.records import PreparedEdge, retargeted_edges
from llama_consciousness.storage.reader import MemoryReader

DUPLICATE_KEY = "lc_duplicate_of"
QUARANTINE_KEY = "lc_quarantine"
ENTITIES_KEY = "lc_entities"

_SLUG = re.compile(r"[^a-z0-9]+")
_PLAIN_KEY = re.compile(r"[a-z0-9]+(?:[ _]+[a-z0-9]+)*")  # keys whose slug is the key itself


#: The longest node id the schema accepts (``MemoryNode.node_id``): entity ids are kept within it.
ENTITY_ID_MAX_CHARS = next(int(c.max_length) for c in MemoryNode.model_fields["node_id"].metadata
                           if getattr(c, "max_length", None))
#: Hex digits of the key's SHA-256 that end an entity id too long to be written whole: 64 bits,
#: so two long names collide with odds of 1 in 10^19, and 232 characters are left for the slug.
_ENTITY_ID_DIGEST_CHARS = 16


def entity_node_id(key: str) -> str:
    """A stable id for an entity's name key: ``"entity_" + slug``.

    A key the ASCII slug cannot keep (東京, Zoë, C++) or too long to fit gets
    the key's SHA-256 appended (after its ASCII folding, for readability), so
    ids stay deterministic, fit the schema and never merge two names.
    """
    slug = _SLUG.sub("_", key).strip("_")
    if _PLAIN_KEY.fullmatch(key) and len(slug) <= ENTITY_ID_MAX_CHARS - len("entity_"):
        return "entity_" + slug
    folded = _SLUG.sub("_", unicodedata.normalize("NFKD", key).encode("ascii", "ignore").decode()).strip("_")
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:_ENTITY_ID_DIGEST_CHARS]
    head = ("entity_" + (folded or "unnamed"))[:ENTITY_ID_MAX_CHARS - len(digest) - 1].rstrip("_")
    return f"{head}_{digest}"


@dataclass
class _LevelBatch:
    """What goes into one level graph."""

    level: str
    citizen_id: str | None
    memories: list[MemoryNode] = field(default_factory=list)
    relationships: list[ConsciousnessRelationship | PreparedEdge] = field(default_factory=list)
    entities: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # memory id -> entities
    duplicates: dict[str, str] = field(default_factory=dict)  # memory id -> duplicate of
    volatile: dict[str, tuple[str, ...]] = field(default_factory=dict)  # memory id -> clock-derived fields
    updates: list[UpdateDecision] = field(default_factory=list)  # knowledge updates judged from the texts


def _derived_link(
    source: MemoryNode, target_id: str, relation_type: str, formation_trigger: str, **overrides: Any
) -> ConsciousnessRelationship:
    """A relationship the writer adds (SUPERSEDES, MENTIONS, DUPLICATE_OF), with the source memory's goal,
    mindstate, feeling and times (defaulted times stay defaulted, so a rerun keeps them)."""
    data: dict[str, Any] = {
        "source_id": source.node_id,
        "target_id": target_id,
        "relation_type": relation_type,
        # placed in the source's graph here rather than copied there by the store
        "level": source.level,
        "citizen_id": source.citizen_id if source.level == "N1" else None,
        "goal": source.goal or "remember",
        "mindstate": source.mindstate or "recording a memory",
        "energy": source.energy,
        "confidence": source.confidence,
        "emotion_vector": source.emotion_vector or {},
        "formation_trigger": formation_trigger,
        "resolution_state": "resolved",
    }
    for name in ("created_at", "valid_at"):
        if name in source.model_fields_set and not (
            name == "valid_at" and "created_at" not in source.model_fields_set and source.valid_at == source.created_at
        ):
            data[name] = getattr(source, name)
    data.update(overrides)
    return ConsciousnessRelationship(**data)


GraphKey = tuple[str, "str | None"]


def source_homes(found: Sequence[GraphKey], citizen_id: Any) -> list[GraphKey]:
    """The graphs a relationship without a level may go to: those (``found``) holding its source memory
    here; two or more mean it cannot be placed, unless its ``citizen_id`` names one (that N1 graph)."""
    if len(found) > 1 and citizen_id is not None:
        mine = [key for key in found if key == ("N1", citizen_id)]
        if mine:
            return mine
    return list(found)


def ambiguous_source(source_id: Any, keys: Sequence[GraphKey]) -> str:
    """Why a relationship whose source memory is in several graphs is not placed."""
    names = []
    for level, citizen in keys:
        try:
            names.append(graph_name(level, citizen))
        except ValueError:  # a record that validation will refuse: named as given
            names.append(f"{level}/{citizen!r}")
    return (f"cannot tell its level: its source {source_id!r} is a memory of {len(keys)} graphs here "
            f"({', '.join(sorted(names))}); give the relationship a level (and citizen_id for N1)")


RELATIONSHIP_FACTOR = 4
"""Relationships per transaction or chunk, in memories' units: a relationship's row is a fraction of a
memory's (no text, no vector), and each transaction and chunk costs a few round trips per graph."""


class KnownNames:
    """The entity names a mention may mean: the level's stored entities, looked up on disk in the keyword
    index's names (``KeywordIndex.match_name``, brought up to the graph's change log first), with the
    names of this call (its entity memories, the entity nodes it creates) held here over them.

    Why not an ``EntityIndex`` of the level's entity names: it was built on every ingestion call, from every
    entity name of the level (~40 ms per chat turn at 2,000 entities, growing with the citizen's history)."""

    def __init__(self, memory: MemoryReader, store: LevelGraphStore) -> None:
        from llama_consciousness.storage.channels import catch_up

        self._stored = memory.keyword_indexes.get(store.plans.graph)
        store.run(catch_up(self._stored))
        self._added = EntityIndex()

    def add(self, entity_id: str, name: str) -> None:
        self._added.add(entity_id, name)

    def add_many(self, entries: Iterable[tuple[str, str]]) -> None:
        self._added.add_many(entries)

    def match(self, name: str, threshold: float = 0.85) -> list[EntityMatch]:
        """As ``EntityIndex.match``: one row per entity, its best name, best first."""
        rows = self._added.match(name, threshold) + self._stored.match_name(name, threshold, types=ENTITY_TYPES)
        return best_per_entity(rows)


class ConsciousnessGraphWriter(ReportingTransform):
    """Write memories, entities, supersessions and relationships into the level graphs."""

    memory: SkipValidation[MemoryReader] = Field(exclude=True, description="the ConsciousnessMemory to write into")
    batch_size: int = Field(default=500, ge=1, le=50_000, description="memories per transaction")
    link_entities: bool = Field(default=True, description="create entity memories and MENTIONS links")
    auto_supersede: bool = Field(
        default=True, description="a new version of a stored memory's base identity supersedes it"
    )
    entity_match_threshold: float = Field(default=0.88, ge=0.0, le=1.0)
    on_error: Literal["raise", "drop"] = Field(
        default="raise", description="what to do with a relationship to a memory that does not exist"
    )
    memo: Any = Field(default=None, exclude=True, description=(
        "the run's DuplicateMemo: a level empty when the run reached it skips reading stored hashes"))
    dropped: Any = Field(default=None, exclude=True, description=(
        "ids the run left out on purpose (injection, near-duplicate): a relationship to one is rejected"))
    prepared: dict[int, Any] = Field(default_factory=dict, exclude=True, description=(
        "rows of relationships already validated (records.PreparedEdge), by id() of their node"))
    plan: Any = Field(default=None, exclude=True, description=(
        "the call's CallPlan: versions and mentions are decided against all the memories of the call"))

    # -- the transform -------------------------------------------------------

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[BaseNode]:
        # One graph after another: ``ingest`` hands each graph's part to its own lane
        # (``pipeline._by_graph``), where graphs are written side by side.
        self._report = IngestReport()
        for batch in self._split(nodes).values():
            self._write_level(batch, self._report)
        return list(nodes)

    # -- steps ---------------------------------------------------------------

    def _split(self, nodes: Sequence[BaseNode]) -> dict[tuple[str, str | None], _LevelBatch]:
        """Group the pipeline's nodes by level graph, as models."""
        batches: dict[tuple[str, str | None], _LevelBatch] = {}
        home: dict[str, dict[tuple[str, str | None], None]] = {}  # memory id -> its graphs (one, normally)
        relationships: list[ConsciousnessRelationship | PreparedEdge] = []
        prepared = self.prepared
        for node in nodes:
            if is_relationship(node):
                ready = prepared.get(id(node)) if prepared else None
                relationships.append(ready if ready is not None else text_node_to_relationship(node))
                continue
            memory = text_node_to_memory(node)
            if node.metadata.get(QUARANTINE_KEY) and not memory.quarantined:
                memory = memory.model_copy(update={"quarantined": True})
            key = home_key(memory.level, memory.citizen_id)
            batch = batches.setdefault(key, _LevelBatch(*key))
            batch.memories.append(memory)
            home.setdefault(memory.node_id, {})[key] = None
            if self.link_entities and node.metadata.get(ENTITIES_KEY):
                batch.entities[memory.node_id] = list(node.metadata[ENTITIES_KEY])
            if node.metadata.get(DUPLICATE_KEY):
                batch.duplicates[memory.node_id] = str(node.metadata[DUPLICATE_KEY])
            if node.metadata.get(COMPUTED_KEY):
                batch.volatile[memory.node_id] = tuple(node.metadata[COMPUTED_KEY])
            if node.metadata.get(UPDATES_KEY):
                batch.updates += decisions_of(node)
        for rel in relationships:
            message = None
            if rel.level is not None:
                key = home_key(rel.level, rel.citizen_id)
            elif rel.source_id in home:
                keys = source_homes(list(home[rel.source_id]), rel.citizen_id)
                key = keys[0]
                if len(keys) > 1:
                    message = ambiguous_source(rel.source_id, keys)
            else:
                message = "cannot tell its level: give it a level or ingest it with its source memory"
            if message is not None:
                if self.on_error == "raise":
                    raise StorageError(f"relationship {rel.edge_id!r}: {message}")
                self._report.reject(str(rel.edge_id), "writer", [message])
                continue
            batches.setdefault(key, _LevelBatch(*key)).relationships.append(rel)
        return batches

    def _supersessions(
        self, store: LevelGraphStore, memories: list[MemoryNode], plan: GraphPlan | None = None,
        settle: Sequence[str] = (), updates: Sequence[UpdateDecision] = (),
    ) -> tuple[list[Supersession], list[ConsciousnessRelationship], dict[str, str]]:
        """Which stored or batch versions the new memories expire, and their links.  A pair with a version of
        the call not written yet (``plan``) waits for it; ``settle`` (base identities, at the end of the
        call) pairs the versions around memories of the call never written, as if they were not in it."""
        batch = {m.node_id: m for m in memories}
        planned = plan.versions if plan is not None else {}
        lookup = ChainMap(batch, planned) if planned else batch
        bases = {base_identity(m, lookup) for m in memories} | set(settle)
        stored_versions = store.versions(sorted(bases)) if bases else []
        known: dict[str, Any] = {n.node_id: n for n, _ in stored_versions}
        stored_base = {n.node_id: b for n, b in stored_versions}
        waiting = plan.pending if plan is not None and not settle else (lambda node_id: False)
        explicit_parents = sorted({m.supersedes for m in memories if m.supersedes and not waiting(m.supersedes)}
                                  - set(batch) - set(known))
        for node in store.get_nodes(explicit_parents) if explicit_parents else []:
            known[node.node_id] = node
        known.update(batch)
        # versions of the call not written yet, in the groups of the batch
        by_base = plan.by_base if plan is not None else {}
        pending = {node_id: planned[node_id] for base in bases for node_id in by_base.get(base, ())
                   if node_id not in batch and waiting(node_id)}
        everything = ChainMap(known, pending) if pending else known

        base_ids: dict[str, str] = {}
        for m in memories:
            parent = m.supersedes
            base_ids[m.node_id] = stored_base.get(parent) if parent in stored_base else base_identity(m, everything)

        def of_call(node_id: str) -> bool:  # a pair is this call's to make when one of its versions is
            return node_id in batch or (plan is not None and node_id in plan.ids)

        # Explicit ``supersedes`` first: every known version that names a known parent.
        pairs = [(known[n.supersedes], n) for n in known.values()
                 if n.supersedes and n.supersedes in known and n.supersedes != n.node_id
                 and (of_call(n.node_id) or of_call(n.supersedes))]
        if self.auto_supersede:
            groups: dict[str, list[Any]] = {}
            for node_id, node in everything.items():
                base = base_ids.get(node_id) or stored_base.get(node_id) or base_identity(node, everything)
                groups.setdefault(base, []).append(node)
            superseded = {o.node_id for o, _ in pairs}
            for versions in groups.values():
                if len(versions) < 2:
                    continue
                versions.sort(key=lambda n: version_order(n.created_at, n.node_id))
                for older, newer in zip(versions, versions[1:]):
                    # A version not written yet pairs with its neighbours when it is; only pairs this call
                    # brings (an old version ingested late is expired by the newer one already stored).
                    if (older.node_id in pending or newer.node_id in pending or older.node_id in superseded
                            or not (of_call(older.node_id) or of_call(newer.node_id))):
                        continue
                    # (already expired by this very newer one: written again, a no-op, so that a rerun
                    # also repeats what follows the graph write, such as the vector rows' expiry)
                    if older.expired_at is None or older.superseded_by == newer.node_id:
                        pairs.append((older, newer))
                        superseded.add(older.node_id)

        changes: list[Supersession] = []
        links: list[ConsciousnessRelationship] = []
        for old, new in pairs:
            changed = new.valid_at > old.valid_at
            reason = new.supersede_reason or ("reality_changed" if changed else "discovered_false")
            changes.append(Supersession(old.node_id, new.node_id, expired_at=new.created_at, reason=reason,
                                        invalid_at=new.valid_at if reason == "reality_changed" else None))
            energy = new.discovery_energy if new.discovery_energy is not None else new.energy
            links.append(_derived_link(new, old.node_id, "SUPERSEDES", f"supersedes {old.node_id} ({reason})",
                                       energy=energy))
        if updates:
            self._judged(store, updates, known, {o.node_id for o, _ in pairs}, changes, links)
        return changes, links, base_ids

    @staticmethod
    def _judged(store: LevelGraphStore, updates: Sequence[UpdateDecision], known: dict[str, Any],
                superseded: set[str], changes: list[Supersession], links: list[ConsciousnessRelationship]) -> None:
        """The knowledge updates a judge found (``ingestion.updates``), applied as an explicit supersession
        (``update``) or a POSSIBLY_SUPERSEDES link (unsure); a memory another version already replaces
        here is left to it."""
        wanted = sorted({i for d in updates for i in (d.old_id, d.new_id)} - set(known))
        known = {**known, **{n.node_id: n for n in store.get_nodes(wanted)}} if wanted else known
        for d in updates:
            old, new = known.get(d.old_id), known.get(d.new_id)
            if old is None or new is None or d.old_id in superseded:
                continue
            if old.expired_at is not None and old.superseded_by != d.new_id:
                continue  # already replaced by another memory
            # a statement ingested late but dated earlier expires when its successor was recorded, or on arrival
            expired_at = max(new.created_at, old.created_at)
            changes.append(Supersession(
                d.old_id, d.new_id, expired_at=expired_at, reason=d.reason,
                invalid_at=new.valid_at if d.reason == "reality_changed" and new.valid_at > old.valid_at else None,
                source=d.source, confidence=d.confidence, confirmed=d.confirmed))
            relation = "SUPERSEDES" if d.confirmed else "POSSIBLY_SUPERSEDES"
            trigger = f"{relation.lower()} {d.old_id} ({d.source}, {d.confidence:.2f}: {d.why})"[:500]
            links.append(_derived_link(new, d.old_id, relation, trigger, confidence=d.confidence))
            superseded.add(d.old_id)

    def _entity_index(self, store: LevelGraphStore, plan: GraphPlan | None) -> tuple[KnownNames, dict[str, str]]:
        """The names mentions are matched against, and each name's target so far.  With a plan, one index
        for the whole call: the level's names as they are when the call first needs them, the call's
        entity-typed memories (written or not), and the entity nodes the call creates."""
        if plan is None:
            return KnownNames(self.memory, store), {}
        if plan.entity_index is None:
            plan.entity_index = KnownNames(self.memory, store)
            plan.entity_index.add_many(plan.entities.items())
        return plan.entity_index, plan.matched

    def _target(
        self, index: KnownNames, matched: dict[str, str], created: dict[str, MemoryNode], source: MemoryNode,
        home: GraphKey, name: str, key: str, entity: dict[str, Any], preferred: Any, excluded: Any = (),
    ) -> str:
        """The entity ``name`` means, once per name (the same few recur across a batch): the best score; on equal
        scores a memory of the call (``preferred``) before an entity node or an older memory.  Without a match,
        an entity memory is created (its times from the mentioning ``source``)."""
        target = matched.get(name)
        if target is None:
            rows = [row for row in index.match(name, threshold=self.entity_match_threshold)
                    if row.entity_id not in excluded]
            if rows:
                target = min(rows, key=lambda row: (-row.score, row.entity_id not in preferred)).entity_id
            else:
                target = entity_node_id(key)
                times = {"created_at": source.created_at} if "created_at" in source.model_fields_set else {}
                created[target] = MemoryNode(
                    node_id=target, level=home[0], citizen_id=home[1], name=name,
                    node_type=entity.get("entity_type") or "Entity", description="", energy=0.5,
                    confidence=float(entity.get("confidence", 0.8)), resolution_state="resolved",
                    is_entity=True, **times)
                index.add(target, name)
            matched[name] = target
        return target

    def _entity_links(
        self, store: LevelGraphStore, batch: _LevelBatch, plan: GraphPlan | None = None
    ) -> tuple[list[MemoryNode], list[PreparedEdge]]:
        """Entity memories to create and MENTIONS links (with their rows), matched against the level.  With a
        plan, a mention whose entity is a memory of the call not written yet waits for it (``plan.held``)."""
        if not batch.entities:
            return [], []
        index, matched = self._entity_index(store, plan)
        in_batch = [(m.node_id, m.name) for m in batch.memories if m.node_type in ENTITY_TYPES]
        if plan is None:
            index.add_many(in_batch)
            preferred: Any = {node_id for node_id, _ in in_batch}
        else:
            index.add_many((node_id, name) for node_id, name in in_batch if plan.entities.get(node_id) != name)
            preferred = plan.ids
        by_id = {m.node_id: m for m in batch.memories}
        created: dict[str, MemoryNode] = {}
        links: dict[str, PreparedEdge] = {}
        for memory_id, entities in batch.entities.items():
            memory = by_id[memory_id]
            targets: list[tuple[str, str]] = []
            for entity in entities:
                name = str(entity.get("name", "")).strip()
                key = entity.get("key") or normalize_entity_name(name)
                if not name or not key:
                    continue
                target = self._target(index, matched, created, memory, (batch.level, batch.citizen_id), name, key,
                                      entity, preferred)
                if target == memory_id:
                    continue
                trigger = f"{memory_id} mentions {name}"
                if plan is not None and target not in by_id and plan.pending(target):
                    plan.held.setdefault(target, []).append(HeldMention(memory, name, key, entity, trigger))
                else:
                    targets.append((target, trigger))
            if targets:
                # A memory's mentions differ only in target, trigger and id: the
                # first is validated as a model, the rest are made from its row.
                first = _derived_link(memory, targets[0][0], "MENTIONS", targets[0][1])
                for link in retargeted_edges(first, targets):
                    links.setdefault(link.edge_id, link)
        return list(created.values()), list(links.values())

    def _check_endpoints(
        self, store: LevelGraphStore, batch: _LevelBatch, new_ids: set[str], report: IngestReport
    ) -> tuple[list[ConsciousnessRelationship], set[str]]:
        """Refuse (or drop) relationships to memories that exist nowhere; also the stored endpoints."""
        wanted = sorted({i for r in batch.relationships for i in (r.source_id, r.target_id)} - new_ids)
        stored = store.existing_ids(wanted) if wanted else set()
        kept = []
        for rel in batch.relationships:
            missing = [i for i in (rel.source_id, rel.target_id) if i not in new_ids and i not in stored]
            if not missing:
                kept.append(rel)
                continue
            graph = graph_name(batch.level, batch.citizen_id)
            message = f"relationship {rel.edge_id!r} refers to missing memories {missing} in graph {graph!r}"
            gone = [i for i in missing if self.dropped and i in self.dropped]
            if gone:  # not an invalid record: the consequence of a drop the report already shows
                message += f" (this ingestion did not write {gone}: dropped as a prompt injection or skipped as a near-duplicate)"
            if self.on_error == "raise" and len(gone) < len(missing):
                raise StorageError(message)
            report.reject(str(rel.edge_id), "writer", [message])
        return kept, stored

    def _write_level(self, batch: _LevelBatch, report: IngestReport) -> None:
        mem = self.memory
        store = mem.writable(batch.level, batch.citizen_id)
        plan = self.plan.graphs.get(store.plans.graph) if self.plan is not None else None
        changes, supersede_links, base_ids = self._supersessions(store, batch.memories, plan, updates=batch.updates)
        entity_nodes, mention_links = self._entity_links(store, batch, plan) if self.link_entities else ([], [])
        if plan is not None:  # the mentions that waited for these memories go with them
            mention_links += _mentions((held, m.node_id) for m in batch.memories
                                       for held in plan.held.pop(m.node_id, ()))
            plan.processed.update(m.node_id for m in batch.memories)
        duplicate_links = [
            _derived_link(m, batch.duplicates[m.node_id], "DUPLICATE_OF", "near-duplicate at ingestion")
            for m in batch.memories
            if m.node_id in batch.duplicates and batch.duplicates[m.node_id] != m.node_id
        ]
        new_ids = {n.node_id for n in [*batch.memories, *entity_nodes]}
        batch.relationships, stored_endpoints = self._check_endpoints(store, batch, new_ids, report)
        report.entities += len(mention_links)
        # A bulk load into a new level: the hash reads before each write would find nothing.
        check_stored = self.memo is None or not self.memo.judged((batch.level, batch.citizen_id), store).empty_at_start

        # Memories (with their entities, expiries and derived links) in
        # batches; then the explicit relationships, once all endpoints exist.
        derived = [*supersede_links, *mention_links, *duplicate_links]
        self._write(store, batch.memories, entity_nodes, derived, changes, base_ids, batch.volatile,
                            check_stored, report)
        size = self.batch_size * RELATIONSHIP_FACTOR
        for start in range(0, len(batch.relationships), size):
            result = store.upsert([], batch.relationships[start : start + size], present=stored_endpoints,
                                  check_stored=check_stored)
            report.relationships_inserted += result.edges_created
            report.relationships_updated += result.edges_updated
            report.relationships_unchanged += result.edges_unchanged
        # What was written is indexed here, on this lane: the indexing of a long run then goes on beside the
        # pure steps of its next chunks (two BEAM conversations, worker kept: 412 against 368 messages/s when
        # ``memory.ingest`` indexed at its end), and a pipeline of one's own leaves none to the next question.
        if batch.memories or entity_nodes:
            mem.index_graph(store.plans.graph)
        mem.bump_graph(store.plans.graph, index=False)

    def _write(
        self, store: LevelGraphStore, memories: list[MemoryNode], entity_nodes: list[MemoryNode],
        links: list[ConsciousnessRelationship | PreparedEdge], changes: list[Supersession],
        base_ids: dict[str, str], volatile: dict[str, tuple[str, ...]], check_stored: bool, report: IngestReport,
    ) -> None:
        """Memories in batches of ``batch_size``, one transaction each; an entity node goes with the first
        memory that mentions it, a link or an expiry with the batch holding the last of its endpoints."""
        if not (memories or entity_nodes or links or changes):
            return
        mem, size = self.memory, self.batch_size
        parts = [memories[start : start + size] for start in range(0, len(memories), size)] or [[]]
        slot: dict[str, int] = {}
        for position, part in enumerate(parts):
            for m in part:
                slot.setdefault(m.node_id, position)
        entity_ids = {n.node_id for n in entity_nodes}
        first: dict[str, int] = {}
        for link in links:
            if link.target_id in entity_ids:
                first[link.target_id] = min(first.get(link.target_id, len(parts)), slot.get(link.source_id, 0))
        slot.update({node_id: first.get(node_id, 0) for node_id in entity_ids})
        grouped: list[tuple[list[Any], list[Any], list[Any]]] = [([], [], []) for _ in parts]
        for node in entity_nodes:
            grouped[slot[node.node_id]][0].append(node)
        for link in links:
            grouped[max(slot.get(link.source_id, 0), slot.get(link.target_id, 0))][1].append(link)
        for change in changes:
            grouped[max(slot.get(change.old_id, 0), slot.get(change.new_id, 0))][2].append(change)

        vectors = mem.vectors(store.plans.level)
        store.check_vector_home()  # before the vectors go anywhere
        for part, (extra, chunk_links, chunk_changes) in zip(parts, grouped):
            if not (part or extra or chunk_links or chunk_changes):
                continue
            ids = {m.node_id for m in part}
            to_write = mem.embed_nodes(part + extra)
            # Vectors kept apart (Postgres) go first: a failure or a kill between the two writes then
            # leaves rows that the rerun writes again as they are, never nodes without their vectors
            # (a rerun would not make an entity node it finds stored again).
            vectors.write(store.plans, to_write)
            result = store.upsert(to_write, chunk_links, chunk_changes, base_ids,
                                  derived={link.edge_id for link in chunk_links}, volatile=volatile,
                                  check_stored=check_stored)
            created, updated = ids.intersection(result.created_ids), ids.intersection(result.updated_ids)
            report.inserted += len(created)  # entity nodes are counted apart
            report.updated += len(updated)
            report.unchanged += len(ids) - len(created) - len(updated)
            report.superseded += result.superseded
            if chunk_changes:  # expired versions must stop matching in the vector store too
                expired = [c.old_id for c in chunk_changes if c.confirmed]
                if expired and vectors.mirrors_validity:
                    vectors.mirror_validity(store.plans, store.get_nodes(expired))

    def finish(self, graph: str) -> IngestReport:
        """Settle, at the end of a call, what its memories never written (dropped as invalid, as injections,
        as near-duplicates) leave waiting in ``graph``: the versions around one are paired across it, and
        a mention of one goes to the best other match, or to an entity node made for it."""
        report = IngestReport()
        plan = self.plan.graphs[graph]
        unwritten = plan.unwritten()
        if not unwritten:
            return report
        store = self.memory.writable(*plan.home)
        bases = sorted(base for base, ids in plan.by_base.items() if unwritten.intersection(ids))
        changes, links, _ = self._supersessions(store, [], plan, settle=bases) if bases else ([], [], {})
        created: dict[str, MemoryNode] = {}
        found: list[tuple[HeldMention, str]] = []
        if plan.held:
            index, matched = self._entity_index(store, plan)[0], {}
            for held in [held for waiting in plan.held.values() for held in waiting]:
                target = self._target(index, matched, created, held.source, plan.home, held.name, held.key,
                                      held.entity, plan.ids, unwritten)
                if target != held.source.node_id:
                    found.append((held, target))
            plan.held.clear()
        mentions = _mentions(found)
        report.entities += len(mentions)
        self._write(store, [], list(created.values()), [*links, *mentions], changes, {}, {}, True, report)
        if created or changes:
            self.memory.index_graph(store.plans.graph)
        self.memory.bump_graph(store.plans.graph, index=False)
        return report


def _mentions(found: Iterable[tuple[HeldMention, str]]) -> list[ConsciousnessRelationship]:
    """Held mentions linked to their targets, one link per edge id."""
    links: dict[str, ConsciousnessRelationship] = {}
    for held, target in found:
        link = _derived_link(held.source, target, "MENTIONS", held.trigger)
        links.setdefault(link.edge_id, link)
    return list(links.values())
