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

    Use an instance as ``with setting(): ...``; the exit runs also when the
    block fails.  With ``adjust``, each entry may ask for a value
    (``with setting(ask): ...``) and ``adjust(saved, asked)`` sets what
    the blocks inside now ask for, after every entry and every exit but the
    last (e.g. the highest of several thresholds).
    """

    def __init__(
        self,
        apply: Callable[[], Any],
        restore: Callable[[Any], None],
        adjust: Callable[[Any, list[Any]], None] | None = None,
    ) -> None:
        self._apply = apply
        self._restore = restore
        self._adjust = adjust
        self._lock = threading.Lock()
        self._asked: list[Any] = []
        self._saved: Any = None

    @property
    def users(self) -> int:
        """Blocks inside the setting now."""
        return len(self._asked)

    @contextmanager
    def __call__(self, ask: Any = None) -> Iterator[None]:
        with self._lock:
            if not self._asked:
                self._saved = self._apply()
            self._asked.append(ask)
            if self._adjust is not None:
                self._adjust(self._saved, self._asked)
        try:
            yield
        finally:
            with self._lock:
                self._asked.remove(ask)
                if not self._asked:
                    saved, self._saved = self._saved, None
                    self._restore(saved)
                elif self._adjust is not None:
                    self._adjust(self._saved, self._asked)
