"""How the six-way retriever searches, as data (with named recipes).

Keeping the configuration a pydantic model, like Graphiti's search configs,
lets a user pick ``HYBRID_RRF_70_30`` instead of passing ten arguments, and
lets the configuration be logged, compared and cached on.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from llama_consciousness.storage.channels import MAX_DEPTH

CHANNELS = ("vector", "graph", "keyword")


class RetrievalConfig(BaseModel):
    """Channels, traversal, fusion, failure isolation and caching of a retrieval."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    channels: tuple[Literal["vector", "graph", "keyword"], ...] = Field(
        default=("vector", "graph", "keyword"),
        description="channels run per level: vector and graph (the spec's six ways) and keyword (full-text)",
    )
    graph_depth: int = Field(
        default=1, ge=1, le=MAX_DEPTH,
        description="links walked from the start memories (the spec's recipes walk 2; one link from a rare "
                    "named memory measured better on LoCoMo's tune conversations, benchmarks/RESULTS.md)")
    graph_walk: Literal["depth", "spreading"] = Field(
        default="depth",
        description="how the graph channel walks: 'depth' follows every link to graph_depth from the memories "
                    "the query names; 'spreading' spreads activation from the vector and keyword hits (and "
                    "named memories) along links by traversal probability, decaying per hop, until a budget is "
                    "spent (no fixed depth; scoring/activation.py)")
    spread_decay: float = Field(default=0.5, gt=0.0, le=1.0, description="spreading: activation kept per hop")
    spread_threshold: float = Field(default=0.05, gt=0.0, lt=1.0,
                                    description="spreading: activation a memory needs to count and spread on")
    spread_budget: float = Field(default=4.0, gt=0.0, le=1000.0,
                                 description="spreading: activation the expansions may spend in all")
    spread_fanout: int = Field(default=10, ge=1, le=1000,
                               description="spreading: links followed per memory, strongest first (a memory with "
                                           "more shares its activation among them)")
    max_start_entities: int = Field(default=10, ge=1, le=100, description="start memories per level")
    entity_match_threshold: float = Field(default=0.85, ge=0.0, le=1.0)
    max_start_links: int | None = Field(
        default=50, ge=0,
        description="a memory the query names starts the walk only if it has at most this many links (a "
                    "speaker every turn mentions is a hub: the walk would lead everywhere); None: every one")
    fallback_start: int = Field(
        default=3, ge=0, le=50,
        description="when the query names no known entity, the top vector hits start the traversal",
    )
    fusion: Literal["concatenate", "rrf", "score"] = Field(
        default="score",
        description="score: weighted sum of each channel's scores scaled to [0, 1] (score_weights); "
                    "concatenate: the spec's order (vector N1..N3, then graph, then keyword); "
                    "rrf: weighted reciprocal rank fusion (channel_weights)",
    )
    channel_weights: dict[str, float] = Field(
        default_factory=lambda: {"vector": 1.0, "graph": 1.0, "keyword": 1.0},
        description="weights of rank fusion (fusion='rrf')")
    score_weights: dict[str, float] = Field(
        default_factory=lambda: {"keyword": 1.0, "vector": 0.1, "graph": 0.2},
        description="weights of score fusion (fusion='score'); chosen on LoCoMo's tune conversations, "
                    "reported on the others (benchmarks/RESULTS.md)")
    neighbour_expansion: int = Field(
        default=5, ge=0, le=100,
        description="the top fused memories whose linked neighbours join the answer (0: off; needs 'graph')")
    long_memory_chars: int | None = Field(
        default=600, ge=1,
        description="memories longer than this are long messages (None: none is): neighbours join only between "
                    "memories no longer than it (a short chat turn needs the turns around it; a long message "
                    "carries its own context, and a long neighbour takes a place the question's own memories "
                    "need), and when most of what the channels found is long, score fusion weighs with "
                    "long_score_weights (chosen on the tune halves of LoCoMo and BEAM)")
    long_score_weights: dict[str, float] | None = Field(
        default_factory=lambda: {"keyword": 1.0, "vector": 2.5, "graph": 0.2},
        description="score fusion's weights when most found memories are long (None: score_weights always); "
                    "meaning carries further in a long message than in a one-line turn.  Chosen on BEAM's tune "
                    "half as the weight with which the default's recall@10 in every category is within 0.01 of "
                    "each channel alone, stock vector search and BM25 (0.6 before: 3 categories short)")
    neighbours_after: int = Field(default=7, ge=0, le=1000,
                                  description="rank after which the neighbours are inserted")
    neighbours_per_memory: int = Field(default=2, ge=1, le=20, description="strongest links followed per memory")
    later_versions_first: bool = Field(
        default=True,
        description="current and evolution mode: found memories that give what the question asks about "
                    "different values come together latest first, the earlier marked possibly outdated (read "
                    "time, nothing written; scoring.recency); never with fusion='concatenate', which keeps the "
                    "channels' order")
    rrf_k: int = Field(default=60, ge=0, le=10_000)
    final_top_k: int | None = Field(
        default=None, ge=1,
        description="cut the fused list (None: keep all); fused lists (score, rrf) hold at most the "
                    "intention's max_results_per_level memories per level either way")
    channel_timeout_s: float = Field(default=5.0, gt=0, le=600, description="per channel; a slow level becomes an error entry")
    cache_ttl_s: float | None = Field(default=None, gt=0, description="cache streams by intention (off by default)")

    @field_validator("channels")
    @classmethod
    def _channels(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError(f"at least one channel is needed, from {CHANNELS}")
        return tuple(dict.fromkeys(value))

    @field_validator("channel_weights", "score_weights", "long_score_weights")
    @classmethod
    def _weights(cls, value: dict[str, float] | None, info: ValidationInfo) -> dict[str, float] | None:
        for name, weight in (value or {}).items():
            if name not in CHANNELS:
                raise ValueError(f"unknown channel {name!r} in {info.field_name}; expected {CHANNELS}")
            if not math.isfinite(weight) or weight < 0:
                raise ValueError(f"{info.field_name} of {name!r} must be a finite number >= 0, got {weight}")
        return value


# Named recipes.
SCORE_FUSION = RetrievalConfig()
"""Vector, graph and keyword per level, fused by score; neighbours of the top 5 memories after rank 7."""

SIX_WAY_CONCATENATION = RetrievalConfig(channels=("vector", "graph"), fusion="concatenate", neighbour_expansion=0,
                                        graph_depth=2, later_versions_first=False)
"""The core document's six ways: vector + graph (walks of depth 2, decision #3) per level, results concatenated
in its order (nothing moved by the read-time step)."""

SEVEN_WAY_CONCATENATION = RetrievalConfig(fusion="concatenate", neighbour_expansion=0, graph_depth=2,
                                          later_versions_first=False)
"""The six ways plus the full-text channel, concatenated in that order."""

SPREADING_ACTIVATION = RetrievalConfig(graph_walk="spreading")
"""The package default with the graph channel spreading activation from the vector and keyword hits instead of
walking a fixed depth from named memories."""

HYBRID_RRF = RetrievalConfig(fusion="rrf", neighbour_expansion=0)
"""All channels, fused by reciprocal rank with equal weights."""

HYBRID_RRF_70_30 = RetrievalConfig(
    fusion="rrf",
    channel_weights={"vector": 0.7, "keyword": 0.3, "graph": 0.3},
    neighbour_expansion=0,
)
"""Spec 002's hybrid search: 70% vector, 30% keyword (graph weighted like keyword)."""
