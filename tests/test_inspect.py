"""``llama-consciousness inspect``: levels and citizens, one memory's versions, a citizen's state history."""

from __future__ import annotations

import json

import pytest

from llama_consciousness.cli import main
from llama_consciousness.ingestion import demo_memory_file
from llama_consciousness.schema import RetrievalIntention

V2 = "ada_belief_falkordb_capabilities_v2"


@pytest.fixture(scope="module")
def demo(memory):
    memory.ingest(demo_memory_file())
    return memory


def _args(memory) -> list[str]:
    return ["--data-dir", str(memory.data_dir)]


def test_overview_lists_levels_citizens_and_states(demo, citizen, capsys) -> None:
    demo.update_citizen_state(citizen, energy=0.61, emotion_vector={"curiosity": 0.7}, goal="learn the graph")
    assert main(["inspect", *_args(demo), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {lv["level"] for lv in data["levels"]} == {"N2", "N3"} and all(lv["memories"] > 0 for lv in data["levels"])
    ours = {c["citizen"]: c for c in data["citizens"]}
    assert ours["ada"]["memories"] == demo.counts("N1", "ada")[0]
    assert ours[citizen]["state"]["energy"] == 0.61 and ours[citizen]["state"]["goal"] == "learn the graph"
    assert main(["inspect", *_args(demo)]) == 0
    text = capsys.readouterr().out
    assert "collective_n2" in text and citizen in text and "curiosity 0.70" in text


def test_memory_shows_its_versions_why_links_dissonances_and_use(demo, capsys) -> None:
    stream = demo.retrieve_stream(RetrievalIntention(query_text="FalkorDB capabilities vector search",
                                                     citizen_id="ada", query_levels=["N1"]))
    demo.record_use(stream).result(timeout=30)
    assert main(["inspect", "memory", V2, "--citizen", "ada", *_args(demo), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    versions = {v["node_id"]: v for v in data["versions"]}
    old = versions["ada_belief_falkordb_capabilities_v1"]
    assert not old["current"] and versions[V2]["current"]
    assert old["why_superseded"]["superseded_by"] == V2
    assert old["why_superseded"]["invalidation_reason"] == "discovered_false"
    assert any(link["relation_type"] == "SUPERSEDES" and link["direction"] == "outgoing" for link in data["links"])
    assert [d["dissonance_type"] for d in data["dissonances"]] == ["discovered_false"]
    focus = {n.node_id for n in stream.activation_tiers["focus"]}
    if V2 in focus:
        assert versions[V2]["access_count"] >= 1 and data["uses"]
    # the same from the old version's side, as text
    assert main(["inspect", "memory", "ada_belief_falkordb_capabilities_v1", "--citizen", "ada", *_args(demo)]) == 0
    text = capsys.readouterr().out
    assert "[superseded]" in text and "[current]" in text and f"superseded by {V2}" in text


def test_state_history_and_find(demo, citizen, capsys) -> None:
    demo.update_citizen_state(citizen, energy=0.4, mindstate="calm")
    demo.update_citizen_state(citizen, energy=0.8, reason="good news")
    assert main(["inspect", "state", citizen, *_args(demo), "--json"]) == 0
    states = json.loads(capsys.readouterr().out)
    assert [s["energy"] for s in states] == [0.4, 0.8] and states[1]["mindstate"] == "calm"
    assert main(["inspect", "state", citizen, *_args(demo)]) == 0
    assert "good news" in capsys.readouterr().out
    assert main(["inspect", "find", "capabilities", "--citizen", "ada", *_args(demo), "--json"]) == 0
    found = {r["node_id"] for r in json.loads(capsys.readouterr().out)}
    assert {V2, "ada_belief_falkordb_capabilities_v1"} <= found


def test_bad_input_is_one_clear_line(demo, capsys) -> None:
    assert main(["inspect", "memory", "no_such_memory", "--citizen", "ada", *_args(demo)]) == 2
    assert "no memory 'no_such_memory'" in capsys.readouterr().err
    assert main(["inspect", "memory", V2, *_args(demo)]) != 0  # N1 without a citizen
    assert "citizen" in capsys.readouterr().err
    assert main(["inspect", "state", "bad id!", *_args(demo)]) != 0
    with pytest.raises(SystemExit):
        main(["inspect", "memory", V2, "--level", "N9"])
