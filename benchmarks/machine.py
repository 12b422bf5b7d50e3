"""What machine a benchmark ran on, for the line printed under its table."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def machine(dists: Sequence[str]) -> str:
    """CPU model, cores (usable), memory, Python and OS, and the versions of ``dists`` that are installed."""
    cpu = platform.processor() or "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        kib = int(Path("/proc/meminfo").read_text().split("\n")[0].split()[1])
        mem = f", {kib / 1024 / 1024:.0f} GiB RAM"
    versions = []
    for dist in dists:
        with contextlib.suppress(PackageNotFoundError):
            versions.append(f"{dist} {version(dist)}")
    return (f"CPU {cpu}, {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable){mem}; "
            f"Python {platform.python_version()}, {platform.system()} {platform.release()}; " + ", ".join(versions))


def commit() -> str:
    """The commit of the llama-consciousness tree imported (short hash, "+ uncommitted changes" when its package
    differs from it), or where it came from when that is not a git checkout."""
    import llama_consciousness

    root = Path(llama_consciousness.__file__).resolve().parent.parent
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "llama_consciousness"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        if head:
            return head + (" + uncommitted changes" if dirty else "")
    return f"{root} (not a git checkout)"


def footer(script: str, argv: Sequence[str] | None, dists: Sequence[str]) -> str:
    """The lines under a benchmark's table: date, machine, the command as run, and the commit."""
    import shlex
    import sys
    from datetime import datetime, timezone

    args = " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    return (f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {machine(dists)}\n"
            f"command: python benchmarks/{script} {args}\ncommit: {commit()}")
