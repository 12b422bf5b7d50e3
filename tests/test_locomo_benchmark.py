"""The LoCoMo benchmark's pure helpers, its loader, and a small end-to-end slice on the real store."""

from __future__ import annotations

import math
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

import locomo_data as ld  # noqa: E402


# -- evidence ids --------------------------------------------------------------------


@pytest.mark.parametrize("raw, expected", [
    ("D1:3", "D1:3"),
    ("D:11:26", "D11:26"),
    ("D30:05", "D30:5"),
    ("D", None),
    ("", None),
    (" D2:8 ", "D2:8"),
    ("x", None),
])
def test_normalize_dia_id(raw, expected):
    assert ld.normalize_dia_id(raw) == expected


def test_normalize_evidence_splits_and_dedupes():
    assert ld.normalize_evidence(["D8:6; D9:17"]) == ["D8:6", "D9:17"]
    assert ld.normalize_evidence(["D9:1 D4:4 D4:6", "D4:4"]) == ["D9:1", "D4:4", "D4:6"]
    assert ld.normalize_evidence(["D", "D:11:26", "D30:05"]) == ["D11:26", "D30:5"]
    assert ld.normalize_evidence([]) == []


def test_ids_and_sessions():
    assert ld.session_of("D11:26") == 11
    with pytest.raises(ValueError):
        ld.session_of("D")
    assert ld.turn_node_id("conv-26", "D1:3") == "conv-26:D1:3"
    assert ld.dia_of_node_id("conv-26:D1:3") == "D1:3"
    assert ld.dia_of_node_id("N1:conv-26:D1:3") == "D1:3"
    assert ld.citizen_for("conv-26") == "locomo-conv-26"
    assert ld.citizen_for("a b/c", "") == "a_b_c"


def test_parse_session_date():
    assert ld.parse_session_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    assert ld.parse_session_date("12:09 am on 13 September, 2023") == datetime(2023, 9, 13, 0, 9, tzinfo=timezone.utc)
    assert ld.parse_session_date("12:30 pm on 1 January, 2022").hour == 12
    with pytest.raises(ValueError):
        ld.parse_session_date("yesterday")


# -- metrics -------------------------------------------------------------------------


def test_recall_hit_and_session_recall():
    ranked = ["D1:1", "D1:2", "D2:5", "D1:1", "D3:1"]
    gold = ["D1:2", "D3:1", "D4:4"]
    assert ld.recall_at_k(ranked, gold, 1) == 0.0
    assert ld.recall_at_k(ranked, gold, 2) == pytest.approx(1 / 3)
    # duplicates do not take a rank: D3:1 is 4th after deduplication
    assert ld.recall_at_k(ranked, gold, 4) == pytest.approx(2 / 3)
    assert ld.hit_at_k(ranked, gold, 1) == 0.0
    assert ld.hit_at_k(ranked, gold, 2) == 1.0
    # sessions: gold {1, 3, 4}; top 2 -> {1}; top 4 -> {1, 2, 3}
    assert ld.session_recall_at_k(ranked, gold, 2) == pytest.approx(1 / 3)
    assert ld.session_recall_at_k(ranked, gold, 4) == pytest.approx(2 / 3)
    assert ld.recall_at_k(ranked, [], 10) == 0.0
    assert ld.session_recall_at_k([], gold, 10) == 0.0


def test_question_metrics_and_summary():
    m = ld.question_metrics(["D1:1", "D1:2"], ["D1:2"])
    assert m == {"R@5": 1.0, "R@10": 1.0, "R@20": 1.0, "Hit@10": 1.0, "SessR@10": 1.0}
    miss = ld.question_metrics(["D1:1"] + [f"D2:{i}" for i in range(30)], ["D9:9"])
    assert set(miss.values()) == {0.0}
    late = ld.question_metrics([f"D2:{i}" for i in range(12)] + ["D9:9"], ["D9:9"])
    assert (late["R@10"], late["R@20"], late["Hit@10"]) == (0.0, 1.0, 0.0)
    s = ld.summarise([(1, m), (2, miss), (5, m)])
    assert s["overall"]["n"] == 2 and s["overall"]["R@10"] == 0.5
    assert s["cat2"]["R@10"] == 0.0 and s["cat5"]["n"] == 1
    assert math.isnan(s["cat3"]["R@10"]) and s["cat3"]["n"] == 0


# -- loader on the real file -------------------------------------------------------------


@pytest.fixture(scope="module")
def conv26():
    assert ld.DEFAULT_DATA.exists(), f"LoCoMo data expected at {ld.DEFAULT_DATA}"
    return ld.load_conversations(ld.DEFAULT_DATA, ["conv-26"])[0]


def test_loader_turns_and_questions(conv26):
    turns = conv26.turns
    assert turns[0].dia_id == "D1:1" and turns[0].session == 1 and turns[0].index == 0
    assert turns[0].date == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    assert turns[0].description.startswith(f"{turns[0].speaker}: ")
    with_caption = [t for t in turns if t.caption]
    assert with_caption and "[shares a photo: " in with_caption[0].description
    assert len({t.node_id for t in turns}) == len(turns)
    # sessions in numeric order, record order inside a session
    assert [t.session for t in turns] == sorted(t.session for t in turns)
    assert {t.session for t in turns} == set(range(1, 20))  # dangling date keys 20-22 ignored
    qs = conv26.questions
    assert qs[0].gold == ("D1:3",) and qs[0].category == 2
    known = {t.dia_id for t in turns}
    assert all(g in known for q in qs for g in q.gold)


def test_turn_memories_shape(conv26):
    from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode

    turns = conv26.turns[:5]
    records = ld.turn_memories(turns, "locomo-test")
    nodes = [r for r in records if isinstance(r, MemoryNode)]
    rels = [r for r in records if isinstance(r, ConsciousnessRelationship)]
    assert [n.node_id for n in nodes] == [t.node_id for t in turns]
    assert all(n.level == "N1" and n.citizen_id == "locomo-test" for n in nodes)
    assert nodes[0].valid_at == nodes[0].created_at == turns[0].date
    assert nodes[2].description == turns[2].description
    assert [(r.source_id, r.target_id) for r in rels] == [(turns[i + 1].node_id, turns[i].node_id) for i in range(4)]
    assert {r.relation_type for r in rels} == {"FOLLOWS"}
    # no FOLLOWS across sessions
    border = [t for t in conv26.turns if t.session in (1, 2)]
    cross = ld.turn_memories(border, "locomo-test")
    assert len([r for r in cross if isinstance(r, ConsciousnessRelationship)]) == len(border) - 2


# -- a slice through the real store -----------------------------------------------------------


def test_ingest_and_retrieve_slice(memory, citizen, conv26):
    import locomo_quality as lq

    from llama_consciousness.retrievers.config import RetrievalConfig
    from llama_consciousness.schema import RetrievalIntention

    turns = [t for t in conv26.turns if t.session in (1, 2)][:40]
    conv = ld.Conversation(conv26.sample_id, turns, [q for q in conv26.questions
                                                      if q.gold and all(g in {t.dia_id for t in turns} for g in q.gold)])
    report = memory.ingest(ld.turn_memories(turns, citizen))
    assert report.inserted == len(turns) and not report.rejected
    n_sessions = len({t.session for t in turns})
    assert report.relationships_inserted == len(turns) - n_sessions  # FOLLOWS inside sessions
    ctx = lq.Context(conv, citizen, memory, [n for n in ld.turn_memories(turns, citizen) if hasattr(n, "node_type")])

    q = next(q for q in conv.questions if q.gold == ("D1:3",))  # the LGBTQ support group
    for ranker in (lq.six_way(None), lq.stock_vector(), lq.bm25(), lq.best_prototype(),
                   lq.six_way(RetrievalConfig(channels=("keyword",)), patch=lq.patch_keyword(avgdl=None))):
        ranked = ranker(ctx, q)
        assert ranked and all(r in {t.dia_id for t in turns} for r in ranked)
    assert "D1:3" in lq.best_prototype()(ctx, q)[:3]

    # point in time: before session 2 nothing of session 2 is visible
    s2 = min(t.date for t in turns if t.session == 2)
    retriever = memory.retriever(citizen, config=RetrievalConfig(channels=("vector", "keyword")))
    nodes = retriever.retrieve_intention(RetrievalIntention(
        query_text="Melanie painting", citizen_id=citizen, query_levels=["N1"], max_results_per_level=20,
        temporal_mode="point_in_time", as_of_time=s2 - timedelta(seconds=1)))
    got = {ld.dia_of_node_id(n.node.metadata["node_id"]) for n in nodes}
    assert got and all(ld.session_of(d) == 1 for d in got)

    pit = lq.point_in_time_check(None, [ctx], None)
    assert pit["checked"] == len(conv.questions) and pit["leaked"] == 0 and pit["late"] == 0


def test_idf_terms_and_neighbour_expansion(conv26):
    import locomo_quality as lq

    assert lq.idf_terms("When did Caroline go to the LGBTQ support group?") == ["caroline", "go", "lgbtq", "support", "group"]
    assert lq.idf_terms("What is it?") == []
    ctx = lq.Context(ld.Conversation("c", conv26.turns[:6]), "x", None)
    post = lq.expand_neighbours(top=2, keep=1)
    # D1:4 first, then neighbours of the top 2 (D1:4 -> D1:3, D1:5; D1:1 -> D1:2), then the rest
    assert post(ctx, ["D1:4", "D1:1", "D1:6"]) == ["D1:4", "D1:3", "D1:5", "D1:2", "D1:1", "D1:6"]
