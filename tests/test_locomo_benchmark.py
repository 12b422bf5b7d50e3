"""The LoCoMo benchmark's pure helpers, its loader, and a small end-to-end slice on the real store.

The loader and the slice read ``tests/fixtures/locomo_mini.json``: two invented
conversations in LoCoMo's JSON format (LoCoMo itself, CC BY-NC, is not in the
repository; the benchmark reads it in place with ``--data PATH``).
"""

from __future__ import annotations

import math
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "locomo_mini.json"
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


# -- loader on the fixture (LoCoMo's format, invented conversations) ---------------------


@pytest.fixture(scope="module")
def mini1():
    return ld.load_conversations(FIXTURE, ["mini-1"])[0]


@pytest.fixture(scope="module")
def mini2():
    return ld.load_conversations(FIXTURE, ["mini-2"])[0]


def test_loader_selects_conversations():
    assert [c.sample_id for c in ld.load_conversations(FIXTURE)] == ["mini-1", "mini-2"]
    # by sample id or by 0-based index given as a string
    assert [c.sample_id for c in ld.load_conversations(FIXTURE, ["1"])] == ["mini-2"]
    assert [c.sample_id for c in ld.load_conversations(FIXTURE, ["mini-2", "0"])] == ["mini-1", "mini-2"]
    assert ld.load_conversations(FIXTURE, ["conv-26"]) == []


def test_loader_turns_and_questions(mini1):
    turns = mini1.turns
    assert len(turns) == 21
    assert turns[0].dia_id == "D1:1" and turns[0].session == 1 and turns[0].index == 0
    assert turns[0].speaker == "Priya" and turns[0].description == "Priya: Hey Tomas! It's been ages. How have you been?"
    assert turns[0].date == datetime(2023, 3, 3, 10, 15, tzinfo=timezone.utc)
    # 12:05 am is five past midnight
    assert turns[-1].date == datetime(2023, 4, 2, 0, 5, tzinfo=timezone.utc) and turns[-1].dia_id == "D3:6"
    assert turns[7].index == 7 and turns[8].dia_id == "D2:1" and turns[8].index == 0
    # photos: with img_url and query, with re-download, and a caption without img_url
    with_caption = {t.dia_id: t for t in turns if t.caption}
    assert set(with_caption) == {"D1:5", "D2:4", "D3:3"}
    assert with_caption["D1:5"].description == ("Priya: Just a wobbly bowl, but I loved getting my hands in the clay."
                                                " [shares a photo: a photo of a lopsided clay bowl on a wooden table]")
    assert "[shares a photo: a photo of a yellow tram" in with_caption["D3:3"].description
    assert all("[shares a photo" not in t.description for t in turns if not t.caption)
    assert len({t.node_id for t in turns}) == len(turns)
    assert {t.session for t in turns} == {1, 2, 3}  # dangling date keys 4-5 ignored
    qs = mini1.questions
    assert len(qs) == 10
    assert qs[0].gold == ("D1:3",) and qs[0].category == 2 and qs[0].answer == "2 March 2023"
    # evidence quirks: "D1:8; D2:01", "D:2:4", a bare "D", none at all
    assert [q.gold for q in qs[2:7]] == [("D1:8", "D2:1"), ("D2:4", "D2:6"), ("D3:3",), ("D1:6",), ()]
    assert qs[6].category == 3
    assert qs[7].answer == 2023  # an answer may be a number
    # adversarial: the adversarial answer when there is no answer, the answer when there are both
    assert (qs[8].category, qs[8].answer) == (5, "A wobbly clay bowl")
    assert (qs[9].category, qs[9].answer) == (5, "Not mentioned in the conversation")
    known = {t.dia_id for t in turns}
    assert all(g in known for q in qs for g in q.gold)


def test_loader_orders_sessions_by_number(mini2):
    turns = mini2.turns
    # session_10 comes after session_9 (not after session_1, as its key would sort)
    assert [t.session for t in turns] == [1] * 3 + [2] * 2 + [3] * 2 + [4] * 3 + [5] * 3 + [6] * 2 + [7] * 2 \
        + [8] * 2 + [9] * 3 + [10] * 3
    assert [t.dia_id for t in turns[-3:]] == ["D10:1", "D10:2", "D10:3"]
    assert mini2.session_dates[10] == datetime(2022, 5, 14, 19, 5, tzinfo=timezone.utc)
    assert mini2.session_dates[2] == datetime(2022, 1, 23, 12, 30, tzinfo=timezone.utc)  # 12:30 pm is noon
    assert [q.gold for q in mini2.questions if q.category == 1] == [("D5:1", "D10:1"), ("D2:1", "D6:1")]


def test_turn_memories_shape(mini1):
    from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode

    turns = mini1.turns[:5]
    records = ld.turn_memories(turns, "locomo-test")
    nodes = [r for r in records if isinstance(r, MemoryNode)]
    rels = [r for r in records if isinstance(r, ConsciousnessRelationship)]
    assert records[:5] == nodes  # memories first
    assert [n.node_id for n in nodes] == [f"mini-1:D1:{i}" for i in range(1, 6)]
    assert all(n.level == "N1" and n.citizen_id == "locomo-test" for n in nodes)
    assert nodes[0].valid_at == nodes[0].created_at == turns[0].date
    assert nodes[2].description == nodes[2].name == turns[2].description
    assert nodes[4].extra == {"sample_id": "mini-1", "dia_id": "D1:5", "session": 1, "turn": 4, "speaker": "Priya"}
    assert [(r.source_id, r.target_id) for r in rels] == [(turns[i + 1].node_id, turns[i].node_id) for i in range(4)]
    assert {r.relation_type for r in rels} == {"FOLLOWS"}
    # no FOLLOWS across sessions
    cross = ld.turn_memories(mini1.turns, "locomo-test")
    cross_rels = [r for r in cross if isinstance(r, ConsciousnessRelationship)]
    assert len(cross_rels) == len(mini1.turns) - 3
    assert ("mini-1:D2:1", "mini-1:D1:8") not in {(r.source_id, r.target_id) for r in cross_rels}
    assert not [r for r in ld.turn_memories(turns, "locomo-test", follows=False)
                if isinstance(r, ConsciousnessRelationship)]


# -- the command lines: --data, and a clear exit when LoCoMo is missing ------------------------


def test_data_summary_command(capsys):
    assert ld.main(["--data", str(FIXTURE)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "mini-1: 3 sessions, 21 turns (3 with a photo), 10 questions (9 with evidence; "
        "multi-hop 2, temporal 3, open-domain 1, single-hop 2, adversarial 2)",
        "mini-2: 10 sessions, 25 turns (2 with a photo), 7 questions (7 with evidence; "
        "multi-hop 2, temporal 1, open-domain 1, single-hop 2, adversarial 1)",
    ]


@pytest.mark.parametrize("module", ["locomo_data", "locomo_quality"])
def test_missing_data_exits_with_where_to_get_it(module, tmp_path, monkeypatch, capsys):
    import importlib

    mod = importlib.import_module(module)
    absent = tmp_path / "locomo10.json"
    for argv in (["--data", str(absent)], []):
        # [] : no --data and no copy beside the repository
        monkeypatch.setattr(mod, "DEFAULT_DATA", absent)
        with pytest.raises(SystemExit) as exc:
            mod.main(argv)
        message = exc.value.code
        assert isinstance(message, str) and "\n" not in message
        assert str(absent) in message
        assert "https://github.com/snap-research/locomo" in message and "data/locomo10.json" in message
        assert "--data PATH" in message
    with pytest.raises(FileNotFoundError, match="snap-research/locomo"):
        ld.load_raw(absent)

    with pytest.raises(SystemExit) as exc:
        mod.main(["--help"])
    assert exc.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--data PATH" in help_text and "read in place" in help_text and "never copied" in help_text
    assert "https://github.com/snap-research/locomo" in help_text


# -- a slice through the real store -----------------------------------------------------------


def test_ingest_and_retrieve_slice(memory, citizen, mini1):
    import locomo_quality as lq

    from llama_consciousness.retrievers.config import RetrievalConfig
    from llama_consciousness.schema import RetrievalIntention

    turns = [t for t in mini1.turns if t.session in (1, 2)]
    known = {t.dia_id for t in turns}
    conv = ld.Conversation(mini1.sample_id, turns, [q for q in mini1.questions
                                                    if q.gold and all(g in known for g in q.gold)])
    assert len(conv.questions) == 7  # the Lisbon questions (session 3) and the one without evidence are out
    report = memory.ingest(ld.turn_memories(turns, citizen))
    assert report.inserted == len(turns) == 15 and not report.rejected
    assert report.relationships_inserted == len(turns) - 2  # FOLLOWS inside sessions 1 and 2
    ctx = lq.Context(conv, citizen, memory, [n for n in ld.turn_memories(turns, citizen) if hasattr(n, "node_type")])

    q = next(q for q in conv.questions if q.gold == ("D1:3",))  # Priya's first pottery lesson
    for ranker in (lq.six_way(None), lq.stock_vector(), lq.bm25(), lq.best_prototype(),
                   lq.six_way(RetrievalConfig(channels=("keyword",)), patch=lq.patch_keyword(avgdl=None))):
        ranked = ranker(ctx, q)
        assert ranked and all(r in known for r in ranked)
    assert "D1:3" in lq.best_prototype()(ctx, q)[:3]
    assert "D1:3" in lq.bm25()(ctx, q)[:3]

    # point in time: before session 2 nothing of session 2 is visible
    s2 = min(t.date for t in turns if t.session == 2)
    retriever = memory.retriever(citizen, config=RetrievalConfig(channels=("vector", "keyword")))
    nodes = retriever.retrieve_intention(RetrievalIntention(
        query_text="Priya glazed a blue mug", citizen_id=citizen, query_levels=["N1"], max_results_per_level=20,
        temporal_mode="point_in_time", as_of_time=s2 - timedelta(seconds=1)))
    got = {ld.dia_of_node_id(n.node.metadata["node_id"]) for n in nodes}
    assert got and all(ld.session_of(d) == 1 for d in got)
    # ... and after it, the mug is
    nodes = retriever.retrieve_intention(RetrievalIntention(
        query_text="Priya glazed a blue mug", citizen_id=citizen, query_levels=["N1"], max_results_per_level=20,
        temporal_mode="point_in_time", as_of_time=s2 + timedelta(seconds=1)))
    assert "D2:4" in {ld.dia_of_node_id(n.node.metadata["node_id"]) for n in nodes}

    pit = lq.point_in_time_check(None, [ctx], None)
    assert pit["checked"] == len(conv.questions) and pit["leaked"] == 0 and pit["late"] == 0


def test_quality_command_on_the_fixture(capsys):
    """The benchmark end to end with ``--data``: both conversations ingested, a table, the point-in-time check."""
    import locomo_quality as lq

    rc = lq.main(["--data", str(FIXTURE), "--variants", "BM25,keyword only", "--citizen-prefix", "mini"])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.startswith("LoCoMo retrieval quality: 2 conversations, 46 turns")
    assert "| **BM25** | overall (1-4) | 13 |" in out and "|  | adversarial (5) | 3 |" in out
    assert "| **keyword only** | overall (1-4) | 13 |" in out
    assert "Point-in-time check" in out and "16 questions, 0 returned a gold turn" in out and "(PASS)" in out


def test_idf_terms_and_neighbour_expansion(mini1):
    import locomo_quality as lq

    assert lq.idf_terms("When did Priya go to her first pottery lesson?") == ["priya", "go", "first", "pottery", "lesson"]
    assert lq.idf_terms("What is the name of Jonah's dog?") == ["name", "jonahs", "dog"]
    assert lq.idf_terms("What is it?") == []
    ctx = lq.Context(ld.Conversation("c", mini1.turns[:6]), "x", None)
    post = lq.expand_neighbours(top=2, keep=1)
    # D1:4 first, then neighbours of the top 2 (D1:4 -> D1:3, D1:5; D1:1 -> D1:2), then the rest
    assert post(ctx, ["D1:4", "D1:1", "D1:6"]) == ["D1:4", "D1:3", "D1:5", "D1:2", "D1:1", "D1:6"]
    # neighbours stay inside a session: D1:8 (last of session 1) and D2:1 (first of session 2) are not neighbours
    ctx = lq.Context(ld.Conversation("c", mini1.turns[:10]), "x", None)
    assert ctx.neighbours["D1:8"] == ["D1:7"] and ctx.neighbours["D2:1"] == ["D2:2"]
