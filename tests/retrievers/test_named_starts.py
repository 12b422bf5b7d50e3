"""The graph channel starts from the memories a question names, found in the on-disk name index.

The names live in the keyword index's documents (``KeywordIndex.match_name``),
kept current from the graph's change log: a memory written a moment ago, by
this memory object or another process, is named on the next retrieval; a
citizen's first question in a fresh process reads no names at all.  Tested on
the real embedded servers, without timing anything; the fuzzy matching is
checked against ``EntityIndex``, whose semantics it keeps.
"""

from __future__ import annotations

import random
import threading

from llama_consciousness import ConsciousnessMemory
from llama_consciousness.retrievers.config import RetrievalConfig
from llama_consciousness.retrievers.six_way import SixWayHybridRetriever
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode, RetrievalIntention
from llama_consciousness.scoring.names import EntityIndex, name_similarity
from llama_consciousness.storage import level_store
from llama_consciousness.storage.keyword_index import KeywordIndex

GRAPH_ONLY = RetrievalConfig(channels=("graph",), neighbour_expansion=0, fallback_start=0)  # named starts only


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
    return sorted(store.run(_names()))


def _names():
    rows = yield level_store.Query(f"MATCH (n:{level_store.NODE_LABEL}) RETURN n.node_id, n.name", read_only=True)
    return [(r[0], r[1]) for r in rows if r[1]]


def test_a_memory_upserted_is_a_graph_start_on_the_next_retrieval(memory, citizen) -> None:
    seed(memory, citizen)
    retriever = SixWayHybridRetriever(memory, citizen, config=GRAPH_ONLY)
    assert ask(retriever, citizen, "What has Luca been working on?") == {"m1": "luca"}

    memory.upsert([node(citizen, "marguerite", "Marguerite", "A neighbour", node_type="Person")],
                  [link("marguerite", "m2")])

    assert ask(retriever, citizen, "What did Marguerite plant?") == {"m2": "marguerite"}


def test_memories_and_entity_nodes_ingested_are_named(memory, citizen) -> None:
    seed(memory, citizen)
    retriever = SixWayHybridRetriever(memory, citizen, config=GRAPH_ONLY)
    ask(retriever, citizen, "What has Luca been working on?")

    report = memory.ingest([node(citizen, "trip", "Harbour trip", "Sailed to Vellmar Harbour with Ottoline Brisk")],
                           duplicates="off")
    assert report.inserted == 1 and report.entities >= 1  # the writer made entity nodes for the mentions

    entity_ids = {node_id for node_id, _ in stored_names(memory, citizen)} - {"luca", "m1", "m2", "trip"}
    assert entity_ids
    hits = ask(retriever, citizen, "Tell me about Ottoline Brisk")
    assert hits.get("trip") in entity_ids  # walked from the entity node the ingestion created


def test_a_renamed_memory_is_found_by_its_new_name_only(memory, citizen) -> None:
    seed(memory, citizen)
    memory.upsert([node(citizen, "proj", "Quillonworks", "A design review")], [link("proj", "m2")])
    retriever = SixWayHybridRetriever(memory, citizen, config=GRAPH_ONLY)
    assert ask(retriever, citizen, "What came of Quillonworks?")["m2"] == "proj"
    memory.keyword_indexes.get(memory.plans("N1", citizen).graph).flush()  # the old name committed to disk

    memory.upsert([node(citizen, "proj", "Brambleton", "A design review")])

    assert "proj" not in ask(retriever, citizen, "What came of Quillonworks?").values()
    assert ask(retriever, citizen, "What came of Brambleton?")["m2"] == "proj"
    memory.keyword_indexes.get(memory.plans("N1", citizen).graph).flush()  # and the new one
    assert "proj" not in ask(retriever, citizen, "What came of Quillonworks?").values()
    assert ask(retriever, citizen, "What came of Brambleton?")["m2"] == "proj"


def test_a_deleted_level_written_again_is_named_afresh(memory, citizen) -> None:
    seed(memory, citizen)
    retriever = SixWayHybridRetriever(memory, citizen, config=GRAPH_ONLY)
    ask(retriever, citizen, "What has Luca been working on?")
    try:
        memory.level("N1", citizen).delete()
        assert ask(retriever, citizen, "What has Luca been working on?") == {}

        memory.upsert([node(citizen, "m9", "Lantern repair", "Fixed the porch lantern"),
                       node(citizen, "quinn", "Quinn", "A friend", node_type="Person")], [link("quinn", "m9")])
        assert ask(retriever, citizen, "What did Quinn fix?") == {"m9": "quinn"}
        assert ask(retriever, citizen, "What has Luca been working on?") == {}
    finally:
        memory.level("N1", citizen).delete()


def test_another_memory_objects_writes_are_named_at_once_and_a_reopen_reads_no_names(memory, citizen) -> None:
    seed(memory, citizen)
    with ConsciousnessMemory(falkordb_url=memory._falkordb_server.url) as other:  # its own keyword indexes
        retriever = SixWayHybridRetriever(other, citizen, config=GRAPH_ONLY)
        assert ask(retriever, citizen, "What has Luca been working on?") == {"m1": "luca"}
        memory.upsert([node(citizen, "quinn", "Quinn", "A friend", node_type="Person")], [link("quinn", "m2")])
        assert ask(retriever, citizen, "What did Quinn plant?") == {"m2": "quinn"}  # no TTL to wait out

    ask(SixWayHybridRetriever(memory, citizen, config=GRAPH_ONLY), citizen, "What did Quinn plant?")
    graph = memory.plans("N1", citizen).graph
    assert memory.keyword_indexes.get(graph).flush()  # what close() leaves on disk
    # a process opening the directory afterwards finds the names there: nothing to catch up on, none to read
    reopened = KeywordIndex(memory.keyword_indexes.directory(graph))
    store = memory.level("N1", citizen)
    (epoch, head), = store.run(_change_log())
    assert reopened.behind(epoch, head) is None
    assert [m.entity_id for m in reopened.match_name("Quinn")] == ["quinn"]


def _change_log():
    rows = yield level_store.Query(f"MATCH (m:{level_store.CHANGES_LABEL}) RETURN m.epoch, m.seq", read_only=True)
    return [(rows[0][0], int(rows[0][1]))]


def test_the_on_disk_names_match_as_entity_index_does(tmp_path) -> None:
    """Random names, committed and pending, fuzzy and exact: ``match_name`` finds every match
    ``EntityIndex.match`` finds over the same names, at several thresholds, with the same scores, best first;
    anything more it finds (a word-order blend that ``EntityIndex`` finds only through shared rare trigrams)
    reaches the threshold too."""
    rng = random.Random(7)
    words = ["luca", "falkor", "db", "phoenix", "project", "garden", "notes", "session", "marguerite", "quill",
             "brisk", "harbour", "rossi", "lantern", "plans", "review"]

    def name() -> str:
        picked = " ".join(rng.choice(words) for _ in range(rng.randint(1, 3)))
        if rng.random() < 0.3:  # a typo
            i = rng.randrange(len(picked))
            picked = picked[:i] + rng.choice("aeioxz") + picked[i + 1:]
        return picked.title() if rng.random() < 0.5 else picked

    names = [(f"m{i}", name()) for i in range(400)]
    index = KeywordIndex(tmp_path / "kw")
    index.behind("epoch", len(names))
    kinds = ["Person", "Memory", "Tool"]
    rows = [(node_id, i, text, "", i + 1, kinds[i % 3]) for i, (node_id, text) in enumerate(names)]
    index.apply("epoch", rows[:300], 300)
    assert index.flush()
    index.apply("epoch", rows[300:], 400)
    reference = EntityIndex(names)
    people = EntityIndex((node_id, text) for i, (node_id, text) in enumerate(names) if i % 3 != 1)
    for _ in range(120):
        asked = name()
        for threshold in (0.5, 0.7, 0.85):
            found = index.match_name(asked, threshold)
            assert set(reference.match(asked, threshold)) <= set(found), (asked, threshold)
            assert all(m.score == name_similarity(asked, m.name) >= threshold for m in found)
            assert [m.score for m in found] == sorted((m.score for m in found), reverse=True)
            assert index.match_name(asked, threshold, 2) == found[:2]
            typed = index.match_name(asked, threshold, types=["Person", "Tool"])  # committed and pending alike
            assert set(people.match(asked, threshold)) <= set(typed) and set(typed) <= set(found)
            assert not {m.entity_id for m in typed} & {f"m{i}" for i in range(1, 400, 3)}


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
