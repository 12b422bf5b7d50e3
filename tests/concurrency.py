"""Run one call from many threads at once, to check a shared object gives each caller its own answer."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def at_once(call: Callable[[int], Any], n: int, rounds: int = 3) -> list[list[Any]]:
    """``call(i)`` for i in ``range(n)``, all threads released together, ``rounds`` times; each round's results.

    An exception in a thread is raised here, not lost in the thread.
    """
    out = []
    for _ in range(rounds):
        barrier = threading.Barrier(n)
        got: list[Any] = [None] * n
        errors: list[BaseException] = []

        def run(i: int) -> None:
            try:
                barrier.wait(timeout=30)
                got[i] = call(i)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in threads), "a thread did not finish"
        if errors:
            raise errors[0]
        out.append(got)
    return out
