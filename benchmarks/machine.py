"""What machine a benchmark ran on, for the line printed under its table."""

from __future__ import annotations

import contextlib
import os
import platform
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
