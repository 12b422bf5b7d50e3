"""The watchdog of an embedded FalkorDB server left running after its last user (``idle_timeout_s``).

``python -m llama_consciousness.storage.idle_stop DATA_DIR SINCE AT``: sleeps
until ``AT`` (epoch seconds), then stops the server of ``DATA_DIR``, left idle
at ``SINCE``, unless a client
took it meanwhile or a later stop left it idle again (that stop's own
watchdog then decides).  Detached from the application, so that the
application may exit at once.
"""

from __future__ import annotations

import sys
import time

from llama_consciousness.storage.falkordb_server import EmbeddedFalkorDB


def main(argv: list[str]) -> int:
    root, since, at = argv[0], float(argv[1]), float(argv[2])
    time.sleep(max(0.0, at - time.time()))
    EmbeddedFalkorDB(root).stop_if_idle(since)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
