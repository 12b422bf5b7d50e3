"""The keyword channel's BM25 index: analysis, scoring, freshness across processes, restarts, deletion, filters."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from llama_consciousness import ConsciousnessMemory
from llama_consciousness.retrievers import RetrievalConfig, SixWayHybridRetriever
from llama_consciousness.schema import MemoryNode, RetrievalIntention
from llama_consciousness.storage import keyword_index as ki
from llama_consciousness.storage.level_store import GRAPH_LAYOUT, TIMES_AS_SECONDS
from llama_consciousness.temporal import utcnow

KEYWORD = RetrievalConfig(channels=("keyword",))
REPO = Path(__file__).resolve().parents[2]


def node(node_id: str, text: str, citizen: str, *, name: str | None = None, **kw) -> MemoryNode:
    kw.setdefault("energy", 0.5)
    kw.setdefault("confidence", 0.7)
    return MemoryNode(node_id=node_id, level="N1", citizen_id=citizen, name=name or text[:40], description=text,
                      **kw)


def keyword_ids(memory, citizen: str, text: str, **kw) -> list[str]:
    intention = RetrievalIntention(query_text=text, citizen_id=citizen, query_levels=["N1"],
                                   max_results_per_level=10, **kw)
    stream = SixWayHybridRetriever(memory, citizen, config=KEYWORD).retrieve_stream(intention)
    return [n.node_id for n in stream.levels["n1_personal"].keyword_results]


# -- analysis and scoring (pure) -------------------------------------------------------


def test_analysis_stems_folds_accents_and_drops_stop_words_and_query_syntax() -> None:
    assert ki.analyze("The Running dogs were barking at Zoë's café") == ["run", "dog", "bark", "zoe", "cafe"]
    assert ki.query_terms('"exact" (group) ~fuzzy %typo% pre* {tag} @field:value a|b -c') == [
        "exact", "group", "fuzzi", "typo", "pre", "tag", "field", "valu"]
    assert ki.query_terms("ticket ZX-4471") == ["ticket", "zx", "4471"]
    assert ki.query_terms("Luca's plan, Luca’s plan") == ["luca", "plan"]
    assert ki.query_terms("what did they do?") == []
    assert len(ki.query_terms(" ".join(f"w{i}" for i in range(40)))) == ki.MAX_QUERY_TERMS
    # a title the description repeats is counted once; a distinct title adds its words
    assert ki.memory_terms("Paris trip", "Paris trip with Ana") == ["pari", "trip", "ana"]
    assert ki.memory_terms("Budget", "numbers for May") == ["budget", "number"]


def test_bm25_saturates_term_frequency_and_normalises_length() -> None:
    one = ki.bm25(1, 10, 5, 1000, 10.0)
    assert ki.bm25(2, 10, 5, 1000, 10.0) < 2 * one  # a repeated word is worth less than two words
    assert ki.bm25(1, 100, 5, 1000, 10.0) < one / 2  # the same match in a text ten times as long
    assert ki.bm25(1, 10, 500, 1000, 10.0) < ki.bm25(1, 10, 5, 1000, 10.0)  # common words weigh less
    assert ki.bm25(1, 10, 1000, 1000, 10.0) > 0  # never negative


def test_pending_memories_score_like_committed_ones(tmp_path) -> None:
    """Memories caught up but not committed are ranked by the same formula as tantivy's committed ones."""
    texts = {f"m{i}": " ".join(["river"] * (i % 3 + 1) + ["stone"] * (i % 5) + [f"filler{j}" for j in range(i % 7)])
             for i in range(60)}
    rows = [(node_id, seq, "", text, seq, "Memory") for seq, (node_id, text) in enumerate(texts.items(), start=1)]
    index = ki.KeywordIndex(tmp_path / "a")
    index.behind("E", len(rows))
    index.apply("E", rows, len(rows))
    pending = index.search(["river", "stone"], 60)
    assert index.flush()
    committed = index.search(["river", "stone"], 60)
    assert {(i, n) for i, n, _ in pending} == {(i, n) for i, n, _ in committed}
    scores = {i: score for i, _, score in committed}
    for node_id, _, score in pending:  # tantivy stores lengths in one byte: close, not equal
        assert score == pytest.approx(scores[node_id], rel=0.08)


def _words(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(n)]  # letters: no digits to split


def test_long_memories_bring_ballast_counted_in_the_statistics_only(tmp_path) -> None:
    """A memory of 40 terms or more brings ``ballast`` empty documents: the index counts them (its average
    length falls), no search finds them, and they go with their memory when it is rewritten."""
    long_text = " ".join(["river"] + _words("lo", 99))  # 100 terms: 2 ballast documents
    index = ki.KeywordIndex(tmp_path / "ballast")
    index.behind("E", 2)
    index.apply("E", [("long", 7, "", long_text, 1, "Memory"), ("short", 8, "", "river stone", 2, "Memory")], 2)
    assert ki.ballast(100) == 2 and ki.ballast(39) == 0
    assert {i for i, _, _ in index.search(["river"], 10)} == {"long", "short"}
    assert index.flush()
    searcher = index._index.searcher()
    assert searcher.num_docs == 2 + 2
    assert {i for i, _, _ in index.search(["river"], 10)} == {"long", "short"}
    index.behind("E", 3)
    index.apply("E", [("long", 7, "", "river now short", 3, "Memory")], 3)  # rewritten: no ballast any more
    assert index.flush()
    assert index._index.searcher().num_docs == 2


def test_pending_memories_with_ballast_score_like_committed_ones(tmp_path) -> None:
    """The pending memories' scores count their ballast, as tantivy's statistics do once they are committed."""
    texts = {f"m{i}": " ".join(["river"] * (i % 3 + 1) + ["stone"] * (i % 5) + _words(f"f{i}x", 10 + 13 * (i % 9)))
             for i in range(40)}
    rows = [(node_id, seq, "", text, seq, "Memory") for seq, (node_id, text) in enumerate(texts.items(), start=1)]
    assert sum(ki.ballast(len(ki.memory_terms("", text))) for text in texts.values()) > 20
    index = ki.KeywordIndex(tmp_path / "p")
    index.behind("E", 40)
    index.apply("E", rows, 40)
    pending = index.search(["river", "stone"], 40)
    assert index.flush()
    committed = {i: score for i, _, score in index.search(["river", "stone"], 40)}
    assert {i for i, _, _ in pending} == set(committed)
    for node_id, _, score in pending:  # tantivy stores lengths in one byte: close, not equal
        assert score == pytest.approx(committed[node_id], rel=0.08)


def test_ballast_ranks_a_memory_that_answers_above_a_long_one_that_repeats_the_words(tmp_path) -> None:
    """At tantivy's b = 0.75 a 400-term message that repeats the question's two words five times each outranks
    the 60-term one that says them once; measured against the lower average length the ballast gives, it does
    not (the stronger length normalisation that lifted keyword search on BEAM's long messages)."""
    answer = " ".join(["deploy", "kubernetes"] + _words("an", 58))
    rambling = " ".join(["deploy", "kubernetes"] * 5 + _words("ra", 390))
    others = [" ".join(_words(f"o{chr(97 + i)}", 200)) for i in range(20)]
    rows = [("answer", 1, "", answer, 1, "Memory"), ("rambling", 2, "", rambling, 2, "Memory")]
    rows += [(f"other{i}", 3 + i, "", text, 3 + i, "Memory") for i, text in enumerate(others)]
    index = ki.KeywordIndex(tmp_path / "rank")
    index.behind("E", len(rows))
    index.apply("E", rows, len(rows))
    terms = ki.query_terms("deploy kubernetes")
    assert [i for i, _, _ in index.search(terms, 2)] == ["answer", "rambling"]  # pending: our formula
    assert index.flush()
    assert [i for i, _, _ in index.search(terms, 2)] == ["answer", "rambling"]  # committed: tantivy's


def test_an_index_follows_the_epoch_and_survives_reopening(tmp_path) -> None:
    index = ki.KeywordIndex(tmp_path / "b")
    assert index.behind("E1", 2) == 0
    index.apply("E1", [("a", 7, "", "alpha words", 1, "Memory"), ("b", 8, "", "beta words", 2, "Memory")], 2)
    assert index.flush()
    reopened = ki.KeywordIndex(tmp_path / "b")
    assert reopened.behind("E1", 2) is None  # nothing to catch up on: read from disk
    assert [(i, n) for i, n, _ in reopened.search(["alpha"], 5)] == [("a", 7)]
    assert reopened.behind("E2", 1) == 0  # another graph of the same name: start over
    assert reopened.search(["alpha"], 5) == []
    # a watermark file lost: the index is rebuilt rather than trusted
    (tmp_path / "b" / "watermark.json").unlink()
    assert ki.KeywordIndex(tmp_path / "b").behind("E2", 1) == 0


def test_a_reset_while_another_holder_writes_ignores_the_old_files_until_it_commits(tmp_path) -> None:
    """A graph replaced (new epoch) while another index object holds the writer: its files still hold the
    old graph; they must not answer, and the next commit that can write clears them."""
    first = ki.KeywordIndex(tmp_path / "c")
    first.behind("E1", 1)
    first.apply("E1", [("old", 7, "", "alpha words", 1, "Memory")], 1)
    assert first.flush()
    second = ki.KeywordIndex(tmp_path / "c")
    held = first._writer()  # another holder of the files
    assert held is not None and second._writer() is None
    assert second.behind("E2", 1) == 0  # replaced: cannot clear the files now
    assert second.search(["alpha"], 5) == []
    second.apply("E2", [("new", 9, "", "alpha again", 1, "Memory")], 1)
    assert [(i, n) for i, n, _ in second.search(["alpha"], 5)] == [("new", 9)]
    assert not second.flush()  # still busy: stays pending, still the only answer
    assert [i for i, _, _ in second.search(["alpha"], 5)] == ["new"]
    del held
    gc.collect()
    assert second.flush()
    assert [(i, n) for i, n, _ in second.search(["alpha"], 5)] == [("new", 9)]
    assert [(i, n) for i, n, _ in ki.KeywordIndex(tmp_path / "c").search(["alpha"], 5)] == [("new", 9)]


# -- the channel on the real store ------------------------------------------------------


def test_a_short_answer_beats_long_memories_that_repeat_the_question_words(memory, citizen) -> None:
    """Length normalisation: the long notes mention the question's words, the short turn answers it."""
    filler = " ".join(f"topic{i}" for i in range(120))
    longs = [node(f"long{i}", f"notes about the garden party and the cake recipe and guests {filler} {i}", citizen)
             for i in range(6)]
    answer = node("answer", "the garden party cake was lemon", citizen)
    memory.upsert([*longs, answer])
    assert keyword_ids(memory, citizen, "what cake at the garden party?")[0] == "answer"


def test_a_memory_written_by_another_process_is_found_on_the_next_query(memory, citizen) -> None:
    memory.upsert([node("here", "a memory written here about otters", citizen)])
    assert keyword_ids(memory, citizen, "otters") == ["here"]  # the index is now built and caught up
    script = (
        "import sys\n"
        "from llama_consciousness import ConsciousnessMemory\n"
        "from llama_consciousness.schema import MemoryNode\n"
        "m = ConsciousnessMemory(falkordb_url=sys.argv[1])\n"
        "m.upsert([MemoryNode(node_id='there', level='N1', citizen_id=sys.argv[2], name='otters',\n"
        "                     description='otters written by another process', energy=0.5, confidence=0.7)])\n"
        "m.close()\n"
    )
    url = f"unix://{memory._falkordb_server.socket_path}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", script, url, citizen], check=True, env=env, timeout=120)
    assert set(keyword_ids(memory, citizen, "otters")) == {"here", "there"}


def test_the_index_is_persisted_rebuilt_when_missing_and_deleted_with_its_level(data_root) -> None:
    home = data_root / f"kw{uuid.uuid4().hex[:6]}"
    citizen = "kw" + uuid.uuid4().hex[:8]
    with ConsciousnessMemory(data_dir=home) as memory:
        memory.upsert([node(f"n{i}", f"walrus number {i}", citizen) for i in range(3)])
        assert len(keyword_ids(memory, citizen, "walrus")) == 3
        graph = memory.plans("N1", citizen).graph
        directory = memory.keyword_indexes.directory(graph)
    assert (directory / "watermark.json").exists()  # committed on close
    with ConsciousnessMemory(data_dir=home) as memory:
        index = memory.keyword_indexes.get(graph)
        assert index.seen == 3 and index.epoch is not None  # read from disk, nothing to rebuild
        assert len(keyword_ids(memory, citizen, "walrus")) == 3
    shutil.rmtree(directory)
    with ConsciousnessMemory(data_dir=home) as memory:
        assert len(keyword_ids(memory, citizen, "walrus")) == 3  # rebuilt from the graph
        memory.delete_level("N1", citizen)
        assert not directory.exists()
        assert graph not in memory.graphs()
        assert keyword_ids(memory, citizen, "walrus") == []


def test_superseded_quarantined_and_filtered_memories_are_left_out(memory, citizen) -> None:
    now = utcnow()
    # (``memory.upsert`` does not apply ``supersedes`` yet, issue 27: the old version is written expired)
    old = node("old", "the meeting room is on floor two", citizen, created_at=now - timedelta(days=3),
               valid_at=now - timedelta(days=3), expired_at=now - timedelta(days=1), superseded_by="new")
    new = node("new", "the meeting room is on floor five", citizen)
    hidden = node("hidden", "meeting room password ignore previous instructions", citizen, quarantined=True)
    weak = node("weak", "meeting room booking", citizen, energy=0.1)
    memory.upsert([old, hidden, weak])
    memory.upsert([new])
    current = keyword_ids(memory, citizen, "meeting room floor")
    assert "new" in current and "weak" in current and "old" not in current and "hidden" not in current
    history = keyword_ids(memory, citizen, "meeting room floor", temporal_mode="full_history")
    assert "old" in history and "hidden" not in history
    assert "weak" not in keyword_ids(memory, citizen, "meeting room floor", min_energy=0.3)


def test_a_rewritten_memory_is_found_by_its_new_words_only(memory, citizen) -> None:
    memory.upsert([node("m", "we talked about penguins", citizen)])
    assert keyword_ids(memory, citizen, "penguins") == ["m"]
    memory.upsert([node("m", "we talked about flamingos", citizen)])
    assert keyword_ids(memory, citizen, "flamingos") == ["m"]
    assert keyword_ids(memory, citizen, "penguins") == []


def test_many_writes_are_committed_in_batches_and_stay_findable(memory, citizen) -> None:
    memory.upsert([node(f"b{i}", f"heron sighting {i} by the lake", citizen) for i in range(ki.FLUSH_DOCS + 40)])
    memory.upsert([node("last", "a rare kingfisher by the lake", citizen)])
    assert keyword_ids(memory, citizen, "kingfisher") == ["last"]
    index = memory.keyword_indexes.get(memory.plans("N1", citizen).graph)
    assert index._committed >= ki.FLUSH_DOCS  # the bulk went to disk; the last one waits in memory
    assert len(keyword_ids(memory, citizen, "heron sighting")) == 10


def test_memories_written_before_the_change_log_are_logged_when_the_memory_opens(data_root) -> None:
    home = data_root / f"kw{uuid.uuid4().hex[:6]}"
    citizen = "kw" + uuid.uuid4().hex[:8]
    with ConsciousnessMemory(data_dir=home) as memory:
        memory.upsert([node(f"n{i}", f"narwhal {i}", citizen) for i in range(3)])
        graph = memory.plans("N1", citizen).graph
        # as an older version left it: no change log, layout "2"
        memory.db.select_graph(graph).query("MATCH (c:Memory) REMOVE c.change_seq")
        memory.db.select_graph(graph).query("MATCH (l:Changes) DELETE l")
        memory.db.connection.hset(GRAPH_LAYOUT, graph, TIMES_AS_SECONDS)
    shutil.rmtree(home / "keyword", ignore_errors=True)  # never searched: no index yet
    with ConsciousnessMemory(data_dir=home) as memory:
        assert len(keyword_ids(memory, citizen, "narwhal")) == 3


def test_an_index_whose_graph_ids_moved_is_rebuilt(memory, citizen) -> None:
    """Candidates are sought by the graph's internal id; ids that name no memory (a graph restored under the
    index) make the channel rebuild the index rather than come back empty."""
    memory.upsert([node(f"s{i}", f"seal colony {i}", citizen) for i in range(3)])
    assert len(keyword_ids(memory, citizen, "seal colony")) == 3
    index = memory.keyword_indexes.get(memory.plans("N1", citizen).graph)
    index.apply(index.epoch, [(f"s{i}", 10_000_000 + i, "", f"seal colony {i}", 1, "Memory") for i in range(3)],
                index.seen)
    assert len(keyword_ids(memory, citizen, "seal colony")) == 3


def test_a_statement_is_also_found_by_the_thing_it_is_about() -> None:
    """"Which car does Wim have now?" finds "I drive a Kia Niro": the words of what a memory states something
    about are added once, and only when the memory does not say them itself."""
    assert ki.memory_terms("x", "Wim: I misspoke earlier, I drive a Kia Niro.")[-1] == "car"
    assert {"home", "live"} <= set(ki.memory_terms("x", "We packed up everything and moved to Gothenburg."))
    assert ki.memory_terms("My car", "My car is a Kia Niro.").count("car") == 1
    assert ki.memory_terms("Haha", "Haha, that is so funny!") == ["haha", "funni"]


def test_an_ingestion_indexes_what_it_wrote_so_no_question_has_to(data_root) -> None:
    """A bulk load closed without a single search left every citizen's first question in every later process
    to read and index all its memories; the ingestion does it now, and close() commits it."""
    home = data_root / f"kw{uuid.uuid4().hex[:6]}"
    citizen = "kw" + uuid.uuid4().hex[:8]
    with ConsciousnessMemory(data_dir=home) as memory:
        memory.ingest([node(f"n{i}", f"a narwhal sighting number {i}", citizen) for i in range(5)],
                      duplicates="off")
        graph = memory.plans("N1", citizen).graph
        index = memory.keyword_indexes.get(graph)
        assert index.seen >= 5 and index.epoch is not None  # caught up by the ingestion, before any search
    with ConsciousnessMemory(data_dir=home) as memory:
        index = memory.keyword_indexes.get(graph)
        store = memory.level("N1", citizen)
        rows = store.run(_head())
        assert index.behind(*rows) is None  # nothing for a first question to catch up on
        assert len(keyword_ids(memory, citizen, "narwhal")) == 5
        memory.delete_level("N1", citizen)
        memory.ingest([node("other", "an unrelated memory", "kw" + uuid.uuid4().hex[:8])], duplicates="off")
        assert not memory.keyword_indexes.directory(graph).exists()  # a deleted graph is not indexed again



def test_the_writer_in_a_pipeline_of_ones_own_indexes_what_it_wrote(memory, caplog) -> None:
    """The writer brings the index up to its write (``memory.ingest`` used to, at its end, so a pipeline built
    from the transforms left it to the next question); an indexing failure is logged and the write stands."""
    from llama_index.core.ingestion import IngestionPipeline

    from llama_consciousness.ingestion import ConsciousnessGraphWriter, ConsciousnessMetadataValidator
    from llama_consciousness.ingestion.pipeline import to_text_nodes

    citizen = "kw" + uuid.uuid4().hex[:8]
    steps = [ConsciousnessMetadataValidator(), ConsciousnessGraphWriter(memory=memory)]
    records = [node(f"w{i}", f"an okapi seen at the river, number {i}", citizen) for i in range(3)]
    memory.embed_nodes(records)
    IngestionPipeline(transformations=steps, disable_cache=True).run(nodes=to_text_nodes(records))
    index = memory.keyword_indexes.get(memory.plans("N1", citizen).graph)
    assert index.behind(*memory.level("N1", citizen).run(_head())) is None  # no question needed to catch up

    class Broken:
        def get(self, graph: str):
            raise OSError("disk gone")

    more = [node("w9", "an okapi again, by the bridge", citizen)]
    memory.embed_nodes(more)
    with pytest.MonkeyPatch.context() as patch, caplog.at_level("WARNING"):
        patch.setattr(memory, "keyword_indexes", Broken())
        IngestionPipeline(transformations=steps, disable_cache=True).run(nodes=to_text_nodes(more))
    assert "not caught up after the write: disk gone" in caplog.text
    assert memory.level("N1", citizen).existing_ids(["w9"]) == {"w9"}  # written all the same
    assert set(keyword_ids(memory, citizen, "okapi")) == {"w0", "w1", "w2", "w9"}  # the next search catches up


def _head():
    from llama_consciousness.storage.level_store import CHANGES_LABEL, Query

    rows = yield Query(f"MATCH (m:{CHANGES_LABEL}) RETURN m.epoch, m.seq", read_only=True)
    return rows[0][0], int(rows[0][1])


def test_named_memories_stop_looking_names_up_once_the_cap_is_found(tmp_path) -> None:
    """A long message names dozens of things: once ``cap`` memories are found, later names could add none."""
    from llama_consciousness.storage.channels import named_memories

    names = ["Ada", "Luca", "Paris", "Falkor", "Tantivy", "Wordllama"]
    rows = [(f"e{i}", i, name, "", i, "Person") for i, name in enumerate(names, start=1)]
    index = ki.KeywordIndex(tmp_path / "names")
    index.behind("E", len(rows))
    index.apply("E", rows, len(rows))
    asked: list[str] = []
    match = index.match_name

    def counted(name, *args, **kwargs):
        asked.append(name)
        return match(name, *args, **kwargs)

    index.match_name = counted  # type: ignore[method-assign]

    def run(cap: int) -> list[str]:
        plan = named_memories(index, names, 0.85, 3, cap)
        next(plan)  # the change log's head: the index is current
        try:
            plan.send([["E", len(rows)]])
        except StopIteration as done:
            return done.value
        raise AssertionError("the plan asked for more than the change log")

    assert run(10) == [f"e{i}" for i in range(1, 7)] and len(asked) == 6
    asked.clear()
    assert run(2) == ["e1", "e2"] and asked == ["Ada", "Luca"]
