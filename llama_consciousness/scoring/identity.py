"""Which stored memories are versions of one belief (the spec's ``extract_base_identity``).

Bitemporal memory never edits a belief in place: a new version supersedes
the old one.  To see a belief evolve (and to detect temporal dissonance),
versions must be grouped by a *base identity*.  The rule, in order:

1. an explicit identity wins: ``extra["base_id"]``;
2. a memory that ``supersedes`` another shares that memory's identity
   (followed through chains: v3 -> v2 -> v1);
3. otherwise the node id with a trailing version marker removed:
   ``_v2``, ``-v2``, ``.v2``, ``_version2``, ``@2`` (case-insensitive), so
   ``decision_v2_architecture_v1`` -> ``decision_v2_architecture``.  Only a
   *trailing* marker counts: the ``v2`` inside the name is part of it.

Rule 3 alone would merge unrelated ids that merely end alike, so grouping
prefers the explicit links of rules 1 and 2 when they exist.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

_VERSION_SUFFIX = re.compile(r"(?:[_\-.](?:v|version)\d+|@\d+)$", re.IGNORECASE)


class _Versioned(Protocol):
    node_id: str
    supersedes: str | None
    extra: Mapping[str, Any]


def extract_base_identity(node_id: str) -> str:
    """``node_id`` without a trailing version marker (rule 3 above)."""
    stripped = _VERSION_SUFFIX.sub("", node_id)
    return stripped or node_id


def base_identity(node: _Versioned, known: Mapping[str, _Versioned] | None = None) -> str:
    """The base identity of a memory, following ``supersedes`` through ``known``."""
    seen: set[str] = set()
    current = node
    while True:
        explicit = (current.extra or {}).get("base_id")
        if explicit:
            return str(explicit)
        parent = current.supersedes
        if not parent or parent in seen:
            break
        seen.add(current.node_id)
        if known is not None and parent in known:
            current = known[parent]
            continue
        return extract_base_identity(parent)
    return extract_base_identity(current.node_id)


def group_by_identity(nodes: Iterable[_Versioned], only_versioned: bool = True) -> dict[str, list[Any]]:
    """Memories grouped by base identity; with ``only_versioned``, groups of two or more."""
    items = list(nodes)
    known = {n.node_id: n for n in items}
    groups: dict[str, list[Any]] = {}
    for node in items:
        groups.setdefault(base_identity(node, known), []).append(node)
    if only_versioned:
        return {k: v for k, v in groups.items() if len(v) > 1}
    return groups
