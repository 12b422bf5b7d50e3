"""The demo command and the bundled scenario it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llama_consciousness.cli import format_table, main
from llama_consciousness.ingestion.loader import MemoryFileError, demo_memory_file, read_memory_file


def test_demo_current_then_past_on_one_data_dir(data_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = data_root / "demo"
    assert main(["demo", "--data-dir", str(directory), "-k", "3"]) == 0
    current = capsys.readouterr().out
    assert "wrote 22 memories and 17 relationships" in current
    for title in ("N1 personal (citizen ada)", "N2 collective", "N3 ecosystem"):
        assert title in current
    assert "FalkorDB ships native HNSW" in current  # the corrected belief
    assert "FalkorDB has no native vector search" not in current  # the expired one

    assert main(["demo", "--data-dir", str(directory), "-k", "3", "--levels", "N1",
                 "--mode", "point_in_time", "--as-of", "2025-09-10"]) == 0
    past = capsys.readouterr().out
    assert "0 memories and 0 relationships (39 already there, unchanged)" in past  # idempotent rerun
    assert "FalkorDB has no native vector search" in past
    assert "FalkorDB ships native HNSW" not in past


def test_demo_rejects_bad_temporal_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--mode", "point_in_time"]) == 2
    assert "requires as_of_time" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["demo", "--as-of", "yesterday-ish"])
    assert "not an ISO-8601 time" in capsys.readouterr().err


def test_demo_rejects_malformed_citizen(data_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--data-dir", str(data_root / "demo_bad"), "--citizen", "x'})-[", "--levels", "N1"]) == 2
    captured = capsys.readouterr()
    assert "invalid citizen_id" in captured.err
    assert captured.out == ""  # refused before any server was started or anything written


def test_bundled_scenario_covers_the_spec() -> None:
    nodes, relationships = read_memory_file(demo_memory_file())
    assert {n.level for n in nodes} == {"N1", "N2", "N3"}
    assert {n.resolution_state for n in nodes} == {"blocked", "in_progress", "resolved"}
    reasons = {n.invalidation_reason for n in nodes if n.expired_at is not None}
    assert reasons == {"discovered_false", "reality_changed"}
    assert {"Ada", "Luca", "Felix"} <= {n.name for n in nodes if n.node_type == "Person"}
    assert any(n.node_type == "Decision" and "V2" in n.name for n in nodes)
    for rel in relationships:  # full consciousness metadata on every relationship
        assert rel.goal and rel.mindstate and rel.formation_trigger and rel.emotion_vector
        assert rel.felt_quality is not None


def test_loader_reports_line_numbers(tmp_path: Path) -> None:
    good = {"node_id": "a", "level": "N2", "name": "A", "energy": 0.5, "confidence": 0.5}
    path = tmp_path / "m.jsonl"
    path.write_text("# comment\n\n" + json.dumps(good) + "\n{not json\n")
    with pytest.raises(MemoryFileError, match=r"m.jsonl:4: malformed JSON"):
        read_memory_file(path)
    path.write_text(json.dumps({**good, "energy": 1.5}) + "\n")
    with pytest.raises(MemoryFileError, match=r":1: invalid memory: energy: Input should be less than or equal to 1"):
        read_memory_file(path)
    path.write_text(json.dumps({"kind": "edge"}) + "\n")
    with pytest.raises(MemoryFileError, match="unknown kind 'edge'"):
        read_memory_file(path)


def test_format_table_cuts_long_cells() -> None:
    text = format_table(("a", "b"), [("x" * 10, 1)], max_width=5)
    assert text.splitlines() == ["a      b", "-----  -", "xxxx…  1"]


def test_sigterm_stops_what_the_demo_started() -> None:
    """Reproduced before: SIGTERM left the demo's FalkorDB server and its temporary directory."""
    import json
    import signal
    import subprocess
    import sys
    import time

    import psutil

    before = set(Path("/tmp").glob("lcdemo*"))
    demo = subprocess.Popen([sys.executable, "-m", "llama_consciousness.cli", "demo"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        pid = started = None
        while pid is None and time.monotonic() < deadline and demo.poll() is None:
            for directory in set(Path("/tmp").glob("lcdemo*")) - before:
                try:
                    pid = json.loads((directory / "falkordb" / "server.json").read_text())["pid"]
                    started = directory
                except (OSError, ValueError, KeyError):
                    continue
            time.sleep(0.01)
        assert pid is not None, "the demo ended before its server was seen"
        demo.send_signal(signal.SIGTERM)
        assert demo.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        demo.kill()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not started.exists()


def test_ingest_refuses_a_negative_entity_cap_before_opening_anything(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text("{}\n")
    assert main(["ingest", str(path), "--data-dir", str(tmp_path / "d"), "--max-entities", "-1"]) == 2
    assert "max_entities must be an integer of at least 0, not -1" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
