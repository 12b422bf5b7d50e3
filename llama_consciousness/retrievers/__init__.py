"""Retrievers: ``SixWayHybridRetriever`` and its configuration recipes."""

from llama_consciousness.retrievers.config import (
    HYBRID_RRF,
    HYBRID_RRF_70_30,
    SCORE_FUSION,
    SEVEN_WAY_CONCATENATION,
    SIX_WAY_CONCATENATION,
    SPREADING_ACTIVATION,
    RetrievalConfig,
)
from llama_consciousness.retrievers.six_way import SixWayHybridRetriever
from llama_consciousness.retrievers.state_based import StateBasedRetriever, StateRetrievalConfig

__all__ = [
    "HYBRID_RRF",
    "HYBRID_RRF_70_30",
    "SCORE_FUSION",
    "SEVEN_WAY_CONCATENATION",
    "SIX_WAY_CONCATENATION",
    "SPREADING_ACTIVATION",
    "RetrievalConfig",
    "SixWayHybridRetriever",
    "StateBasedRetriever",
    "StateRetrievalConfig",
]
