"""Fixtures of the tool tests; the helpers are in ``tool_helpers``."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def shared_dir(data_root: Path) -> Path:
    """The data directory of the session's memory: a server subprocess joins its servers."""
    return data_root / "shared"
