"""The offline and LLM entity extractors, and the ingestion transform.

Entity names themselves are tested in ``tests/scoring/test_names.py``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.schema import MetadataMode
from llm_builders import FixedLLM
from pydantic import ValidationError

from llama_consciousness.entities import ENTITIES_KEY, Entity, LLMEntityExtractor, OfflineEntityExtractor, parse_entity_list
from llama_consciousness.ingestion.entities import MAX_ENTITIES_PER_MEMORY, EntityExtractor
from llama_consciousness.nodes import (
    memory_to_text_node,
    relationship_to_text_node,
    text_node_to_memory,
)
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode

SPEC_QUERY = "How does Luca's approach to V2 differ from Felix's?"


# --------------------------------------------------------------------------
# offline extraction


def test_spec_query_example() -> None:
    extractor = OfflineEntityExtractor()
    assert extractor.extract_query_entities(SPEC_QUERY) == ["Luca", "V2", "Felix"]
    entities = {e.name: e for e in extractor.extract(SPEC_QUERY)}
    assert entities["Luca"].entity_type == "Person" and entities["Felix"].entity_type == "Person"
    assert entities["Luca"].key == "luca" and entities["V2"].key == "v2"
    assert SPEC_QUERY[slice(*entities["Felix"].span)] == "Felix"


def test_lower_case_query_finds_names_and_codes() -> None:
    query = SPEC_QUERY.lower()
    assert OfflineEntityExtractor().extract_query_entities(query) == ["luca", "v2", "felix"]
    known = OfflineEntityExtractor(known_people=["person_Luca", "Felix"])
    entities = known.extract("did luca talk to felix about v2")
    assert [(e.key, e.entity_type) for e in entities] == [("luca", "Person"), ("felix", "Person"), ("v2", "Entity")]


@pytest.mark.parametrize("text", [
    "When I woke up the sky was grey.",
    "What we learned: nothing. How could we? The end.",
    "I think so. We agreed. They left on Monday in March.",
    "WHEN I WOKE UP THE SKY WAS GREY.",
    "",
])
def test_no_entities_in_plain_sentences(text: str) -> None:
    assert OfflineEntityExtractor().extract(text) == []


def test_phrases_codes_and_tools() -> None:
    text = "Microsoft GraphRAG and FalkorDB power the V2 architecture in Phase 3; N1 and S6 use GPT-4."
    entities = OfflineEntityExtractor().extract(text)
    by_name = {e.name: e.entity_type for e in entities}
    assert by_name["Microsoft GraphRAG"] == "Tool"
    assert by_name["FalkorDB"] == "Tool"
    assert by_name["V2 architecture"] == "Concept"
    assert by_name["Phase 3"] == "Project"
    for code in ("V2", "N1", "S6", "GPT-4", "GraphRAG"):
        assert code in by_name
    # text order, spans point at the surface forms
    assert [e.span[0] for e in entities] == sorted(e.span[0] for e in entities)
    for entity in entities:
        assert text[slice(*entity.span)] == entity.name


def test_people_cues_possessives_and_organizations() -> None:
    text = ("We met with Zebulon and Quentavious said it was fine. Brunhilde's idea won. "
            "Luca Rossi joined Anthropic Labs; Dr. Okonkwo agreed.")
    entities = {e.name: e.entity_type for e in OfflineEntityExtractor().extract(text)}
    assert entities["Zebulon"] == "Person"
    assert entities["Quentavious"] == "Person"
    assert entities["Brunhilde"] == "Person"
    assert entities["Luca Rossi"] == "Person"
    assert entities["Anthropic Labs"] == "Organization"
    assert entities["Okonkwo"] == "Person"
    assert "We" not in entities


def test_sentence_initial_capitals_need_evidence() -> None:
    extractor = OfflineEntityExtractor()
    assert extractor.extract("Memories fade. Sky was grey.") == []
    assert extractor.extract_query_entities("Yesterday Luca left.") == ["Luca"]
    assert extractor.extract_query_entities("Felix left early.") == ["Felix"]
    assert extractor.extract_query_entities("Then we saw Berlin.") == ["Berlin"]


def test_quoted_terms() -> None:
    text = 'We call it the "consciousness stream", or \u201cenergy decay\u201d, or \'spreading activation\'.'
    entities = OfflineEntityExtractor().extract(text)
    assert [(e.name, e.entity_type) for e in entities] == [
        ("consciousness stream", "Concept"), ("energy decay", "Concept"), ("spreading activation", "Concept"),
    ]
    # Long quotations and apostrophes are not quoted terms.
    assert OfflineEntityExtractor().extract('He said "we should ship it now and fix things later".') == []
    assert OfflineEntityExtractor().extract_query_entities("it's Luca's and Felix's call") == ["Luca", "Felix"]


def test_vocabulary_and_concepts() -> None:
    extractor = OfflineEntityExtractor(vocabulary={"energy decay": "Concept", "person_nora": "Person"})
    entities = extractor.extract("Energy-decay rates worried nora's team.", concepts=["spreading activation"])
    assert [(e.name, e.entity_type, e.key) for e in entities] == [
        ("Energy-decay", "Concept", "energy decay"),
        ("nora", "Person", "nora"),
        ("spreading activation", "Concept", "spreading activation"),
    ]
    assert entities[-1].span is None  # a concept of the memory that the text does not mention
    plural = OfflineEntityExtractor(vocabulary=["V2 architecture"]).extract("Both V2 architectures failed.")
    assert plural[0].name == "V2 architectures" and plural[0].key == "v2 architecture"


def test_dedupe_keeps_first_surface_form_and_is_deterministic() -> None:
    text = "Luca met LUCA's twin? No: Luca met FalkorDB people, then falkordb again. Luca."
    first = OfflineEntityExtractor().extract(text)
    assert first == OfflineEntityExtractor().extract(text)
    assert [e.name for e in first] == ["Luca", "FalkorDB"]


def test_max_entities_keeps_the_most_confident_in_text_order() -> None:
    extractor = OfflineEntityExtractor(known_people=["Zed"], max_entities=2)
    entities = extractor.extract("Berlin, Zed and V2.")
    assert [e.name for e in entities] == ["Zed", "V2"]


def test_entity_model() -> None:
    entity = Entity(name=" person_Luca ")
    assert entity.name == "person_Luca" and entity.key == "luca" and entity.entity_type == "Entity"
    assert entity.to_metadata() == {"name": "person_Luca", "entity_type": "Entity", "key": "luca", "confidence": 1.0}
    with pytest.raises(ValidationError):
        Entity(name="Luca", entity_type="Alien")
    with pytest.raises(ValidationError):
        Entity(name="?!")
    with pytest.raises(ValidationError):
        Entity(name="Luca", confidence=1.5)


def test_offline_extraction_is_fast() -> None:
    extractor = OfflineEntityExtractor()
    start = time.perf_counter()
    for i in range(200):
        extractor.extract(f"{SPEC_QUERY} {i}")
    assert (time.perf_counter() - start) / 200 < 0.01


# --------------------------------------------------------------------------
# the ingestion transform


def _memory(node_id: str, name: str, description: str, **extra: Any) -> MemoryNode:
    # Explicit times: a defaulted created_at is deliberately not carried by the TextNode.
    return MemoryNode(node_id=node_id, level="N2", name=name, description=description,
                      energy=0.5, confidence=0.8, created_at="2025-10-01T12:00:00Z", **extra)


def _nodes():
    memories = [
        _memory("m1", "V2 architecture decision", SPEC_QUERY.replace("?", "."), concepts=["graph traversal"]),
        _memory("m2", "Morning", "When I woke up the sky was grey."),
        _memory("m3", "FalkorDB migration", 'Nora asked about the "consciousness stream" in Phase 3.'),
    ]
    relationship = ConsciousnessRelationship(
        edge_id="r1", source_id="m1", target_id="m3", relation_type="RELATES_TO",
        goal="link the decision to its migration", mindstate="reviewing", energy=0.5, confidence=0.5,
    )
    nodes = [memory_to_text_node(m) for m in memories]
    nodes.append(relationship_to_text_node(relationship))
    return memories, nodes


def _check_transformed(memories, nodes) -> None:
    by_id = {n.node_id: n for n in nodes}
    m1 = by_id["m1"].metadata[ENTITIES_KEY]
    names = [e["name"] for e in m1]
    assert {"Luca", "Felix", "V2"} <= set(names)
    assert "graph traversal" in names
    assert all(set(e) >= {"name", "entity_type", "key"} for e in m1)
    assert by_id["m2"].metadata[ENTITIES_KEY] == []
    m3 = {e["key"]: e["entity_type"] for e in by_id["m3"].metadata[ENTITIES_KEY]}
    assert m3["falkordb migration"] == "Tool" or "falkordb" in m3
    assert m3["nora"] == "Person" and m3["consciousness stream"] == "Concept" and m3["phase 3"] == "Project"
    for node in nodes:
        if node.metadata.get("kind") == "relationship":
            assert ENTITIES_KEY not in node.metadata
            continue
        # the entities are instructions for the writer, not text to embed
        assert ENTITIES_KEY not in node.get_content(metadata_mode=MetadataMode.EMBED)
        assert ENTITIES_KEY not in node.get_content(metadata_mode=MetadataMode.LLM)
    for memory in memories:
        assert text_node_to_memory(by_id[memory.node_id]) == memory


def test_transform_in_ingestion_pipeline() -> None:
    memories, nodes = _nodes()
    # every entity of these memories (by default a memory keeps its three most confident: see below)
    pipeline = IngestionPipeline(transformations=[EntityExtractor(max_entities_per_memory=10)])
    out = pipeline.run(nodes=nodes)
    assert len(out) == len(nodes)
    _check_transformed(memories, out)


async def test_transform_in_ingestion_pipeline_async() -> None:
    memories, nodes = _nodes()
    pipeline = IngestionPipeline(transformations=[EntityExtractor(known_people=["Felix"], max_entities_per_memory=10)])
    out = await pipeline.arun(nodes=nodes)
    _check_transformed(memories, out)


def test_transform_limits_entities_per_memory() -> None:
    node = memory_to_text_node(_memory("m9", "Crowd", "Alice, Bob, Carla, Diego and Emma met Fiona and Greta."))
    EntityExtractor(max_entities_per_memory=3)([node])
    assert len(node.metadata[ENTITIES_KEY]) == 3
    EntityExtractor()([node])  # the default: MAX_ENTITIES_PER_MEMORY of the seven names
    assert len(node.metadata[ENTITIES_KEY]) == MAX_ENTITIES_PER_MEMORY < 7
    EntityExtractor(max_entities_per_memory=0)([node])
    assert node.metadata[ENTITIES_KEY] == []


def test_transform_needs_an_llm_for_llm_mode() -> None:
    with pytest.raises(ValidationError):
        EntityExtractor(extractor="llm")


# --------------------------------------------------------------------------
# LLM extraction


GOOD_ANSWER = ('[{"name": "person_Luca", "type": "Person"}, {"name": "person_felix", "type": "Person"},'
               ' {"name": "decision_v2_architecture", "type": "Concept"}, "FalkorDB"]')


def test_llm_extractor_maps_answers_to_known_entities() -> None:
    llm = FixedLLM(answer=GOOD_ANSWER, prompts=[])
    known = ["Luca", "Felix", "V2 architecture"] + [f"entity_{i}" for i in range(2000)]
    extractor = LLMEntityExtractor(llm, known_entities=known, known_entities_budget=200)
    entities = extractor.extract(SPEC_QUERY)
    assert [(e.name, e.entity_type, e.key) for e in entities] == [
        ("Luca", "Person", "luca"), ("Felix", "Person", "felix"),
        ("V2 architecture", "Concept", "v2 architecture"), ("FalkorDB", "Entity", "falkordb"),
    ]
    assert entities[0].confidence > entities[-1].confidence  # known names are more credible
    assert entities[0].span == (9, 13)
    prompt = llm.prompts[-1]
    assert SPEC_QUERY in prompt and "Luca, Felix, V2 architecture" in prompt
    assert "more)" in prompt and "entity_1999" not in prompt and len(prompt) < 3000
    assert extractor.extract_query_entities(SPEC_QUERY) == ["Luca", "Felix", "V2 architecture", "FalkorDB"]


def test_llm_extractor_without_known_entities_strips_prefixes() -> None:
    extractor = LLMEntityExtractor(FixedLLM(answer=GOOD_ANSWER, prompts=[]))
    assert extractor.extract_query_entities(SPEC_QUERY) == ["Luca", "felix", "v2 architecture", "FalkorDB"]


@pytest.mark.parametrize("answer", [
    "```json\n" + GOOD_ANSWER + "\n```",
    "Sure! Here are the entities:\n" + GOOD_ANSWER + "\nLet me know if you need more.",
    '{"entities": ' + GOOD_ANSWER + "}",
])
def test_llm_answers_are_parsed_robustly(answer: str) -> None:
    extractor = LLMEntityExtractor(FixedLLM(answer=answer, prompts=[]))
    assert [e.key for e in extractor.extract(SPEC_QUERY)] == ["luca", "felix", "v2 architecture", "falkordb"]


def test_parse_entity_list(caplog: pytest.LogCaptureFixture) -> None:
    assert parse_entity_list('["a", "b"] trailing') == ["a", "b"]
    assert parse_entity_list("[]") == []
    with caplog.at_level(logging.WARNING, logger="llama_consciousness.entities"):
        assert parse_entity_list('{"name": "Luca"}') == []
        assert parse_entity_list("no idea") == []
        assert parse_entity_list("[unclosed") == []
    assert sum("no JSON list" in r.getMessage() for r in caplog.records) == 3


def test_llm_malformed_output_falls_back_to_offline(caplog: pytest.LogCaptureFixture) -> None:
    for answer in ['{"name": "Luca"}', "I cannot help with that.", '[{"name": ']:
        extractor = LLMEntityExtractor(FixedLLM(answer=answer, prompts=[]))
        with caplog.at_level(logging.WARNING, logger="llama_consciousness.entities"):
            caplog.clear()
            assert extractor.extract_query_entities(SPEC_QUERY) == ["Luca", "V2", "Felix"]
        assert any("no JSON list" in r.getMessage() for r in caplog.records)
    # an empty list is an answer, not a failure; junk items are skipped
    assert LLMEntityExtractor(FixedLLM(answer="[]", prompts=[])).extract(SPEC_QUERY) == []
    junk = LLMEntityExtractor(FixedLLM(answer='[1, null, {"type": "Person"}, "", "Luca"]', prompts=[]))
    assert junk.extract_query_entities(SPEC_QUERY) == ["Luca"]


async def test_llm_exception_falls_back_to_offline(caplog: pytest.LogCaptureFixture) -> None:
    extractor = LLMEntityExtractor(FixedLLM(fail=True, prompts=[]))
    with caplog.at_level(logging.WARNING, logger="llama_consciousness.entities"):
        assert extractor.extract_query_entities(SPEC_QUERY) == ["Luca", "V2", "Felix"]
        assert await extractor.aextract_query_entities(SPEC_QUERY) == ["Luca", "V2", "Felix"]
    assert sum("LLM call failed" in r.getMessage() for r in caplog.records) == 2
    with pytest.raises(TypeError):
        LLMEntityExtractor(None)


async def test_llm_transform_in_pipeline() -> None:
    memories, nodes = _nodes()
    llm = FixedLLM(answer=GOOD_ANSWER, prompts=[])
    transform = EntityExtractor(extractor="llm", llm=llm, known_entities=["Luca", "Felix"], num_workers=2)
    out = await IngestionPipeline(transformations=[transform]).arun(nodes=nodes)
    by_id = {n.node_id: n for n in out}
    names = [e["name"] for e in by_id["m1"].metadata[ENTITIES_KEY]]
    assert names[:2] == ["Luca", "Felix"] and "graph traversal" in names
    assert len(llm.prompts) == len(memories)  # relationships are not sent to the LLM
    for memory in memories:
        assert text_node_to_memory(by_id[memory.node_id]) == memory

    failing = EntityExtractor(extractor="llm", llm=FixedLLM(fail=True, prompts=[]))
    _, nodes = _nodes()
    out = IngestionPipeline(transformations=[failing]).run(nodes=nodes)
    assert {"Luca", "Felix", "V2"} <= {e["name"] for e in out[0].metadata[ENTITIES_KEY]}


_WORD_PIECES = st.sampled_from(["Kofi", "kofi", "KOFI", "A", "a", "I", "McDonald", "MacBook", "iPhone", "LlamaIndex",
                                "gpt4o", "GPT-4", "v2", "abc-12x", "x", "\u01c5ungla", "\u00c9mile", "\u00e9mile",
                                "snake_case", "Snake_Case", "O'Neil", "2025", "N1", "\u0130stanbul", "\u212aelvin"])


@settings(max_examples=300, deadline=None)
@given(word=_WORD_PIECES | st.text(alphabet=st.characters(categories=["Lu", "Ll", "Lt", "Nd", "Pc"]), min_size=1,
                                   max_size=8), shouting=st.booleans())
def test_word_classes_match_the_rules(word: str, shouting: bool) -> None:
    """The fast paths for common words answer as the rules do."""
    from llama_consciousness.entities import _classify, _classify_by_rules

    assert _classify(word, shouting) == _classify_by_rules(word, shouting)


def _counted(text: str) -> tuple[int, int]:
    return sum(c.isalpha() for c in text), sum(c.isalpha() and c.isupper() for c in text)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.characters(max_codepoint=127)) | st.text())
def test_letter_counts_equal_the_per_character_definition(text: str) -> None:
    """ASCII text is counted by deleting bytes; the counts must be ``str.isalpha`` / ``str.isupper``'s."""
    from llama_consciousness.entities import _letter_counts

    assert _letter_counts(text) == _counted(text)


@pytest.mark.parametrize("text", ["", "FALKORDB IS DOWN AGAIN!!", "Ünïcode ÉCRIT", "ǅungla ǈ", "snake_case 42 MiXeD"])
def test_letter_counts_of_chosen_texts(text: str) -> None:
    from llama_consciousness.entities import _letter_counts

    assert _letter_counts(text) == _counted(text)


# --------------------------------------------------------------------------
# size caps and linear resolution (see tests/reliability/test_long_texts.py for timings)


def test_names_longer_than_the_caps_are_not_entities() -> None:
    from llama_consciousness.entities import MAX_ENTITY_CHARS, MAX_ENTITY_WORDS

    extractor = OfflineEntityExtractor()
    at_cap = "Zq" + "a" * (MAX_ENTITY_CHARS - 3) + "B"  # one CamelCase token of exactly the cap
    assert [e.name for e in extractor.extract(f"We use {at_cap} daily.")] == [at_cap]
    assert extractor.extract(f"We use {at_cap}x daily.") == []
    assert extractor.extract(f"We use {'Aa' * 160} daily.") == []
    words = [f"Zorb{chr(97 + i)}" for i in range(MAX_ENTITY_WORDS + 1)]
    twelve, thirteen = " ".join(words[:-1]), " ".join(words)
    assert [e.name for e in extractor.extract(f"we saw {twelve} today")] == [twelve]
    # an over-long run is no entity, but its codes and CamelCase words still are
    assert extractor.extract(f"we saw {thirteen} today") == []
    parts = extractor.extract(f"we saw {thirteen} V2 FalkorDB Zorbz Zorby today")
    assert [(e.name, e.entity_type) for e in parts] == [("V2", "Entity"), ("FalkorDB", "Tool")]
    assert OfflineEntityExtractor(emit_parts=False).extract(f"we saw {thirteen} V2 FalkorDB Zorbz Zorby") == []
    # concepts and lexicon entries over the caps are not entities either
    long_concept = "x" * (MAX_ENTITY_CHARS + 1)
    assert [e.name for e in extractor.extract("nothing here", concepts=[long_concept, "graph traversal"])] == [
        "graph traversal"]
    assert OfflineEntityExtractor(vocabulary=[long_concept]).extract(f"about {long_concept}") == []


def test_llm_names_longer_than_the_caps_are_dropped() -> None:
    answer = '["Luca", "' + "Zq" * 60 + '", "' + " ".join(["Word"] * 13) + '"]'
    extractor = LLMEntityExtractor(FixedLLM(answer=answer, prompts=[]))
    assert extractor.extract_query_entities(SPEC_QUERY) == ["Luca"]


@pytest.mark.parametrize("answer", ["[" * 5000, '{"a": ' * 5000, '["x", ' * 5000, "see {x} and [y] " * 5000])
def test_degenerate_llm_answers_fall_back_quickly(answer: str, caplog: pytest.LogCaptureFixture) -> None:
    """Deep nesting used to raise RecursionError out of ``extract``; many brackets were tried one by one."""
    extractor = LLMEntityExtractor(FixedLLM(answer=answer, prompts=[]))
    start = time.perf_counter()
    with caplog.at_level(logging.WARNING, logger="llama_consciousness.entities"):
        assert extractor.extract_query_entities(SPEC_QUERY) == ["Luca", "V2", "Felix"]
    assert time.perf_counter() - start < 1.0
    assert parse_entity_list(answer) == []


class _PairwiseResolution(OfflineEntityExtractor):
    """The overlap resolution as first written (every mention against every kept one): the reference."""

    def _resolve(self, text, mentions):
        from llama_consciousness.entities import _PRIORITY, _key

        order = sorted(mentions, key=lambda m: (-(m.end - m.start), _PRIORITY[m.source], m.start))
        accepted, rejected = [], []
        for mention in order:
            if any(m.start < mention.end and mention.start < m.end for m in accepted):
                rejected.append(mention)
            else:
                accepted.append(mention)
        if self.emit_parts:
            candidates = rejected + [p for m in accepted for p in m.parts]
            accepted += [c for c in candidates
                         if c.part_ok and any(m.start <= c.start and c.end <= m.end and m is not c for m in accepted)]
        accepted.sort(key=lambda m: (m.start, -(m.end - m.start), _PRIORITY[m.source]))
        entities, seen = [], set()
        for mention in accepted:
            name = text[mention.start:mention.end]
            key = _key(name)
            if key and key not in seen:
                seen.add(key)
                entities.append(Entity(name=name, entity_type=mention.entity_type, key=key,
                                       span=(mention.start, mention.end), confidence=mention.confidence))
        return entities


_TEXT_PIECES = st.sampled_from([
    "Luca", "luca's", "Felix", "said", "asked", "V2", "architecture", "FalkorDB", "Microsoft", "GraphRAG", "Phase",
    "3", "of", "Bank", "America", "the", "The", '"energy decay"', "'spreading activation'", "energy", "decay",
    "Nora", "Anthropic", "Labs", "GPT-4", "N1", ".", ",", "\n", "(", ")", "Zorba", "Quill", "LLM", "v2",
])


@settings(max_examples=300, deadline=None)
@given(words=st.lists(_TEXT_PIECES, max_size=40), emit_parts=st.booleans())
def test_linear_resolution_agrees_with_the_pairwise_rule(words: list[str], emit_parts: bool) -> None:
    text = " ".join(words)
    kwargs = {"known_people": ["Nora"], "vocabulary": ["energy decay", "V2 architecture", "Bank of America"],
              "emit_parts": emit_parts}
    assert OfflineEntityExtractor(**kwargs).extract(text) == _PairwiseResolution(**kwargs).extract(text)
