"""Entity names, normalised so that "person_Luca", "Luca's" and "LUCA" meet; the entity index."""

from __future__ import annotations

import random
import time

import pytest

from llama_consciousness.scoring.names import (
    EntityIndex,
    compact_key,
    name_similarity,
    normalize_entity_name,
    singularize,
    split_type_prefix,
    trigrams,
)


@pytest.mark.parametrize("name", ["person_Luca", "Luca", "luca's", "LUCA", "Luca\u2019s", "  Luca ",
                                  "PERSON_LUCA", "person:luca", "\"Luca\"", "\uff2c\uff55\uff43\uff41"])
def test_person_names_share_a_key(name: str) -> None:
    assert normalize_entity_name(name) == "luca"


@pytest.mark.parametrize(("plural", "singular"), [
    ("tasks", "task"), ("architectures", "architecture"), ("indexes", "index"),
    ("policies", "policy"), ("classes", "class"), ("statuses", "status"), ("causes", "cause"),
    ("memories", "memory"), ("matches", "match"), ("indices", "index"), ("APIs", "api"),
    ("GPUs", "gpu"), ("Open Tasks", "open task"),
])
def test_plural_and_singular_share_a_key(plural: str, singular: str) -> None:
    assert normalize_entity_name(plural) == normalize_entity_name(singular) == singular


@pytest.mark.parametrize("word", ["analysis", "status", "class", "FalkorDB", "series", "news", "corpus",
                                  "Lucas", "Thomas", "Kubernetes", "Postgres", "Redis", "DevOps", "bus",
                                  "V2", "GPT-4"])
def test_words_that_are_not_plurals_are_kept(word: str) -> None:
    key = normalize_entity_name(word)
    assert key == word.casefold().replace("-", " ")
    assert singularize(key) == key


def test_normalize_articles_prefixes_and_separators() -> None:
    assert normalize_entity_name("the V2 architecture") == "v2 architecture"
    assert normalize_entity_name("The V2 Architectures") == "v2 architecture"
    assert normalize_entity_name("decision_v2_architecture") == "v2 architecture"
    assert normalize_entity_name("an idea") == "idea"
    assert normalize_entity_name("the") == "the"  # an article alone is a word
    assert normalize_entity_name("GPT-4") == normalize_entity_name("gpt 4") == "gpt 4"
    assert normalize_entity_name("node.js") == "node js"
    assert normalize_entity_name("Luca's  V2\tplan") == "luca v2 plan"
    assert normalize_entity_name("James'") == "james"
    assert normalize_entity_name("phase_3") == "phase 3"  # not a type prefix
    assert normalize_entity_name("Person Luca") == "person luca"  # only person_ / person:
    assert normalize_entity_name("") == normalize_entity_name("?!") == ""
    assert split_type_prefix("person_Luca") == ("person", "Luca")
    assert split_type_prefix("Decision_V2_Architecture") == ("decision", "V2_Architecture")
    assert split_type_prefix("Luca") == (None, "Luca")


def test_normalize_is_idempotent_on_examples() -> None:
    for name in ["person_Luca", "Falkor DB", "the V2 architectures", "statuses", "Policies", "Luca's tasks",
                 "Microsoft GraphRAG", "GPT-4o", "Kubernetes", "classes"]:
        key = normalize_entity_name(name)
        assert normalize_entity_name(key) == key


def test_name_similarity() -> None:
    assert name_similarity("FalkorDB", "Falkor DB") >= 0.85
    assert name_similarity("Falkor-DB", "falkordb") >= 0.85
    assert name_similarity("Felix", "Felix's") == 1.0
    assert name_similarity("person_Luca", "LUCA") == 1.0
    assert name_similarity("Felix", "Flux") < 0.5
    assert name_similarity("Luca", "Felix") < 0.2
    assert name_similarity("V2 architecture", "architecture V2") >= 0.85
    assert 0.0 < name_similarity("Luca", "Luca Rossi") < 0.85
    assert name_similarity("", "Luca") == 0.0
    for a, b in [("FalkorDB", "Falkor DB"), ("Luca", "Luca Rossi"), ("energy decay", "energy-decay model")]:
        score = name_similarity(a, b)
        assert 0.0 <= score < 1.0
        assert score == name_similarity(b, a)


def test_entity_index_exact_then_fuzzy() -> None:
    index = EntityIndex([
        ("e1", "person_Luca"), ("e2", "FalkorDB"), ("e3", "Felix"), ("e4", "Flux"),
        ("e5", "Falkor DB"), ("e1", "Luca Rossi"), ("e6", "decision_v2_architecture"),
    ])
    assert len(index) == 7
    assert "luca" in index and "LUCA's" in index and "nobody" not in index

    hits = index.match("Luca")
    assert hits[0] == ("e1", "person_Luca", 1.0)
    assert [h.entity_id for h in hits] == ["e1"]  # one row per entity

    hits = index.match("FalkorDB")
    assert [h.entity_id for h in hits] == ["e2", "e5"]
    assert hits[0].score == 1.0 and 0.85 <= hits[1].score < 1.0

    assert [h.entity_id for h in index.match("Felix")] == ["e3"]  # "Flux" is too far
    assert [h.entity_id for h in index.match("Felix", threshold=0.1)][0] == "e3"
    assert index.match("the V2 architectures")[0].entity_id == "e6"
    assert index.match("architecture v2")[0].entity_id == "e6"  # word order
    assert index.best("Falkor-DB").entity_id in {"e2", "e5"}
    assert index.best("Zebulon") is None
    assert index.match("") == []
    assert index.match("FalkorDB", limit=1) == [("e2", "FalkorDB", 1.0)]
    assert index.exact("falkor db") == [("e5", "Falkor DB")]

    index.add("e7", "Felix's notebook")
    index.add("e7", "Felix's notebook")  # idempotent
    assert len(index) == 8
    assert index.match("felix notebook")[0].entity_id == "e7"


def _synthetic_names(count: int, seed: int = 11) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vi", "zo", "be", "da", "fe", "gu", "hi", "jo",
                 "pa", "se", "to", "wu", "rin", "dor", "mel", "qua", "xi", "bel"]
    prefixes = ["person", "concept", "decision", "tool", "project"]
    names = []
    for i in range(count):
        first = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
        second = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
        if i % 2:
            names.append((f"id{i}", f"{rng.choice(prefixes)}_{first}_{second}"))
        else:
            names.append((f"id{i}", f"{first.title()} {second.title()}"))
    return names


def test_entity_index_candidates_agree_with_a_full_scan() -> None:
    names = _synthetic_names(3000, seed=3)
    index = EntityIndex(names)
    keys = {normalize_entity_name(n) for _, n in names}
    rng = random.Random(5)
    for _, name in rng.sample(names, 60):
        query = name[:-1] if rng.random() < 0.5 else name.replace("_", " ")
        qkey = normalize_entity_name(query)
        qgrams = trigrams(compact_key(qkey))
        expected = set()
        for key in keys:
            grams = trigrams(compact_key(key))
            if key == qkey or 2 * len(qgrams & grams) / (len(qgrams) + len(grams)) >= 0.8:
                expected.add(key)
        got = {normalize_entity_name(h.name) for h in index.match(query, threshold=0.8)}
        assert expected <= got


def test_entity_index_lookup_is_fast_on_50k_names() -> None:
    names = _synthetic_names(50_000)
    index = EntityIndex(names)
    rng = random.Random(1)
    queries = [name for _, name in rng.sample(names, 200)]
    queries += [q.replace("_", " ")[:-1] for q in queries[:100]]
    start = time.perf_counter()
    results = [index.match(q) for q in queries]
    average_ms = (time.perf_counter() - start) / len(queries) * 1000
    assert average_ms < 50, average_ms  # loose: the benchmark suite measures speed properly
    ids = dict((name, eid) for eid, name in names)
    for query, hits in zip(queries[:200], results):
        assert hits and hits[0].score == 1.0
        assert ids[query] in {h.entity_id for h in hits if h.score == 1.0}
