"""Spec 004 cognitive fields, pure functions: concepts, surfaces_when, authority score.

The spec's worked examples are requirements and are checked verbatim.
"""

from __future__ import annotations

import math

import pytest

from llama_consciousness.scoring.cognitive import (
    DEFAULT_TECHNICAL_TERMS,
    STOP_WORDS,
    compute_authority_score,
    extract_concepts,
    infer_surfaces_when,
    tokenize,
)

ELEFANTE = "Always use absolute paths in Elefante to avoid errors"
DEBUGGING = "When debugging path errors, use absolute paths"


# ----------------------------------------------------------------- concepts


def test_spec_example_concepts_elefante():
    assert extract_concepts(ELEFANTE) == ["elefante", "always", "absolute", "paths", "avoid"]


def test_spec_example_concepts_debugging():
    assert extract_concepts(DEBUGGING) == ["debugging", "path", "errors", "absolute", "paths"]


def test_sixth_concept_of_elefante_example_is_errors():
    assert extract_concepts(ELEFANTE, k=6)[-1] == "errors"


def test_stop_words_keep_rule_polarity_words():
    for word in ("always", "avoid", "never"):
        assert word not in STOP_WORDS
    for word in ("use", "in", "to", "when", "the", "and", "is"):
        assert word in STOP_WORDS
    assert "elefante" in DEFAULT_TECHNICAL_TERMS


def test_tokenize_keeps_technical_tokens():
    tokens = tokenize("FalkorDB v2 with pgvector, Python3, node.js, snake_case and C++ in Docker.")
    for token in ("falkordb", "v2", "pgvector", "python3", "node.js", "snake_case", "c++", "docker"):
        assert token in tokens
    assert "docker" == tokens[-1]  # the sentence's final '.' is not part of the word


def test_concepts_drop_numbers_and_single_letters():
    concepts = extract_concepts("In 2025 a b c shipped 1.2.3 to production", k=10)
    assert concepts == ["shipped", "production"]


def test_frequency_beats_position_and_boost_beats_both():
    text = "notes about caching: caching layers, caching keys, and redis"
    concepts = extract_concepts(text, k=3)
    assert concepts[0] == "caching"  # three times beats a boosted term once
    assert concepts[1] == "redis"  # boosted term beats earlier ordinary words
    assert extract_concepts("alpha beta gamma", k=3) == ["alpha", "beta", "gamma"]  # ties -> position


def test_custom_boost_terms_and_k():
    assert extract_concepts(ELEFANTE, k=2, boost_terms=()) == ["always", "absolute"]
    assert extract_concepts(ELEFANTE, k=1, boost_terms={"Paths"}) == ["paths"]
    assert extract_concepts(ELEFANTE, k=0) == []
    assert extract_concepts("") == []
    assert extract_concepts("the and of to in") == []


def test_shape_boost_for_unlisted_technical_tokens():
    # 'v2' is not in the list but looks technical: it outranks an earlier plain word.
    assert extract_concepts("upgrade storage to v2 today", k=3) == ["upgrade", "v2", "storage"]
    assert extract_concepts("upgrade storage to vv today", k=3) == ["upgrade", "storage", "vv"]


def test_extract_concepts_is_deterministic():
    text = "Configure Docker networking for FalkorDB; FalkorDB must listen on a unix socket"
    assert {tuple(extract_concepts(text)) for _ in range(5)} == {tuple(extract_concepts(text))}


# ------------------------------------------------------------ surfaces_when


def test_spec_example_surfaces_when_elefante():
    concepts = extract_concepts(ELEFANTE)
    result = infer_surfaces_when(ELEFANTE, concepts)
    assert result[:3] == ["elefante error", "elefante problem", "elefante best practice"]
    assert result == ["elefante error", "elefante problem", "elefante best practice", "how to elefante"]


def test_spec_example_surfaces_when_debugging():
    concepts = extract_concepts(DEBUGGING)
    result = infer_surfaces_when(DEBUGGING, concepts)
    assert result[:3] == ["debugging error", "path error", "debugging best practice"]
    assert result == [
        "debugging error", "path error", "debugging best practice", "how to debugging",
        "debugging problem", "path problem",
    ]


def test_surfaces_when_config_and_question_rows():
    text = "How to set up FalkorDB: the docker setup needs a config file"
    concepts = extract_concepts(text)
    assert concepts[0] == "falkordb"
    result = infer_surfaces_when(text, concepts)
    assert result[:2] == ["how to falkordb", "falkordb setup"]
    assert "docker setup" in result and "falkordb configuration" in result
    assert "why falkordb" not in result  # no "why" in the text


def test_surfaces_when_why_question():
    result = infer_surfaces_when("Why pgvector needs HNSW indexes", ["pgvector", "hnsw", "indexes"])
    assert result == ["why pgvector"]


def test_imperative_only_counts_at_clause_start():
    assert infer_surfaces_when("We use redis for caching", ["redis", "caching"]) == []
    assert infer_surfaces_when("Caching matters. Use redis", ["redis", "caching"]) == [
        "redis best practice", "how to redis",
    ]
    assert infer_surfaces_when("Never commit secrets", ["commit", "secrets"])[0] == "commit best practice"


def test_surfaces_when_skips_cue_only_concepts_and_limits():
    # 'always' and 'errors' restate cues: never a pattern subject.
    result = infer_surfaces_when(ELEFANTE, ["always", "errors", "elefante"])
    assert not any(p.startswith(("always ", "errors ")) for p in result)
    assert infer_surfaces_when(DEBUGGING, extract_concepts(DEBUGGING), max_patterns=2) == [
        "debugging error", "path error",
    ]
    assert infer_surfaces_when(DEBUGGING, [], max_patterns=8) == []
    assert infer_surfaces_when(DEBUGGING, ["always"]) == []
    assert infer_surfaces_when(DEBUGGING, extract_concepts(DEBUGGING), max_patterns=0) == []


def test_surfaces_when_without_cue_words_is_what_the_full_rules_give(monkeypatch):
    """The shortcut for texts without any cue word must agree with the rules run on every word."""
    import random

    from llama_consciousness.scoring import cognitive

    words = ["docker", "setup", "error", "use", "always", "why", "how", "to", "set", "up", "the", "paths",
             "Elefante", "crash", "avoid", "config", "never", "fix", "do", "not", "notes", "meeting",
             "[REDACTED:email]", "don\u2019t", "ops", "latency", ",", ";", "-", "."]
    rng = random.Random(7)
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 14))) for _ in range(400)]
    texts += ["Always use absolute paths in Elefante to avoid errors", "Meeting notes about latency"]
    concepts = [extract_concepts(t) for t in texts]
    fast = [infer_surfaces_when(t, c) for t, c in zip(texts, concepts)]

    class Always(frozenset):  # every text "has a cue": the full rules run
        def isdisjoint(self, other) -> bool:
            return False

    monkeypatch.setattr(cognitive, "_CUE_WORDS", Always())
    slow = [infer_surfaces_when(t, c) for t, c in zip(texts, concepts)]
    assert fast == slow
    assert any(fast) and not all(fast)  # both kinds of text were met


def test_surfaces_when_deduplicates():
    text = "How to fix docker errors: always pin versions"
    result = infer_surfaces_when(text, extract_concepts(text), max_patterns=20)
    assert len(result) == len(set(result))
    assert result.count("how to docker") == 1  # question row and rule row both produce it


# ---------------------------------------------------------------- authority


def test_authority_hand_computed():
    expected = (
        0.35 * (8 / 10)
        + 0.25 * math.log(10) / math.log(50)
        + 0.20 * math.exp(-0.007 * 30)
        + 0.20 * math.exp(-0.05 * 2)
    )
    assert expected == pytest.approx(0.770232, abs=1e-6)
    assert compute_authority_score(8, 10, 30, 2) == pytest.approx(expected, abs=1e-12)


def test_authority_round_numbers():
    assert compute_authority_score(10, 50, 0, 0) == pytest.approx(1.0)
    # neutral importance, used once, brand new, never accessed: 0.175 + 0 + 0.2 + 0.2
    assert compute_authority_score(None, 1, 0, None) == pytest.approx(0.575)
    assert compute_authority_score(0, 0, 1e6, 1e6) == pytest.approx(0.0, abs=1e-12)


def test_authority_edge_cases():
    base = compute_authority_score(5, 0, 10, 3)
    assert compute_authority_score(5, 1, 10, 3) == base  # log(1) = 0
    assert compute_authority_score(5, -4, 10, 3) == base
    assert compute_authority_score(5, 5000, 10, 3) == pytest.approx(base + 0.25)  # usage capped at 1
    assert compute_authority_score(None, 0, 10, 3) == base  # None -> neutral 5
    assert compute_authority_score(15, 0, 10, 3) == compute_authority_score(10, 0, 10, 3)
    assert compute_authority_score(-3, 0, 10, 3) == compute_authority_score(0, 0, 10, 3)
    assert compute_authority_score(5, 0, 10, None) == compute_authority_score(5, 0, 10, 10)
    assert compute_authority_score(5, 0, -7, -2) == compute_authority_score(5, 0, 0, 0)
    assert compute_authority_score(float("nan"), 0, 10, 3) == base
    for args in [(10, 10**9, -5, -5), (0, 0, 0, None), (7.5, 3, 400, 90)]:
        assert 0.0 <= compute_authority_score(*args) <= 1.0


def test_tech_shape_is_the_old_pattern_in_linear_time() -> None:
    import random
    import re
    import time

    from llama_consciousness.scoring.cognitive import tech_shape

    old = re.compile(r"(?:[a-z].*\d|\d.*[a-z])|[._]|[+#]$")
    rng = random.Random(5)
    alphabet = "abz09'._-+#"
    for _ in range(5000):
        word = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        assert tech_shape(word) == bool(old.search(word)), word
    started = time.perf_counter()
    assert not tech_shape("a" * 1_000_000)
    assert time.perf_counter() - started < 0.5
