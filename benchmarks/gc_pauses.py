"""The garbage collector's pauses while a block runs (``gc.callbacks``), by generation: a benchmark row that
shows where a latency tail comes from, and would show it coming back."""

from __future__ import annotations

import gc
import time


class GcPauses:
    """Every collection's duration while installed, by generation (0, 1, 2)."""

    def __init__(self) -> None:
        self.pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses[info["generation"]].append((time.perf_counter() - self._started) * 1000)

    def __enter__(self) -> "GcPauses":
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)

    @property
    def longest(self) -> float:
        return max((max(p, default=0.0) for p in self.pauses.values()), default=0.0)

    def counts(self) -> dict[int, tuple[int, float]]:
        """Per generation: how many collections, and the longest (ms)."""
        return {g: (len(p), max(p, default=0.0)) for g, p in self.pauses.items()}

    def summary(self) -> str:
        return describe(self.counts())


def describe(counts: dict[int, tuple[int, float]]) -> str:
    """``GcPauses.summary`` of ``counts`` (``GcPauses.counts``, or several processes' summed)."""
    return ", ".join(f"gen{g} {count} (max {longest:.0f} ms)" for g, (count, longest) in counts.items())
