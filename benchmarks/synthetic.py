"""Synthetic memories for the speed benchmarks: seeded, reproducible, the same in every source tree.

``retrieval_speed.py`` and ``versions_speed.py`` build their data here.  For
N1 (citizen ``ada``), N2 and N3, ``make_nodes`` makes ``n`` memories from
template sentences over people, tools, projects, tasks and decisions with a
random detail clause (so that WordLlama embeddings cluster by topic like real
text without exact duplicates), with full metadata (energy, confidence,
emotion_vector, goal, mindstate, formation_trigger, felt_quality,
resolution_state, concepts, created_at in 2024); about 80 of them per level
are people and tools ("Luca", "FalkorDB", node_type Person/Tool) so that
names in queries give the graph channel start points.  ``make_rels`` links
uniformly random memories of the same level, with full link metadata;
``make_queries`` makes questions, half of them naming a person or a tool.

``load_level`` generates, embeds (the memory's own embedding model) and
writes one level through ``ConsciousnessMemory.upsert`` (memories in batches,
then relationships in batches, one transaction per call), timing each step;
``settle_persistence`` runs a ``SAVE`` and waits for background persistence,
so that no snapshot or AOF rewrite competes with later measurements.

This module uses only the schema models (``llama_consciousness.schema``) and
public methods of ``ConsciousnessMemory`` (``upsert``, ``embed_model``,
``plans``, ``counts``, ``db``), so that it runs unchanged against any source
tree of the package (``versions_speed.py`` loads two at once).
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Iterator, Sequence
from itertools import islice
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import numpy as np

from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode

if TYPE_CHECKING:
    from llama_consciousness.memory import ConsciousnessMemory

CITIZEN = "ada"
LEVELS = ("N1", "N2", "N3")

# --------------------------------------------------------------------------
# Synthetic memories
# --------------------------------------------------------------------------

PEOPLE = (
    "Ada", "Luca", "Felix", "Nicolas", "Iris", "Marco", "Noor", "Sofia", "Jonas", "Mei",
    "Tomas", "Priya", "Kofi", "Elena", "Hugo", "Yuki", "Amara", "Bruno", "Chiara", "Dmitri",
    "Esther", "Farid", "Greta", "Hamid", "Ines", "Jakob", "Kenji", "Lena", "Mateo", "Nadia",
    "Oskar", "Paula", "Rafael", "Selin", "Tariq", "Ulla", "Vera", "Wanjiru", "Xavier", "Zofia",
)
TOOLS = (
    "FalkorDB", "LlamaIndex", "pgvector", "Postgres", "WordLlama", "Redis", "Grafana", "pytest",
    "Docker", "Kafka", "OpenTelemetry", "Prometheus", "Kubernetes", "Terraform", "Airflow", "DuckDB",
    "Sentry", "Jupyter", "FastAPI", "Celery", "RabbitMQ", "Elasticsearch", "MinIO", "Ollama",
    "Vault", "Nginx", "GitLab", "Jenkins", "Ansible", "Spark", "Superset", "dbt",
    "Tailscale", "Caddy", "SQLite", "ClickHouse", "Loki", "Tempo", "Argo", "Helm",
)
PROJECTS = (
    "the V2 architecture", "Phase 3 retrieval", "the memory importer", "the onboarding flow",
    "the nightly benchmark", "the citizen dashboard", "the temporal query layer",
    "the collective memory", "the ecosystem map", "the release checklist", "the billing service",
    "the mobile client", "the search relevance study", "the data retention policy",
    "the incident review process", "the plugin marketplace", "the cost report", "the audit trail",
)
TASKS = (
    "migrating the N2 graph", "tuning efRuntime", "writing the retrieval spec",
    "fixing the flaky socket test", "profiling the writer", "reviewing the schema change",
    "backfilling embeddings", "cleaning up duplicate entities", "designing the supersession rules",
    "measuring recall at 50K nodes", "documenting the memory format", "triaging the bug reports",
    "rewriting the injection guard", "pairing on the traversal query", "sizing the production server",
    "upgrading the Python runtime", "splitting the monolith", "rotating the credentials",
    "drafting the quarterly goals", "interviewing candidates", "setting up alerting",
    "reducing the docker image size", "auditing access rights", "migrating the dashboards",
)
DECISIONS = (
    "keep vectors next to the graph", "batch writes in transactions of 500",
    "drop the separate vector database", "store emotions as parallel arrays",
    "version beliefs instead of editing them", "run temporal filters inside Cypher",
    "use reciprocal rank fusion", "ship the offline embedding by default",
    "postpone the dashboard until the API is stable", "cap queries at 1000 results per level",
    "pin the database build", "split the citizen graphs per person", "move the cron jobs to Airflow",
    "retire the legacy importer", "adopt weekly release trains", "keep the on-call rotation at six people",
)
OBSERVATIONS = (
    "answered the recall query in under two milliseconds", "left an orphan entry after an update",
    "slowed down once the graph passed 40K nodes", "returned stale results for a point-in-time query",
    "handled the import without a single error", "needed a restart after the config change",
    "used far less memory than expected", "timed out twice during the morning load",
    "disagreed with the exact scan on three queries", "made the flame graph much flatter",
    "crashed when the disk filled up", "logged a warning about deprecated options",
    "doubled its throughput after the upgrade", "lost its connection during the failover drill",
)
REASONS = (
    "the latency budget is 30 ms", "the team wants one substrate",
    "the last incident showed how fragile the old path was", "recall dropped below 0.95",
    "it halves the operational burden", "nobody could explain the old behaviour",
    "the users asked for it twice this week", "the benchmark numbers were convincing",
    "the budget for next quarter is tight", "security flagged the old setup",
)
BELIEFS = (
    "scales linearly with the number of citizens", "is the bottleneck of the whole ingestion",
    "will not survive the next schema change", "is good enough for the first release",
    "hides a subtle ordering bug", "should be replaced before the summer",
    "is underused by most teams", "costs more than it saves",
)
INSIGHTS = (
    "most duplicates come from the chat importer", "the slow part is validation, not the database",
    "every blocked task shares the same missing decision", "old beliefs are still retrieved too often",
    "energy decays too fast for long projects", "the entity names need normalising first",
    "small batches hide the real cost of indexing", "people trust the dashboard more than the logs",
)
DETAILS = (
    "the office was unusually quiet", "it was raining all afternoon", "the coffee machine was broken again",
    "half the team was travelling", "the build queue was long", "a customer call ran over",
    "the staging cluster was down", "the new laptop arrived", "it was the last day of the sprint",
    "the fire alarm test interrupted everyone", "the wiki was being migrated", "the VPN kept dropping",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
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
NODE_TYPES = (("Decision", 2), ("Task", 3), ("Observation", 3), ("Belief", 1), ("Conversation", 2),
              ("Insight", 1))
EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)  # every memory is in the past: all pass "current"


def _emotions(rng: random.Random) -> dict[str, float]:
    return {e: round(rng.uniform(0.1, 1.0), 2) for e in rng.sample(EMOTIONS, rng.randint(1, 3))}


def _memory_text(rng: random.Random, node_type: str) -> tuple[str, str, str | None, list[str]]:
    """(name, description, resolution_state or None, concepts) of one memory."""
    p1, p2 = rng.sample(PEOPLE, 2)
    tool, tool2 = rng.sample(TOOLS, 2)
    project, task = rng.choice(PROJECTS), rng.choice(TASKS)
    day, sprint = rng.choice(WEEKDAYS), rng.randint(1, 60)
    detail = f" That {day.lower()} {rng.choice(DETAILS)}." if rng.random() < 0.7 else ""
    concepts = [tool, project.removeprefix("the ")]
    if node_type == "Decision":
        decision = rng.choice(DECISIONS)
        return (f"Decision: {decision}",
                f"On {day} {p1} and {p2} decided to {decision} for {project} after comparing {tool} "
                f"with {tool2}, because {rng.choice(REASONS)}.{detail}", "resolved", concepts)
    if node_type == "Task":
        phrase, state = rng.choice(STATUS)
        return (f"Task: {task}",
                f"{p1} is {phrase} {task} with {tool} for {project}; {p2} offered to help in sprint "
                f"{sprint}.{detail}", state, concepts)
    if node_type == "Observation":
        return (f"Observation about {tool}",
                f"{tool} {rng.choice(OBSERVATIONS)} while {p1} was {task}; {p2} confirmed it on {day}.{detail}",
                None, concepts)
    if node_type == "Belief":
        belief = rng.choice(BELIEFS)
        return (f"Belief: {tool} {belief}",
                f"{p1} believes that {tool} {belief}, at least until {project} proves otherwise.{detail}",
                None, concepts)
    if node_type == "Conversation":
        return (f"Conversation with {p2} about {project}",
                f"{p1} told {p2} on {day} that {project} depends on {task} and that {tool} "
                f"{rng.choice(OBSERVATIONS)}.{detail}", None, concepts)
    return (f"Insight while {task}",
            f"While {task}, {p1} realised that {rng.choice(INSIGHTS)}; {p2} wants to check it against "
            f"{tool}.{detail}", None, concepts)


def _entity_text(rng: random.Random, name: str, node_type: str) -> str:
    if node_type == "Person":
        return (f"{name} works on {rng.choice(PROJECTS)} and often pairs with {rng.choice(PEOPLE)} "
                f"on {rng.choice(TASKS)}.")
    return f"{name} is a tool the team uses for {rng.choice(PROJECTS)}, mostly while {rng.choice(TASKS)}."


@dataclass
class LevelData:
    level: str
    graph: str
    ids: list[str]
    nodes: list[MemoryNode]
    embeddings: np.ndarray  # float32, rows normalised, same order as ids
    rels: list[dict[str, Any]]  # relationship fields (models are built per batch)
    times: dict[str, float] = field(default_factory=dict)


def make_nodes(level: str, n: int, rng: random.Random) -> list[MemoryNode]:
    return list(iter_nodes(level, n, rng))


def iter_nodes(level: str, n: int, rng: random.Random) -> Iterator[MemoryNode]:
    """The memories of ``make_nodes`` one at a time (a level of 500K is not held whole)."""
    citizen = CITIZEN if level == "N1" else None
    prefix = f"{level.lower()}_"
    types = [t for t, w in NODE_TYPES for _ in range(w)]
    entities = [(p, "Person") for p in PEOPLE] + [(t, "Tool") for t in TOOLS]
    if n < 4 * len(entities):
        entities = entities[: max(2, n // 4)]
    for i in range(n):
        created = EPOCH + timedelta(seconds=rng.randrange(365 * 86400))
        common: dict[str, Any] = {
            "node_id": f"{prefix}{i:06d}", "level": level, "citizen_id": citizen,
            "created_at": created, "energy": round(rng.uniform(0.1, 1.0), 2),
            "confidence": round(rng.uniform(0.3, 1.0), 2), "emotion_vector": _emotions(rng),
            "goal": rng.choice(GOALS), "mindstate": rng.choice(MINDSTATES),
            "formation_trigger": rng.choice(TRIGGERS),
            "felt_quality": rng.choice(FEELINGS) if rng.random() < 0.5 else None,
        }
        if i < len(entities):
            name, node_type = entities[i]
            yield MemoryNode(**common, node_type=node_type, name=name, description=_entity_text(rng, name, node_type),
                             resolution_state="resolved", concepts=[name])
            continue
        node_type = rng.choice(types)
        name, description, state, concepts = _memory_text(rng, node_type)
        yield MemoryNode(**common, node_type=node_type, name=name, description=description,
                         resolution_state=state or rng.choice(("resolved", "in_progress", "blocked")),
                         concepts=concepts)


def make_rels(nodes: Sequence[MemoryNode], m: int, rng: random.Random) -> list[dict[str, Any]]:
    """``m`` distinct relationships between uniformly random memories of one level."""
    return list(iter_rels([x.node_id for x in nodes], [x.created_at for x in nodes], m, rng))


def iter_rels(ids: Sequence[str], times: Sequence[datetime], m: int, rng: random.Random
              ) -> Iterator[dict[str, Any]]:
    """The relationships of ``make_rels`` one at a time, from the memories' ids and creation times."""
    n = len(ids)
    seen: set[tuple[int, str, int]] = set()
    made = 0
    while made < m:
        a, b = rng.randrange(n), rng.randrange(n)
        rel_type = rng.choice(REL_TYPES)
        if a == b or (a, rel_type, b) in seen:
            continue
        seen.add((a, rel_type, b))
        created = max(times[a], times[b]) + timedelta(minutes=rng.randrange(3 * 24 * 60))
        made += 1
        yield {
            "source_id": ids[a], "target_id": ids[b], "relation_type": rel_type,
            "goal": rng.choice(GOALS), "mindstate": rng.choice(MINDSTATES),
            "energy": round(rng.uniform(0.1, 1.0), 2), "confidence": round(rng.uniform(0.3, 1.0), 2),
            "emotion_vector": _emotions(rng), "formation_trigger": rng.choice(TRIGGERS),
            "energy_transfer_coefficient": round(rng.uniform(0.1, 1.0), 2),
            "resolution_state": rng.choice(("resolved", "in_progress", "blocked")),
            "felt_quality": rng.choice(FEELINGS) if rng.random() < 0.3 else None,
            "created_at": created,
        }


def make_queries(n: int, rng: random.Random) -> list[str]:
    named = (
        "What did {p} decide about {t}?",
        "{p}'s observations on {t} during {proj}",
        "When did {p} talk about {proj}?",
        "Is {t} the bottleneck for {task}?",
        "What does {p} believe about {t}?",
        "Who helped {p} with {task}?",
    )
    plain = (
        "Why is {task} blocked?",
        "decisions about {proj} and why we made them",
        "what slowed down while {task}",
        "insights from {task}",
        "did we {dec}?",
        "what is still in progress for {proj}",
    )
    out = []
    for i in range(n):
        template = rng.choice(named if i % 2 == 0 else plain)
        out.append(template.format(p=rng.choice(PEOPLE), t=rng.choice(TOOLS), proj=rng.choice(PROJECTS),
                                   task=rng.choice(TASKS), dec=rng.choice(DECISIONS)))
    return out


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------

def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def embed_level(memory: ConsciousnessMemory, nodes: list[MemoryNode], batch: int = 2000
                ) -> tuple[list[MemoryNode], np.ndarray]:
    texts = [f"{n.name}\n{n.description}".strip() for n in nodes]  # == memory.memory_text
    vectors: list[list[float]] = []
    for start in range(0, len(texts), batch):
        vectors.extend(memory.embed_model.get_text_embedding_batch(texts[start:start + batch]))
    out = [node.model_copy(update={"embedding": list(map(float, v))}) for node, v in zip(nodes, vectors)]
    matrix = np.asarray(vectors, dtype=np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    return out, matrix


LEAN_ABOVE = 100_000
"""Above this many memories per level, a level is generated, embedded and written in pieces and only its ids
and embedding matrix are kept (500K memories as models with their vectors held ~10 GB)."""


def load_level(memory: ConsciousnessMemory, level: str, n: int, m: int, seed: int,
               node_batch: int, rel_batch: int) -> LevelData:
    """Write one level's synthetic memories, then their relationships, with ``memory.upsert`` (update
    detection off: template sentences about the same people and tools would read as updates of each
    other; what the judge costs is measured by ``updates_quality.py`` and ``ingest_speed.py``)."""
    if n > LEAN_ABOVE:
        return _load_level_lean(memory, level, n, m, seed, node_batch, rel_batch)
    rng = random.Random(f"{seed}:{level}:{n}:{m}")
    t0 = time.perf_counter()
    nodes = make_nodes(level, n, rng)
    rels = make_rels(nodes, m, rng)
    t_gen = time.perf_counter() - t0
    t0 = time.perf_counter()
    nodes, matrix = embed_level(memory, nodes)
    t_embed = time.perf_counter() - t0
    t0 = time.perf_counter()
    for start in range(0, len(nodes), node_batch):
        memory.upsert(nodes[start:start + node_batch], embed=False, detect_updates=False)
    t_nodes = time.perf_counter() - t0
    t0 = time.perf_counter()
    cid = CITIZEN if level == "N1" else None
    for start in range(0, len(rels), rel_batch):
        models = [ConsciousnessRelationship(**r) for r in rels[start:start + rel_batch]]
        memory.upsert(relationships=models, level=level, citizen_id=cid, embed=False)
    t_rels = time.perf_counter() - t0
    graph = memory.plans(level, cid).graph
    stored = memory.counts(level, cid)
    if stored != (n, m):
        raise RuntimeError(f"{graph}: stored {stored}, expected {(n, m)}")
    data = LevelData(level, graph, [x.node_id for x in nodes], nodes, matrix, rels,
                     {"generate": t_gen, "embed": t_embed, "nodes": t_nodes, "relationships": t_rels})
    log(f"  {level} ({graph}): {n:,} memories + {m:,} relationships: generate {t_gen:.1f} s, "
        f"embed {t_embed:.1f} s, write memories {t_nodes:.1f} s ({n / t_nodes:,.0f}/s), "
        f"write relationships {t_rels:.1f} s ({m / t_rels:,.0f}/s)")
    return data


def _load_level_lean(memory: ConsciousnessMemory, level: str, n: int, m: int, seed: int,
                     node_batch: int, rel_batch: int) -> LevelData:
    """``load_level`` in pieces: the same memories and relationships (the same random draws, in the same
    order), but no model is kept once written; ``nodes`` and ``rels`` of the result are empty."""
    rng = random.Random(f"{seed}:{level}:{n}:{m}")
    cid = CITIZEN if level == "N1" else None
    ids: list[str] = []
    times: list[datetime] = []
    blocks: list[np.ndarray] = []
    t_gen = t_embed = t_nodes = 0.0
    nodes_iter = iter_nodes(level, n, rng)
    while True:
        t0 = time.perf_counter()
        chunk = list(islice(nodes_iter, 20_000))
        t_gen += time.perf_counter() - t0
        if not chunk:
            break
        t0 = time.perf_counter()
        chunk, matrix = embed_level(memory, chunk)
        t_embed += time.perf_counter() - t0
        t0 = time.perf_counter()
        for start in range(0, len(chunk), node_batch):
            memory.upsert(chunk[start:start + node_batch], embed=False, detect_updates=False)
        t_nodes += time.perf_counter() - t0
        ids += [x.node_id for x in chunk]
        times += [x.created_at for x in chunk]
        blocks.append(matrix)
    t0 = time.perf_counter()
    rels = iter_rels(ids, times, m, rng)
    while batch := list(islice(rels, rel_batch)):
        memory.upsert(relationships=[ConsciousnessRelationship(**r) for r in batch], level=level, citizen_id=cid,
                      embed=False)
    t_rels = time.perf_counter() - t0
    graph = memory.plans(level, cid).graph
    stored = memory.counts(level, cid)
    if stored != (n, m):
        raise RuntimeError(f"{graph}: stored {stored}, expected {(n, m)}")
    log(f"  {level} ({graph}): {n:,} memories + {m:,} relationships (in pieces): generate {t_gen:.1f} s, "
        f"embed {t_embed:.1f} s, write memories {t_nodes:.1f} s ({n / t_nodes:,.0f}/s), "
        f"write relationships {t_rels:.1f} s ({m / t_rels:,.0f}/s)")
    return LevelData(level, graph, ids, [], np.concatenate(blocks), [],
                     {"generate": t_gen, "embed": t_embed, "nodes": t_nodes, "relationships": t_rels})


def settle_persistence(memory: ConsciousnessMemory) -> float:
    """SAVE now and wait for any background save / AOF rewrite: nothing may fork during timing."""
    conn = memory.db.connection
    t0 = time.perf_counter()
    for _ in range(6000):
        info = conn.info("persistence")
        if not info.get("rdb_bgsave_in_progress") and not info.get("aof_rewrite_in_progress"):
            break
        time.sleep(0.1)
    conn.execute_command("SAVE")
    for _ in range(6000):
        info = conn.info("persistence")
        if not info.get("rdb_bgsave_in_progress") and not info.get("aof_rewrite_in_progress"):
            break
        time.sleep(0.1)
    return time.perf_counter() - t0
