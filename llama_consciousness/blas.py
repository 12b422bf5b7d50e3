"""One BLAS thread for the matrix products of an ingestion.

Why: OpenBLAS splits a large product across every core, and its helper
threads then busy-wait for the next call instead of sleeping, on a core
that the worker process and the graph server need.  Measured on 10,000
memories on 2 cores (the near-duplicate filter's 1,000 x 9,000 x 256
products): the writing process used 7.7 CPU-seconds with numpy's default
and 5.6 with one thread, and the run took 8.7 s instead of 9.8 s.

Process-wide, so nested and concurrent blocks share one limit
(``SharedSetting``).  Without a BLAS that ``threadpoolctl`` drives, nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy  # noqa: F401 - loads the BLAS library before the controller looks for it

from llama_consciousness.shared_setting import SharedSetting

_controller: Any = None


def _blas_controller() -> Any:
    """A ``threadpoolctl`` controller for the BLAS libraries loaded now (None if there is none)."""
    global _controller
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController

            controller = ThreadpoolController().select(user_api="blas")
            _controller = controller if controller.lib_controllers else False
        except Exception:  # noqa: BLE001 - an unknown BLAS build: leave it as it is
            _controller = False
    return _controller or None


@contextmanager
def _in_control() -> Iterator[None]:
    """Let this thread, and the next setter after it, set OpenBLAS's threads.

    ``threadpoolctl`` silently ignores any thread but the first that set
    OpenBLAS's pool; the first and last users here may be different lanes
    (``force`` from any thread: why ``pyproject.toml`` asks for 3.8).
    """
    from threadpoolctl import OpenBLASController

    OpenBLASController.clear_controlling_thread(force=True)
    try:
        yield
    finally:
        OpenBLASController.clear_controlling_thread(force=True)


def _one_thread() -> Any:
    """Limit the BLAS to one thread; returns the limiter that undoes it (None without a known BLAS)."""
    controller = _blas_controller()
    if controller is None:
        return None
    with _in_control():
        return controller.limit(limits=1)


def _restore(limiter: Any) -> None:
    if limiter is not None:
        with _in_control():
            limiter.restore_original_limits()


one_blas_thread = SharedSetting(_one_thread, _restore)
"""``with one_blas_thread():`` BLAS calls of this process use one thread for the duration of the block."""


def blas_threads() -> int | None:
    """The number of threads the BLAS library uses now (None if there is no known BLAS)."""
    controller = _blas_controller()
    return None if controller is None else max(lib.num_threads for lib in controller.lib_controllers)
