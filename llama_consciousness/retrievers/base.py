"""What both retrievers share: one orchestration, a stream with its nodes, LlamaIndex's instrumentation.

A retriever's work is written once, synchronously, in :meth:`StreamRetriever.gather`:
each level's queries go out at once on their own connections
(``storage.interleaved``), so the sync path is already concurrent.  The
async methods run that same code in a worker thread; they work on any event
loop (nothing is bound to the loop that first used the retriever) and
cannot block it.

Nothing of one call is kept on the retriever: the stream and the nodes are
returned, so one retriever can serve many threads and conversations.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.callbacks.schema import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent, RetrievalStartEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_consciousness.postprocessors.pipeline import complete_stream
from llama_consciousness.schema import ConsciousnessStream
from llama_consciousness.storage import list_graphs
from llama_consciousness.storage.reader import MemoryReader

dispatcher = get_dispatcher(__name__)

R = TypeVar("R")
"""The request a retriever answers (``RetrievalIntention`` or ``StateBasedRetrieval``)."""


def remaining_ms(deadline: float) -> int:
    """Milliseconds left before ``deadline`` (a ``time.monotonic()`` value), never negative."""
    return max(0, int((deadline - time.monotonic()) * 1000))


def existing_graphs(memory: MemoryReader, timeout_s: float) -> set[str] | Exception:
    """The graphs the server holds, or why that cannot be known (every level is then an error entry).

    Bounded by ``timeout_s``.  When the memory's own embedded server died,
    it is started again and asked once more (its persisted data is back).
    """
    for attempt in range(2):
        try:
            return set(list_graphs(memory.db, int(timeout_s * 1000)))
        except Exception as exc:  # server down or stalled
            if attempt == 0 and memory.ensure_server():
                continue
            return exc
    raise AssertionError("unreachable")


class StreamRetriever(BaseRetriever, Generic[R]):
    """A LlamaIndex retriever that also answers with the spec's consciousness stream.

    Subclasses give :meth:`request_for` (a query string or bundle as their
    request) and :meth:`gather` (the retrieval itself).  ``retrieve`` returns
    the nodes as the channels ranked them; ``retrieve_stream`` runs the
    ``stream_postprocessors`` too (a query engine runs its own node
    postprocessors on ``retrieve``'s nodes, and running them twice would
    rank twice).
    """

    def __init__(self, stream_postprocessors: Sequence[BaseNodePostprocessor] | None = None,
                 callback_manager: CallbackManager | None = None, verbose: bool = False) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.stream_postprocessors = list(stream_postprocessors or [])

    def request_for(self, query: Any) -> R:
        raise NotImplementedError

    def gather(self, request: R) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
        """The retrieval: the stream of what the channels found, and the ranked nodes."""
        raise NotImplementedError

    # -- LlamaIndex entry points ----------------------------------------------------------

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.gather(self.request_for(query_bundle))[1]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)

    # -- the stream -------------------------------------------------------------------------

    @dispatcher.span
    def retrieve_stream_and_nodes(self, request: Any = None) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
        """The stream completed by ``stream_postprocessors``, and the nodes as they left them.

        Emits what ``retrieve`` emits: a dispatcher span, retrieval start and
        end events, and the callback manager's RETRIEVE event.
        """
        request = self.request_for(request)
        bundle = QueryBundle(str(getattr(request, "query_text", "") or ""))
        self._check_callback_manager()
        dispatcher.event(RetrievalStartEvent(str_or_query_bundle=bundle))
        with self.callback_manager.as_trace("query"):
            with self.callback_manager.event(
                CBEventType.RETRIEVE, payload={EventPayload.QUERY_STR: bundle.query_str}
            ) as retrieve_event:
                stream, nodes = self.gather(request)
                if self.stream_postprocessors:
                    stream, nodes = complete_stream(stream, nodes, request, self.stream_postprocessors)
                retrieve_event.on_end(payload={EventPayload.NODES: nodes})
        dispatcher.event(RetrievalEndEvent(str_or_query_bundle=bundle, nodes=nodes))
        return stream, nodes

    async def aretrieve_stream_and_nodes(self, request: Any = None) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
        return await asyncio.to_thread(self.retrieve_stream_and_nodes, request)

    def retrieve_stream(self, request: Any = None) -> ConsciousnessStream:
        """The spec's consciousness stream (complete with ``stream_postprocessors``)."""
        return self.retrieve_stream_and_nodes(request)[0]

    async def aretrieve_stream(self, request: Any = None) -> ConsciousnessStream:
        return (await self.aretrieve_stream_and_nodes(request))[0]
