"""Erase: permanent removal of memories, or of everything about a citizen, everywhere the text was copied.

``ConsciousnessMemory.erase`` / ``erase_citizen`` call these.  Unlike a forget (a retraction kept in the
history), an erasure leaves nothing to restore: the memories go from the graph with their links, the
entities only they named, their use records, their vectors (FalkorDB's index, pgvector rows) and their
keyword documents; then, unless ``wait=False``, the servers' files are rewritten (the FalkorDB write log
and snapshot, on every server holding the graph, replicas included; Postgres vacuumed and its old WAL
gone) so that a byte search of the data directory finds none of the erased text.  What was done comes
back as an :class:`~llama_consciousness.schema.ErasureReceipt`, safe to log: counts and ids, never text.

Steps run in an order that a crash can interrupt anywhere: the graph first (one transaction: a memory is
there whole or gone whole), then what derives from it; erasing the same ids again completes the rest
(pgvector rows of the ids, the keyword index, the files), so a rerun after ``kill -9`` finishes the job.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llama_consciousness.forgetting import MemorySelector, node_id_list
from llama_consciousness.levels import check_level, graph_level, graph_name
from llama_consciousness.schema import ErasureReceipt
from llama_consciousness.storage.reader import MemoryKeeper
from llama_consciousness.schema._time import utcnow
from llama_consciousness.storage import erasure
from llama_consciousness.storage.cluster import ClusterDB
from llama_consciousness.storage.level_store import (
    CHANGES_LABEL, EDGE_TYPE, GRAPH_LAYOUT, GRAPH_REGISTRY, NODE_LABEL, Query,
)


logger = logging.getLogger(__name__)


def _epoch() -> Any:
    rows = yield Query(f"MATCH (m:{CHANGES_LABEL}) RETURN m.epoch", read_only=True)
    return rows[0][0] if rows else None


def _citizen_records(citizen_id: str) -> Any:
    """The memories of a shared level (N2, N3) that belong to ``citizen_id``."""
    rows = yield Query(f"MATCH (n:{NODE_LABEL}) WHERE n.citizen_id = $c RETURN n.node_id", {"c": citizen_id},
                       read_only=True)
    return [row[0] for row in rows]


def _citizen_links(citizen_id: str) -> Any:
    """Delete the links of a shared level that belong to ``citizen_id`` (between memories that stay)."""
    rows = yield Query(f"MATCH ()-[r:{EDGE_TYPE}]->() WHERE r.citizen_id = $c DELETE r RETURN count(r)",
                       {"c": citizen_id})
    return int(rows[0][0]) if rows else 0


def _servers(memory: MemoryKeeper, graph: str) -> list[Any]:
    """The redis clients of every server holding ``graph`` (a cluster's master and replicas, or the one)."""
    if isinstance(memory.db, ClusterDB):
        servers = memory.db.holders(graph)
        # and the replicas the master itself has (ROLE): the slot map (CLUSTER SLOTS) leaves a replica out until
        # the cluster's gossip says it has replicated something, so one erasure right after a citizen's first
        # writes scrubbed the master alone and the replicas' files kept the erased text
        role = servers[0].connection.execute_command("ROLE")
        if role and role[0] == "master":
            servers += [memory.db.server((str(host), int(port)), read_only=True) for host, port, *_ in role[2]]
        return list({id(server.connection): server.connection for server in servers}.values())
    return [memory.db.connection]


def _forget_graph(memory: MemoryKeeper, graph: str) -> None:
    """``erasure.forget_graph`` where the package's keys are.  On a cluster each key lives on its own slot's
    master, not with the graph: sent to the graph's master and replicas (as it was), it failed with MOVED and
    stopped erase_citizen before the shared levels and the files; the replicas follow their masters."""
    if isinstance(memory.db, ClusterDB):
        memory.db.node(GRAPH_REGISTRY).connection.srem(GRAPH_REGISTRY, graph)
        memory.db.node(GRAPH_LAYOUT).connection.hdel(GRAPH_LAYOUT, graph)
    else:
        erasure.forget_graph(memory.db.connection, graph)


def rewrite_files(memory: MemoryKeeper, graphs: Sequence[str], keys: Sequence[str] = ()) -> None:
    """Rewrite the files holding what was erased from ``graphs``, on every server holding them, and Postgres's
    when a level keeps its vectors there (what ``erase`` does with ``wait``; once for many erasures); and the
    files of the servers holding ``keys`` (the package's own keys an erasure edited)."""
    pgvector = any(memory.vector_backends[graph_level(g)[0]] == "pgvector" for g in graphs if graph_level(g))
    by_server: dict[int, tuple[Any, list[str]]] = {}
    for graph in graphs:
        for client in _servers(memory, graph):
            by_server.setdefault(id(client), (client, []))[1].append(graph)
    for key in keys:  # one server holds them all, or on a cluster their slots' masters: files only
        for client in _servers(memory, key):
            by_server.setdefault(id(client), (client, []))
    for client, names in by_server.values():
        erasure.scrub_server(client, names)
    if pgvector:
        memory.pgvector.purge_files()


def erase(memory: MemoryKeeper, node_ids: str | Sequence[str] | None, level: str,
          citizen_id: str | None = None, *, where: MemorySelector | Mapping[str, Any] | None = None,
          reason: str = "user_requested", wait: bool = True) -> ErasureReceipt:
    """See ``ConsciousnessMemory.erase``."""
    receipt = _erase(memory, node_ids, level, citizen_id, where=where, reason=reason, wait=wait)
    keep_receipt(memory, receipt)
    return receipt


def _erase(memory: MemoryKeeper, node_ids: str | Sequence[str] | None, level: str,
           citizen_id: str | None = None, *, where: MemorySelector | Mapping[str, Any] | None = None,
           reason: str = "user_requested", wait: bool = True) -> ErasureReceipt:
    if (node_ids is None) == (where is None):
        raise ValueError("erase takes either node_ids or a selector (where=...), not both, not neither")
    reason = _reason(reason)
    store = memory.level(level, citizen_id)  # not ``writable``: an erase must not create a graph
    graph = store.plans.graph
    there = store.exists()
    if node_ids is not None:
        ids = node_id_list(node_ids)
        if not ids:
            raise ValueError("erase needs node ids (non-empty strings) or a selector")
    else:
        selector = MemorySelector.model_validate(where).model_copy(update={"include_forgotten": True})
        ids = store.run(selector.plan()) if there else []
    done = store.run(erasure.erase_memories(ids)) if ids and there else erasure.Erasure()
    receipt = ErasureReceipt(at=utcnow(), reason=reason, graphs=[graph], node_ids=done.erased_ids,
                             memories=done.memories, entities=done.entities, links=done.links,
                             access_records=done.access_records, uses_touched=done.uses_touched)
    on_pgvector = memory.vector_backends[check_level(level)] == "pgvector"
    if on_pgvector and ids:  # every id asked for: a rerun after a crash removes what the first run left
        receipt.vector_rows = memory.pgvector.delete_nodes(graph, [*ids, *done.entity_ids])
    # the keyword index starts over under the graph's epoch (new if something was erased now; the current one
    # on a rerun, whose first run may have died before this), its old files deleted, then indexes the graph
    if there:
        epoch = done.epoch or store.run(_epoch())
        memory.keyword_indexes.get(graph).purge(epoch)
        memory.bump_graph(graph)
        memory.index_written()
    if wait:
        rewrite_files(memory, [graph])
        receipt.files_rewritten = True
    logger.info("erased: %s", receipt.model_dump_json())
    return receipt


def erase_citizen(memory: MemoryKeeper, citizen_id: str, *, reason: str = "user_requested",
                  wait: bool = True) -> ErasureReceipt:
    """See ``ConsciousnessMemory.erase_citizen``."""
    reason = _reason(reason)
    n1 = graph_name("N1", citizen_id)  # validates the id
    receipt = ErasureReceipt(at=utcnow(), reason=reason, citizen_id=citizen_id)
    store = memory.level("N1", citizen_id)
    if store.exists():
        receipt.memories, receipt.links = store.counts()
        memory.delete_level("N1", citizen_id)  # the graph (states, uses, access), its vectors and keyword index
        receipt.graphs_deleted.append(n1)
    _forget_graph(memory, n1)
    scrubbed = [n1]
    if memory.vector_backends["N1"] == "pgvector":  # a rerun after a crash between the graph and its rows
        receipt.vector_rows += memory.pgvector.delete_graph(n1)
    for level in ("N2", "N3"):
        shared = memory.level(level)
        if not shared.exists():
            continue
        ids = shared.run(_citizen_records(citizen_id))
        links = shared.run(_citizen_links(citizen_id))
        if not ids and not links:
            continue
        part = _erase(memory, ids, level, reason=reason, wait=False) if ids else None
        receipt.graphs.append(shared.plans.graph)
        receipt.links += links
        if part is not None:
            receipt.node_ids += part.node_ids
            receipt.memories += part.memories
            receipt.entities += part.entities
            receipt.links += part.links
            receipt.access_records += part.access_records
            receipt.uses_touched += part.uses_touched
            receipt.vector_rows += part.vector_rows
        scrubbed.append(shared.plans.graph)
    if wait:
        # with the registry's servers: on a cluster not the graph's, and their write logs name the citizen's graph
        rewrite_files(memory, scrubbed, keys=(GRAPH_REGISTRY, GRAPH_LAYOUT))
        receipt.files_rewritten = True
    logger.info("erased citizen: %s", receipt.model_dump_json())
    keep_receipt(memory, receipt)
    return receipt


RECEIPTS_FILE = "erasures.jsonl"
"""The receipts kept in the data directory, one JSON line each, for ``inspect erasures``."""


def citizen_digest(citizen_id: str) -> str:
    """How a kept receipt names a citizen: a digest that says whether a given id was erased, not which was."""
    return "sha256:" + hashlib.sha256(citizen_id.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _kept_form(receipt: ErasureReceipt) -> dict[str, Any]:
    """A receipt as kept on disk: the citizen's id, and graph names holding it, as digests, since erasing a
    citizen means their id must not stay in the data directory either."""
    data = receipt.model_dump(mode="json")
    level_of = {graph: graph_level(graph) for graph in [*receipt.graphs, *receipt.graphs_deleted]}

    def name(graph: str) -> str:
        place = level_of.get(graph)
        return f"citizen_{citizen_digest(place[1])}" if place and place[0] == "N1" and place[1] else graph

    data["graphs"] = [name(g) for g in receipt.graphs]
    data["graphs_deleted"] = [name(g) for g in receipt.graphs_deleted]
    if receipt.citizen_id is not None:
        data["citizen_id"] = citizen_digest(receipt.citizen_id)
    return data


def keep_receipt(memory: MemoryKeeper, receipt: ErasureReceipt) -> None:
    """Append ``receipt`` (its kept form) to the data directory's receipts; a memory on servers given by URL
    has no directory of its own, and keeps none (the receipt is returned and logged all the same)."""
    if memory.data_dir is None:
        return
    line = json.dumps(_kept_form(receipt), sort_keys=True) + "\n"
    with _KEEP_LOCK, open(Path(memory.data_dir) / RECEIPTS_FILE, "a", encoding="utf-8") as out:
        out.write(line)


def kept_receipts(memory: MemoryKeeper, citizen_id: str | None = None) -> list[dict[str, Any]]:
    """The kept receipts, oldest first; with ``citizen_id``, those of erasures of that citizen or their N1."""
    path = None if memory.data_dir is None else Path(memory.data_dir) / RECEIPTS_FILE
    if path is None or not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if citizen_id is None:
        return rows
    digest = citizen_digest(citizen_id)
    return [r for r in rows if r.get("citizen_id") == digest or f"citizen_{digest}" in r.get("graphs", [])]


_KEEP_LOCK = threading.Lock()


def _reason(reason: Any) -> str:
    if not isinstance(reason, str) or not reason.strip() or len(reason) > 200:
        raise ValueError("an erasure needs a reason (a short text, e.g. 'user_requested' or 'retention')")
    return reason.strip()


__all__ = ["citizen_digest", "erase", "erase_citizen", "keep_receipt", "kept_receipts", "rewrite_files"]
