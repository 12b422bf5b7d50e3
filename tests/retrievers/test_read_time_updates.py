"""Read-time knowledge updates end to end on the real embedded FalkorDB: the later of two retrieved memories
that give what the question asks another value comes first, the earlier is marked possibly outdated (with the
later one's date) in the nodes and in what an LLM is given, and nothing is written."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from llama_consciousness.render import render_stream
from llama_consciousness.retrievers.config import RetrievalConfig
from llama_consciousness.schema import MemoryNode, RetrievalIntention

T0 = datetime(2024, 1, 20, 9, 0, tzinfo=timezone.utc)
OLD = ("Login API response time under 20 concurrent requests: the login API response time is 180ms under 20 "
       "concurrent requests.")
NEW = ("Good news from this week's work on the authentication flow, the session cache and the database pool: "
       "the login API response time has decreased to 120ms under 20 concurrent requests.")
OTHER = "The nightly backup of the Postgres database runs at 2am and takes 14 minutes."
QUESTION = "What is the login API response time under 20 concurrent requests?"


def _memories(citizen: str) -> list[MemoryNode]:
    def m(node_id: str, text: str, days: int) -> MemoryNode:
        return MemoryNode(node_id=node_id, level="N1", citizen_id=citizen, node_type="Memory", name=text[:40],
                          description=text, energy=0.5, confidence=0.8, valid_at=T0 + timedelta(days=days),
                          created_at=T0 + timedelta(days=days))

    # the earlier statement is the closer match to the question's words: plain retrieval ranks it first
    return [m("old", OLD, 0), m("new", NEW, 14), m("other", OTHER, 20)]


@pytest.fixture
def stored(memory, citizen):
    memory.upsert(_memories(citizen))
    return citizen


def _ask(memory, citizen: str, question: str = QUESTION, config: RetrievalConfig | None = None, **intent):
    retriever = memory.retriever(citizen, config=config)
    intention = RetrievalIntention(query_text=question, citizen_id=citizen, query_levels=["N1"], **intent)
    return [n.node.metadata for n in retriever.retrieve_intention(intention)]


def test_the_later_value_comes_first_and_the_earlier_is_marked(memory, stored) -> None:
    plain = [m["node_id"] for m in _ask(memory, stored, config=RetrievalConfig(later_versions_first=False))]
    assert plain.index("old") < plain.index("new")  # the case the step is for
    found = _ask(memory, stored)
    order = [m["node_id"] for m in found]
    assert order.index("new") < order.index("old")
    old = next(m for m in found if m["node_id"] == "old")
    assert old["possibly_outdated_by"] == "new" and old["possibly_outdated"] is True
    assert old["possibly_outdated_since"].startswith((T0 + timedelta(days=14)).date().isoformat())
    new = next(m for m in found if m["node_id"] == "new")
    assert not new.get("possibly_outdated_by")
    # nothing was written: the stored memory carries no mark
    assert memory.get_node("old", "N1", stored).possibly_superseded_by is None


def test_what_an_llm_is_given_says_which_is_later(memory, stored) -> None:
    stream = memory.retrieve_stream(RetrievalIntention(query_text=QUESTION, citizen_id=stored, query_levels=["N1"]))
    text = render_stream(stream, 4000, current_first=True).text
    old_line = next(line for line in text.splitlines() if "180ms" in line)
    assert old_line.startswith("- [N1 Memory] [possibly outdated: a later memory (2024-02-03) gives it another value]")
    new_line = next(line for line in text.splitlines() if "120ms" in line)
    assert "possibly outdated" not in new_line and "[current]" in new_line
    assert text.index("120ms") < text.index("180ms")


@pytest.mark.parametrize("mode", ["point_in_time", "full_history"])
def test_other_temporal_modes_are_left_as_retrieved(memory, stored, mode) -> None:
    extra = {"as_of_time": T0 + timedelta(days=30)} if mode == "point_in_time" else {}
    found = _ask(memory, stored, temporal_mode=mode, **extra)
    assert not any(m.get("possibly_outdated_by") for m in found)


def test_a_question_about_the_past_is_not_reordered(memory, stored) -> None:
    found = _ask(memory, stored, "What was the login API response time before, under 20 concurrent requests?")
    assert not any(m.get("possibly_outdated_by") for m in found)


def test_switched_off_by_the_config(memory, stored) -> None:
    found = _ask(memory, stored, config=RetrievalConfig(later_versions_first=False))
    assert not any(m.get("possibly_outdated_by") for m in found)


def test_a_bare_stream_carries_the_marks_too(memory, stored) -> None:
    """Without postprocessors the stream's channel results carry this answer's read-time marks."""
    stream = memory.retrieve_stream(RetrievalIntention(query_text=QUESTION, citizen_id=stored, query_levels=["N1"]),
                                    postprocessors=None)
    nodes = [n for r in stream.levels.values() for part in (r.vector_results, r.keyword_results) for n in part]
    old = [n for n in nodes if n.node_id == "old"]
    assert old and all(n.possibly_outdated_by == "new" and n.possibly_outdated_since is not None for n in old)
    assert "[possibly outdated: a later memory (2024-02-03)" in render_stream(stream, 4000).text


def test_the_concatenation_recipes_keep_their_order(memory, stored) -> None:
    from llama_consciousness.retrievers.config import SEVEN_WAY_CONCATENATION

    found = _ask(memory, stored, config=SEVEN_WAY_CONCATENATION)
    assert not any(m.get("possibly_outdated_by") for m in found)
    hand_made = RetrievalConfig(fusion="concatenate")  # any concatenation, not only the named recipes
    assert not any(m.get("possibly_outdated_by") for m in _ask(memory, stored, config=hand_made))
