"""``kill -9`` in the middle of ``memory.erase``, then the data directory reopened: every memory is there
whole or gone whole, never half, and erasing the same ids again leaves none of the erased text in any file.

Each trial is a real client process on its own data directory (its own embedded FalkorDB): it ingests a few
memories carrying a unique marker and one kept memory with another, then erases the marked ones (``wait=True``,
snapshots uncompressed so that a byte search would find a text they hold) and is SIGKILLed at one moment of
the erasure: at once, after a short random delay, or paused at a step (after the graph's transaction, after the
keyword index's purge, between the rewrite of the write log and the new snapshot; the child prints each step
it reaches and, for its trial's step, waits there to be killed).  The test then opens each directory itself
(adopting the server the killed client left, or starting it again) and checks, for each memory: its node, the
vector search, the keyword channel and a retrieval agree (all find it or none does); erases the same ids again;
and finds the erased marker in no file of the directory while the kept marker is still found.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from files_on_disk import files_holding
from llama_consciousness import ConsciousnessMemory

N_ERASED = 5
CITIZEN = "kill9"
LINE_TIMEOUT_S = 60.0

_CHILD = textwrap.dedent(
    """
    import sys, time
    from llama_consciousness import ConsciousnessMemory
    from llama_consciousness.schema import MemoryNode
    from llama_consciousness.storage import erasure, keyword_index

    directory, citizen, gone, kept, pause_at, n = sys.argv[1:7]
    n = int(n)

    def mark(step):
        print(step, flush=True)
        if step == pause_at:
            time.sleep(600)  # the test kills this process here

    erase_memories = erasure.erase_memories
    def traced_erase_memories(ids):
        result = yield from erase_memories(ids)  # the graph's one transaction
        mark("graph_done")
        return result
    erasure.erase_memories = traced_erase_memories
    purge = keyword_index.KeywordIndex.purge
    def traced_purge(self, *args, **kwargs):
        purge(self, *args, **kwargs)
        mark("purged")
    keyword_index.KeywordIndex.purge = traced_purge
    background_job = erasure.background_job
    def traced_job(client, command, deadline):
        status = background_job(client, command, deadline)
        mark(command.lower() + "_done")
        return status
    erasure.background_job = traced_job

    memory = ConsciousnessMemory(data_dir=directory)
    memory.db.connection.config_set("rdbcompression", "no")
    memory.ingest([MemoryNode(node_id=f"m{i}", level="N1", citizen_id=citizen, name=f"Door note {i}",
                              description=f"Door note {i}: the code word is {gone}, keep it secret.",
                              energy=0.5, confidence=0.8) for i in range(n)]
                  + [MemoryNode(node_id="kept", level="N1", citizen_id=citizen, name="Garden note",
                                description=f"The garden gate opens with {kept}.", energy=0.5, confidence=0.8)])
    memory.retriever(citizen_id=citizen).retrieve(gone)  # the keyword index on disk holds the marker too
    print("ready", flush=True)
    print("erasing", flush=True)
    receipt = memory.erase([f"m{i}" for i in range(n)], "N1", citizen)
    print("erased", receipt.memories, flush=True)
    memory.close()
    """
)


@dataclass
class Trial:
    name: str
    kill_on: str  # the line after which the child is killed
    delay_s: float = 0.0
    pause_at: str = "-"
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="lck9", dir="/tmp")))
    gone: str = field(default_factory=lambda: f"zebra{uuid.uuid4().hex[:16]}")
    kept: str = field(default_factory=lambda: f"okapi{uuid.uuid4().hex[:16]}")
    lines: list[str] = field(default_factory=list)
    killed: bool = False
    error: str | None = None

    def run(self) -> None:
        """Run the child and kill it (SIGKILL) ``delay_s`` after its line ``kill_on``."""
        stderr = self.directory.parent / f"{self.directory.name}.stderr"
        with open(stderr, "wb") as err:
            child = subprocess.Popen([sys.executable, "-c", _CHILD, str(self.directory), CITIZEN, self.gone,
                                      self.kept, self.pause_at, str(N_ERASED)],
                                     stdout=subprocess.PIPE, stderr=err, text=True)
        stuck = threading.Timer(LINE_TIMEOUT_S, child.kill)  # a child that hangs ends the loop below
        stuck.start()
        try:
            for line in child.stdout:
                self.lines.append(line.strip())
                if self.lines[-1] == self.kill_on:
                    if self.delay_s:
                        time.sleep(self.delay_s)
                    child.send_signal(signal.SIGKILL)
                    self.killed = True
                    break
            if not self.killed:
                self.error = f"never reached {self.kill_on!r}: {self.lines}; " + stderr.read_text()[-2000:]
        finally:
            stuck.cancel()
            child.kill()
            child.wait(30)
            child.stdout.close()
            stderr.unlink(missing_ok=True)


def _server_processes(directory: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            line = " ".join(proc.info["cmdline"] or [])
            if "redis" in line and str(directory) in line and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def _where_found(memory: ConsciousnessMemory, trial: Trial) -> dict[str, dict[str, bool]]:
    """For each memory: whether its node exists, and whether the vector search, the keyword channel and a
    retrieval find it."""
    question = f"door note code word {trial.gone} garden gate {trial.kept}"
    retriever = memory.retriever(citizen_id=CITIZEN)
    vector = {h.node_id for h in memory.vector_search(question, "N1", CITIZEN, k=50)}
    stream = memory.retrieve_stream(retriever.intention_for(question).model_copy(update={"query_levels": ["N1"]}))
    keyword = {n.node_id for level in stream.levels.values() for n in level.keyword_results}
    errors = [level.error for level in stream.levels.values() if level.error]
    assert not errors, errors
    retrieved = {n.node.node_id.split(":", 1)[1] for n in retriever.retrieve(question)}
    ids = [f"m{i}" for i in range(N_ERASED)] + ["kept"]
    nodes = {n.node_id for n in memory.get_nodes(ids, "N1", CITIZEN)}
    return {i: {"node": i in nodes, "vector": i in vector, "keyword": i in keyword, "retrieval": i in retrieved}
            for i in ids}


def test_an_erasure_killed_anywhere_leaves_memories_whole_and_is_completed_by_a_rerun() -> None:
    trials = [
        Trial("at once", kill_on="erasing"),
        Trial("after a random delay", kill_on="erasing", delay_s=random.uniform(0.01, 0.25)),
        Trial("after the graph's transaction", kill_on="graph_done", pause_at="graph_done"),
        Trial("after the keyword purge", kill_on="purged", pause_at="purged"),
        Trial("between the log rewrite and the snapshot", kill_on="bgrewriteaof_done", pause_at="bgrewriteaof_done"),
    ]
    try:
        threads = [threading.Thread(target=trial.run) for trial in trials]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [t.error for t in trials] == [None] * len(trials)

        for trial in trials:
            what = f"{trial.name} (delay {trial.delay_s:.3f} s; lines {trial.lines})"
            with ConsciousnessMemory(data_dir=trial.directory) as memory:
                found = _where_found(memory, trial)
                assert all(found["kept"].values()), (what, found)
                states = {tuple(where.values()) for i, where in found.items() if i != "kept"}
                # one transaction: all there, each found everywhere; or all gone, each found nowhere
                assert states in ({(True, True, True, True)}, {(False, False, False, False)}), (what, found)
                erased_before = states == {(False, False, False, False)}
                if trial.pause_at != "-":  # paused after the transaction: gone in the graph for sure
                    assert erased_before, (what, found)

                memory.db.connection.config_set("rdbcompression", "no")
                receipt = memory.erase([f"m{i}" for i in range(N_ERASED)], "N1", CITIZEN)
                assert receipt.memories == (0 if erased_before else N_ERASED) and receipt.files_rewritten, what
                found = _where_found(memory, trial)
                assert not any(any(found[f"m{i}"].values()) for i in range(N_ERASED)), (what, found)
                assert all(found["kept"].values()), (what, found)
                on_disk = files_holding(trial.directory, trial.gone, trial.kept)
                assert on_disk[trial.gone] == [], (what, on_disk)
                assert on_disk[trial.kept], f"{what}: the kept text should be on disk (else this proves nothing)"
            deadline = time.monotonic() + 15
            while _server_processes(trial.directory) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not _server_processes(trial.directory), f"{what}: a server of the directory still runs"
    finally:
        for trial in trials:
            for proc in _server_processes(trial.directory):  # only what this test's directories started
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            shutil.rmtree(trial.directory, ignore_errors=True)
