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
    assert m == {"R@5": 1.0, "R@10": 1.0, "R@20": 1.0, "Hit@10": 1.0, "SessR@10": 1.0, "Win@10": 0.0,
                 "WinGold@10": 0.0}
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


def test_split_by_conversation_in_file_order():
    ids = ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47", "conv-48", "conv-49",
           "conv-50"]  # locomo10.json, in file order
    assert ld.split_conversations(ids, "tune") == ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43"]
    assert ld.split_conversations(ids, "test") == ["conv-44", "conv-47", "conv-48", "conv-49", "conv-50"]
    assert ld.split_conversations(ids, "all") == ids
    # odd counts: the extra conversation goes to tune; the two parts never overlap and cover everything
    for n in range(0, 8):
        items = list(range(n))
        tune, test = ld.split_conversations(items, "tune"), ld.split_conversations(items, "test")
        assert tune + test == items and len(tune) == math.ceil(n / 2)
    with pytest.raises(ValueError, match="unknown split"):
        ld.split_conversations(ids, "train")
    # the split is stated where the user reads it
    for sid in ids:
        assert sid in ld.SPLIT_HELP and sid in ld.__doc__


def test_loader_split_and_override():
    assert [c.sample_id for c in ld.load_conversations(FIXTURE, split="tune")] == ["mini-1"]
    assert [c.sample_id for c in ld.load_conversations(FIXTURE, split="test")] == ["mini-2"]
    assert [c.sample_id for c in ld.load_conversations(FIXTURE, split="all")] == ["mini-1", "mini-2"]
    # --conversations overrides the split
    assert [c.sample_id for c in ld.load_conversations(FIXTURE, ["mini-1"], split="test")] == ["mini-1"]


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


# -- long memories: windows of consecutive turns ------------------------------------------------


@pytest.mark.parametrize("n, size, stride, starts", [
    (0, 12, 6, []),
    (5, 12, 6, [0]),          # a short session is one window of all its turns
    (12, 12, 6, [0]),
    (13, 12, 6, [0, 1]),      # the last window is aligned to the end
    (20, 12, 6, [0, 6, 8]),
    (24, 12, 6, [0, 6, 12]),
    (47, 12, 6, [0, 6, 12, 18, 24, 30, 35]),
    (8, 4, 2, [0, 2, 4]),
    (7, 4, 2, [0, 2, 3]),
])
def test_window_starts(n, size, stride, starts):
    assert ld.window_starts(n, size, stride) == starts
    covered = {i for s in starts for i in range(s, min(s + size, n))}
    assert covered == set(range(n))  # every turn is in a window


def test_session_windows(mini1, mini2):
    windows = ld.session_windows(mini1.turns, size=4, stride=2)
    assert [w.node_id for w in windows] == [
        "mini-1:W1:1-4", "mini-1:W1:3-6", "mini-1:W1:5-8",
        "mini-1:W2:1-4", "mini-1:W2:3-6", "mini-1:W2:4-7",
        "mini-1:W3:1-4", "mini-1:W3:3-6"]
    assert all(len(w.turns) == 4 and len({t.session for t in w.turns}) == 1 for w in windows)
    w = windows[4]
    assert (w.session, w.first, w.last, w.key) == (2, 3, 6, "W2:3-6")
    assert [t.dia_id for t in w.turns] == ld.window_turns(w.key) == ["D2:3", "D2:4", "D2:5", "D2:6"]
    assert w.description == "\n".join(t.description for t in w.turns)
    assert w.date == w.turns[0].date == mini1.session_dates[2]
    assert w.name.endswith(" ...") and w.description.startswith(w.name[:-4])
    assert len(w.name.split()) == 11 and w.words == len(w.description.split())
    # the default sizing: the fixture's sessions (2-8 turns) are shorter than 12, one window each
    assert [w.key for w in ld.session_windows(mini2.turns)] == [
        "W1:1-3", "W2:1-2", "W3:1-2", "W4:1-3", "W5:1-3", "W6:1-2", "W7:1-2", "W8:1-2", "W9:1-3", "W10:1-3"]
    assert ld.session_windows(mini2.turns)[-1].date == mini2.session_dates[10]
    # window keys are never turns, and cover nothing when malformed
    assert ld.is_turn("D1:3") and not ld.is_turn("W1:1-4") and ld.window_turns("D1:3") == []
    assert ld.dia_of_node_id("mini-1:W2:3-6") == "W2:3-6" == ld.dia_of_node_id("N1:mini-1:W2:3-6")


def test_conversation_memories_with_windows(mini1):
    from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode

    turns_only = ld.conversation_memories(mini1, "locomo-test")
    assert turns_only == ld.turn_memories(mini1.turns, "locomo-test")
    records = ld.conversation_memories(mini1, "locomo-test", "turns+windows", size=4, stride=2)
    nodes = [r for r in records if isinstance(r, MemoryNode)]
    rels = [r for r in records if isinstance(r, ConsciousnessRelationship)]
    assert records[:len(nodes)] == nodes  # memories first
    assert len(nodes) == 21 + 8 and len(rels) == 21 - 3  # windows add no relationships
    windows = [n for n in nodes if n.extra.get("kind") == "window"]
    assert [n.node_id for n in windows] == [w.node_id for w in ld.session_windows(mini1.turns, 4, 2)]
    w = windows[3]
    assert (w.level, w.citizen_id, w.node_type) == ("N1", "locomo-test", "Memory")
    assert w.valid_at == w.created_at == mini1.session_dates[2]
    assert w.extra == {"sample_id": "mini-1", "session": 2, "first_turn": 1, "last_turn": 4, "kind": "window"}
    assert w.description.count("\n") == 3 and w.name != w.description
    with pytest.raises(ValueError, match="unknown memories"):
        ld.conversation_memories(mini1, "x", "windows")


def test_metrics_count_windows_as_misses():
    gold = ["D1:3", "D2:1"]
    ranked = ["W1:1-4", "W1:3-6", "D1:3"] + [f"D3:{i}" for i in range(1, 20)]
    m = ld.question_metrics(ranked, gold)
    # windows take slots 1 and 2, the gold turn is third; a window covering D1:3 is in the top 10
    assert m["R@10"] == 0.5 and m["Hit@10"] == 1.0
    assert m["Win@10"] == pytest.approx(0.2) and m["WinGold@10"] == 1.0
    assert m["SessR@10"] == 0.5  # windows are not sessions found
    # a window from another part of the session covers no gold turn
    far = ld.question_metrics(["W1:5-8"] * 1 + ["D9:9"], gold)
    assert (far["R@10"], far["Win@10"], far["WinGold@10"]) == (0.0, 0.1, 0.0)
    # ten windows push the gold turn out of the top 10
    crowded = ld.question_metrics([f"W{i}:1-4" for i in range(3, 13)] + ["D1:3"], gold)
    assert crowded["R@10"] == 0.0 and crowded["R@20"] == 0.5 and crowded["Win@10"] == 1.0


# -- a slice through the real store -----------------------------------------------------------


def _slice(mini1, sessions=(1, 2)):
    turns = [t for t in mini1.turns if t.session in sessions]
    known = {t.dia_id for t in turns}
    return ld.Conversation(mini1.sample_id, turns, [q for q in mini1.questions
                                                    if q.gold and all(g in known for g in q.gold)])


def test_ingest_and_retrieve_slice(memory, citizen, mini1):
    import locomo_quality as lq

    from llama_consciousness.retrievers.config import RetrievalConfig
    from llama_consciousness.schema import RetrievalIntention

    conv = _slice(mini1)
    turns = conv.turns
    known = {t.dia_id for t in turns}
    assert len(conv.questions) == 7  # the Lisbon questions (session 3) and the one without evidence are out
    report = memory.ingest(ld.turn_memories(turns, citizen))
    assert report.inserted == len(turns) == 15 and not report.rejected
    assert report.relationships_inserted == len(turns) - 2  # FOLLOWS inside sessions 1 and 2
    ctx = lq.Context(conv, citizen, memory, [n for n in ld.turn_memories(turns, citizen) if hasattr(n, "node_type")])

    q = next(q for q in conv.questions if q.gold == ("D1:3",))  # Priya's first pottery lesson
    known_variants = lq.variants()
    for name in lq.DEFAULT_SET:
        ranked, per_level = known_variants[name][1]()(ctx, q)
        assert ranked and all(r in known for r in ranked), name
        assert list(per_level) == ["N1"] and per_level["N1"] == len(ranked), name
    assert "D1:3" in lq.stock_bm25()(ctx, q)[0][:3]

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


def test_windows_compete_in_the_store(memory, citizen, mini1):
    """turns+windows: the windows are stored beside the turns, every system can return them, gold stays turns."""
    import locomo_quality as lq

    conv = _slice(mini1)
    ctx = lq.ingest_conversation(memory, conv, citizen, "turns+windows", size=4, stride=2)
    assert ctx.citizen == f"{citizen}-w4s2-mini-1" == lq.citizen_of("mini-1", citizen, "turns+windows", 4, 2)
    windows = [w.node_id for w in ld.session_windows(conv.turns, 4, 2)]
    assert len(windows) == 6 and len(ctx.nodes) == 15 + 6
    stored = memory.get_nodes(windows, "N1", ctx.citizen)
    assert sorted(n.node_id for n in stored) == sorted(windows)
    assert all(n.extra["kind"] == "window" for n in stored)
    assert len(memory.get_nodes([t.node_id for t in conv.turns], "N1", ctx.citizen)) == 15

    keys = {ld.dia_of_node_id(w) for w in windows} | {t.dia_id for t in conv.turns}
    q = next(q for q in conv.questions if q.gold == ("D1:3",))
    assert q.gold == ("D1:3",)  # gold is the turns, unchanged
    for name in ("package default", "stock BM25", "stock vector", "vector only"):
        ranked, _ = lq.variants()[name][1]()(ctx, q)
        assert set(ranked) <= keys, name
        assert any(r.startswith("W") for r in ranked), name  # the long memories compete
    out = lq.evaluate("stock BM25", lq.stock_bm25(), [ctx], None)
    assert out.queries == 7 and out.per_level == [20] * 7 and out.per_level_max == 20
    assert out.summary["overall"]["Win@10"] > 0
    # the turns-only citizen of the same conversation holds no window
    assert lq.citizen_of("mini-1", citizen) == f"{citizen}-mini-1"


def test_variants_and_config_json():
    import locomo_quality as lq

    from llama_consciousness.retrievers.config import RetrievalConfig

    known = lq.variants()
    for name in ("package default", "default no-graph", "default no-neighbours", "keyword only", "vector only",
                 "graph only", "HYBRID_RRF", "stock BM25", "stock vector"):
        assert name in known and name in lq.DEFAULT_SET
    assert "graph" not in lq._without_graph().channels and lq._without_graph().fusion == RetrievalConfig().fusion
    assert lq._default_with(neighbour_expansion=0).neighbour_expansion == 0
    configs = lq.json_variants(['{"fusion": "rrf", "rrf_k": 20}', '{"channels": ["keyword"]}'])
    assert list(configs) == ["json1", "json2"]
    assert configs["json1"][0] == 'RetrievalConfig(**{"fusion": "rrf", "rrf_k": 20})'
    with pytest.raises(ValueError, match="not a RetrievalConfig"):
        lq.json_variants(['{"fusion": "sum"}'])
    with pytest.raises(ValueError, match="not a RetrievalConfig"):
        lq.json_variants(['{"no_such_field": 1}'])
    known.update(configs)
    assert lq.select("default", known) == lq.DEFAULT_SET
    assert lq.select("none", known, ["json1"]) == ["json1"]
    assert lq.select("stock BM25,default", known, ["json2"])[:2] == ["stock BM25", "package default"]
    assert lq.select("stock BM25,default", known, ["json2"])[-1] == "json2"
    assert "json1" not in lq.select("all", known)
    with pytest.raises(ValueError, match="unknown variants"):
        lq.select("BM25", known)


def test_quality_command_on_the_fixture(capsys):
    """The benchmark end to end with ``--data``: the test split by default, a table with the per-level column,
    the point-in-time check; then the long-memory evaluation and --config-json."""
    import locomo_quality as lq

    rc = lq.main(["--data", str(FIXTURE), "--variants", "stock BM25,keyword only", "--citizen-prefix", "mini"])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.startswith("LoCoMo retrieval quality: 1 conversations (split test: mini-2), 25 turns")
    assert "| per level mean/max | ms/query |" in out and "Win@10" not in out
    assert "| **stock BM25** | overall (1-4) | 6 |" in out and "| 20.0/20 |" in out
    assert "|  | adversarial (5) | 1 |" in out
    assert "| **keyword only** | overall (1-4) | 6 |" in out
    assert "Point-in-time check" in out and "7 questions, 0 returned a gold turn" in out and "(PASS)" in out

    rc = lq.main(["--data", str(FIXTURE), "--split", "all", "--memories", "turns+windows", "--window-size", "4",
                  "--window-stride", "2", "--variants", "none", "--config-json", '{"channels": ["keyword"]}',
                  "--limit-questions", "2", "--citizen-prefix", "mini"])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.startswith("LoCoMo retrieval quality: 2 conversations (split all: mini-1, mini-2, first 2 questions "
                          "each), 46 turns + 18 windows of 4 turns (stride 2)")
    assert "| Win@10 | WinGold@10 | per level mean/max |" in out
    assert "| **json1** | overall (1-4) | 4 |" in out
    assert '- json1: RetrievalConfig(**{"channels": ["keyword"]})' in out
    assert "4 questions, 0 returned a gold turn" in out

    with pytest.raises(SystemExit) as exc:
        lq.main(["--data", str(FIXTURE), "--config-json", '{"fusion": "sum"}'])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        lq.main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for sid in ("conv-26", "conv-43", "conv-44", "conv-50"):
        assert sid in help_text
    assert "turns+windows" in help_text and "--config-json" in help_text
