"""The embedded servers do not outlive the processes that use them, however they end (issue 40, item 5),
and a crash does not cost a replay of every write since the last log rewrite (item 6).

Reproduced before: a script that opened the memory and exited without ``close()`` (or was killed with
SIGKILL) left its redis-server (and, killed, its Postgres) running until some later process opened and
closed that data directory; SIGTERM to ``llama-consciousness demo`` while its server was starting (its
``redis.pid`` written, the state file not yet) left that server running with nobody knowing of it; and a
burst of writes stayed in the append-only tail until the file doubled, to be replayed query by query
after a crash.  Each test runs real client processes on their own data directory and waits (bounded) for
the server to be gone, then reopens the directory and finds what was written.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from llama_consciousness import ConsciousnessMemory
from llama_consciousness.storage.falkordb_server import _alive

GONE_WITHIN_S = 20.0

_CLIENT = textwrap.dedent(
    """
    import sys, time
    from llama_consciousness import ConsciousnessMemory, MemoryNode
    memory = ConsciousnessMemory(data_dir=sys.argv[1])
    memory.upsert([MemoryNode(node_id="kept", level="N2", name="Kept", energy=0.5, confidence=0.5,
                              description="written by a process that never closed its memory")])
    print(memory._falkordb_server.pid, flush=True)
    if sys.argv[2] == "wait":
        time.sleep(600)
    """
)


def _servers_of(directory: Path) -> list[int]:
    """Live (not zombie) redis-servers whose command line names ``directory``."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        line = " ".join(proc.info["cmdline"] or [])
        if "redis-server" in line and str(directory) in line and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc.pid)
    return found


def _wait_gone(pid: int, timeout_s: float = GONE_WITHIN_S) -> float:
    """Seconds until ``pid`` is no longer a live redis-server; fails the test past ``timeout_s``."""
    t0 = time.monotonic()
    while _alive(pid):
        if time.monotonic() - t0 > timeout_s:
            pytest.fail(f"the FalkorDB server {pid} still runs {timeout_s:.0f} s after its last client ended")
        time.sleep(0.1)
    return time.monotonic() - t0


def _reopen_finds_the_note(directory: Path) -> None:
    with ConsciousnessMemory(data_dir=directory) as memory:
        node = memory.get_node("kept", "N2")
        assert node is not None and "never closed" in node.description


@pytest.fixture
def directory(data_root: Path, request: pytest.FixtureRequest) -> Path:
    path = data_root / f"life_{request.node.name[-12:]}_{os.getpid()}"
    yield path
    for proc in psutil.process_iter(["cmdline"]):  # whatever the outcome, no server left behind
        line = " ".join(proc.info["cmdline"] or [])
        if ("redis-server" in line or "postgres" in line) and str(path) in line:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()


def test_a_script_that_exits_without_close_stops_its_server(directory: Path) -> None:
    run = subprocess.run([sys.executable, "-c", _CLIENT, str(directory), "exit"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    pid = int(run.stdout.split()[-1])
    _wait_gone(pid)
    assert not _servers_of(directory)
    _reopen_finds_the_note(directory)


def test_a_client_killed_with_sigkill_stops_its_server(directory: Path) -> None:
    client = subprocess.Popen([sys.executable, "-c", _CLIENT, str(directory), "wait"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        pid = int(client.stdout.readline())
        time.sleep(1.2)  # appendfsync everysec: what was acknowledged a second ago is on disk either way
    finally:
        client.kill()
        client.wait(timeout=30)
    assert _alive(pid)
    _wait_gone(pid)
    _reopen_finds_the_note(directory)


def test_a_server_shared_with_a_live_process_stays(directory: Path) -> None:
    """Only the *last* client's end stops it: a process that still holds the server keeps it."""
    with ConsciousnessMemory(data_dir=directory) as memory:
        pid = memory._falkordb_server.pid
        run = subprocess.run([sys.executable, "-c", _CLIENT, str(directory), "exit"], capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        assert int(run.stdout.split()[-1]) == pid
        time.sleep(3.5)  # past the watcher's two looks at the clients
        assert _alive(pid)
        assert memory.get_node("kept", "N2") is not None
    _wait_gone(pid, 5.0)  # this close was the last: stopped at once


def test_an_idle_timeout_keeps_an_abandoned_server_for_that_long(directory: Path) -> None:
    """``server_idle_timeout_s`` applies to a client killed without ``close()`` as to one that closed."""
    script = _CLIENT.replace("ConsciousnessMemory(data_dir=sys.argv[1])",
                             "ConsciousnessMemory(data_dir=sys.argv[1], server_idle_timeout_s=4)")
    run = subprocess.run([sys.executable, "-c", script, str(directory), "exit"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    pid = int(run.stdout.split()[-1])
    time.sleep(3.0)  # noticed within 2 s; then idle for 4 s
    assert _alive(pid)
    _wait_gone(pid)
    _reopen_finds_the_note(directory)


def test_sigterm_to_the_demo_while_its_server_starts_leaves_no_server(directory: Path) -> None:
    """SIGTERM as soon as the server's ``redis.pid`` appears, before the state file names the server."""
    pidfile = directory / "falkordb" / "redis.pid"
    demo = subprocess.Popen([sys.executable, "-m", "llama_consciousness.cli", "demo", "--data-dir", str(directory)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not pidfile.exists() and demo.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        assert pidfile.exists(), "the demo ended before its server started"
        demo.send_signal(signal.SIGTERM)
        code = demo.wait(timeout=60)
    finally:
        demo.kill()
    stderr = demo.stderr.read()
    demo.stderr.close()
    assert code in (128 + signal.SIGTERM, -signal.SIGTERM), stderr[-2000:]
    t0 = time.monotonic()
    while _servers_of(directory):
        if time.monotonic() - t0 > GONE_WITHIN_S:
            state = (directory / "falkordb" / "server.json")
            pytest.fail(f"FalkorDB {_servers_of(directory)} of the demo still runs {GONE_WITHIN_S:.0f} s after "
                        f"SIGTERM; state: {state.read_text() if state.exists() else None}")
        time.sleep(0.1)
    state = json.loads((directory / "falkordb" / "server.json").read_text() or "{}") \
        if (directory / "falkordb" / "server.json").exists() else {}
    assert not state.get("clients")


def test_a_burst_of_writes_is_folded_into_a_snapshot_while_the_server_runs(directory: Path) -> None:
    """Item 6: a crash after a bulk write must not replay it query by query (minutes at 10K memories per
    level before): once the writes pause, the append-only tail is folded while the server runs, so a
    SIGKILL leaves a snapshot to read and a short tail."""
    from falkordb import FalkorDB

    from llama_consciousness.storage import EmbeddedFalkorDB

    server = EmbeddedFalkorDB(directory).start()
    pid = server.pid
    try:
        client = FalkorDB(unix_socket_path=str(server.socket_path))
        graph = client.select_graph("burst")
        for start in range(0, 20000, 2000):  # a few MB of write commands, below Redis's own rewrite size
            graph.query("UNWIND range($a, $b) AS i CREATE (:N {i: i}) WITH count(*) AS c "
                        "CREATE (:Pad {text: $pad})", {"a": start, "b": start + 1999, "pad": "x" * 150_000})
        info = client.connection.info("persistence")
        assert info["aof_current_size"] - info["aof_base_size"] > (1 << 20)
        deadline = time.monotonic() + GONE_WITHIN_S
        while time.monotonic() < deadline:
            info = client.connection.info("persistence")
            if info["aof_current_size"] - info["aof_base_size"] < (1 << 20) and not info["aof_rewrite_in_progress"]:
                break
            time.sleep(0.2)
        tail = info["aof_current_size"] - info["aof_base_size"]
        assert tail < (1 << 20), f"the tail is still {tail} bytes {GONE_WITHIN_S:.0f} s after the writes"
        time.sleep(1.2)  # appendfsync everysec
        client.close()
    finally:
        os.kill(pid, signal.SIGKILL)  # the crash: no close, no compaction on the way out
    while _alive(pid):
        time.sleep(0.05)
    again = EmbeddedFalkorDB(directory).start()
    try:
        db = FalkorDB(unix_socket_path=str(again.socket_path))
        assert db.select_graph("burst").ro_query("MATCH (n:N) RETURN count(n)").result_set[0][0] == 20000
        db.close()
        log = (again.directory / "falkordb.log").read_text()
        assert "DB loaded from base file" in log.split("Ready to accept connections")[-2]
    finally:
        again.stop()


def test_a_client_killed_with_sigkill_stops_its_postgres_too(directory: Path) -> None:
    """The embedded Postgres (N3's vectors in pgvector) is held by the same processes: stopped with them."""
    script = _CLIENT.replace("ConsciousnessMemory(data_dir=sys.argv[1])",
                             "ConsciousnessMemory(data_dir=sys.argv[1], vector_backends={'N3': 'pgvector'})")
    client = subprocess.Popen([sys.executable, "-c", script, str(directory), "wait"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        pid = int(client.stdout.readline())
        postmaster = int((directory / "postgres" / "postmaster.pid").read_text().split()[0])
        time.sleep(1.2)
    finally:
        client.kill()
        client.wait(timeout=30)
    assert _alive(pid) and psutil.pid_exists(postmaster)
    _wait_gone(pid)
    t0 = time.monotonic()
    while psutil.pid_exists(postmaster) and psutil.Process(postmaster).status() != psutil.STATUS_ZOMBIE:
        if time.monotonic() - t0 > GONE_WITHIN_S:
            pytest.fail(f"the embedded Postgres {postmaster} still runs {GONE_WITHIN_S:.0f} s after its client")
        time.sleep(0.1)
    with ConsciousnessMemory(data_dir=directory, vector_backends={"N3": "pgvector"}) as memory:
        assert memory.get_node("kept", "N2") is not None
