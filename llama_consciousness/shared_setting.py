"""A process-wide setting that nested and concurrent users share.

Why: some settings that speed up a bulk operation belong to the whole
process (the garbage collector's thresholds, the BLAS library's thread
count), while the operations that want them overlap: a retrieval inside
an ingestion, two lanes of one ingestion, two retrievals on two threads.
If each use set the value on entry and put back what it found on exit, an
inner or a concurrent use would put back the raised value, or undo the
setting under another use still running.  Here the first entry applies
the setting, later entries only count, and the last exit restores what
the first entry found.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class SharedSetting:
    """``apply()`` on the first entry (returns what to restore), ``restore(saved)`` on the last exit.

    Use an instance as ``with setting(): ...``; the exit runs also when the block fails.
    """

    def __init__(self, apply: Callable[[], Any], restore: Callable[[Any], None]) -> None:
        self._apply = apply
        self._restore = restore
        self._lock = threading.Lock()
        self._users = 0
        self._saved: Any = None

    @property
    def users(self) -> int:
        """Blocks inside the setting now."""
        return self._users

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._users == 0:
                self._saved = self._apply()
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    saved, self._saved = self._saved, None
                    self._restore(saved)
