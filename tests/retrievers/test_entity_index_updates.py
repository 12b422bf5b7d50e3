"""The entity-name index follows writes made through the same memory instead of being rebuilt.

A chatbot writes a memory and asks a question every turn; reading every name of a
50K-memory level again after each write cost it most of a second.  These tests
write through ``memory.upsert`` and ``memory.ingest`` on the real embedded
servers and check, without timing anything, that the next retrieval starts the
graph channel from the new name with the very index object it already had, that
the index then holds exactly what a full rebuild would, that renames and deleted
levels leave no wrong start memories, and that building stays linear when many
memories share a name.
"""

from __future__ import annotations

import threading

from llama_consciousness.retrievers.config import RetrievalConfig
from llama_consciousness.retrievers.six_way import SixWayHybridRetriever
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode, RetrievalIntention
from llama_consciousness.scoring.names import EntityIndex

GRAPH_ONLY = RetrievalConfig(channels=("graph",), neighbour_expansion=0, fallback_start=0)  # named starts only


class CountingRetriever(SixWayHybridRetriever):
    """The six-way retriever unchanged, counting the full builds of entity-name indexes it makes."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.builds = 0

    def _remember_index(self, graph, names, version):
        self.builds += 1
        return super()._remember_index(graph, names, version)


def node(citizen: str, node_id: str, name: str, description: str = "", **kw) -> MemoryNode:
    return MemoryNode(node_id=node_id, level="N1", citizen_id=citizen, name=name, description=description,
                      energy=0.5, confidence=0.7, **kw)


def link(source: str, target: str) -> ConsciousnessRelationship:
    return ConsciousnessRelationship(source_id=source, target_id=target, relation_type="RELATES_TO",
                                     goal="understand the work", mindstate="reflective", energy=0.6,
                                     confidence=0.6, emotion_vector={"curiosity": 0.4})


def ask(retriever: SixWayHybridRetriever, citizen: str, text: str) -> dict[str, str]:
    """Graph-channel hits of N1 for ``text``: memory id -> the start memory its walk began from."""
    nodes = retriever.retrieve_intention(RetrievalIntention(query_text=text, citizen_id=citizen,
                                                            query_levels=["N1"]))
    return {n.node.metadata["node_id"]: n.node.metadata.get("start_id") for n in nodes}


def seed(memory, citizen: str) -> None:
    memory.upsert([node(citizen, "luca", "Luca", "A colleague", node_type="Person"),
                   node(citizen, "m1", "Schema review", "Luca reviewed the graph schema design"),
                   node(citizen, "m2", "Garden", "Planting tomatoes and basil in the spring garden")],
                  [link("luca", "m1")])


def stored_names(memory, citizen: str) -> list[tuple[str, str]]:
    store = memory.level("N1", citizen)
    return sorted(store.run(store.plans.named_nodes_all()))


def cached_index(memory, citizen: str) -> tuple[int, EntityIndex]:
    graph = memory.plans("N1", citizen).graph
    version, _, index = memory.entity_index_cache[graph]
    return version, index


def test_a_memory_upserted_is_a_graph_start_on_the_next_retrieval_without_a_rebuild(memory, citizen) -> None:
    seed(memory, citizen)
    retriever = CountingRetriever(memory, citizen, config=GRAPH_ONLY)
    assert ask(retriever, citizen, "What has Luca been working on?") == {"m1": "luca"}
    assert retriever.builds == 1
    _, index = cached_index(memory, citizen)

    memory.upsert([node(citizen, "marguerite", "Marguerite", "A neighbour", node_type="Person")],
                  [link("marguerite", "m2")])

    assert ask(retriever, citizen, "What did Marguerite plant?") == {"m2": "marguerite"}
    assert retriever.builds == 1  # the level's names were not read again
    version, followed = cached_index(memory, citizen)
    assert followed is index and version == memory.graph_version(memory.plans("N1", citizen).graph)
    assert sorted(followed) == stored_names(memory, citizen)  # exactly what a full rebuild would hold


def test_memories_and_entity_nodes_ingested_join_the_index_in_place(memory, citizen) -> None:
    seed(memory, citizen)
    retriever = CountingRetriever(memory, citizen, config=GRAPH_ONLY)
    ask(retriever, citizen, "What has Luca been working on?")
    _, index = cached_index(memory, citizen)

    report = memory.ingest([node(citizen, "trip", "Harbour trip", "Sailed to Vellmar Harbour with Ottoline Brisk")],
                           duplicates="off")
    assert report.inserted == 1 and report.entities >= 1  # the writer made entity nodes for the mentions

    version, followed = cached_index(memory, citizen)
    assert followed is index and version == memory.graph_version(memory.plans("N1", citizen).graph)
    names = stored_names(memory, citizen)
    assert sorted(followed) == names
    entity_ids = {node_id for node_id, _ in names} - {"luca", "m1", "m2", "trip"}
    assert entity_ids  # the entity nodes are in the index too
    hits = ask(retriever, citizen, "Tell me about Ottoline Brisk")
    assert hits.get("trip") in entity_ids  # walked from the entity node the ingestion created
    assert retriever.builds == 1


def test_a_renamed_memory_is_found_by_its_new_name_only(memory, citizen) -> None:
    seed(memory, citizen)
    memory.upsert([node(citizen, "proj", "Quillonworks", "A design review")], [link("proj", "m2")])
    retriever = CountingRetriever(memory, citizen, config=GRAPH_ONLY)
    assert ask(retriever, citizen, "What came of Quillonworks?")["m2"] == "proj"

    memory.upsert([node(citizen, "proj", "Brambleton", "A design review")])

    assert "proj" not in {m.entity_id for m in cached_index(memory, citizen)[1].match("Quillonworks")}
    assert "proj" not in ask(retriever, citizen, "What came of Quillonworks?").values()
    assert ask(retriever, citizen, "What came of Brambleton?")["m2"] == "proj"
    assert retriever.builds == 1
    assert sorted(cached_index(memory, citizen)[1]) == stored_names(memory, citizen)


def test_a_deleted_level_written_again_is_indexed_afresh(memory, citizen) -> None:
    seed(memory, citizen)
    retriever = CountingRetriever(memory, citizen, config=GRAPH_ONLY)
    ask(retriever, citizen, "What has Luca been working on?")
    graph = memory.plans("N1", citizen).graph
    try:
        memory.level("N1", citizen).delete()
        assert ask(retriever, citizen, "What has Luca been working on?") == {}
        assert graph not in memory.entity_index_cache  # the level was seen gone: its names went with it

        memory.upsert([node(citizen, "m9", "Lantern repair", "Fixed the porch lantern"),
                       node(citizen, "quinn", "Quinn", "A friend", node_type="Person")], [link("quinn", "m9")])
        assert ask(retriever, citizen, "What did Quinn fix?") == {"m9": "quinn"}
        assert ask(retriever, citizen, "What has Luca been working on?") == {}
        assert retriever.builds == 2
        assert sorted(cached_index(memory, citizen)[1]) == [("m9", "Lantern repair"), ("quinn", "Quinn")]
    finally:
        memory.level("N1", citizen).delete()


def test_a_write_whose_names_are_unknown_rebuilds_the_index(memory, citizen) -> None:
    seed(memory, citizen)
    retriever = CountingRetriever(memory, citizen, config=GRAPH_ONLY)
    ask(retriever, citizen, "What has Luca been working on?")
    _, index = cached_index(memory, citizen)
    memory.bump_graph(memory.plans("N1", citizen).graph)  # a write that did not say which names it wrote
    assert ask(retriever, citizen, "What has Luca been working on?") == {"m1": "luca"}
    assert retriever.builds == 2 and cached_index(memory, citizen)[1] is not index


class CountedId(str):
    """An entity id that counts how often it is compared for equality."""

    comparisons = 0

    def __eq__(self, other: object) -> bool:
        CountedId.comparisons += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_building_is_linear_when_many_memories_share_a_name() -> None:
    count = 5000
    pairs = [(CountedId(f"m{i}"), "Session notes") for i in range(count)]
    CountedId.comparisons = 0
    index = EntityIndex(pairs)
    # Testing each new pair against those already under the key compares ids count**2 / 2 times (12.5M here).
    assert CountedId.comparisons <= count
    assert len(index) == count and len(index.exact("session note")) == count
    assert index.match("Session notes", limit=2) == [("m0", "Session notes", 1.0), ("m1", "Session notes", 1.0)]


def test_assign_renames_and_drops_entities() -> None:
    index = EntityIndex([("a", "Luca"), ("b", "Luca"), ("c", "Falkor DB"), ("a", "person_Luca Rossi")])
    index.assign([("a", "Marguerite"), ("c", ""), ("d", "Ottoline")])
    assert sorted(index) == [("a", "Marguerite"), ("b", "Luca"), ("d", "Ottoline")]
    assert [m.entity_id for m in index.match("Luca")] == ["b"]
    assert index.match("Falkor DB") == [] and "FalkorDB" not in index
    assert index.best("Marguerite").entity_id == "a" and len(index) == 3
    index.assign([("a", "Marguerite")])  # again: nothing changes
    assert len(index) == 3 and index.exact("marguerite") == [("a", "Marguerite")]


def test_readers_never_see_half_of_a_write() -> None:
    index = EntityIndex([(f"old{i}", "Session notes") for i in range(100)])
    seen: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        try:
            while not done.is_set():
                seen.append(len(index.exact("Session notes")))
                index.match("Sesion notes", limit=3)
        except BaseException as exc:  # reported below
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(3)]
    for thread in readers:
        thread.start()
    try:
        for write in range(50):
            index.assign([(f"new{write}_{i}", "Session notes") for i in range(100)])
    finally:
        done.set()
        for thread in readers:
            thread.join()
    assert not errors
    assert seen and all(size % 100 == 0 for size in seen)  # every write seen whole or not at all
    assert len(index.exact("Session notes")) == 5100
