"""The scoring functions of state-based retrieval, and the Cypher side they must agree with.

``llama_consciousness.storage.state_queries`` computes in Cypher what these
functions compute in Python: its emotion pre-filter is checked here against them.
"""

from __future__ import annotations

import pytest

from llama_consciousness.schema._time import utcnow
from llama_consciousness.scoring import state as st
from llama_consciousness.storage import state_queries as sq

GOAL = "design_retrieval_architecture"


def test_scoring_functions_and_their_cypher_agree() -> None:
    assert st.normalise_goal("  Design_Retrieval-Architecture ") == "design retrieval architecture"
    assert st.goal_terms("design the retrieval architecture for N2") == ["design", "retrieval", "architecture"]
    assert st.goal_match_score(GOAL, GOAL, strategy="exact") == 1.0
    assert st.goal_match_score(GOAL, "Design retrieval architecture", strategy="exact") == 0.0
    assert st.goal_match_score(GOAL, "Design retrieval architecture") == 1.0
    assert st.goal_match_score(GOAL, "retrieval architecture") == 0.8
    assert st.goal_match_score(GOAL, "designing the new retrieval layer") == pytest.approx(0.4)
    assert st.goal_match_score(GOAL, None, ["architecture"]) == pytest.approx(0.2)
    assert not st.goal_matches(0.2, "partial") and st.goal_matches(0.3, "partial")
    assert st.goal_match_score(GOAL, "x", strategy="semantic", semantic_similarity=0.7) == 0.7
    with pytest.raises(ValueError, match="goal match"):
        st.goal_match_score(GOAL, GOAL, strategy="fuzzy")  # type: ignore[arg-type]
    assert st.recency_weight(0) == 1.0 and st.recency_weight(30) == 0.5 and st.recency_weight(-3) == 1.0
    assert st.doing_score(0.8, 30) == pytest.approx(0.4)
    assert st.energy_proximity(0.6, 0.9) == pytest.approx(0.7)
    assert st.unresolved_score(0.8, None, 1.0) == pytest.approx(0.8) and st.unresolved_score(0.8, 0.5) == 0.4
    assert st.pattern_similarity(None, 0.9) == 0.9 and st.pattern_similarity(0.4, None) == 0.4
    vector, norm = st.emotion_query({"excited": 0.8, "excitement": 0.6, "Cautious": 0.3})
    assert vector == {"excitement": 0.8, "caution": 0.3} and norm == pytest.approx((0.64 + 0.09) ** 0.5)


def test_necessary_emotions_never_drop_a_memory_above_the_threshold() -> None:
    import random

    assert sq.necessary_emotions({"frustration": 0.7, "uncertainty": 0.5}, 0.7) == ["frustration"]
    assert sq.necessary_emotions({"joy": 0.5, "calm": 0.5}, 0.7) == ["calm", "joy"]
    assert sq.necessary_emotions({}, 0.7) == []
    rng = random.Random(7)
    names = ["a", "b", "c", "d", "e", "f"]
    for _ in range(3000):
        now = {n: rng.choice([0.1, 0.3, 0.5, 0.7, 0.9, 1.0]) for n in rng.sample(names, rng.randint(1, 4))}
        other = {n: rng.random() for n in rng.sample(names, rng.randint(1, 4))}
        threshold = rng.choice([0.5, 0.6, 0.7, 0.8])
        if st.emotional_similarity(now, other) > threshold:
            assert set(other) & set(sq.necessary_emotions(now, threshold)), (now, other, threshold)


def test_normalise_goal_reads_ascii_whitespace_as_spaces_and_trims_spaces_only() -> None:
    # the Cypher's trim strips spaces only: tabs and newlines become spaces first, on both sides
    assert st.normalise_goal("\tgoal\n") == "goal"
    assert st.goal_match_score("goal", "\tgoal\n") == 1.0
    assert st.normalise_goal("_\tgoal\r\n-") == "goal"
    assert st.normalise_goal("design\tretrieval\nlayer") == "design retrieval layer"  # inner ones too
    assert st.normalise_goal("a\x0bb\x0cc") == "a b c"
    assert st.normalise_goal("two  spaces") == "two  spaces"  # runs are kept, as in the Cypher
    # whitespace beyond ASCII is kept (the model strips it from the outside of a memory's goal)
    assert st.normalise_goal("_\xa0goal") == "\xa0goal" and st.normalise_goal("\x1cgoal") == "\x1cgoal"
    assert st.normalise_goal(None) == ""


def test_goal_lower_is_falkordb_to_lower() -> None:
    # FalkorDB's toLower maps one code point to one: no "i̇" for "İ", no final sigma
    assert st.goal_lower("İSTANBUL") == "istanbul" and "İSTANBUL".lower() != "istanbul"
    assert st.goal_lower("ΟΔΟΣ") == "οδοσ" and "ΟΔΟΣ".lower() == "οδος"
    assert st.goal_lower("Café ÜBER Piñata") == "café über piñata" == "Café ÜBER Piñata".lower()
    assert st.normalise_goal("Istanbul_ROUTE") == st.normalise_goal("istanbul route")


@pytest.mark.parametrize("empty", ["___", "-", "_", " - ", "_-_", "\t_\n"])
def test_a_goal_with_nothing_left_once_normalised_matches_nothing(empty: str) -> None:
    assert st.normalise_goal(empty) == "" and st.effective_goal(empty) is None
    for strategy in ("exact", "partial", "semantic"):
        # nothing: not memories without a goal or with "_" (the empty string equals the empty
        # string), not every goal of 3+ characters (the empty string is in every string)
        for memory_goal in (None, "", "_", "___", empty, "design retrieval", "abc"):
            assert st.goal_match_score(empty, memory_goal, ["design"], strategy, semantic_similarity=0.9) == 0.0
    assert st.effective_goal("  goal ") == "goal" and st.effective_goal(None) is None
    # the retriever's query drops it: the mode runs as without a goal
    now = utcnow()
    q = sq.StateQuery(mode="find_related_unresolved", now=now, energy=0.5, goal=empty, goal_embedding=[0.1, 0.2])
    assert q.goal is None and q.goal_embedding is None
    assert sq.StateQuery(mode="find_related_unresolved", now=now, energy=0.5, goal=" goal\n").goal == "goal"
