"""Whether a process runs: shared by the embedded servers and their watcher (which loads only the storage
modules it needs, without LlamaIndex)."""

from __future__ import annotations

import psutil


def pid_alive(pid: int) -> bool:
    """True for a process that runs (a zombie, which an init may never reap, does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
