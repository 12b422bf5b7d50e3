"""Exceptions of llama-consciousness.

All derive from :class:`ConsciousnessError` so an application can catch the
library's failures in one place, and each also derives from the builtin it
refines (``ValueError``, ``RuntimeError``, ``OSError``) so code written
against plain Python keeps working.
"""

from __future__ import annotations


class ConsciousnessError(Exception):
    """Base class of every error raised on purpose by this package."""


class DataDirectoryError(ConsciousnessError, OSError):
    """The data directory cannot be created, written or used for sockets."""


class EmbeddedServerError(ConsciousnessError, RuntimeError):
    """An embedded server (FalkorDB or Postgres) failed to start or stop."""


class EmbeddingDimensionError(ConsciousnessError, ValueError):
    """A vector does not have the dimension of the level's index."""


class VectorBackendError(ConsciousnessError, ValueError):
    """A level graph is opened with its vectors expected elsewhere than where they were written (FalkorDB or
    Postgres, ``vector_backends``): its vector channel would find nothing."""


class LevelError(ConsciousnessError, ValueError):
    """An unknown level, or a level that needs a citizen id without one."""


class StorageError(ConsciousnessError, RuntimeError):
    """A query against a level store failed."""
