"""Erase and retention (issue 41) on the real embedded servers: what is erased is gone from every query and
from every file of the data directory, what is kept stays, and an interrupted erasure can be completed."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from files_on_disk import files_holding
from llama_consciousness import inspection
from llama_consciousness.cli import main
from llama_consciousness.retention import RetentionPolicy, RetentionRule
from llama_consciousness.schema import MemoryNode
from llama_consciousness.storage import erasure

UTC = timezone.utc


def _marker() -> str:
    return f"zebra{uuid.uuid4().hex[:16]}"


def _node(node_id: str, text: str, level: str = "N1", citizen: str | None = None, **kw) -> MemoryNode:
    return MemoryNode(node_id=node_id, level=level, citizen_id=citizen, name=text[:60], description=text,
                      energy=0.5, confidence=0.8, **kw)


@pytest.fixture
def plain_snapshots(memory):
    """Snapshots written uncompressed while the test runs: Redis compresses long strings in ``dump.rdb``, where a
    byte search would miss a text it holds, and the kept memory's marker proves the search would find one."""
    memory.db.connection.config_set("rdbcompression", "no")
    yield
    memory.db.connection.config_set("rdbcompression", "yes")


def test_an_erased_memory_is_in_no_query_and_no_file(memory, citizen, plain_snapshots) -> None:
    gone, kept, gone_n3 = _marker(), _marker(), _marker()
    memory.ingest([_node("secret", f"My door code is 4711 and my nickname is {gone}.", citizen=citizen),
                   _node("public", f"I like jazz on Sundays, says {kept}.", citizen=citizen)])
    n3_id = f"n3-{uuid.uuid4().hex[:8]}"
    memory.upsert([_node(n3_id, f"The ecosystem heard of {gone_n3} once.", level="N3")])
    assert memory.retriever(citizen_id=citizen).retrieve(f"nickname {gone}")[0].node.node_id == "N1:secret"
    memory.forget("secret", "N1", citizen, reason="user_requested")  # forgotten first: erase finds it anyway

    receipt = memory.erase(None, "N1", citizen, where={"contains": gone})
    assert receipt.node_ids == ["secret"] and receipt.memories == 1 and receipt.files_rewritten
    assert gone not in receipt.model_dump_json()
    n3 = memory.erase(n3_id, "N3")
    assert n3.memories == 1 and n3.vector_rows >= 1

    assert memory.get_node("secret", "N1", citizen) is None
    found = [n.node.node_id for n in memory.retriever(citizen_id=citizen).retrieve(f"nickname {gone} door code")]
    assert "N1:secret" not in found and "N1:public" in found
    assert all(h.node_id != n3_id for h in memory.vector_search(f"ecosystem heard of {gone_n3}", "N3", k=20,
                                                                temporal_mode="full_history"))
    on_disk = files_holding(memory.data_dir, gone, gone_n3, kept)
    assert on_disk[gone] == [] and on_disk[gone_n3] == [], on_disk
    assert on_disk[kept], "the kept memory's text should still be on disk (else this test proves nothing)"
    assert memory.erase("secret", "N1", citizen).memories == 0  # again: harmless


def test_an_interrupted_erasure_is_completed_by_erasing_again(memory, citizen, plain_snapshots) -> None:
    gone = _marker()
    memory.ingest([_node("diary", f"Dear diary, {gone} happened today.", citizen=citizen),
                   _node("other", "Nothing happened today.", citizen=citizen)])
    store = memory.writable("N1", citizen)
    # a crash right after the graph's transaction: the rest (keyword index, files) never ran
    assert store.run(erasure.erase_memories(["diary"])).memories == 1
    receipt = memory.erase("diary", "N1", citizen)
    assert receipt.memories == 0 and receipt.files_rewritten
    assert files_holding(memory.data_dir, gone)[gone] == []
    assert memory.get_node("other", "N1", citizen) is not None


def test_erasing_while_others_read_and_write_loses_nothing_else(memory, citizen) -> None:
    memory.ingest([_node(f"m{i}", f"Memory number {i} about gardens and {i} roses.", citizen=citizen)
                   for i in range(30)])
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        retriever = memory.retriever(citizen_id=citizen)
        while not stop.is_set():
            try:
                retriever.retrieve("roses in the garden")
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

    def write() -> None:
        for i in range(10):
            try:
                memory.upsert([_node(f"w{i}", f"A written memory {i} about tulips.", citizen=citizen)])
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

    threads = [threading.Thread(target=read), threading.Thread(target=write)]
    for t in threads:
        t.start()
    receipt = memory.erase([f"m{i}" for i in range(0, 30, 3)], "N1", citizen, wait=False)
    threads[1].join()
    stop.set()
    threads[0].join()
    assert errors == [] and receipt.memories == 10
    left = {n.node_id for n in memory.get_nodes([f"m{i}" for i in range(30)] + [f"w{i}" for i in range(10)],
                                                 "N1", citizen)}
    assert left == {f"m{i}" for i in range(30) if i % 3} | {f"w{i}" for i in range(10)}


def test_erasing_a_citizen_removes_them_everywhere(memory, plain_snapshots) -> None:
    citizen = "t" + uuid.uuid4().hex[:12]
    other = "t" + uuid.uuid4().hex[:12]
    mine, theirs = _marker(), _marker()
    memory.ingest([_node("a", f"{mine} is my secret word.", citizen=citizen)])
    memory.update_citizen_state(citizen, energy=0.7, goal=f"remember {mine}")
    n2_mine, n2_theirs = f"n2-{uuid.uuid4().hex[:8]}", f"n2-{uuid.uuid4().hex[:8]}"
    memory.upsert([_node(n2_mine, f"{mine} told the collective something.", level="N2", citizen=citizen),
                   _node(n2_theirs, f"{theirs} told the collective something else.", level="N2", citizen=other)])
    assert citizen in memory.citizens()

    receipt = memory.erase_citizen(citizen)
    assert receipt.graphs_deleted == [f"citizen_{citizen}"] and receipt.memories >= 1 and receipt.files_rewritten
    assert n2_mine in receipt.node_ids and mine not in receipt.model_dump_json()
    assert citizen not in memory.citizens()
    assert memory.get_node(n2_mine, "N2") is None and memory.get_node(n2_theirs, "N2") is not None
    on_disk = files_holding(memory.data_dir, mine, theirs, f"citizen_{citizen}")
    assert on_disk[mine] == [] and on_disk[f"citizen_{citizen}"] == [], on_disk
    assert on_disk[theirs]
    # the receipt is kept without the citizen's id, and found by it
    kept = [r for r in inspection.erasures(memory, citizen) if r["graphs_deleted"]]
    assert len(kept) == 1 and kept[0]["memories"] == receipt.memories and citizen not in json.dumps(kept)
    assert files_holding(memory.data_dir, citizen)[citizen] == []


def test_retention_forgets_then_erases_and_a_dry_run_changes_nothing(memory, citizen) -> None:
    old = datetime(2024, 1, 1, tzinfo=UTC)
    memory.ingest([_node("old", "An old chat message.", citizen=citizen, created_at=old, valid_at=old),
                   _node("new", "A new chat message.", citizen=citizen)])
    policy = RetentionPolicy(rules=[RetentionRule(level="N1", node_types=["Memory"], forget_after=timedelta(days=90),
                                                  erase_after=timedelta(days=30))])
    dry = memory.apply_retention(policy, dry_run=True)
    mine = [s for s in dry.steps if s.citizen_id == citizen]
    assert [s.forget for s in mine] == [["old"]] and memory.get_node("old", "N1", citizen).forgotten_at is None

    first = memory.apply_retention(policy)
    assert memory.get_node("old", "N1", citizen).forgotten_reason.value == "retention"
    assert all(s.erase == [] for s in first.steps if s.citizen_id == citizen)
    later = memory.apply_retention(policy, now=datetime.now(UTC) + timedelta(days=31))
    assert memory.get_node("old", "N1", citizen) is None
    assert memory.get_node("new", "N1", citizen) is not None and any(r.memories for r in later.receipts)
    with pytest.raises(ValueError):
        RetentionRule(level="N1")


def test_the_command_line_erases_only_with_yes_and_applies_retention_dry_by_default(
        memory, citizen, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    memory.ingest([_node("x", "Something to erase.", citizen=citizen),
                   _node("y", "An old one.", citizen=citizen, created_at=datetime(2024, 1, 1, tzinfo=UTC))])
    where = ["--data-dir", str(memory.data_dir)]
    assert main(["erase", "x", "--citizen", citizen, *where]) == 2
    assert "--yes" in capsys.readouterr().err and memory.get_node("x", "N1", citizen) is not None
    assert main(["erase", "x", "--citizen", citizen, "--yes", "--no-wait", *where]) == 0
    assert '"memories": 1' in capsys.readouterr().out and memory.get_node("x", "N1", citizen) is None
    assert main(["inspect", "erasures", "--citizen", citizen, *where]) == 0
    assert "user_requested" in capsys.readouterr().out

    policy = tmp_path / "policy.json"
    policy.write_text('{"rules": [{"level": "N1", "node_types": ["Memory"], "forget_after": "P90D"}]}')
    assert main(["retention", str(policy), *where]) == 0
    assert "dry run" in capsys.readouterr().out and memory.get_node("y", "N1", citizen).forgotten_at is None
    assert main(["retention", str(policy), "--apply", *where]) == 0
    assert memory.get_node("y", "N1", citizen).forgotten_at is not None
