"""``retrieve_stream`` and its async form are seen by LlamaIndex's instrumentation as ``retrieve`` is.

A dispatcher span around the call, retrieval start and end events, and the
callback manager's RETRIEVE event: what observability tools built on
LlamaIndex (Arize, Langfuse, LlamaDebugHandler) read.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent, RetrievalStartEvent
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler

from llama_consciousness import MemoryNode, RetrievalIntention
from llama_consciousness.retrievers import StateBasedRetriever
from llama_consciousness.schema import StateBasedRetrieval


class _Events(BaseEventHandler):
    seen: list[Any] = []

    @classmethod
    def class_name(cls) -> str:
        return "_Events"

    def handle(self, event: Any, **kwargs: Any) -> None:
        self.seen.append(event)


def _instrumented(calls: dict[str, Any]) -> dict[str, tuple[int, int, int, list[str]]]:
    """For each call: retrieval start events, end events, RETRIEVE callback pairs, and the span names opened."""
    root = get_dispatcher()
    out = {}
    for name, call in calls.items():
        events = _Events(seen=[])
        spans = SimpleSpanHandler()
        root.add_event_handler(events)
        root.add_span_handler(spans)
        try:
            debug = call()
        finally:
            root.event_handlers.remove(events)
            root.span_handlers.remove(spans)
        opened = [span.id_ for span in spans.completed_spans]
        out[name] = (sum(isinstance(e, RetrievalStartEvent) for e in events.seen),
                     sum(isinstance(e, RetrievalEndEvent) for e in events.seen),
                     len(debug.get_event_pairs(CBEventType.RETRIEVE)), opened)
    return out


def test_stream_calls_emit_what_retrieve_emits(memory) -> None:
    citizen = "instr_" + uuid.uuid4().hex[:8]
    memory.upsert([MemoryNode(node_id="m", level="N1", citizen_id=citizen, name="Tide gauge",
                              description="Reading the tide gauge at the harbour", energy=0.6, confidence=0.7,
                              resolution_state="in_progress", emotion_vector={"curiosity": 0.5})])

    def with_debug(make: Any) -> Any:
        def call() -> LlamaDebugHandler:
            debug = LlamaDebugHandler()
            make(CallbackManager([debug]))
            return debug
        return call

    intention = RetrievalIntention(query_text="tide gauge", citizen_id=citizen, query_levels=["N1"])
    state = StateBasedRetrieval(citizen_id=citizen, current_energy=0.6, current_emotions={"curiosity": 0.5},
                                query_mode="find_what_i_was_doing")
    results = _instrumented({
        "retrieve": with_debug(lambda cm: memory.retriever(citizen, callback_manager=cm).retrieve("tide gauge")),
        "retrieve_stream": with_debug(lambda cm: memory.stream_retriever(callback_manager=cm).retrieve_stream(intention)),
        "aretrieve_stream": with_debug(lambda cm: asyncio.run(
            memory.stream_retriever(callback_manager=cm).aretrieve_stream(intention))),
        "state retrieve_stream": with_debug(lambda cm: StateBasedRetriever(
            memory, callback_manager=cm).retrieve_stream(state)),
    })
    for name, (starts, ends, pairs, spans) in results.items():
        assert (starts, ends, pairs) == (1, 1, 1), name
        assert any("retrieve" in span for span in spans), (name, spans)
