"""The watchdog of an embedded FalkorDB server left running after its last user (``idle_timeout_s``).

``python -m llama_consciousness.storage.idle_stop DATA_DIR SINCE AT PID``:
sleeps until ``AT`` (epoch seconds), then stops the server ``PID`` of
``DATA_DIR``, left idle at ``SINCE``, unless a client
took it meanwhile or a later stop left it idle again (that stop's own
watchdog then decides), and exits as soon as one of those happens; a data
directory deleted under the server stops it at once.  Detached from the
application, so that the application may exit at once.
"""

from __future__ import annotations

import sys
import time

import psutil

from llama_consciousness.storage.falkordb_server import EmbeddedFalkorDB, _alive


POLL_S = 5.0
"""How often a waiting watchdog looks whether it is still needed (a newer stop or a new user)."""


def main(argv: list[str]) -> int:
    root, since, at, pid = argv[0], float(argv[1]), float(argv[2]), int(argv[3])
    server = EmbeddedFalkorDB(root)
    while time.time() < at:
        if not server.directory.exists():  # the data were deleted under a running server: stop it now
            _kill(pid)
            return 0
        if not server.still_idle(server._read_state(), since):
            return 0  # in use again, or left idle again later: that stop's own watchdog decides
        time.sleep(min(POLL_S, max(0.0, at - time.time())))
    if server.directory.exists():
        server.stop_if_idle(since)
    else:
        _kill(pid)
    return 0


def _kill(pid: int) -> None:
    """SIGKILL: a server whose directory is gone refuses SIGTERM (its last save fails), and has nothing to
    keep."""
    if _alive(pid):
        psutil.Process(pid).kill()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
