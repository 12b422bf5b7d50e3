"""``ConsciousnessQueryEngine``: LlamaIndex's ``RetrieverQueryEngine`` that gives its answers' memories back.

After each response, the memories the answer was given from (the response's
source nodes: the focus tier when a tier postprocessor ran) are marked as used
(``memory.record_use``): one more access each, one more co-activation for
the links between them.  The write happens on the memory's background thread,
so the answer is not delayed; a response whose nodes did not come from a
retriever of this package is left alone.  Use it wherever
``RetrieverQueryEngine`` is used::

    engine = ConsciousnessQueryEngine.from_args(memory.retriever("ada"), llm=my_llm)
"""

from __future__ import annotations

import logging
from typing import Any

from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import QueryBundle

__all__ = ["ConsciousnessQueryEngine"]

logger = logging.getLogger(__name__)


class ConsciousnessQueryEngine(RetrieverQueryEngine):
    """A ``RetrieverQueryEngine`` whose responses are recorded as uses of the memory they came from."""

    def _record(self, response: Any) -> None:
        memory = getattr(self.retriever, "memory", None)
        if memory is None or not getattr(response, "source_nodes", None):
            return
        try:
            memory.record_use(response)
        except (TypeError, ValueError) as exc:  # nodes of another retriever: nothing of ours to reinforce
            logger.debug("response not recorded as a use: %s", exc)
        except Exception as exc:  # a closed memory, a store without record_use: the answer stands
            logger.warning("response not recorded as a use: %s", exc)

    def _query(self, query_bundle: QueryBundle) -> Any:
        response = super()._query(query_bundle)
        self._record(response)
        return response

    async def _aquery(self, query_bundle: QueryBundle) -> Any:
        response = await super()._aquery(query_bundle)
        self._record(response)
        return response
