"""Consciousness-aware ranking (spec Component 5) and activation tiers.

The two postprocessors on hand-built nodes, then both in a real
``RetrieverQueryEngine`` over the embedded FalkorDB memory.  The pure
formulas are tested in ``tests/scoring/test_ranking.py`` and
``tests/scoring/test_emotional_intent.py``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest
from llama_index.core import Settings
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.llms import CustomLLM, MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import ValidationError

from llama_consciousness.postprocessors.ranker import (
    RANKING_KEYS,
    ConsciousnessRanker,
    intention_emotions,
    parse_emotion_json,
)
from llama_consciousness.postprocessors.tiers import TIER_KEY, ActivationTierPostprocessor
from llama_consciousness.schema import (
    ConsciousnessNode,
    MemoryNode,
    RetrievalIntention,
    StateBasedRetrieval,
)
from llama_consciousness.schema._time import utcnow
from llama_consciousness.scoring.emotional_intent import extract_emotional_intent
from llama_consciousness.scoring.ranking import calculate_emotional_similarity, consciousness_adjusted_score
from llama_consciousness.stream import assemble_stream

SPEC_QUERY = "Times when I felt excited but cautious"


# -- helpers -----------------------------------------------------------------------


def mk(node_id: str, score: float | None = 0.5, **meta: Any) -> NodeWithScore:
    """A retrieved node shaped like the six-way retriever's (memory fields in metadata)."""
    meta.setdefault("node_id", node_id)
    meta.setdefault("name", node_id)
    meta.setdefault("level", "N2")
    meta.setdefault("energy", 0.5)
    meta.setdefault("confidence", 0.5)
    meta.setdefault("metadata_completeness", 1.0)
    return NodeWithScore(node=TextNode(id_=node_id, text=f"memory {node_id}", metadata=meta), score=score)


def ids(nodes) -> list[str]:
    return [n.node.metadata["node_id"] if hasattr(n, "node") else n.node_id for n in nodes]


def empty_stream():
    return assemble_stream("intent_test", {}, retrieved_at=utcnow(), latency_ms=0, query_count=0)


class FixedLLM(CustomLLM):
    """Answers every prompt with ``answer``; counts calls and keeps the last prompt."""

    answer: str = '{"fear": 0.9}'
    calls: int = 0
    last_prompt: str = ""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata()

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.calls += 1
        self.last_prompt = prompt
        return CompletionResponse(text=self.answer)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        raise NotImplementedError


class FailingLLM(FixedLLM):
    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.calls += 1
        raise RuntimeError("model offline")


# -- ConsciousnessRanker on hand-built nodes -------------------------------------------------------


def test_ranker_scores_by_hand_and_sorts():
    a = mk("a", 0.5, energy=0.8, confidence=0.9, emotion_vector={"excited": 0.8, "cautious": 0.3},
           metadata_completeness=0.75)
    b = mk("b", 0.9, energy=0.1, confidence=0.1, emotion_vector={"sadness": 0.9})
    out = ConsciousnessRanker().postprocess_nodes([b, a], query_str=SPEC_QUERY)
    assert ids(out) == ["a", "b"]
    # query {"caution": 0.6, "excitement": 0.6} . memory {"caution": 0.3, "excitement": 0.8}
    resonance = (0.6 * 0.3 + 0.6 * 0.8) / (math.sqrt(0.72) * math.sqrt(0.73))
    expected_a = 0.5 + (0.8 * 0.4 + 0.5 * 0.6) * 0.4 + 0.9 * 0.2 + resonance * 0.5 - 0.25 * 0.1
    expected_b = 0.9 + (0.1 * 0.4 + 0.5 * 0.6) * 0.4 + 0.1 * 0.2 + 0.0 - 0.0
    meta = a.node.metadata
    assert meta["emotional_resonance"] == pytest.approx(resonance)
    assert meta["priority_score"] == pytest.approx(0.62)
    assert meta["consciousness_adjusted_score"] == pytest.approx(expected_a)
    assert a.score == pytest.approx(expected_a)
    assert b.score == pytest.approx(expected_b)
    assert meta["ranking_base_score"] == 0.5
    for key in RANKING_KEYS:  # bookkeeping stays out of prompts and embedding texts
        assert key in a.node.excluded_llm_metadata_keys and key in a.node.excluded_embed_metadata_keys
    assert "consciousness_adjusted_score" not in a.node.get_content(metadata_mode="llm")


def test_ranker_reality_pressure_and_missing_values():
    node = mk("p", None, relevance_score=0.2, energy=1.0, confidence=1.0)
    ConsciousnessRanker(reality_pressure=1.0).postprocess_nodes([node], query_str="plain words")
    assert node.score == pytest.approx(0.2 + 1.0 * 0.4 + 0.2)  # score None -> relevance_score
    bare = NodeWithScore(node=TextNode(id_="x", text="no consciousness metadata"), score=None)
    ConsciousnessRanker().postprocess_nodes([bare])
    # completeness computed: nothing of the 14 listed fields but node_id -> 1/14
    assert bare.score == pytest.approx(0.5 * 0.6 * 0.4 - (1 - 1 / 14) * 0.1)
    junk = mk("j", float("nan"), energy="high", confidence=float("inf"), emotion_vector="not json",
              metadata_completeness=None)
    ConsciousnessRanker().postprocess_nodes([junk], query_str="excited")
    assert math.isfinite(junk.score) and junk.node.metadata["emotional_resonance"] == 0.0


def test_ranker_computes_completeness_from_memory_fields():
    full = dict(energy=0.5, confidence=0.5, resolution_state="resolved", emotion_vector={"joy": 0.5}, goal="g",
                mindstate="m", formation_trigger="t", felt_quality="q", emotion_description="d")
    rich = mk("rich", 0.5, **full)
    poor = mk("poor", 0.5, energy=0.5, confidence=0.5)
    del rich.node.metadata["metadata_completeness"], poor.node.metadata["metadata_completeness"]
    out = ConsciousnessRanker().postprocess_nodes([poor, rich], query_str="about work")
    assert ids(out) == ["rich", "poor"]
    # rich: 11 of 14 listed fields (no body_sensation/spatial_context/sensory_details); poor: 4 of 14
    assert rich.score - poor.score == pytest.approx((11 / 14 - 4 / 14) * 0.1)


def test_ranker_ties_are_stable_top_n_and_idempotent():
    nodes = [mk(f"n{i}", 0.3) for i in range(6)]
    ranker = ConsciousnessRanker()
    assert ids(ranker.postprocess_nodes(list(nodes), query_str="x")) == [f"n{i}" for i in range(6)]
    assert ids(ranker.postprocess_nodes(nodes[::-1], query_str="x")) == [f"n{i}" for i in range(6)][::-1]
    first = [n.score for n in nodes]
    ranker.postprocess_nodes(nodes, query_str="x")  # ranking again starts from the stored base
    assert [n.score for n in nodes] == first
    assert len(ConsciousnessRanker(top_n=2).postprocess_nodes(nodes, query_str="x")) == 2
    assert ConsciousnessRanker(top_n=0).postprocess_nodes(nodes) == []


def test_ranker_field_validation():
    for bad in ({"reality_pressure": 1.5}, {"reality_pressure": -0.1}, {"top_n": -1}, {"emotion_source": "tarot"}):
        with pytest.raises(ValidationError):
            ConsciousnessRanker(**bad)
    assert ConsciousnessRanker(llm=FixedLLM()).to_dict()["class_name"] == "ConsciousnessRanker"


def test_ranker_process_merges_intention_emotions():
    def pair():
        return [mk("joyful", 0.5, emotion_vector={"excitement": 1.0}),
                mk("mixed", 0.5, emotion_vector={"excitement": 0.5, "fear": 0.5})]

    ranker = ConsciousnessRanker()
    nodes = ranker.postprocess_nodes(pair(), query_str="excited")
    assert ids(nodes) == ["joyful", "mixed"]
    same, fields = ranker.process(nodes, None, RetrievalIntention(query_text="excited", citizen_id="c"))
    assert fields == {} and ids(same) == ["joyful", "mixed"]  # nothing to add: the same order

    intention = RetrievalIntention(query_text="excited", citizen_id="c", required_emotions=["afraid"])
    assert intention_emotions(intention) == {"fear": 0.6}
    nodes = ranker.process(nodes, None, intention).nodes
    assert ids(nodes) == ["mixed", "joyful"]  # query {excitement .6, fear .6} now prefers the mixed memory
    assert nodes[0].node.metadata["emotional_resonance"] == pytest.approx(1.0)
    assert nodes[0].node.metadata["ranking_base_score"] == 0.5  # not the previous adjusted score

    nodes = ranker.postprocess_nodes(pair(), query_str="excited")
    state = StateBasedRetrieval(current_energy=0.5, current_emotions={"excited": 0.5, "scared": 0.5}, citizen_id="c")
    assert ids(ranker.process(nodes, None, state).nodes) == ["mixed", "joyful"]


# -- the LLM emotion path -----------------------------------------------------------------------


def test_parse_emotion_json():
    assert parse_emotion_json('Sure! ```json\n{"Excited": 0.9, "cautious": 2}\n```') == {"caution": 1.0,
                                                                                        "excitement": 0.9}
    assert parse_emotion_json("{}") == {}
    for bad in ("no json here", "[1, 2]", '{"fear": "lots"}', '{"fear": true}', "{not json}"):
        with pytest.raises(ValueError):
            parse_emotion_json(bad)


def fear_and_joy():
    return [mk("joy", 0.5, emotion_vector={"excitement": 0.9}), mk("fear", 0.5, emotion_vector={"fear": 0.9})]


def test_llm_emotions_drive_the_ranking():
    llm = FixedLLM(answer='The intent is {"afraid": 0.9}')
    ranker = ConsciousnessRanker(emotion_source="llm", llm=llm)
    out = ranker.postprocess_nodes(fear_and_joy(), query_str="times I felt excited")
    assert ids(out) == ["fear", "joy"]  # the LLM's reading wins over the lexicon's
    assert llm.calls == 1 and "times I felt excited" in llm.last_prompt
    assert ranker.query_emotions("times I felt excited") == {"fear": 0.9}
    assert llm.calls == 1  # remembered: the same question is not asked twice


async def test_llm_emotions_async_path():
    llm = FixedLLM(answer='{"fear": 0.8}')
    ranker = ConsciousnessRanker(emotion_source="llm", llm=llm)
    out = await ranker.apostprocess_nodes(fear_and_joy(), query_bundle=QueryBundle("times I felt excited"))
    assert ids(out) == ["fear", "joy"] and llm.calls == 1
    lexicon = await ConsciousnessRanker().apostprocess_nodes(fear_and_joy(), query_str="times I felt excited")
    assert ids(lexicon) == ["joy", "fear"]


@pytest.mark.parametrize("llm", [FailingLLM(), FixedLLM(answer="I feel nothing"), MockLLM()])
def test_llm_failure_falls_back_to_lexicon(llm, caplog):
    ranker = ConsciousnessRanker(emotion_source="llm", llm=llm)
    with caplog.at_level(logging.WARNING, logger="llama_consciousness.postprocessors.ranker"):
        out = ranker.postprocess_nodes(fear_and_joy(), query_str="times I felt excited")
    assert ids(out) == ["joy", "fear"]
    assert ranker.query_emotions("times I felt excited") == extract_emotional_intent("times I felt excited")
    assert "using the lexicon" in caplog.text


async def test_llm_failure_falls_back_async():
    ranker = ConsciousnessRanker(emotion_source="llm", llm=FailingLLM())
    out = await ranker.apostprocess_nodes(fear_and_joy(), query_str="times I felt excited")
    assert ids(out) == ["joy", "fear"]


# -- ActivationTierPostprocessor on hand-built nodes --------------------------------------------------


@pytest.mark.parametrize(
    ("count", "sizes"),
    [(0, (0, 0, 0)), (4, (4, 0, 0)), (5, (5, 0, 0)), (25, (5, 20, 0)), (75, (5, 20, 50)), (200, (5, 20, 50))],
)
def test_tier_postprocessor_sizes(count, sizes):
    nodes = [mk(f"n{i}", 1.0 - i / 1000) for i in range(count)]
    kept = ActivationTierPostprocessor().postprocess_nodes(nodes)
    assert len(kept) == min(count, 75) and ids(kept) == ids(nodes)[:75]  # order and scores untouched
    labels = [n.node.metadata[TIER_KEY] for n in kept]
    assert (labels.count("focus"), labels.count("peripheral"), labels.count("background")) == sizes
    assert labels == ["focus"] * sizes[0] + ["peripheral"] * sizes[1] + ["background"] * sizes[2]
    assert all(TIER_KEY not in n.node.metadata for n in nodes[75:])

    tiers = ActivationTierPostprocessor().process(nodes).stream_fields["activation_tiers"]
    stream = empty_stream().model_copy(update={"activation_tiers": tiers})
    assert tuple(len(stream.activation_tiers[t]) for t in ("focus", "peripheral", "background")) == sizes
    assert all(isinstance(c, ConsciousnessNode) for tier in stream.activation_tiers.values() for c in tier)


def test_tier_postprocessor_drop_background_and_custom_sizes():
    nodes = [mk(f"n{i}") for i in range(30)]
    pp = ActivationTierPostprocessor(focus=2, peripheral=3, background=10, drop_background=True)
    kept = pp.postprocess_nodes(nodes)
    assert ids(kept) == [f"n{i}" for i in range(5)]
    assert [n.node.metadata[TIER_KEY] for n in kept] == ["focus"] * 2 + ["peripheral"] * 3
    assert all(n.node.metadata[TIER_KEY] == "background" for n in nodes[5:15])  # labelled, then dropped
    tiers = pp.process(nodes).stream_fields["activation_tiers"]
    assert {t: ids(v) for t, v in tiers.items()} == {
        "focus": ["n0", "n1"], "peripheral": ["n2", "n3", "n4"], "background": []}
    with pytest.raises(ValidationError):
        ActivationTierPostprocessor(focus=-1)


def test_tier_process_skips_non_memories_in_the_stream_tiers():
    nodes = [mk(f"n{i}") for i in range(7)] + [NodeWithScore(node=TextNode(id_="doc", text="a document"))]
    kept, fields = ActivationTierPostprocessor(focus=1, peripheral=2, background=10).process(nodes)
    assert len(kept) == 8 and kept[-1].node.metadata[TIER_KEY] == "background"
    assert {t: ids(v) for t, v in fields["activation_tiers"].items()} == {
        "focus": ["n0"], "peripheral": ["n1", "n2"], "background": ["n3", "n4", "n5", "n6"]}


# -- both in a real query engine ---------------------------------------------------------------------------


@pytest.fixture
def engine_parts(memory, citizen):
    def mem(node_id: str, description: str, **kw: Any) -> MemoryNode:
        kw.setdefault("energy", 0.5)
        kw.setdefault("confidence", 0.5)
        return MemoryNode(node_id=node_id, level="N1", citizen_id=citizen, name=node_id.replace("_", " "),
                          description=description, **kw)

    report = memory.ingest([
        mem("beta_launch", "Launched the beta with excitement but kept a careful rollback plan", energy=0.9,
            confidence=0.9, emotion_vector={"excitement": 0.7, "caution": 0.4, "fear": 0.2}, goal="ship the beta",
            mindstate="focused"),
        mem("parser_idea", "Excited about the new parser design", emotion_vector={"excited": 0.9}),
        mem("server_retired", "A sad day when the old server was retired", energy=0.9, confidence=0.9,
            emotion_vector={"sadness": 0.8}),
        mem("budget_notes", "Plain meeting notes about budgets", energy=0.2, confidence=0.3),
        mem("garden", "Watered the tomatoes in the garden"),
        mem("bicycle", "Fixed the bicycle chain"),
        mem("bread", "Baked sourdough bread"),
        mem("piano", "Practised piano scales"),
    ])
    assert report.inserted == 8
    Settings.llm = MockLLM()
    retriever = memory.retriever(citizen, intention_defaults={"query_levels": ["N1"]})
    tiers = ActivationTierPostprocessor(focus=2, peripheral=3, background=2)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(),
                                            node_postprocessors=[ConsciousnessRanker(), tiers])
    return retriever, engine, tiers


def check_engine_result(raw: list[NodeWithScore], sources: list[NodeWithScore]) -> None:
    assert len(raw) == 8
    query_emotions = extract_emotional_intent(SPEC_QUERY)
    expected = {}
    for n in raw:
        meta = n.node.metadata
        resonance = calculate_emotional_similarity(query_emotions, meta.get("emotion_vector") or {})
        expected[meta["node_id"]] = consciousness_adjusted_score(
            n.score, meta["energy"], meta["confidence"], resonance, meta["metadata_completeness"])
    best = sorted(expected, key=lambda k: -expected[k])
    assert ids(sources) == best[:7]  # 2 + 3 + 2 kept, the 8th is below attention
    # emotional resonance dominates: the two excited memories lead, whichever BM25 puts first
    assert set(ids(sources)[:2]) == {"beta_launch", "parser_idea"}
    assert "budget_notes" not in ids(sources)  # low energy, low confidence, no emotions
    for n in sources:
        assert n.score == pytest.approx(expected[n.node.metadata["node_id"]])
        assert n.score == n.node.metadata["consciousness_adjusted_score"]
    scores = [n.score for n in sources]
    assert scores == sorted(scores, reverse=True)
    assert [n.node.metadata[TIER_KEY] for n in sources] == ["focus"] * 2 + ["peripheral"] * 3 + ["background"] * 2


def test_query_engine_ranks_and_tiers(engine_parts):
    retriever, engine, tiers = engine_parts
    raw = retriever.retrieve(SPEC_QUERY)
    response = engine.query(SPEC_QUERY)
    check_engine_result(raw, response.source_nodes)

    stream = retriever.retrieve_stream(SPEC_QUERY).model_copy(
        update=tiers.process(response.source_nodes).stream_fields)
    focus = stream.activation_tiers["focus"]
    assert [c.node_id for c in focus] == ids(response.source_nodes)[:2]
    assert set(ids(response.source_nodes)[:2]) == {"beta_launch", "parser_idea"}
    assert [len(stream.activation_tiers[t]) for t in ("focus", "peripheral", "background")] == [2, 3, 2]
    top = focus[0]
    assert isinstance(top, ConsciousnessNode) and top.relevance_score == pytest.approx(response.source_nodes[0].score)
    beta = next(c for c in focus if c.node_id == "beta_launch")
    assert beta.emotion_vector == {"excitement": 0.7, "caution": 0.4, "fear": 0.2}


async def test_query_engine_async(engine_parts):
    retriever, engine, _ = engine_parts
    raw = await retriever.aretrieve(SPEC_QUERY)
    response = await engine.aquery(SPEC_QUERY)
    check_engine_result(raw, response.source_nodes)


def test_hide_from_text_adds_each_key_once_to_both_lists() -> None:
    from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

    from llama_consciousness.postprocessors.base import hide_from_text

    node = NodeWithScore(node=TextNode(text="t", metadata={"a": 1, "score": 2, "rank": 3},
                                       excluded_embed_metadata_keys=["a"], excluded_llm_metadata_keys=["rank"]))
    hide_from_text(node, ("score", "rank", "score"))
    hide_from_text(node, ("score", "rank"))
    assert node.node.excluded_embed_metadata_keys == ["a", "score", "rank"]
    assert node.node.excluded_llm_metadata_keys == ["rank", "score"]
    assert "score" not in node.node.get_content(metadata_mode=MetadataMode.LLM)
