"""Permanent erasure ("right to be forgotten"): the storage half.

Superseding a memory never deletes it (the graphs are bitemporal), so a memory that must be forgotten
needs its own path, and deleting it from the graph is not enough: its text also sits in every copy the
stores keep on disk.  Where it hides, and what takes it out:

* the level graph: the memory, its links, the entities only it named, its ``Access`` record and its id
  in the ``Use`` records (:func:`erase_memories`, one transaction);
* the keyword index beside the graph (tantivy segment files, which keep a deleted document's words until
  a merge): :func:`erase_memories` gives the graph's change log a new epoch, so every process's index
  starts over from the graph, and ``KeywordIndex.purge`` deletes the old files at once;
* the FalkorDB server's files (the append-only log of every write with its parameters, the snapshot)
  and its query log (a stream per graph, kept in snapshots) and slow log: :func:`scrub_server`;
* Postgres, when a level keeps its vectors there (ids, citizen ids, emotions; no text):
  ``PgVectorStore.delete_nodes`` / ``delete_graph``, then ``PgVectorStore.purge_files``;
* the package's own server keys naming a graph (a citizen's id is in its graph's name):
  :func:`forget_graph`, once the graph itself is deleted; and the server's log, where FalkorDB names
  graphs at every snapshot: :func:`scrub_server` drops the lines naming a deleted one.

In order, for memories: :func:`erase_memories`; ``delete_nodes`` of the erased ids and entities (a level in
Postgres); ``KeywordIndex.purge(erasure.epoch)``; :func:`scrub_server`; ``purge_files``.  For a citizen: the
graph deleted with its vectors and keyword index (``memory.delete_level``), :func:`forget_graph`, then the
same two scrubs.

Plans here are generators of :class:`Query` run by ``LevelGraphStore.run`` (as ``storage.usage``);
values only ever travel as parameters.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from llama_consciousness.errors import StorageError
from llama_consciousness.storage.falkordb_server import background_job, drop_log_lines, stale_persistence_files
from llama_consciousness.storage.level_store import (
    ACCESS_LABEL, CHANGES_LABEL, EDGE_TYPE, GRAPH_LAYOUT, GRAPH_REGISTRY, NODE_LABEL, USE_LABEL, Query,
)
from llama_consciousness.storage.params import Ids

logger = logging.getLogger(__name__)

Plan = Generator[Any, Any, Any]


@dataclass(frozen=True)
class Erasure:
    """What :func:`erase_memories` deleted from one graph."""

    erased_ids: list[str] = field(default_factory=list)
    """The memories asked for that were in the graph (ids asked for and absent are not listed)."""
    entity_ids: list[str] = field(default_factory=list)
    """Entities (``is_entity``) an erased memory linked to that were left with no link at all."""
    links: int = 0
    """Links of the erased memories (a link between two of them counted once)."""
    access_records: int = 0
    """``Access`` nodes (use counts) of the ids asked for and of the deleted entities."""
    uses_touched: int = 0
    """``Use`` records whose list named one of them: edited, or deleted when left empty."""
    uses_deleted: int = 0
    epoch: str | None = None
    """The graph's new change-log epoch (None when nothing was erased): give it to ``KeywordIndex.purge``."""

    @property
    def memories(self) -> int:
        return len(self.erased_ids)

    @property
    def entities(self) -> int:
        return len(self.entity_ids)


# One query, so one transaction: a failure leaves everything as it was, and nothing is lost between steps
# (the entities to look at are known only before their memories go).  Each part is a CALL {} ending in an
# aggregation, which always yields one row, so a part that finds nothing cannot stop the next; a part sees
# what the ones before it deleted.  Links are named through the path (see ``channels.links_of_ids``).  Use
# records and access counts go for every id asked for, found or not: nothing about an id to forget is kept.
_ERASE = f"""
CALL {{
UNWIND $ids AS id
MATCH (n:{NODE_LABEL} {{node_id: id}})
OPTIONAL MATCH p = (n)-[:{EDGE_TYPE}]-(m:{NODE_LABEL})
WITH n, head(relationships(p)) AS r, m
RETURN collect(DISTINCT n.node_id) AS erased, count(DISTINCT r) AS links,
       collect(DISTINCT CASE WHEN coalesce(m.is_entity, false) AND NOT m.node_id IN $ids THEN m.node_id END) AS hubs
}}
CALL {{
WITH erased
UNWIND erased AS id
MATCH (n:{NODE_LABEL} {{node_id: id}})
DETACH DELETE n
RETURN count(n) AS deleted
}}
CALL {{
WITH hubs
UNWIND hubs AS id
MATCH (e:{NODE_LABEL} {{node_id: id}})
WITH id, e WHERE indegree(e) + outdegree(e) = 0
DELETE e
RETURN collect(id) AS entities
}}
CALL {{
WITH entities
UNWIND $ids + entities AS id
MATCH (a:{ACCESS_LABEL} {{node_id: id}})
DETACH DELETE a
RETURN count(a) AS accesses
}}
CALL {{
WITH entities
WITH $ids + entities AS gone
MATCH (x:{USE_LABEL}) WHERE any(i IN x.node_ids WHERE i IN gone) AND all(i IN x.node_ids WHERE i IN gone)
DETACH DELETE x
RETURN count(x) AS uses_deleted
}}
CALL {{
WITH entities
WITH $ids + entities AS gone
MATCH (x:{USE_LABEL}) WHERE any(i IN x.node_ids WHERE i IN gone)
SET x.node_ids = [i IN x.node_ids WHERE NOT i IN gone]
RETURN count(x) AS uses_edited
}}
CALL {{
WITH erased
WITH erased WHERE size(erased) > 0
MERGE (log:{CHANGES_LABEL} {{key: 0}}) ON CREATE SET log.seq = 0
SET log.epoch = randomUUID()
RETURN collect(log.epoch) AS epochs
}}
RETURN erased, links, entities, accesses, uses_deleted, uses_edited, epochs
"""


def erase_memories(node_ids: Iterable[str]) -> Plan:
    """Delete the memories ``node_ids`` of this graph for good, with all they leave in it; an :class:`Erasure`.

    Deleted, in one transaction: each memory with all its links (``DETACH DELETE``); the entity memories it
    linked to that are left with no link at all (an entity other memories still name stays, and so does an
    entity that was already alone: only those this erasure orphaned go); the ``Access`` records of the ids
    and of those entities; their ids in every ``Use`` record, a record left with none deleted (one that
    counted nothing to begin with stays).  Then the change log gets a new epoch: every keyword index of the
    graph, in any process, starts over from the graph at its next search and so forgets them
    (``KeywordIndex.behind``); ``KeywordIndex.purge`` with :attr:`Erasure.epoch` deletes its old files at once.

    Only the ids given go: the other versions of a memory (the ones it superseded, and the ones that
    superseded it: ``LevelPlans.versions`` by ``base_id``) hold earlier or later wordings of the same text,
    and are erased only when listed too.  Ids not in the graph are ignored (erasing again changes nothing,
    not even the epoch).  Other memories keep what named an erased one by id (``superseded_by``,
    ``possibly_superseded_by``, ``unsuperseded_from``): a memory it superseded stays superseded.  On disk,
    the server keeps the erased text in its write log and snapshot until :func:`scrub_server`.
    """
    ids = list(dict.fromkeys(node_ids))
    if not all(isinstance(i, str) for i in ids):
        raise TypeError("node ids to erase must be strings")
    if not ids:
        return Erasure()
    rows = yield Query(_ERASE, {"ids": Ids(ids)})
    erased, links, entities, accesses, uses_deleted, uses_edited, epochs = rows[0]
    return Erasure(erased_ids=list(erased), entity_ids=list(entities), links=int(links),
                   access_records=int(accesses), uses_touched=int(uses_deleted) + int(uses_edited),
                   uses_deleted=int(uses_deleted), epoch=epochs[0] if epochs else None)


def forget_graph(connection: redis.Redis, graph: str) -> None:
    """Remove ``graph``'s name from the package's own keys on the server (the registry of level graphs and
    their layout marks), once the graph is deleted: an N1 graph's name holds its citizen's id, which would
    otherwise stay in every snapshot.  ``LevelGraphStore.delete`` takes it out of the registry, not out of
    the layout marks."""
    connection.srem(GRAPH_REGISTRY, graph)
    connection.hdel(GRAPH_LAYOUT, graph)


# -- the server's files ------------------------------------------------------------------------------------

SCRUB_TIMEOUT_S = 120.0
TELEMETRY_FLUSH_S = 3.5
"""How long a FalkorDB that logs queries (``CMD_INFO``) may take to move the queries it ran into its stream
``telemetry{<graph>}``: its task runs every 0.25-3 s."""


@dataclass(frozen=True)
class Scrub:
    """What :func:`scrub_server` did."""

    telemetry_keys: int = 0
    """Query-log streams deleted."""
    slowlogs_reset: int = 0
    """Graphs whose slow log was emptied (a graph that no longer exists has none)."""
    aof_rewritten: bool = False
    """The append-only files were rewritten from the data (False: the server keeps none)."""
    snapshot_saved: bool = False
    removed_files: list[str] = field(default_factory=list)
    """Leftover temporary files of saves and rewrites whose process was gone, deleted."""
    files_checked: bool = False
    """The data directory was on this machine and was checked for files a rewrite left behind."""
    log_lines_removed: int = 0
    """Lines of the server's log naming a graph that no longer exists (a deleted citizen's)."""


def telemetry_key(graph: str) -> str:
    """FalkorDB's query-log stream of ``graph``."""
    return f"telemetry{{{graph}}}"


def scrub_server(client: redis.Redis, graphs: Sequence[str], timeout_s: float = SCRUB_TIMEOUT_S) -> Scrub:
    """Take what was deleted from ``graphs`` out of the FalkorDB server's memory logs and files; a :class:`Scrub`.

    Run after :func:`erase_memories` (or a graph's deletion).  A deleted memory's text survives on the
    server in: the append-only files (every write is logged there with its parameters, the erasure leaves
    the earlier writes in place), the snapshot (``dump.rdb``), the query log of each graph (a stream
    ``telemetry{<graph>}`` holding recent queries with their parameters, which snapshots keep; the embedded
    server runs without it, ``CMD_INFO no``, but a server started otherwise has one) and the slow logs
    (FalkorDB's per graph, Redis's own: memory only, not files, emptied all the same).  So this:

    1. deletes the graphs' query-log streams, and on a server that logs queries deletes them again once
       the queries that ran until now have been moved into them (``TELEMETRY_FLUSH_S``);
    2. empties the graphs' slow logs (``GRAPH.SLOWLOG <graph> RESET``) and Redis's (``SLOWLOG RESET``);
    3. rewrites the append-only files from the data (``BGREWRITEAOF``), in a rewrite started after the
       erasure (one already running is waited for first), then writes a new snapshot (``BGSAVE``);
    4. when the server's directory is on this machine, waits until the files the rewrite made history are
       deleted (Redis 7 deletes them after the rewrite) and deletes the temporary files of saves and
       rewrites whose process is gone;
    5. removes from the server's log file (when on this machine) the lines naming those of ``graphs`` that
       no longer exist: FalkorDB logs graph names at every snapshot, and an N1 graph's holds its citizen's id
       (the log holds no query text: Redis logs commands only in a crash report).

    Everything is bounded by ``timeout_s``; a step that fails or does not finish in time raises
    ``StorageError`` saying what still holds the data.  A cluster's servers (and replicas) are scrubbed one
    by one, each with its own client.  Writes made meanwhile are kept, as they should be.
    """
    deadline = time.monotonic() + timeout_s
    keys = [telemetry_key(g) for g in graphs]

    def drop_query_logs() -> int:
        # one key at a time: a cluster refuses one DEL of keys in different slots (CROSSSLOT)
        return sum(int(client.delete(key)) for key in keys)

    try:
        # A cluster's replica refuses every write (MOVED to its master): a scrub of one failed there.  Its
        # master, scrubbed first, deletes the query logs and waits until its replicas have the deletion.
        replication = client.info("replication")
        replica = replication.get("role") == "slave"
        telemetry = 0 if replica else drop_query_logs()
        # (a stream found means a query log, whatever the setting says: turned off at run time, it goes on)
        if keys and not replica and (telemetry or _logs_queries(client)):
            time.sleep(max(0.0, min(TELEMETRY_FLUSH_S, deadline - time.monotonic())))
            telemetry += drop_query_logs()
        if keys and not replica and int(replication.get("connected_slaves") or 0):
            client.execute_command("WAIT", int(replication["connected_slaves"]),
                                   max(1, int(min(5.0, deadline - time.monotonic()) * 1000)))
        reset = 0
        for graph in graphs:
            try:
                client.execute_command("GRAPH.SLOWLOG", graph, "RESET")
                reset += 1
            except redis.ResponseError as exc:
                if "empty key" not in str(exc) and "Invalid graph" not in str(exc):
                    raise
        client.execute_command("SLOWLOG", "RESET")
        rewritten = False
        if client.info("persistence").get("aof_enabled"):
            _finish(background_job(client, "BGREWRITEAOF", deadline), "rewriting the append-only files",
                    timeout_s)
            rewritten = True
        _finish(background_job(client, "BGSAVE", deadline), "writing a new snapshot", timeout_s)
        removed, checked = _settle_files(client, deadline, timeout_s)
        deleted = [graph for graph in graphs if not client.exists(graph)]
        lines = drop_log_lines(client, deleted) or 0
    except (redis.RedisError, OSError) as exc:
        raise StorageError(f"scrubbing the FalkorDB server failed: {exc}; erased data may remain in its files") \
            from exc
    return Scrub(telemetry_keys=telemetry, slowlogs_reset=reset, aof_rewritten=rewritten, snapshot_saved=True,
                 removed_files=removed, files_checked=checked, log_lines_removed=lines)


def _logs_queries(client: redis.Redis) -> bool:
    """Whether the server keeps a query log (FalkorDB's ``CMD_INFO``, on by default; fixed at start)."""
    try:
        reply = client.execute_command("GRAPH.CONFIG", "GET", "CMD_INFO")
    except redis.ResponseError:
        return True  # unknown: assume the default
    return bool(int(reply[1])) if isinstance(reply, (list, tuple)) and len(reply) == 2 else True


def _finish(status: str | None, what: str, timeout_s: float) -> None:
    if status is None:
        raise StorageError(f"{what} did not finish within {timeout_s:.0f} s; erased data may remain in the "
                           "FalkorDB server's files until it does")
    if status != "ok":
        raise StorageError(f"{what} failed (status {status!r}; see the server's log); erased data may remain "
                           "in the FalkorDB server's files")


def _settle_files(client: redis.Redis, deadline: float, timeout_s: float) -> tuple[list[str], bool]:
    """Wait until the server's directory holds only the files it uses; the temporary files deleted and
    whether the directory could be looked at."""
    removed: list[str] = []
    while True:
        stale = stale_persistence_files(client)
        if stale is None:
            logger.info("the FalkorDB server's directory is not on this machine: its files were not checked")
            return removed, False
        temporary, replaced = stale
        for path in temporary:  # their process is gone: nobody will ever delete them
            path.unlink(missing_ok=True)
            removed.append(str(path))
        if not replaced:  # the server deletes these itself; never touched here, it may be writing the directory
            return removed, True
        if time.monotonic() >= deadline:
            raise StorageError(
                f"the FalkorDB server still keeps {[str(p) for p in replaced]} after {timeout_s:.0f} s: append-only "
                "files a rewrite replaced, which hold erased data (is 'aof-disable-auto-gc' on?)")
        time.sleep(0.05)
