"""The level graph store and the memory facade, on the real embedded FalkorDB.

``fresh_graph`` gives each test an empty graph of its own; the facade tests
use fresh citizen ids (private N1 graphs) and unique node ids on the shared
N3 graph, and remove what they wrote.
"""

from __future__ import annotations

import math
import random
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from tests.storage.test_pgvector_store import sql_cursor

from llama_consciousness.errors import EmbeddingDimensionError, LevelError, StorageError
from llama_consciousness.schema import ConsciousnessNode, ConsciousnessRelationship, MemoryNode
from llama_consciousness.scoring.emotions import canonical_emotion
from llama_consciousness.storage import records
from llama_consciousness.storage.level_store import LevelGraphStore, LevelPlans, Supersession
from llama_consciousness.temporal import TemporalWindow

T0 = datetime(2024, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


def at(offset: float | None) -> datetime | None:
    return None if offset is None else T0 + timedelta(seconds=offset)


def mk(node_id: str, embedding: list[float] | None = None, *, level: str = "N2", **kwargs) -> MemoryNode:
    kwargs.setdefault("energy", 0.5)
    kwargs.setdefault("confidence", 0.5)
    kwargs.setdefault("name", f"memory {node_id}")
    return MemoryNode(node_id=node_id, level=level, embedding=embedding, **kwargs)


def link(source: str, target: str, relation_type: str = "RELATES_TO", **kwargs) -> ConsciousnessRelationship:
    kwargs.setdefault("goal", "connect")
    kwargs.setdefault("mindstate", "focused")
    kwargs.setdefault("energy", 0.5)
    kwargs.setdefault("confidence", 0.5)
    return ConsciousnessRelationship(source_id=source, target_id=target, relation_type=relation_type, **kwargs)


def unit(rng: random.Random, dim: int) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(dim)]
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


def cosine(a, b) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def raw_nodes(store: LevelGraphStore) -> dict[str, dict]:
    rows = store.graph.query("MATCH (n:Memory) RETURN n.node_id, properties(n)").result_set
    return {r[0]: r[1] for r in rows}


def raw_edges(store: LevelGraphStore) -> dict[str, dict]:
    rows = store.graph.query("MATCH ()-[r:LINK]->() RETURN r.edge_id, properties(r)").result_set
    return {r[0]: r[1] for r in rows}


def snapshot(store: LevelGraphStore, ids: list[str]) -> tuple:
    return (
        store.counts(),
        raw_nodes(store),
        raw_edges(store),
        [n.model_dump() for n in store.get_nodes(ids)],
        sorted((e.model_dump() for e in store.get_relationships()), key=lambda e: e["edge_id"]),
    )


def batch() -> tuple[list[MemoryNode], list[ConsciousnessRelationship]]:
    """Nodes and edges as an ingestion would build them, some times left to defaults."""
    nodes = [
        mk("a", [1, 0, 0, 0], created_at=at(0), emotion_vector={"excited": 0.8}, concepts=["x", "y"]),
        mk("b", [0, 1, 0, 0], valid_at=at(-50), created_at=at(1), invalid_at=at(100)),
        mk("c", [0, 0, 1, 0]),                                 # all times defaulted
        mk("d", [0, 0, 0, 1], valid_at=at(3)),                 # created_at defaulted
        mk("e", None, created_at=at(4), expired_at=at(10)),    # no embedding
        mk("f", [1, 1, 0, 0], extra={"k": [1, 2]}, sensory_details={"smell": "rain"}),
    ]
    edges = [
        link("a", "b", created_at=at(0), emotion_vector={"curious": 0.4}),
        link("b", "c", "JUSTIFIES"),
        link("c", "d", edge_id="custom-id", valid_at=at(2)),
        link("a", "f", "RESOLVED_BY", energy_transfer_coefficient=0.9),
    ]
    return nodes, edges


# -- idempotency ------------------------------------------------------------------


def test_second_upsert_changes_nothing(fresh_graph):
    store = fresh_graph("N2")
    nodes, edges = batch()
    first = store.upsert(nodes, edges)
    assert (first.nodes_created, first.nodes_updated, first.nodes_unchanged) == (6, 0, 0)
    assert (first.edges_created, first.edges_updated, first.edges_unchanged) == (4, 0, 0)
    ids = [n.node_id for n in nodes]
    before = snapshot(store, ids)
    assert before[0] == (6, 4)
    # the same objects, and the same batch built again (new default times)
    for again_nodes, again_edges in ((nodes, edges), batch()):
        again = store.upsert(again_nodes, again_edges)
        assert (again.nodes_created, again.nodes_updated, again.nodes_unchanged) == (0, 0, 6)
        assert (again.edges_created, again.edges_updated, again.edges_unchanged) == (0, 0, 4)
        assert snapshot(store, ids) == before
    # nodes only, edges only: unchanged as well
    assert store.upsert(nodes).nodes_unchanged == 6
    assert store.upsert((), edges).edges_unchanged == 4
    assert snapshot(store, ids) == before
    assert store.upsert().nodes_created == 0


def test_changed_records_are_updated(fresh_graph):
    store = fresh_graph("N2")
    nodes, edges = batch()
    store.upsert(nodes, edges)
    before = raw_nodes(store)
    changed = nodes[1].model_copy(update={"description": "now described"})
    edge = edges[1].model_copy(update={"energy": 0.9})
    result = store.upsert([changed] + nodes[2:], [edge] + edges[2:])
    assert (result.nodes_created, result.nodes_updated, result.nodes_unchanged) == (0, 1, 4)
    assert (result.edges_created, result.edges_updated, result.edges_unchanged) == (0, 1, 2)
    after = raw_nodes(store)
    assert after["b"]["description"] == "now described"
    assert after["b"]["content_hash"] != before["b"]["content_hash"]
    assert {k: v for k, v in after.items() if k != "b"} == {k: v for k, v in before.items() if k != "b"}
    assert {e.edge_id: e for e in store.get_relationships()}[edge.edge_id].energy == 0.9
    assert store.counts() == (6, 4)


def test_a_field_cleared_on_update_is_removed(fresh_graph):
    """New records are sent without their empty fields; an update still clears one."""
    store = fresh_graph("N2")
    store.upsert([mk("f", [0.1, 0.2, 0.3, 0.4], felt_quality="warm", goal="finish", created_at=at(0))],
                 [link("f", "f", "SELF_REFERENCES", felt_quality="odd", created_at=at(0))])
    stored = raw_nodes(store)["f"]
    assert stored["felt_quality"] == "warm"
    assert "body_sensation" not in stored  # never set, never stored
    store.upsert([mk("f", [0.1, 0.2, 0.3, 0.4], goal="finish", created_at=at(0))],
                 [link("f", "f", "SELF_REFERENCES", created_at=at(0))])
    assert "felt_quality" not in raw_nodes(store)["f"]
    edge_props = store.graph.query("MATCH ()-[r:LINK]->() RETURN properties(r)").result_set[0][0]
    assert "felt_quality" not in edge_props
    assert store.get_node("f").felt_quality is None


def test_bulk_vectors_arrive_as_their_seven_decimals(fresh_graph):
    """Upserts send vectors rounded to seven decimals; the server must store the same float32."""
    import numpy as np

    from llama_consciousness.storage import records

    rng = random.Random(7)
    vec = unit(rng, 4)
    store = fresh_graph("N2")
    store.upsert([mk("v", vec, created_at=at(0))])
    expected = np.round(np.asarray(vec, dtype=np.float64), records.VECTOR_DECIMALS).astype(np.float32)
    assert np.array_equal(np.asarray(raw_nodes(store)["v"]["embedding"], dtype=np.float32), expected)


def test_a_new_embedding_replaces_the_stored_one(fresh_graph):
    store = fresh_graph("N2")
    old, new = [0.5, 0.5, 0.5, 0.5], [-0.3, 0.1, 0.2, 0.9]
    store.upsert([mk("moved", old, created_at=at(0)), mk("still", [0.1, 0.2, 0.3, 0.4], created_at=at(0))])
    assert store.upsert([mk("moved", new, created_at=at(0))]).nodes_updated == 1
    assert raw_nodes(store)["moved"]["embedding"] == pytest.approx(new, abs=1e-6)
    hits = store.vector_search(new, 2, TemporalWindow())
    assert [h.node.node_id for h in hits] == ["moved", "still"]
    assert hits[0].similarity == pytest.approx(1.0, abs=1e-5)
    # and back again
    store.upsert([mk("moved", old, created_at=at(0))])
    assert raw_nodes(store)["moved"]["embedding"] == pytest.approx(old)
    assert store.vector_search(old, 1, TemporalWindow())[0].similarity == pytest.approx(1.0, abs=1e-5)


def test_defaulted_times_keep_the_stored_ones(fresh_graph):
    store = fresh_graph("N2")
    store.upsert([mk("m", [1, 0, 0, 0], created_at=at(0)), mk("n", [0, 1, 0, 0], created_at=at(0))],
                 [link("m", "n", created_at=at(0))])
    # re-ingested much later without times, with a changed description
    again = mk("m", [1, 0, 0, 0], description="second pass")
    assert again.created_at > at(10**6)
    result = store.upsert([again], [link("m", "n", goal="new goal")])
    assert (result.nodes_updated, result.edges_updated) == (1, 1)
    stored = store.get_node("m")
    assert stored.description == "second pass"
    assert stored.created_at == at(0) and stored.valid_at == at(0)
    rel = store.get_relationships(["m"])[0]
    assert rel.goal == "new goal" and rel.created_at == at(0) and rel.valid_at == at(0)
    # built once more: nothing to do
    result = store.upsert([mk("m", [1, 0, 0, 0], description="second pass")], [link("m", "n", goal="new goal")])
    assert (result.nodes_unchanged, result.edges_unchanged) == (1, 1)
    # explicit times are applied
    store.upsert([mk("m", [1, 0, 0, 0], description="second pass", created_at=at(5), expired_at=at(7))])
    stored = store.get_node("m")
    assert (stored.created_at, stored.valid_at, stored.expired_at) == (at(5), at(5), at(7))


def test_repeated_id_in_one_batch_last_wins(fresh_graph):
    store = fresh_graph("N2")
    result = store.upsert([mk("r", [1, 0, 0, 0], description="first"), mk("r", [1, 0, 0, 0], description="last")])
    assert result.nodes_created == 1 and store.counts() == (1, 0)
    assert store.get_node("r").description == "last"


# -- refused batches write nothing ------------------------------------------------


def test_relationship_to_missing_node_rejects_the_whole_batch(fresh_graph):
    store = fresh_graph("N2")
    store.upsert([mk("present", [1, 0, 0, 0])])
    before = snapshot(store, ["present"])
    with pytest.raises(StorageError) as info:
        store.upsert(
            [mk("new1", [0, 1, 0, 0]), mk("new2", [0, 0, 1, 0])],
            [link("new1", "new2"), link("present", "new1"), link("new2", "ghost-id")],
        )
    assert "ghost-id" in str(info.value)
    assert "new1" not in str(info.value).split("missing")[1].split(";")[0]
    assert snapshot(store, ["present"]) == before
    assert store.get_nodes(["new1", "new2"]) == []
    with pytest.raises(StorageError, match="phantom"):
        store.upsert((), [link("phantom", "present")])
    assert snapshot(store, ["present"]) == before


def test_wrong_embedding_dimension_writes_nothing(fresh_graph):
    store = fresh_graph("N2")
    store.upsert([mk("present", [1, 0, 0, 0])])
    with pytest.raises(EmbeddingDimensionError, match="dimension 5"):
        store.upsert([mk("good", [0, 1, 0, 0]), mk("bad", [1, 2, 3, 4, 5])], [link("good", "present")])
    assert store.counts() == (1, 0)
    assert store.get_node("good") is None
    with pytest.raises(EmbeddingDimensionError):
        store.vector_search([1, 0, 0], 3, TemporalWindow())


def test_records_of_another_graph_are_rejected(fresh_graph):
    n2 = fresh_graph("N2")
    n1 = fresh_graph("N1")  # citizen "x"
    with pytest.raises(StorageError, match="N3"):
        n2.upsert([mk("ok", [1, 0, 0, 0]), mk("n3-node", [1, 0, 0, 0], level="N3")])
    with pytest.raises(StorageError, match="'y'"):
        n1.upsert([mk("mine", [1, 0, 0, 0], level="N1", citizen_id="x"),
                   mk("theirs", [1, 0, 0, 0], level="N1", citizen_id="y")])
    with pytest.raises(StorageError):
        n1.upsert([mk("shared", [1, 0, 0, 0], level="N2")])
    with pytest.raises(StorageError, match="level N3"):
        n2.upsert([mk("p", [1, 0, 0, 0]), mk("q", [0, 1, 0, 0])], [link("p", "q", level="N3")])
    with pytest.raises(StorageError):
        n1.upsert([mk("p", [1, 0, 0, 0], level="N1", citizen_id="x"), mk("q", [0, 1, 0, 0], level="N1", citizen_id="x")],
                  [link("p", "q", level="N1", citizen_id="y")])
    assert n2.counts() == (0, 0) and n1.counts() == (0, 0)
    # an unlevelled relationship is stamped with the graph's level (and citizen)
    n1.upsert([mk("p", [1, 0, 0, 0], level="N1", citizen_id="x"), mk("q", [0, 1, 0, 0], level="N1", citizen_id="x")],
              [link("p", "q")])
    rel = n1.get_relationships()[0]
    assert (rel.level, rel.citizen_id) == ("N1", "x")


# -- round trips ------------------------------------------------------------------


def test_emotions_round_trip_with_canonical_names(fresh_graph):
    store = fresh_graph("N2")
    emotions = {"excited": 0.8, "Deep Focus": 0.4, "curious": 0.3, "excitement": 0.1, "calm": 0.0}
    store.upsert([mk("e1", [1, 0, 0, 0], emotion_vector=emotions), mk("e2", [0, 1, 0, 0])],
                 [link("e1", "e2", emotion_vector={"frustrated": 0.6, "Relief": 0.2})])
    stored = store.get_node("e1")
    assert stored.emotion_vector == emotions
    assert list(stored.emotion_vector) == list(emotions)  # names and their order preserved
    props = raw_nodes(store)["e1"]
    assert props["emotion_names"] == list(emotions)
    assert props["emotion_canonical"] == ["excitement", "deep_focus", "curiosity", "excitement", "calm"]
    assert props["emotion_canonical"] == [canonical_emotion(n) for n in emotions]
    assert props["emotion_values"] == pytest.approx(list(emotions.values()))
    assert store.get_node("e2").emotion_vector is None
    rel = store.get_relationships()[0]
    assert rel.emotion_vector == {"frustrated": 0.6, "Relief": 0.2}
    assert raw_edges(store)[rel.edge_id]["emotion_canonical"] == ["frustration", "relief"]
    # canonical names are queryable inside the database
    rows = store.graph.query("MATCH (n:Memory) WHERE 'excitement' IN n.emotion_canonical RETURN n.node_id").result_set
    assert [r[0] for r in rows] == ["e1"]


def test_structured_fields_round_trip(fresh_graph):
    store = fresh_graph("N2")
    node = mk(
        "s", [1, 0, 0, 0],
        sensory_details={"sound": "rain on the \"roof\"", "smell": "pétrichor", "light": "dim"},
        extra={"source": "chat", "nested": {"list": [1, 2.5, "three", None, True]}, "unicode": "😀 ü"},
        concepts=["alpha", "beta"], surfaces_when=["when 'tired'"],
        felt_quality="warm", body_sensation="tight chest", goal="finish", mindstate="calm",
        formation_trigger="spontaneous_insight", resolution_state="resolved", supersedes="old",
        invalidation_reason="reality_changed", discovery_energy=0.3, metadata_completeness=0.9,
        created_at=at(0), valid_at=at(-10), invalid_at=at(10), expired_at=at(20), node_type="Decision",
    )
    edge = link("s", "s", "SELF_REFERENCES", sensory_details={"touch": "cold"}, felt_quality="odd",
                body_sensation="shiver", spatial_context="desk", metadata_completeness=0.5, created_at=at(0))
    store.upsert([node], [edge])
    assert store.get_node("s") == node.model_copy(update={"embedding": None})
    assert store.get_relationships(["s"]) == [edge.model_copy(update={"level": "N2"})]
    props = raw_nodes(store)["s"]
    assert props["embedding"] == pytest.approx([1, 0, 0, 0])
    assert "sensory_details" not in props and isinstance(props["sensory_details_json"], str)
    # an empty extra and no sensory details are stored as absent, and read back as empty / None
    store.upsert([mk("plain", [0, 1, 0, 0])])
    plain = store.get_node("plain")
    assert plain.extra == {} and plain.sensory_details is None and plain.concepts == []


def test_hostile_strings_are_stored_verbatim(fresh_graph):
    store = fresh_graph("N2")
    bystanders = [mk(f"keep{i}", [0, 1, 0, i / 10]) for i in range(3)]
    store.upsert(bystanders, [link("keep0", "keep1")])
    name = "x'}) DETACH DELETE n //"
    description = "`Memory`) MATCH (m) DETACH DELETE m; RETURN 1 // \"double\" 'single' \\ back\\slash $k {x}"
    hostile = mk(
        "id'with\"quotes`and) MATCH (n) DELETE n", [1, 0, 0, 0], name=name, description=description,
        goal="'; CALL db.idx.vector.queryNodes('Memory', 'embedding', 1, vecf32([1])) //",
        concepts=["a'b", "c`d", "MERGE (x)"], extra={"k'ey`": "va\"l'ue"},
        emotion_vector={"fear' DELETE n": 0.2}, created_at=at(0),
    )
    edge = link(hostile.node_id, "keep0", goal="x`}]->() DELETE r //", mindstate="' OR 1=1 --")
    result = store.upsert([hostile], [edge])
    assert (result.nodes_created, result.edges_created) == (1, 1)
    stored = store.get_node(hostile.node_id)
    assert stored.name == name and stored.description == description
    assert stored == hostile.model_copy(update={"embedding": None})
    rel = [e for e in store.get_relationships([hostile.node_id]) if e.target_id == "keep0"][0]
    assert rel.goal == edge.goal and rel.mindstate == edge.mindstate
    assert store.counts() == (4, 2)
    assert [n.node_id for n in store.get_nodes([b.node_id for b in bystanders])] == ["keep0", "keep1", "keep2"]
    # a second write is recognised as unchanged
    assert store.upsert([hostile], [edge]).nodes_unchanged == 1
    hits = store.vector_search([1, 0, 0, 0], 1, TemporalWindow())
    assert hits[0].node.name == name


def _hostile_and_structured() -> tuple[list[MemoryNode], list[ConsciousnessRelationship]]:
    nodes, edges = batch()
    nodes.append(mk("h'q\"`", [0, 1, 1, 0], name="x'}) DETACH DELETE n //", description="\"d\" \\ \n\t ü 😀",
                    extra={"nested": {"list": [1, 2.5, "three", None, True]}}, sensory_details={"sound": "rain"},
                    invalidation_reason="reality_changed", supersedes="old", discovery_energy=0.1 + 0.2,
                    surfaces_when=["when 'tired'"], created_at=at(2)))
    edges.append(link("h'q\"`", "a", goal="x`}]->() DELETE r //", sensory_details={"touch": "cold"},
                      energy=1 / 3, created_at=at(2)))
    return nodes, edges


def _everything_read(store: LevelGraphStore, ids: list[str]) -> tuple:
    window = TemporalWindow(mode="full_history")
    return (
        [n.model_dump() for n in store.get_nodes(ids)],
        sorted((e.model_dump() for e in store.get_relationships()), key=lambda e: e["edge_id"]),
        [h.node.model_dump() for h in store.vector_search([1, 0.5, 0.2, 0], 10, window)],
    )


def _digits15(value):
    """``value`` with every float as FalkorDB's replies print it: 15 significant digits."""
    if isinstance(value, float):
        return float(f"{value:.15g}")
    if isinstance(value, dict):
        return {k: _digits15(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_digits15(v) for v in value)
    return value


def test_a_record_is_stored_once_as_its_properties_and_read_back_validated(fresh_graph):
    """Every field is a property (no second copy); reads are the models written, to a reply's 15 digits;
    a value written by hand that the model refuses is an error, not a model."""
    store = fresh_graph("N2")
    nodes, edges = _hostile_and_structured()
    store.upsert(nodes, edges)
    stored = [*raw_nodes(store).values(), *raw_edges(store).values()]
    assert len(stored) == len(nodes) + len(edges) and not any(records.LEGACY_COPY in p for p in stored)
    link_props = raw_edges(store)[edges[-1].edge_id]
    assert link_props["goal"] == edges[-1].goal and link_props["sensory_details_json"] == '{"touch": "cold"}'
    ids = [n.node_id for n in nodes]
    read_nodes, read_edges, _ = _everything_read(store, ids)
    by_id = {n.node_id: n for n in nodes}
    seconds = {t: lambda v: v and v.replace(microsecond=0) for t in records.TIME_FIELDS}  # stored to the second
    for got in read_nodes:
        written = by_id[got["node_id"]].model_dump(exclude={"embedding"})
        written = {**written, "level": "N2", "extra": written["extra"] or {},
                   **{t: cut(written[t]) for t, cut in seconds.items()}}
        assert {k: v for k, v in got.items() if k != "embedding"} == _digits15(written), got["node_id"]
    assert {e["edge_id"] for e in read_edges} == {e.edge_id for e in edges}
    assert store.get_node("h'q\"`").discovery_energy == pytest.approx(0.1 + 0.2, rel=1e-14)
    # a supersession changes the stored times, and the reads show it
    store.upsert([mk("a2", [1, 0, 0, 0], created_at=at(30))],
                 supersessions=[Supersession("a", "a2", expired_at=at(30), reason="reality_changed", invalid_at=at(25))])
    read = store.get_node("a")
    assert (read.expired_at, read.invalid_at, read.superseded_by, read.invalidation_reason) == (
        at(30), at(25), "a2", "reality_changed")
    store.graph.query("MATCH (n:Memory {node_id: 'b'}) SET n.energy = 7.0")
    store.graph.query("MATCH ()-[r:LINK {edge_id: $id}]->() SET r.energy = 7.0", {"id": edges[-1].edge_id})
    with pytest.raises(ValueError, match="energy"):
        store.get_node("b")
    with pytest.raises(ValueError, match="energy"):
        store.get_relationships(["h'q\"`"])


def test_a_link_of_the_read_copy_layout_keeps_its_texts_and_loses_the_copy_once_rewritten(fresh_graph):
    """Links written by the 2026-11-24..26 versions kept their texts only in ``fields_v1``: they read them
    from it; re-written, the texts are properties again and the copy is gone."""
    import json

    store = fresh_graph("N2")
    nodes, edges = _hostile_and_structured()
    store.upsert(nodes, edges)
    edge = edges[0].model_copy(update={"goal": "the old goal", "felt_quality": "uneasy",
                                       "sensory_details": {"sound": "rain"}})
    row = records.edge_row(edge)["props"]
    legacy = json.dumps([row[name] for name in records.LEGACY_EDGE_LAYOUT])
    nulls = {name: None for name in records.LEGACY_EDGE_TEXTS}
    store.graph.query("MATCH ()-[r:LINK {edge_id: $id}]->() SET r += $nulls SET r.fields_v1 = $copy",
                      {"id": edge.edge_id, "nulls": nulls, "copy": legacy})
    assert not set(records.LEGACY_EDGE_TEXTS) & set(raw_edges(store)[edge.edge_id])
    read = {e.edge_id: e for e in store.get_relationships()}[edge.edge_id]
    assert read == edge.model_copy(update={"level": "N2"})
    changed = edge.model_copy(update={"goal": "a new goal", "energy": 0.25})
    assert store.upsert((), [changed]).edges_updated == 1
    props = raw_edges(store)[edge.edge_id]
    assert records.LEGACY_COPY not in props and props["goal"] == "a new goal" and props["felt_quality"] == "uneasy"
    assert {e.edge_id: e for e in store.get_relationships()}[edge.edge_id] == changed.model_copy(update={"level": "N2"})


def test_records_read_as_validation_would_build_them(fresh_graph):
    """A record read back is the model validation makes of its own dump: equal, with the same fields
    set, the same types and the same dump."""
    store = fresh_graph("N2")
    nodes, edges = _hostile_and_structured()
    store.upsert(nodes, edges)
    nodes_read = store.get_nodes([n.node_id for n in nodes])
    edges_read = store.get_relationships()
    assert len(nodes_read) == len(nodes) and len(edges_read) == len(edges)
    for got in nodes_read + edges_read:
        data = got.model_dump(exclude_unset=True)
        again = type(got).model_validate(data)
        assert got == again and got.model_fields_set == again.model_fields_set
        assert got.model_dump_json() == again.model_dump_json()
        assert [type(v) for v in got.__dict__.values()] == [type(v) for v in again.__dict__.values()]
    # the records' own checks still run on what the store changes (the times are cells)
    store.graph.query("MATCH (n:Memory {node_id: 'b'}) SET n.expired_at = 915148800")  # 1999-01-01
    with pytest.raises(ValueError, match="expired_at"):
        store.get_node("b")


# -- vector search ----------------------------------------------------------------


def test_vector_search_returns_k_after_updates(fresh_graph):
    store = fresh_graph("N2", dimension=8)
    rng = random.Random(42)
    vectors = {f"v{i}": unit(rng, 8) for i in range(200)}
    store.upsert([mk(i, v, created_at=at(0)) for i, v in vectors.items()])
    # re-upsert changed versions of 60 nodes: every SET leaves an orphan in the index
    for i in list(vectors)[::10] + list(vectors)[1::10] + list(vectors)[2::10]:
        if int(i[1:]) % 20 < 10:
            vectors[i] = unit(rng, 8)
        result = store.upsert([mk(i, vectors[i], created_at=at(0), description="updated")])
        assert result.nodes_updated == 1
    assert store.counts() == (200, 0)
    window = TemporalWindow()
    for query_id in ("v0", "v1", "v5", "v199"):
        query = vectors[query_id]
        hits = store.vector_search(query, 20, window)
        ids = [h.node.node_id for h in hits]
        assert len(hits) == 20 and len(set(ids)) == 20
        sims = [h.similarity for h in hits]
        assert sims == sorted(sims, reverse=True)
        assert ids[0] == query_id and sims[0] == pytest.approx(1.0, abs=1e-5)
        for hit in hits:
            assert hit.similarity == pytest.approx(cosine(query, vectors[hit.node.node_id]), abs=1e-4)
            assert hit.node.embedding is None
        exact = sorted(vectors, key=lambda i: -cosine(query, vectors[i]))[:20]
        assert len(set(ids) & set(exact)) >= 18


def test_vector_search_returns_k_when_orphans_outnumber_live_vectors(fresh_graph):
    store = fresh_graph("N2", dimension=8)
    rng = random.Random(5)
    for round_ in range(4):  # the initial write and three updates of every node, each re-embedded
        vectors = {f"w{i}": unit(rng, 8) for i in range(100)}
        result = store.upsert([mk(i, v, created_at=at(0), description=f"round {round_}") for i, v in vectors.items()])
        assert result.nodes_created + result.nodes_updated == 100
    raw = store.graph.query("CALL db.idx.vector.queryNodes('Memory', 'embedding', 100, vecf32($q)) "
                            "YIELD node RETURN node.node_id", {"q": vectors["w0"]}).result_set
    assert len(raw) < 60  # the orphans crowd out live nodes of a plain KNN query
    hits = store.vector_search(vectors["w0"], 60, TemporalWindow())
    assert len({h.node.node_id for h in hits}) == 60
    assert hits[0].node.node_id == "w0"
    everything = store.vector_search(vectors["w0"], 100, TemporalWindow())
    assert len({h.node.node_id for h in everything}) == 100
    # more than there is: every live node, once
    assert len({h.node.node_id for h in store.vector_search(vectors["w0"], 500, TemporalWindow())}) == 100


def test_vector_search_honours_window_and_filters(fresh_graph):
    store = fresh_graph("N2")
    query = [1, 0, 0, 0]
    store.upsert([
        mk("expired", [1, 0, 0, 0], created_at=at(0), expired_at=at(10)),
        mk("future", [1, 0.01, 0, 0], valid_at=datetime.now(timezone.utc) + timedelta(days=1)),
        mk("low_energy", [1, 0.1, 0, 0], created_at=at(0), energy=0.1, confidence=0.9),
        mk("low_confidence", [1, 0.2, 0, 0], created_at=at(0), energy=0.9, confidence=0.1),
        mk("strong", [1, 0.3, 0, 0], created_at=at(0), energy=0.9, confidence=0.9),
        mk("far", [0, 0, 0, 1], created_at=at(0), energy=0.9, confidence=0.9),
        mk("no_vector", None, created_at=at(0)),
    ])
    ids = lambda window, **f: [h.node.node_id for h in store.vector_search(query, 10, window, **f)]  # noqa: E731
    assert ids(TemporalWindow()) == ["low_energy", "low_confidence", "strong", "far"]
    assert ids(TemporalWindow("evolution"))[:2] == ["expired", "future"]
    assert ids(TemporalWindow("point_in_time", as_of_time=at(5))) == ["expired", "low_energy", "low_confidence",
                                                                      "strong", "far"]
    assert ids(TemporalWindow(), min_energy=0.5) == ["low_confidence", "strong", "far"]
    assert ids(TemporalWindow(), min_confidence=0.5) == ["low_energy", "strong", "far"]
    assert ids(TemporalWindow(), min_energy=0.5, min_confidence=0.5) == ["strong", "far"]
    assert ids(TemporalWindow(), min_energy=0.95) == []
    assert [h.node.node_id for h in store.vector_search(query, 1, TemporalWindow())] == ["low_energy"]
    assert store.vector_search(query, 0, TemporalWindow()) == []


def test_reindex_keeps_results(fresh_graph):
    store = fresh_graph("N2", dimension=8)
    rng = random.Random(9)
    vectors = {f"r{i}": unit(rng, 8) for i in range(400)}
    for round_ in range(3):
        store.upsert([mk(i, v, created_at=at(0), description=f"round {round_}") for i, v in vectors.items()])
    window = TemporalWindow()
    before = [(h.node.node_id, round(h.similarity, 5)) for h in store.vector_search(vectors["r3"], 15, window)]
    store.reindex_vectors()
    after = [(h.node.node_id, round(h.similarity, 5)) for h in store.vector_search(vectors["r3"], 15, window)]
    assert after == before and len(after) == 15
    # the rebuilt index has no orphans: a plain KNN query returns every node
    rows = store.graph.query("CALL db.idx.vector.queryNodes('Memory', 'embedding', 400, vecf32($q)) "
                             "YIELD node RETURN node.node_id", {"q": vectors["r3"]}).result_set
    assert len({r[0] for r in rows}) == 400
    for _ in range(5):  # again and again: each rebuild must wait for the drop to settle
        store.reindex_vectors()
        assert [h.node.node_id for h in store.vector_search(vectors["r3"], 15, window)] == [i for i, _ in before]


def test_graph_without_vectors(fresh_graph):
    store = fresh_graph("N3", store_vectors=False)
    store.upsert([mk("nv", [1, 0, 0, 0], level="N3")])
    assert "embedding" not in raw_nodes(store)["nv"]
    assert store.get_node("nv").embedding is None
    assert store.upsert([mk("nv", [1, 0, 0, 0], level="N3")]).nodes_unchanged == 1


# -- schema -----------------------------------------------------------------------


def indexes(store: LevelGraphStore) -> list:
    rows = store.graph.query("CALL db.indexes() YIELD label, properties, types, entitytype "
                             "RETURN label, properties, types, entitytype").result_set
    return sorted((r[0], sorted(r[1]), r[3]) for r in rows)


def test_ensure_schema_twice_is_harmless(fresh_graph):
    store = fresh_graph("N2")
    store.upsert([mk("x", [1, 0, 0, 0])])
    before = indexes(store), raw_nodes(store)
    store.ensure_schema()
    store.ensure_schema()
    assert (indexes(store), raw_nodes(store)) == before
    constraints = store.graph.query("CALL db.constraints() YIELD label, properties RETURN label, properties").result_set
    assert [c for c in constraints if c[0] == "Memory"] == [["Memory", ["node_id"]]]
    assert [h.node.node_id for h in store.vector_search([1, 0, 0, 0], 3, TemporalWindow())] == ["x"]


def test_index_of_another_dimension_is_an_error(fresh_graph, memory):
    store = fresh_graph("N2", dimension=4)
    store.upsert([mk("x", [1, 0, 0, 0])])
    other = LevelGraphStore(memory.db, LevelPlans(store.plans.graph, "N2", dimension=8))
    with pytest.raises(EmbeddingDimensionError, match="dimension 4"):
        other.ensure_schema()
    assert store.counts() == (1, 0)
    assert len(store.vector_search([1, 0, 0, 0], 1, TemporalWindow())) == 1


# -- the memory facade ------------------------------------------------------------


@pytest.fixture
def citizens(memory, citizen):
    """Two fresh citizens; their N1 graphs are deleted afterwards."""
    other = "t" + uuid.uuid4().hex[:12]
    yield citizen, other
    for cid in (citizen, other):
        memory.level("N1", cid).delete()


def test_memory_routes_n1_to_the_citizen_graph(memory, citizens):
    me, other = citizens
    nodes = [mk("mine1", level="N1", citizen_id=me), mk("mine2", level="N1", citizen_id=me),
             mk("theirs1", level="N1", citizen_id=other), mk("theirs2", level="N1", citizen_id=other)]
    rels = [link("mine1", "mine2"), link("theirs1", "theirs2", "ANSWERS")]
    result = memory.upsert(nodes, rels)
    assert (result.nodes_created, result.edges_created) == (4, 2)
    assert {f"citizen_{me}", f"citizen_{other}"} <= set(memory.graphs())
    assert memory.counts("N1", me) == (2, 1) and memory.counts("N1", other) == (2, 1)
    mine = memory.level("N1", me).get_relationships()[0]
    assert (mine.source_id, mine.level, mine.citizen_id) == ("mine1", "N1", me)
    theirs = memory.level("N1", other).get_relationships()[0]
    assert (theirs.relation_type, theirs.level, theirs.citizen_id) == ("ANSWERS", "N1", other)
    stored = memory.get_node("mine1", "N1", me)
    assert stored.citizen_id == me and stored.embedding is None
    assert memory.get_node("mine1", "N1", other) is None
    # embedded on the way in, with the model's dimension
    hits = memory.vector_search("memory mine2", "N1", me, k=2)
    assert {h.node_id for h in hits} == {"mine1", "mine2"}
    assert all(h.retrieval_source == "N1_vector" for h in hits)
    # a relationship written later, alone, goes where its level says
    memory.upsert((), [link("mine2", "mine1", "FOLLOWS", level="N1", citizen_id=me)])
    memory.upsert((), [link("theirs2", "theirs1", "FOLLOWS")], level="N1", citizen_id=other)
    assert memory.counts("N1", me) == (2, 2) and memory.counts("N1", other) == (2, 2)
    # and the whole thing again changes nothing
    again = memory.upsert(nodes, rels)
    assert (again.nodes_unchanged, again.edges_unchanged) == (4, 2)


def test_relationship_without_level_is_refused(memory, citizen):
    with pytest.raises(LevelError, match="orphan"):
        memory.upsert([mk("lonely", level="N1", citizen_id=citizen)],
                      [link("elsewhere", "lonely", edge_id="orphan")])
    # refused before anything was written
    assert f"citizen_{citizen}" not in memory.graphs()
    assert memory.counts("N1", citizen) == (0, 0)


def test_memory_reads_of_a_citizen_without_graph(memory, citizen):
    assert memory.get_node("anything", "N1", citizen) is None
    assert memory.get_nodes(["a", "b"], "N1", citizen) == []
    assert memory.counts("N1", citizen) == (0, 0)
    assert memory.vector_search("anything", "N1", citizen) == []
    assert memory.level("N1", citizen).get_relationships() == []
    assert f"citizen_{citizen}" not in memory.graphs()
    with pytest.raises(LevelError):
        memory.get_node("x", "N1")
    with pytest.raises(LevelError):
        memory.counts("N4")


def test_memory_vector_search_on_pgvector_level(memory):
    tag = uuid.uuid4().hex[:10]
    ids = [f"n3-{tag}-{i}" for i in range(3)]
    nodes = memory.embed_nodes([
        mk(ids[0], level="N3", name=f"zebra migration {tag}", description="herds crossing the river",
           emotion_vector={"awe": 0.7}, created_at=at(0), energy=0.8),
        mk(ids[1], level="N3", name=f"quantum chromodynamics {tag}", created_at=at(0), energy=0.2),
        mk(ids[2], level="N3", name=f"zebra crossing {tag}", created_at=at(0), expired_at=at(5)),
    ])
    store = memory.level("N3")
    try:
        result = memory.upsert(nodes)
        assert result.nodes_created == 3
        assert memory.pgvector.upsert("ecosystem_n3", nodes) == 0  # already there, unchanged
        # the graph holds the memories, Postgres the vectors
        assert "embedding" not in raw_nodes(store)[ids[0]]
        hits = memory.vector_search(nodes[0].embedding, "N3", k=5)
        assert isinstance(hits[0], ConsciousnessNode)
        top = hits[0]
        assert top.node_id == ids[0] and top.retrieval_source == "N3_vector"
        assert top.relevance_score == pytest.approx(1.0, abs=1e-4)
        assert top.name == f"zebra migration {tag}" and top.description == "herds crossing the river"
        assert top.emotion_vector == {"awe": 0.7} and top.level == "N3" and top.embedding is None
        assert ids[2] not in {h.node_id for h in hits}  # expired: not current
        evolution = memory.vector_search(nodes[2].embedding, "N3", k=3, temporal_mode="evolution")
        assert evolution[0].node_id == ids[2]
        strong = memory.vector_search(nodes[1].embedding, "N3", k=1000, min_energy=0.5)  # other tests share N3
        assert ids[1] not in {h.node_id for h in strong} and ids[0] in {h.node_id for h in strong}
        assert memory.upsert(nodes).nodes_unchanged == 3
    finally:
        store.graph.query("MATCH (n:Memory) WHERE n.node_id IN $ids DETACH DELETE n", {"ids": ids})
        with sql_cursor(memory.pgvector.url) as cur:
            cur.execute(f"DELETE FROM lc_memory_vectors_{memory.dimension} WHERE graph = %s AND node_id = ANY(%s)",
                        ("ecosystem_n3", ids))


def test_wire_rows_hold_each_field_where_the_upsert_queries_read_it() -> None:
    """``node_wire``/``edge_wire`` lay rows out by the order ``node_row``/``edge_row`` build them in:
    that order must be the one ``NODE_WIRE``/``EDGE_WIRE`` declare."""
    from llama_consciousness.storage import records

    memory = MemoryNode(node_id="m", level="N2", name="Wire", description="d", energy=0.5, confidence=0.6,
                        emotion_vector={"calm": 0.4}, embedding=[0.1, 0.2], created_at=datetime(2020, 1, 1, tzinfo=timezone.utc))
    row = records.node_row(memory)
    assert list(row["times"]) == list(records.TIME_FIELDS) and list(row["props"]) == list(records.NODE_PROPS)
    wire = records.node_wire(row)
    assert len(wire) == len(records.NODE_WIRE)
    assert {name: wire[i] for i, name in enumerate(records.NODE_WIRE) if name in row["props"]} == row["props"]
    link = ConsciousnessRelationship(source_id="a", target_id="b", relation_type="ENABLES", goal="g", mindstate="m",
                                     energy=0.5, confidence=0.5, emotion_vector={"hope": 0.3})
    edge = records.edge_row(link)
    assert list(edge["times"]) == list(records.TIME_FIELDS) and list(edge["props"]) == list(records.EDGE_PROPS)
    wire = records.edge_wire(edge, True)
    assert len(wire) == len(records.EDGE_WIRE) and wire[records.EDGE_WIRE.index("derived")] is True
    assert {name: wire[i] for i, name in enumerate(records.EDGE_WIRE) if name in edge["props"]} == edge["props"]
    # every field is sent once (the ids lead both the head and the properties)
    assert len(set(records.NODE_WIRE)) == len(records.NODE_WIRE) and set(records.NODE_PROPS) <= set(records.NODE_WIRE)
    assert len(set(records.EDGE_WIRE)) == len(records.EDGE_WIRE)
    assert set(records.EDGE_PROPS) <= set(records.EDGE_WIRE)


# -- prepared edges (rows made ahead, as the ingestion worker and the writer's MENTIONS do) --------


def test_prepared_edges_store_exactly_what_models_store(fresh_graph):
    """A ``PreparedEdge`` writes the very edge its model would, and is unchanged against it."""
    by_model, by_prepared = fresh_graph("N2"), fresh_graph("N2")
    nodes, edges = batch()
    for edge in edges:
        edge.level = "N2"  # a prepared row carries its graph
    by_model.upsert(nodes, edges)
    result = by_prepared.upsert(nodes, [records.prepare_edge(e) for e in edges])
    assert (result.edges_created, result.edges_updated) == (4, 0)
    assert raw_edges(by_prepared) == raw_edges(by_model)
    # models and prepared rows are interchangeable for idempotence
    assert by_prepared.upsert((), edges).edges_unchanged == 4
    assert by_model.upsert((), [records.prepare_edge(e) for e in edges]).edges_unchanged == 4


def test_prepared_edge_needs_its_graph(fresh_graph):
    store = fresh_graph("N2")
    nodes, _ = batch()
    store.upsert(nodes)
    with pytest.raises(StorageError, match="has no level"):
        store.upsert((), [records.prepare_edge(link("a", "b"))])
    with pytest.raises(StorageError, match="not to graph"):
        store.upsert((), [records.prepare_edge(link("a", "b", level="N3"))])
    assert store.counts() == (6, 0)


@pytest.mark.parametrize("trigger", ["a mentions Ada", "quote ' and \" and \\ backslash", "ünïcödé \u2019s \n line"])
def test_retargeted_edges_are_the_rows_of_their_models(trigger):
    """Each retargeted row, hash included, is what ``edge_row`` makes of the equivalent model."""
    first = link("a", "entity_first", "MENTIONS", level="N1", citizen_id="ada", created_at=at(5),
                 emotion_vector={"curious": 0.4, "calm": 0.25}, formation_trigger="a mentions First",
                 sensory_details={"sound": "rain"})
    targets = [("entity_first", "a mentions First"), ("entity_ada", trigger), ("b", "a mentions b")]
    made = records.retargeted_edges(first, targets)
    for prepared, (target, text) in zip(made, targets):
        model = first.model_copy(update={"target_id": target, "formation_trigger": text,
                                         "edge_id": f"a|MENTIONS|{target}"})
        assert prepared.row == records.edge_row(model)
        assert (prepared.edge_id, prepared.target_id, prepared.level, prepared.citizen_id) == (
            model.edge_id, target, "N1", "ada")
    assert len({p.row["hash"] for p in made}) == 3


def test_compact_replies_decode_as_the_official_client_does(memory, fresh_graph) -> None:
    """Our reply decoder gives the client's own result set for every value type our queries return."""
    from llama_consciousness.storage import replies

    store = fresh_graph("N2")
    graph = memory.db.select_graph(store.plans.graph)
    graph.query("CREATE (:Memory {node_id: 'a', n: 3, x: 0.25, ok: true, tags: ['p', 'q'], v: vecf32([0.5, -1.0])})")
    query = ("MATCH (m:Memory {node_id: 'a'}) "
             "RETURN m.node_id, m.n, m.x, m.ok, m.missing, m.tags, [m.n, [m.x, null, 'é'], []], "
             "{k: m.x, inner: {deep: [1, 'two']}}, m.v, [m.node_id, m.x, m.ok, m.v]")
    decoded = []
    decode = replies._decode

    def spy(cell):
        decoded.append(cell[0])
        return decode(cell)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(replies, "_decode", spy)
        ours = replies.run(graph, query, True)
    assert ours == graph.ro_query(query).result_set and len(ours) == 1
    # decoded here (booleans, maps and vectors through _decode), not by the client's parser
    assert {replies.BOOLEAN, replies.MAP, replies.VECTORF32} <= set(decoded) <= {
        replies.NULL, replies.STRING, replies.INTEGER, replies.BOOLEAN, replies.DOUBLE, replies.ARRAY, replies.MAP,
        replies.VECTORF32, replies.DATETIME}
    assert [type(v) for v in ours[0][:5]] == [str, int, float, bool, type(None)]
    # a node (not decoded here) sends the whole reply to the client's parser
    with_node = replies.run(graph, "MATCH (m:Memory) RETURN m.x, m", True)
    assert with_node[0][0] == 0.25 and with_node[0][1].properties["node_id"] == "a"
    assert replies.run(graph, "MATCH (m:Memory {node_id: 'none'}) RETURN m.node_id", True) == []


def _searched_graph(fresh_graph, *, seed: int, queries: int):
    """A graph of 3,000 memories (16 dimensions), some queries, and each one's top 40 searched alone."""
    store = fresh_graph("N2", dimension=16)
    rng = random.Random(seed)
    nodes = [mk(f"c{i}", unit(rng, 16), created_at=at(0)) for i in range(3000)]
    for start in range(0, len(nodes), 1000):
        store.upsert(nodes[start:start + 1000])
    asked = [unit(rng, 16) for _ in range(queries)]
    alone = [[h.node.node_id for h in store.vector_search(q, 40, TemporalWindow())] for q in asked]
    assert all(len(set(ids)) == 40 for ids in alone)
    return store, asked, alone


def test_vector_search_is_exact_under_concurrent_searches_of_one_graph(memory, fresh_graph, caplog):
    """Concurrent KNN queries on one graph make FalkorDB repeat memories in a page (FalkorDB #2848).

    A repeated memory takes the place of a real neighbour, so a chatbot
    serving several users at once would silently lose answers.  Each search
    here runs on its own connection, four at a time, and must return what it
    returns alone.
    """
    import threading

    store, queries, alone = _searched_graph(fresh_graph, seed=11, queries=8)
    window = TemporalWindow()
    wrong: list[tuple[int, list[str]]] = []

    def search(worker: int) -> None:
        own = LevelGraphStore(memory.db, store.plans)
        for round_ in range(30):
            i = (worker + round_) % len(queries)
            ids = [h.node.node_id for h in own.vector_search(queries[i], 40, window)]
            if ids != alone[i]:
                wrong.append((i, ids))

    threads = [threading.Thread(target=search, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong, f"{len(wrong)} of 120 concurrent searches differed, e.g. {wrong[0]}"
    assert "repeated memories" not in caplog.text  # no page of ours was corrupted and read again


def test_knn_page_reads_again_a_page_that_repeats_a_memory(caplog):
    """The last column of a vector-search page says whether it held each memory once (pure edge case)."""
    from llama_consciousness.storage.level_store import KNN_ATTEMPTS, Query, _knn_page

    repeated, clean = [[["m1"], 0.1, False], [["m1"], 0.1, False]], [[["m1"], 0.1, True], [["m2"], 0.2, True]]
    plan = _knn_page("g", "CALL db.idx.vector.queryNodes(...)", {"fetch": 80})
    first = next(plan)
    assert isinstance(first, Query) and first.read_only
    assert plan.send(repeated) == first  # the same question again
    with pytest.raises(StopIteration) as done:
        plan.send(clean)
    assert done.value.value == clean
    # an empty page is not a corrupted one
    plan = _knn_page("g", "CALL db.idx.vector.queryNodes(...)", {})
    next(plan)
    with pytest.raises(StopIteration) as done:
        plan.send([])
    assert done.value.value == []
    # a page corrupted every time: the last one, and a warning
    plan = _knn_page("g", "CALL db.idx.vector.queryNodes(...)", {})
    next(plan)
    for _ in range(KNN_ATTEMPTS - 1):
        plan.send(repeated)
    with pytest.raises(StopIteration) as done:
        plan.send(repeated)
    assert done.value.value == repeated
    assert "repeated memories in 4 pages in a row" in caplog.text


def test_vector_searches_of_one_graph_pass_its_gate_in_threads_and_interleaved_runs(memory, fresh_graph):
    """``run_interleaved`` holds the same per-graph gate as the store (FalkorDB #2848).

    Two searches of one graph in one interleaved run go one after the
    other (no deadlock on the run's own gate); threads searching the same
    graph at once all get what a search alone gets.
    """
    import threading

    from llama_consciousness.storage import knn_gate
    from llama_consciousness.storage.interleaved import Interleaved, run_interleaved

    store, queries, alone = _searched_graph(fresh_graph, seed=12, queries=6)
    window = TemporalWindow()
    name = store.plans.graph

    # one interleaved run, six searches of the same graph, and a plain query beside them
    jobs = [(name, store.plans.vector_search(q, 40, window)) for q in queries] + [(name, store.plans.counts())]
    *found, counts = run_interleaved(memory.db, jobs)
    assert [[h.node.node_id for h in hits] for hits in found] == alone
    assert counts == (3000, 0)
    lock = knn_gate.gate(memory.db, name)
    assert not lock.locked()
    # while the first search is in flight the second waits; the plain query goes at once
    run = Interleaved(memory.db, [(name, store.plans.vector_search(q, 40, window)) for q in queries[:2]]
                      + [(name, store.plans.counts())])
    assert lock.locked() and [job.sent for job in run._state] == [True, False, True]
    first, second, _ = run.results()
    assert [[h.node.node_id for h in hits] for hits in (first, second)] == alone[:2]
    assert not lock.locked()

    # threads searching the same graph at once, beside an interleaved run of its own
    wrong: list[int] = []

    def threaded() -> None:
        own = LevelGraphStore(memory.db, store.plans)
        for round_ in range(20):
            i = round_ % len(queries)
            if [h.node.node_id for h in own.vector_search(queries[i], 40, window)] != alone[i]:
                wrong.append(i)

    threads = [threading.Thread(target=threaded) for _ in range(3)]
    for thread in threads:
        thread.start()
    found = run_interleaved(memory.db, [(name, store.plans.vector_search(queries[i % 6], 40, window))
                                        for i in range(12)])
    for thread in threads:
        thread.join()
    assert [[h.node.node_id for h in hits] for hits in found] == [alone[i % 6] for i in range(12)]
    assert not wrong
    assert not lock.locked()


def test_home_key_keeps_the_citizen_in_n1_only():
    """One key per level graph: N2/N3 records of different writers share one batch (pure function)."""
    from llama_consciousness.levels import graph_name, home_key

    assert home_key("N1", "ada") == ("N1", "ada")
    assert home_key("N2", "ada") == home_key("N2", None) == ("N2", None)
    assert home_key("N3", "luca") == ("N3", None)
    for level, citizen in (("N1", "ada"), ("N2", "ada"), ("N3", None)):
        assert graph_name(*home_key(level, citizen)) == graph_name(level, citizen)
