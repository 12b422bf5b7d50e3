"""The pure ingestion steps in a second process, for the next chunks while this one writes (they would
share the interpreter lock with the writer).  Not ``multiprocessing``: ``spawn`` re-runs a script without a
``__main__`` guard, ``fork`` is unsafe with threads and connections.  The child is ``python -m
llama_consciousness.ingestion.worker`` on two pipes; records travel as plain tuples (pickled ``TextNode``s
cost more than the steps save), answers in order, a step's error as itself.
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
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode

from llama_consciousness.errors import ConsciousnessError
from llama_consciousness.ingestion.report import IngestReport

log = logging.getLogger(__name__)

Record = tuple[str, str, dict[str, Any], "list[float] | None"]

_HELLO = b"ready"
"""The child's first message: its imports are done."""


class IngestWorkerError(ConsciousnessError, RuntimeError):
    """The worker process failed (died, or raised an error that cannot cross processes)."""


def to_records(nodes: Sequence[BaseNode]) -> list[Record]:
    """Nodes as the tuples that cross the pipe: all that later steps read of a node."""
    return [(n.node_id, n.get_content(metadata_mode=MetadataMode.NONE), n.metadata, n.embedding) for n in nodes]


_PLACEMENT = ("kind", "level", "citizen_id")


def answer_records(nodes: Sequence[BaseNode], prepared: dict[int, Any]) -> list[Record]:
    """``to_records`` of a chunk's kept nodes; a prepared relationship keeps only what places it and private
    keys (it is written from its row: its fields would cross twice, a third of a relationship chunk's reply)."""
    from llama_consciousness.nodes import PRIVATE_PREFIX

    records = to_records(nodes)
    for position in prepared:
        node_id, text, metadata, embedding = records[position]
        slim = {k: v for k, v in metadata.items() if k.startswith(PRIVATE_PREFIX) or k in _PLACEMENT}
        records[position] = (node_id, text, slim, embedding)
    return records


def from_records(records: Sequence[Record]) -> list[BaseNode]:
    from llama_consciousness.nodes import record_text_node

    return [record_text_node(node_id, text, metadata, embedding) for node_id, text, metadata, embedding in records]


def run_pure(options: Any, nodes: list[BaseNode], pipeline: Any = None) -> tuple[list[BaseNode], IngestReport]:
    """The pure steps of ``options`` (or ``pipeline``, built from them) on ``nodes``: the nodes kept, the report."""
    from llama_consciousness.ingestion.steps import collect_reports, pure_pipeline

    pipeline = pure_pipeline(options) if pipeline is None else pipeline
    report = IngestReport()
    out = pipeline.run(nodes=nodes)
    collect_reports(pipeline, report)
    return out, report


def prepare_edges(nodes: Sequence[BaseNode], validator: Any) -> dict[int, Any]:
    """Upsert rows (``records.PreparedEdge``) of the relationships with a level among ``nodes``, by position,
    from the models ``validator`` built; the writer then skips the model and the row."""
    from llama_consciousness.nodes import is_relationship, text_node_to_relationship
    from llama_consciousness.storage.records import prepare_edge

    out: dict[int, Any] = {}
    for position, node in enumerate(nodes):
        if is_relationship(node) and node.metadata.get("level") is not None:
            model = validator.validated_relationship(node)
            out[position] = prepare_edge(model if model is not None else text_node_to_relationship(node))
    return out


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
        self._sent = self._read = 0  # chunks sent, answers read: the next answer is to ticket ``_read``
        self._ready = False  # the child's first message, once its imports are done, was read

    def ready(self) -> bool:
        """Whether the child has started (its imports, about a second, are done); never waits."""
        if not self._ready:
            try:
                if self._replies.poll(0):
                    self._read_hello()
            except (EOFError, OSError, IngestWorkerError):  # dead before it started: never ready
                return False
        return self._ready

    def _read_hello(self) -> None:
        try:
            hello = self._replies.recv_bytes()
        except (EOFError, OSError) as exc:
            raise IngestWorkerError(f"the ingestion worker died (exit code {self._process.poll()})") from exc
        if hello != _HELLO:
            raise IngestWorkerError(f"the ingestion worker began with {hello[:40]!r}, not its hello")
        self._ready = True

    @property
    def pending(self) -> int:
        return self._sent - self._read

    def alive(self) -> bool:
        return self._process.poll() is None

    def submit(self, options: Any, nodes: Sequence[BaseNode], embed_model: Any = None) -> int:
        """Send one chunk (and the embedding model to use on it, if any); returns its ticket."""
        ticket = self._sent
        try:
            message = pickle.dumps((ticket, options, embed_model, to_records(nodes)), protocol=pickle.HIGHEST_PROTOCOL)
            self._requests.send_bytes(message)
        except OSError as exc:
            raise IngestWorkerError(f"the ingestion worker is gone: {exc}") from exc
        self._sent += 1
        return ticket

    def result(self, ticket: int) -> tuple[list[BaseNode], IngestReport, dict[int, Any]]:
        """The answer to ``ticket`` (earlier ones read first): kept nodes, report, prepared rows by position."""
        if ticket != self._read or not self.pending:
            pending = list(range(self._read, self._sent))
            raise ValueError(f"ticket {ticket} is not the next answer (pending: {pending})")
        if not self._ready:
            self._read_hello()
        try:
            answer, status, payload, report = pickle.loads(self._replies.recv_bytes())
        except (EOFError, OSError) as exc:
            raise IngestWorkerError(f"the ingestion worker died (exit code {self._process.poll()})") from exc
        self._read += 1
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
        if self.pending:
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


def idle() -> bool:
    """Whether a started worker is kept for the next ingestion (it then costs no start)."""
    with _idle_lock:
        return bool(_idle)


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
    from llama_consciousness.ingestion.steps import embed_memories, pure_pipeline

    pipelines: dict[Any, Any] = {}
    while (message := inbox.get()) is not None:
        ticket, options, embed_model, records = pickle.loads(message)
        try:
            if options not in pipelines:
                pipelines[options] = pure_pipeline(options)
            pipeline = pipelines[options]
            out, report = run_pure(options, from_records(records), pipeline)
            if embed_model is not None:  # the memories that pass: the store steps find their vectors ready
                embed_memories(embed_model, out)
            prepared = prepare_edges(out, pipeline.transformations[0])  # the validator
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
    try:
        replies.send_bytes(_HELLO)
    except OSError:  # the parent is gone (or stopped this worker) before it started: nothing to do
        return 0
    with fewer_collections(young=BULK_YOUNG_COLLECTION_THRESHOLD):
        _serve(requests, replies)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
