"""One vector-index search at a time per graph, in this process.

FalkorDB's vector index (HNSW, in RediSearch's VectorSimilarity) shares one
set of visited nodes between all the searches running on an index, so two
searches of one graph at the same time corrupt each other: a page comes
back with a memory repeated in the place of real neighbours, or short, or
missing a neighbour it skipped (FalkorDB issue #2848; fixed upstream, not
in the server this package ships).  A chatbot serving several users from
one process runs exactly such searches.

The cure here is to never send the server two searches of one graph at
once: every vector search holds its graph's gate from the moment it is sent
until its reply is read.  Searches of different graphs (a retrieval's three
levels) still run in parallel, and so does every other query.  Searches from
other processes are not gated; ``level_store._knn_page`` throws away a page
that repeats a memory, the visible half of the same corruption.

The gates are not reentrant: one thread never holds two searches of one
graph in flight (``storage.interleaved`` sends a search whose gate is taken
once the search in flight is read).
"""

from __future__ import annotations

import threading
from typing import Any

_gates: dict[tuple[Any, str], threading.Lock] = {}
_gates_lock = threading.Lock()



def searches_vectors(cypher: str) -> bool:
    """Whether a query searches the vector index (and must pass the gate)."""
    return "db.idx.vector.queryNodes" in cypher


def _server(db: Any) -> Any:
    """What tells servers apart: the address the client connects to (a cluster's own key: a graph name is
    one graph in the whole cluster)."""
    key = getattr(db, "server_key", None)
    if key is not None:
        return key
    pool = getattr(getattr(db, "connection", None), "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None) or {}
    if not kwargs:
        return id(db)
    return kwargs.get("path") or (kwargs.get("host"), kwargs.get("port"))


def gate(db: Any, graph: str) -> threading.Lock:
    """The lock that vector searches of ``graph`` on ``db``'s server hold while in flight."""
    key = (_server(db), graph)
    found = _gates.get(key)
    if found is None:
        with _gates_lock:
            found = _gates.setdefault(key, threading.Lock())
    return found
