"""Texts of any length and token shape are ingested in time linear in their length, or refused per item.

Reproduced before:

* one long unbroken token stalled ingestion quadratically (0.67 s at 10 KB,
  44 s at 100 KB; 10 MB never finished);
* many short mentions (a text of quoted words) made the entity extractor
  quadratic: every mention was checked against every mention kept so far
  (2.3 s at 50 KB, 39 s at 200 KB);
* a token of ~320 capitalised characters became an entity whose node id
  ("entity_" + its key) was longer than the schema's 256 characters, and
  ``memory.ingest(..., on_invalid="drop")`` raised instead of ingesting.

Every test runs against the session's embedded FalkorDB (the ``memory``
fixture); each uses a fresh citizen, so its N1 graph is its own.
"""

from __future__ import annotations

import gc
import json
import random
import time
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from llama_index.core.schema import BaseNode, TransformComponent

from llama_consciousness.entities import ENTITIES_KEY, MAX_ENTITY_CHARS, MAX_ENTITY_WORDS, OfflineEntityExtractor
from llama_consciousness.ingestion.entities import EntityExtractor
from llama_consciousness.ingestion.pipeline import build_pipeline, to_text_nodes
from llama_consciousness.ingestion.steps import IngestOptions
from llama_consciousness.ingestion.writer import ENTITY_TYPES, entity_node_id
from llama_consciousness.schema import MemoryNode
from llama_consciousness.scoring.names import normalize_entity_name

#: The schema's limit on node ids (``MemoryNode.node_id``).
NODE_ID_LIMIT = 256


def _mixed(size: int) -> str:
    rng = random.Random(7)
    return "".join(rng.choice("aBc1D2eF") for _ in range(size))


#: One unbroken "word" of each shape, repeated to any length.  The last ones
#: are not one token but many short ones: they stress the number of
#: mentions rather than the length of one.
SHAPES: dict[str, Any] = {
    "lower": "a",
    "upper": "A",
    "hyphenated": "ab-",
    "apostrophes": "x'",
    "camel": "Aa",
    "letters and digits": "a1",
    "mixed case and digits": _mixed,
    "unicode letters": "\u00e9\u00df\u4e2d",
    "capitalised words": "Abc ",
    "codes": "V2 ",
    "quoted words": '"ab" ',
}
ONE_TOKEN = ["lower", "upper", "hyphenated", "apostrophes", "camel", "letters and digits", "mixed case and digits",
             "unicode letters"]


def text_of(shape: str, size: int) -> str:
    unit = SHAPES[shape]
    if callable(unit):
        return unit(size)
    return (unit * (size // len(unit) + 1))[:size]


def memory_node(citizen: str, description: str, name: str = "note", **fields: Any) -> MemoryNode:
    return MemoryNode(node_id="m_" + uuid.uuid4().hex[:10], level="N1", citizen_id=citizen, name=name,
                      description=description, energy=0.5, confidence=0.5, **fields)


def entity_ids(memory, citizen: str) -> dict[str, str]:
    """``node_id -> name`` of the entity memories in the citizen's graph."""
    return dict(memory.level("N1", citizen).named_nodes(ENTITY_TYPES))


def mentions(memory, citizen: str, memory_id: str) -> set[str]:
    edges = memory.level("N1", citizen).get_relationships([memory_id])
    return {e.target_id for e in edges if e.relation_type == "MENTIONS" and e.source_id == memory_id}


def best_time(fn, repeat: int = 3) -> float:
    """The best of ``repeat`` runs, garbage collector paused.

    Why paused: a text of 100,000 tokens allocates enough objects to trigger
    full collections, each of which walks the whole process heap (every
    module imported); at 200 KB they fall in, at 50 KB not, which doubles
    the ratio without saying anything about the algorithm.  The collections
    are linear in total, and ingestion runs with them tuned down anyway
    (``gcquiet``).
    """
    best = float("inf")
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
    finally:
        if enabled:
            gc.enable()
    return best


# -- the extractor is linear --------------------------------------------------------


@pytest.mark.parametrize("shape", list(SHAPES))
def test_entity_extraction_time_grows_linearly(shape: str) -> None:
    extractor = OfflineEntityExtractor()
    small, large = text_of(shape, 50_000), text_of(shape, 200_000)
    t_small = best_time(lambda: extractor.extract(small))
    t_large = best_time(lambda: extractor.extract(large))
    # 4x the text: ~4x the time when linear, ~16x when quadratic.  The floor
    # keeps timer noise on a few milliseconds from deciding the ratio.
    ratio = t_large / max(t_small, 0.01)
    assert ratio < 8, f"{shape}: {t_small:.3f} s at 50 KB, {t_large:.3f} s at 200 KB (x{ratio:.1f})"
    assert t_large < 2.0, f"{shape}: {t_large:.2f} s for 200 KB"


@pytest.mark.parametrize("shape", list(SHAPES))
def test_extracted_entities_stay_within_the_caps(shape: str) -> None:
    for entity in OfflineEntityExtractor().extract(text_of(shape, 20_000)):
        assert len(entity.name) <= MAX_ENTITY_CHARS and len(entity.name.split()) <= MAX_ENTITY_WORDS
        assert len(entity_node_id(entity.key)) <= NODE_ID_LIMIT


# -- ingestion of one long token ---------------------------------------------------------


@pytest.mark.parametrize("shape", ONE_TOKEN + ["capitalised words", "codes"])
def test_a_memory_of_one_200kb_token_is_ingested_in_seconds(memory, citizen, shape: str) -> None:
    node = memory_node(citizen, text_of(shape, 200_000))
    start = time.perf_counter()
    report = memory.ingest([node], on_invalid="drop", duplicates="off")
    elapsed = time.perf_counter() - start
    assert elapsed < 10.0, f"{shape}: 200 KB ingested in {elapsed:.1f} s"
    assert report.inserted == 1 and not report.rejected, report
    stored = memory.get_node(node.node_id, "N1", citizen)
    assert stored is not None and stored.description == node.description
    assert all(len(node_id) <= NODE_ID_LIMIT for node_id in entity_ids(memory, citizen))


def test_a_memory_file_of_long_tokens_is_ingested_in_seconds(memory, citizen, tmp_path) -> None:
    path = tmp_path / "long.jsonl"
    records = [memory_node(citizen, text_of(shape, 100_000)).model_dump(mode="json") | {"kind": "memory"}
               for shape in ONE_TOKEN]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    start = time.perf_counter()
    report = memory.ingest(path, on_invalid="drop", duplicates="off")
    elapsed = time.perf_counter() - start
    assert elapsed < 10.0, f"{len(records)} memories of 100 KB ingested in {elapsed:.1f} s"
    assert report.inserted == len(records) and not report.rejected, report


# -- a very long name: no entity over the caps, and ids within the schema's limit ----------


LONG_CAPITALISED = "Aa" * 160  # one CamelCase-looking token of 320 characters


@pytest.mark.parametrize("on_invalid", ["raise", "drop"])
@pytest.mark.parametrize("where", ["description", "name"])
def test_a_320_character_capitalised_token_is_ingested(memory, citizen, on_invalid: str, where: str) -> None:
    fields = {"description": f"We deployed {LONG_CAPITALISED} with FalkorDB.", "name": "deploy note"}
    if where == "name":
        fields = {"description": "We deployed it with FalkorDB.", "name": LONG_CAPITALISED}
    node = memory_node(citizen, **fields)
    report = memory.ingest([node], on_invalid=on_invalid, duplicates="off")
    assert report.inserted == 1 and not report.rejected, report
    entities = entity_ids(memory, citizen)
    assert entities and all(len(node_id) <= NODE_ID_LIMIT for node_id in entities)
    # the 320 characters are not a name; the rest of the text still is
    assert "entity_falkordb" in mentions(memory, citizen, node.node_id)
    assert all(len(name) <= MAX_ENTITY_CHARS for name in entities.values())


def test_the_longest_kept_name_in_two_memories_is_one_entity(memory, citizen) -> None:
    name = "ZorbaQuill" * (MAX_ENTITY_CHARS // len("ZorbaQuill"))  # exactly at the cap
    assert len(name) == MAX_ENTITY_CHARS
    first, second = (memory_node(citizen, f"We rely on {name} every day.") for _ in range(2))
    memory.ingest([first], on_invalid="drop", duplicates="off")
    memory.ingest([second], on_invalid="drop", duplicates="off")
    target = entity_node_id(normalize_entity_name(name))
    assert target in mentions(memory, citizen, first.node_id)
    assert target in mentions(memory, citizen, second.node_id)
    assert [node_id for node_id, stored in entity_ids(memory, citizen).items() if stored == name] == [target]


class _NamesEverything(TransformComponent):
    """An entity step of someone else's (a custom extractor, an LLM): every memory mentions ``name``."""

    name: str

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        for node in nodes:
            node.metadata[ENTITIES_KEY] = [{"name": self.name, "entity_type": "Organization",
                                            "key": normalize_entity_name(self.name), "confidence": 0.8}]
        return nodes


@pytest.mark.parametrize("on_invalid", ["raise", "drop"])
def test_an_entity_name_longer_than_an_id_gets_one_id_within_the_limit(memory, citizen, on_invalid: str) -> None:
    """An entity another step (a custom extractor, an LLM) names at length still gets a valid, stable id."""
    long_name = LONG_CAPITALISED + " Systems"
    nodes = to_text_nodes([memory_node(citizen, "first note"), memory_node(citizen, "second note")])
    pipeline = build_pipeline(memory, IngestOptions(on_invalid=on_invalid, duplicates="off"))
    steps = pipeline.transformations
    steps[[type(s) for s in steps].index(EntityExtractor)] = _NamesEverything(name=long_name)
    for node in nodes:  # two runs: the second must find the stored entity, not make another
        pipeline.run(nodes=[node])
    ids = [node_id for node_id, name in entity_ids(memory, citizen).items() if name == long_name]
    assert len(ids) == 1 and len(ids[0]) <= NODE_ID_LIMIT, ids
    assert ids[0] == entity_node_id(normalize_entity_name(long_name))
    for node in nodes:
        assert ids[0] in mentions(memory, citizen, node.node_id)


def test_entity_ids_are_stable_and_fit_the_schema() -> None:
    # short keys keep the ids they always had
    assert entity_node_id("marguerite okonkwo") == "entity_marguerite_okonkwo"
    assert entity_node_id("v2 architecture") == "entity_v2_architecture"
    assert entity_node_id("node js") == "entity_node_js"
    # long keys: capped, deterministic, and distinct when they differ anywhere
    base = "a" * 5000
    for key in (base, base + " b", "x" * 249, "x" * 250, "y " * 400):
        node_id = entity_node_id(key)
        assert len(node_id) <= NODE_ID_LIMIT and node_id == entity_node_id(key)
        MemoryNode(node_id=node_id, level="N2", name=key, description="", energy=0.5, confidence=0.5)  # schema-valid
    assert entity_node_id(base) != entity_node_id(base + " b") != entity_node_id(base + "c")
    assert entity_node_id("x" * 249) == "entity_" + "x" * 249  # 256 characters: fits as it is
    assert entity_node_id("x" * 250) != "entity_" + "x" * 250


def test_entity_ids_of_names_beyond_ascii_never_merge_two_names() -> None:
    """Reproduced before: a name without ASCII letters was always ``entity_unnamed`` (東京 and Москва one
    entity), and names differing only in what the ASCII slug drops shared an id (Zoë and Zo, C++ and C)."""
    names = ["東京", "Москва", "Zoë", "Zo", "C++", "C", "Łukasz", "ukasz", "", "Ünïcödé " * 60]
    ids = [entity_node_id(normalize_entity_name(name)) for name in names]
    assert len(set(ids)) == len(ids), ids
    assert all(len(i) <= NODE_ID_LIMIT and i == entity_node_id(normalize_entity_name(n)) for i, n in zip(ids, names))
    assert ids[2].startswith("entity_zoe_") and ids[3] == "entity_zo"  # readable where it can be
