"""One BLAS thread for the matrix products of an ingestion.

Why: numpy's BLAS (OpenBLAS) splits a large product across every core, and
after each call its helper threads keep busy-waiting for the next one for
a while instead of sleeping.  During an ingestion the other core is never
idle: the worker process and the graph server need it.  The
near-duplicate filter multiplies each chunk's vectors with the run's
earlier ones (1,000 x up to 9,000 x 256), and every such product left a
helper thread spinning.  Measured on 10,000 memories on 2 cores: the
writing process used 7.7 CPU-seconds with numpy's default and 5.6 with one
BLAS thread, and the run took 9.8 s instead of 8.7 s.  One thread costs
the product itself a few milliseconds per chunk.

The setting is process-wide, so nested and concurrent uses share one
limit: the first entry sets one thread, the last exit restores what was
there.  Without a BLAS that ``threadpoolctl`` can drive, this does nothing.
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


@contextmanager
def _in_control() -> Iterator[None]:
    """Let this thread set OpenBLAS's threads, and the next setter (any thread) after it.

    ``threadpoolctl`` lets only the first thread that set OpenBLAS's shared
    pool set it again, and silently ignores the others.  Here the first and
    the last user of the limit may be different threads (lanes of one
    ingestion), so control is released around each change (``force``,
    from any thread: why ``pyproject.toml`` asks for 3.8).
    """
    from threadpoolctl import OpenBLASController

    OpenBLASController.clear_controlling_thread(force=True)
    try:
        yield
    finally:
        OpenBLASController.clear_controlling_thread(force=True)


def blas_threads() -> int | None:
    """The number of threads the BLAS library uses now (None if there is no known BLAS)."""
    controller = _blas_controller()
    if controller is None:
        return None
    return max(lib.num_threads for lib in controller.lib_controllers)
