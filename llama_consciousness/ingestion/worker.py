"""The pure ingestion steps in a second process.

Why: validation, PII scrubbing, the injection guard, concepts and entity
extraction read nothing but their own records, yet in one process they
share the interpreter lock with the writer, so a large ingestion used one
core for all of its Python work.  A worker process runs those steps for
the next chunks while this process writes the previous one.

Why not ``multiprocessing``: its ``spawn`` start re-imports the caller's
``__main__``, so a user's script without an ``if __name__ == "__main__"``
guard would run again in the worker (and refuse to start it); ``fork``
is unsafe in a process with threads and open server connections.  The
worker is a plain ``python -m llama_consciousness.ingestion.worker`` child
talking over two pipes with ``multiprocessing.connection`` framing; it
imports only this package.

Records travel as plain ``(node_id, text, metadata, embedding)`` tuples:
pickling ``TextNode`` objects costs more than the steps save.  Replies come
back in request order; an error in a step comes back as the exception
itself, raised here for the chunk that failed.  If the worker itself fails
(it dies, or an error cannot cross back), the pipeline runs its chunks in
its own process instead (``pipeline._pipelined``).
"""

from __future__ import annotations

import atexit
import logging
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode

from llama_consciousness.errors import ConsciousnessError
from llama_consciousness.ingestion.report import IngestReport

log = logging.getLogger(__name__)

Record = tuple[str, str, dict[str, Any], "list[float] | None"]


class IngestWorkerError(ConsciousnessError, RuntimeError):
    """The worker process failed (died, or raised an error that cannot cross processes)."""


def to_records(nodes: Sequence[BaseNode]) -> list[Record]:
    """Nodes as the tuples that cross the pipe: all that later steps read of a node."""
    return [(n.node_id, n.get_content(metadata_mode=MetadataMode.NONE), n.metadata, n.embedding) for n in nodes]


_PLACEMENT = ("level", "citizen_id")


def answer_records(nodes: Sequence[BaseNode], prepared: dict[int, Any]) -> list[Record]:
    """``to_records`` of a chunk's kept nodes, with its prepared relationships slimmed.

    Why: a relationship whose row the worker made (``prepare_edges``) is
    written from that row alone; this process reads of its node only what
    places it (kind, level, citizen) and the package's private keys.  Its
    other fields would cross the pipe twice, in the node and in the row: a
    third of a relationship chunk's reply.
    """
    from llama_consciousness.nodes import KIND_KEY, PRIVATE_PREFIX

    records = to_records(nodes)
    for position in prepared:
        node_id, text, metadata, embedding = records[position]
        slim = {k: v for k, v in metadata.items() if k.startswith(PRIVATE_PREFIX)}
        slim[KIND_KEY] = metadata[KIND_KEY]
        for key in _PLACEMENT:
            if key in metadata:
                slim[key] = metadata[key]
        records[position] = (node_id, text, slim, embedding)
    return records


def from_records(records: Sequence[Record]) -> list[BaseNode]:
    from llama_consciousness.nodes import record_text_node

    return [record_text_node(node_id, text, metadata, embedding) for node_id, text, metadata, embedding in records]


def run_pure(
    options: Any, nodes: list[BaseNode], pipelines: dict[Any, Any] | None = None, embed_model: Any = None
) -> tuple[list[BaseNode], IngestReport]:
    """The pure steps of ``options`` on ``nodes``: (the nodes they keep, what they reported).

    With ``embed_model``, the memories that pass are embedded here too, so
    that the store steps find their vectors ready.  (``prepare_edges`` is
    the worker's further step for relationships.)
    """
    from llama_consciousness.ingestion.steps import collect_reports, pure_pipeline

    pipeline = pipelines.get(options) if pipelines is not None else None
    if pipeline is None:
        pipeline = pure_pipeline(options)
        if pipelines is not None:
            pipelines[options] = pipeline
    report = IngestReport()
    out = pipeline.run(nodes=nodes)
    collect_reports(pipeline, report)
    if embed_model is not None:
        embed_memories(embed_model, out)
    return out, report


def prepare_edges(nodes: Sequence[BaseNode], validator: Any = None) -> dict[int, Any]:
    """Upsert rows for the placed relationships among ``nodes``, by position (``records.PreparedEdge``).

    The worker makes them for the writer, which then skips the model and
    the row (see ``PreparedEdge``).  A relationship whose level is not known
    yet (the writer finds it from its source memory) is left to the writer.
    ``validator`` (the pipeline's ``ConsciousnessMetadataValidator``) lends
    the models it built, which the later pure steps leave as they are.
    """
    from llama_consciousness.nodes import is_relationship, text_node_to_relationship
    from llama_consciousness.storage.records import prepare_edge

    out: dict[int, Any] = {}
    for position, node in enumerate(nodes):
        if is_relationship(node) and node.metadata.get("level") is not None:
            model = validator.validated_relationship(node) if validator is not None else None
            out[position] = prepare_edge(model if model is not None else text_node_to_relationship(node))
    return out


def embed_memories(embed_model: Any, nodes: Sequence[BaseNode]) -> None:
    """Embed, in place, the memories among ``nodes`` that have no embedding yet.

    The text is the one the store steps would embed (``memory_text`` of the
    validated memory), so the vectors are the same wherever they are made.
    """
    from llama_consciousness.nodes import embedding_text, is_relationship

    todo = [n for n in nodes if n.embedding is None and not is_relationship(n)]
    if todo:
        vectors = embed_model.get_text_embedding_batch([embedding_text(n) for n in todo])
        for node, vector in zip(todo, vectors):
            node.embedding = list(vector)


def ships_to_worker(embed_model: Any) -> bool:
    """Whether the worker can embed with this model: an offline model that pickles small.

    The bundled WordLlama reloads its table from the worker's own installation;
    a remote model (OpenAI) is left to this process, with its client and key.
    """
    from llama_consciousness.embeddings import WordLlamaEmbedding

    return type(embed_model) is WordLlamaEmbedding


class PureStageWorker:
    """One worker process; ``submit`` sends a chunk, ``result`` waits for its answer, in order."""

    def __init__(self) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = dict(os.environ)
        # The child must import this very package, also when it runs from a
        # source tree that is on sys.path but not installed.
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "llama_consciousness.ingestion.worker", str(to_child_r), str(from_child_w)],
                pass_fds=(to_child_r, from_child_w), stdin=subprocess.DEVNULL, env=env, close_fds=True,
            )
        except BaseException:
            os.close(to_child_w)
            os.close(from_child_r)
            raise
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self._requests = Connection(to_child_w, readable=False)
        self._replies = Connection(from_child_r, writable=False)
        self._pending: deque[int] = deque()
        self._next = 0

    @property
    def pending(self) -> int:
        return len(self._pending)

    def alive(self) -> bool:
        return self._process.poll() is None

    def submit(self, options: Any, nodes: Sequence[BaseNode], embed_model: Any = None) -> int:
        """Send one chunk (and the embedding model to use on it, if any); returns its ticket.

        Its answer also carries the relationships' upsert rows (``prepare_edges``).
        """
        ticket = self._next
        self._next += 1
        try:
            message = pickle.dumps((ticket, options, embed_model, to_records(nodes)), protocol=pickle.HIGHEST_PROTOCOL)
            self._requests.send_bytes(message)
        except OSError as exc:
            raise IngestWorkerError(f"the ingestion worker is gone: {exc}") from exc
        self._pending.append(ticket)
        return ticket

    def result(self, ticket: int) -> tuple[list[BaseNode], IngestReport, dict[int, Any]]:
        """The answer to ``ticket``: the kept nodes, the report, prepared relationships by node position.

        Answers come in order; earlier ones must have been read.
        """
        if not self._pending or self._pending[0] != ticket:
            raise ValueError(f"ticket {ticket} is not the next answer (pending: {list(self._pending)})")
        try:
            answer, status, payload, report = pickle.loads(self._replies.recv_bytes())
        except (EOFError, OSError) as exc:
            code = self._process.poll()
            raise IngestWorkerError(f"the ingestion worker died (exit code {code})") from exc
        self._pending.popleft()
        if answer != ticket:
            raise IngestWorkerError(f"the ingestion worker answered {answer} instead of {ticket}")
        if status == "error":
            raise payload
        records, prepared = payload
        return from_records(records), report, prepared

    def close(self) -> None:
        """Stop the worker (kills it if it is still busy: its answers are no longer wanted)."""
        for conn in (self._requests, self._replies):
            try:
                conn.close()
            except OSError:
                pass
        if self._pending:
            self._process.kill()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


# -- one idle worker kept per process ---------------------------------------------

_idle: list[PureStageWorker] = []
_idle_lock = threading.Lock()


def acquire() -> PureStageWorker | None:
    """A worker for one ingestion (an idle one, or a new one); None if none can start."""
    with _idle_lock:
        while _idle:
            worker = _idle.pop()
            if worker.alive():
                return worker
            worker.close()
    try:
        return PureStageWorker()
    except (OSError, ValueError) as exc:  # no process or no fd passing here: run the steps in this process
        log.warning("cannot start an ingestion worker process (%s); running every step in this process", exc)
        return None


def release(worker: PureStageWorker, healthy: bool) -> None:
    """Keep a worker that finished cleanly for the next ingestion; stop any other."""
    if healthy and worker.alive() and not worker.pending:
        with _idle_lock:
            if not _idle:
                _idle.append(worker)
                return
    worker.close()


def shutdown() -> None:
    """Stop the idle worker (also done at interpreter exit)."""
    with _idle_lock:
        workers, _idle[:] = list(_idle), []
    for worker in workers:
        worker.close()


atexit.register(shutdown)


# -- the child ----------------------------------------------------------------------


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return IngestWorkerError(f"{type(exc).__name__}: {exc}")


def _serve(requests: Connection, replies: Connection) -> None:
    # A reader thread drains the request pipe, so the parent never blocks
    # writing a chunk while this process blocks writing an answer.
    inbox: queue.Queue[Any] = queue.Queue()

    def read() -> None:
        try:
            while True:
                inbox.put(requests.recv_bytes())
        except (EOFError, OSError):
            inbox.put(None)

    threading.Thread(target=read, daemon=True).start()
    from llama_consciousness.ingestion.validator import ConsciousnessMetadataValidator

    pipelines: dict[Any, Any] = {}
    while (message := inbox.get()) is not None:
        ticket, options, embed_model, records = pickle.loads(message)
        try:
            out, report = run_pure(options, from_records(records), pipelines, embed_model)
            validator = next((t for t in pipelines[options].transformations
                              if isinstance(t, ConsciousnessMetadataValidator)), None)
            prepared = prepare_edges(out, validator)
            answer = (ticket, "ok", (answer_records(out, prepared), prepared), report)
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
            answer = (ticket, "error", _picklable(exc), None)
        try:
            replies.send_bytes(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:
            return


def main(argv: Sequence[str]) -> int:
    import gc

    from llama_consciousness.gcquiet import BULK_YOUNG_COLLECTION_THRESHOLD, fewer_collections
    from llama_consciousness.ingestion.steps import pure_pipeline  # noqa: F401 - imported before the freeze

    # This process is ours: its imports are kept out of every collection,
    # and collections are rare for its whole life (see ``gcquiet``).
    gc.freeze()
    requests = Connection(int(argv[1]), writable=False)
    replies = Connection(int(argv[2]), readable=False)
    with fewer_collections(young=BULK_YOUNG_COLLECTION_THRESHOLD):
        _serve(requests, replies)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
