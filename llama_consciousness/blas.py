"""One BLAS thread for the matrix products of an ingestion.

Why: OpenBLAS's helper threads busy-wait after each product on a core the
worker process and the graph server need.  On 10,000 memories on 2 cores
(the near-duplicate filter's products) the writing process used 7.7
CPU-seconds with numpy's default and 5.6 with one thread; the run took 8.7 s
instead of 9.8 s.  Nested and concurrent blocks share one limit.
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
    """Let this thread, and the next setter after it, set OpenBLAS's threads: ``threadpoolctl`` ignores any
    but the first thread that set them, and our first and last users may be different lanes (3.8's ``force``)."""
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
