"""``UsageReinforcement``: what retrieval use taught the memory, brought back into ranking (spec 004).

The retrieved memories get ``access_count``, ``last_accessed_at`` and
``co_activation`` (links to the other retrieved memories that surfaced
together before, ``memory.record_use``) in their metadata, and a used one
the spec's ``authority_score`` recomputed with them (now).  Their score is multiplied by
``1 + authority_weight x usage + co_activation_weight x co-activation``:

* ``usage`` is the part of the authority score that use earns (0.25 x
  log(accesses)/log(50) + 0.20 x exp(-0.05 x days since the last access)),
  so a memory never used is not moved at all;
* co-activation is the summed count over ``CO_ACTIVATION_SCALE``, at most 1.

The weights are spec 004's composite weights of authority (0.10) and
co-activation (0.15).  They were not tuned: no offline data records use (the
LoCoMo questions are never marked used, so their rankings are unchanged).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Optional

from llama_index.core.bridge.pydantic import Field
from pydantic import SkipValidation
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_consciousness.errors import LevelError, StorageError
from llama_consciousness.postprocessors.base import StepResult, StreamPostprocessor, memory_key
from llama_consciousness.schema._time import utcnow
from llama_consciousness.scoring.cognitive import (
    AUTHORITY_ACCESS_WEIGHT, AUTHORITY_USAGE_WEIGHT, authority_from_metadata, recency_share, usage_share,
)
from llama_consciousness.storage import run_interleaved, usage
from llama_consciousness.storage.citizen_states import from_micros
from llama_consciousness.storage.reader import MemoryReader

__all__ = ["CO_ACTIVATION_SCALE", "UsageReinforcement", "usage_credit"]

logger = logging.getLogger(__name__)

CO_ACTIVATION_SCALE = 10.0
"""Co-activations with the other retrieved memories that count as full credit."""


def usage_credit(access_count: int, days_since_accessed: float | None) -> float:
    """The part of spec 004's authority score that use earns, in [0, 0.45]; 0 for a memory never used."""
    if not access_count or days_since_accessed is None:
        return 0.0
    return AUTHORITY_USAGE_WEIGHT * usage_share(access_count) + AUTHORITY_ACCESS_WEIGHT * recency_share(
        days_since_accessed)


class UsageReinforcement(StreamPostprocessor):
    """Annotates the nodes with their use and co-activation, recomputes their authority, lifts used ones."""

    memory: SkipValidation[MemoryReader] = Field(exclude=True, description="The memory the nodes came from.")
    authority_weight: float = Field(default=0.10, ge=0.0, le=10.0)
    co_activation_weight: float = Field(default=0.15, ge=0.0, le=10.0)
    timeout_s: float = Field(default=5.0, gt=0.0)

    @classmethod
    def class_name(cls) -> str:
        return "UsageReinforcement"

    def _read(self, nodes: Sequence[NodeWithScore]) -> dict[tuple[str, str | None], tuple[dict, dict]]:
        groups: dict[tuple[str, str | None], list[str]] = {}
        for n in nodes:
            level, citizen, node_id = memory_key(n)
            if level is not None and n.node.metadata.get("node_id") and (level != "N1" or citizen):
                groups.setdefault((level, citizen), []).append(node_id)
        keys = list(groups)
        if not keys:
            return {}
        timeout_ms = int(self.timeout_s * 1000)
        plans = {key: self.memory.plans(*key) for key in keys}
        # co-activation only among memories used at least once (it is counted between used memories): with
        # nothing used, as in most retrievals, one small indexed read per level is all this step costs
        stats = run_interleaved(self.memory.db, [(plans[k].graph, usage.access_stats(groups[k])) for k in keys],
                                timeout_ms)
        out: dict[tuple[str, str | None], tuple[dict, dict]] = {}
        co_keys = []
        for key, found in zip(keys, stats):
            if isinstance(found, BaseException):
                logger.warning("usage of %s %s unavailable: %s", key[0], key[1] or "", found)
                continue
            out[key] = (found, {})
            if len(found) > 1:
                co_keys.append(key)
        if co_keys:
            co = run_interleaved(self.memory.db, [(plans[k].graph, usage.co_activation(sorted(out[k][0])))
                                                  for k in co_keys], timeout_ms)
            for key, found in zip(co_keys, co):
                if isinstance(found, BaseException):
                    logger.warning("co-activation of %s %s unavailable: %s", key[0], key[1] or "", found)
                    continue
                out[key] = (out[key][0], found)
        return out

    def process(self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None,
                intention: Any = None) -> StepResult:
        if not nodes:
            return StepResult(nodes, {})
        try:
            read = self._read(nodes)
        except (StorageError, LevelError) as exc:
            logger.warning("usage unavailable: %s", exc)
            return StepResult(nodes, {})
        now = utcnow()
        out, moved = [], False
        for n in nodes:
            meta = n.node.metadata
            level, citizen, node_id = memory_key(n)
            if (level, citizen) not in read:
                out.append(n)
                continue
            stats, co = read[(level, citizen)]
            count, at = stats.get(node_id, (0, None))
            last = from_micros(at)
            co_count = co.get(node_id, 0)
            meta.update(access_count=count, last_accessed_at=last.isoformat() if last else None,
                        co_activation=co_count)
            if count:  # a memory never used keeps the authority it was written with
                meta["authority_score"] = round(authority_from_metadata(
                    meta, now, access_count=count, last_accessed_at=last), 6)
            days = None if last is None else (now - last).total_seconds() / 86_400.0
            boost = (1.0 + self.authority_weight * usage_credit(count, days)
                     + self.co_activation_weight * min(1.0, co_count / CO_ACTIVATION_SCALE))
            moved = moved or (boost != 1.0 and n.score is not None)
            out.append(NodeWithScore(node=n.node, score=None if n.score is None else n.score * boost))
        if moved:  # a stable sort; with nothing used, the order stays exactly as it came
            out = sorted(out, key=lambda o: -(o.score or 0.0))
        return StepResult(out, {})
