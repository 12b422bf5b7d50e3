"""Read-time knowledge updates (scoring.recency): which retrieved memories a later one may replace, and the
order that puts the later one first."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

from llama_consciousness.scoring.recency import (
    Candidate, asks_about_the_past, later_versions, latest_first, statement_about,
)

T0 = datetime(2024, 3, 1, tzinfo=timezone.utc)


def c(key: str, text: str, days: int) -> Candidate:
    return Candidate(key, text, T0 + timedelta(days=days))


LOGIN_OLD = ("user: I've been measuring the login API response time and it's currently at 180ms under 20 "
             "concurrent requests. Can you review my caching code?\n```js\nconst ttl = 3600;\n```")
LOGIN_NEW = ("user: I'm trying to optimize the login API response time, which has decreased to 120ms under 20 "
             "concurrent requests after optimizing the authentication flow. Here is my controller.")
QUESTION = "What is the login API response time under 20 concurrent requests?"


def test_a_later_value_of_the_same_thing_replaces_the_earlier() -> None:
    found = [c("old", LOGIN_OLD, 0), c("new", LOGIN_NEW, 5)]
    assert later_versions(QUESTION, found) == {"old": "new"}
    # the order they were found in does not matter: time decides
    assert later_versions(QUESTION, list(reversed(found))) == {"old": "new"}


def test_the_same_value_again_is_no_update() -> None:
    again = LOGIN_NEW.replace("has decreased to 120ms", "is still 180ms")
    assert later_versions(QUESTION, [c("old", LOGIN_OLD, 0), c("new", again, 5)]) == {}


def test_a_memory_that_does_not_speak_of_the_question_is_never_marked() -> None:
    other = "user: The deploy of the chat service takes 12 minutes on 3 nodes, and the login page loads."
    assert later_versions(QUESTION, [c("a", other, 0), c("b", LOGIN_NEW, 5)]) == {}
    assert later_versions(QUESTION, [c("a", LOGIN_OLD, 0), c("b", other, 5)]) == {}


def test_values_in_code_blocks_do_not_count() -> None:
    code_only = "user: login API response time under 20 concurrent requests, see:\n```\nlatency = 95\n```"
    st = statement_about({"login", "respons", "time", "concurrent", "request"}, code_only)
    assert "95" not in st.values


def test_questions_about_the_past_are_never_reordered() -> None:
    found = [c("old", LOGIN_OLD, 0), c("new", LOGIN_NEW, 5)]
    for q in ("What was the login API response time before the optimization?",
              "What was the login API response time at first under 20 concurrent requests?",
              "How many days passed between the two login API response time measurements?"):
        assert asks_about_the_past(q)
        assert later_versions(q, found) == {}
    assert not asks_about_the_past(QUESTION)


def test_dates_are_values() -> None:
    q = "What is the deadline for the Instagram automation prototype?"
    old = c("old", "user: I set a sprint deadline of April 1, 2024 for the Instagram automation prototype.", 0)
    new = c("new", "user: I need to move the deadline for my Instagram automation prototype to April 5, 2024.", 9)
    assert later_versions(q, [new, old]) == {"old": "new"}


def test_memories_without_a_time_are_left_alone() -> None:
    assert later_versions(QUESTION, [Candidate("old", LOGIN_OLD, None), c("new", LOGIN_NEW, 5)]) == {}


def test_latest_first_brings_a_group_together_at_its_best_place_latest_first() -> None:
    ranked = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6)]
    when = {k: T0 + timedelta(days=i) for i, k in enumerate("abcd")}  # a is the oldest, d the latest
    out = latest_first(ranked, {"a": "c"}, when)
    assert out == [("c", 0.9), ("a", 0.9), ("b", 0.8), ("d", 0.6)]
    assert [s for _, s in out] == sorted((s for _, s in out), reverse=True)  # scores never increase down the list
    # a group of three, found far apart: together, latest first, where the first of them was
    assert [k for k, _ in latest_first(ranked, {"a": "d", "b": "d"}, when)] == ["d", "b", "a", "c"]
    # a successor that was not found changes nothing; nothing is lost or repeated
    assert latest_first(ranked, {"a": "zz"}, when) == ranked
    assert sorted(k for k, _ in latest_first(ranked, {"b": "d", "a": "c"}, when)) == list("abcd")


def test_a_group_points_every_earlier_memory_to_the_latest() -> None:
    mid = LOGIN_NEW.replace("120ms", "150ms")
    found = [c("old", LOGIN_OLD, 0), c("mid", mid, 3), c("new", LOGIN_NEW, 5)]
    assert later_versions(QUESTION, found) == {"old": "new", "mid": "new"}


def test_linear_on_long_messages() -> None:
    big = ("Note: the login API response time is 180ms. " + "x = 1\n```\ncode: here\n```\n" * 2000) * 10
    started = time.perf_counter()
    later_versions(QUESTION, [c(str(i), big, i) for i in range(20)])
    assert time.perf_counter() - started < 5


def test_an_excerpt_keeps_the_beginning_and_what_speaks_of_the_question() -> None:
    from llama_consciousness.scoring.recency import excerpt

    filler = "We refactored the worker and moved the queue settings into a file. " * 60
    text = "user: Here is where the project stands. " + filler + \
        "The login API response time is 120ms under 20 concurrent requests now. " + filler
    out = excerpt(text, QUESTION, 1000)
    assert len(out) < 1100
    assert out.startswith("user: Here is where the project stands.")
    assert "120ms under 20 concurrent requests" in out and out.count("[…]") == 2
    assert excerpt("short", QUESTION, 1000) == "short"
    # nothing speaks of the question: the beginning only
    plain = excerpt(filler * 2, "What colour is the bike shed?", 500)
    assert plain.endswith("[…]") and len(plain) < 520
    # linear on a very long message
    started = time.perf_counter()
    excerpt(text * 50, QUESTION, 2000)
    assert time.perf_counter() - started < 5


def test_an_excerpt_finds_its_passage_by_place_whatever_the_text_holds() -> None:
    """The passage is found where it is, past characters whose lower case is longer ("İ"); a term split by a
    sentence's end is not named."""
    from llama_consciousness.scoring.recency import excerpt

    filler = "We refactored the worker and moved the queue settings into a file. " * 30
    answer = "The login API response time is 120ms under 20 concurrent requests now."
    for before in ("İstanbul office notes. " * 20, "Notes. " * 20):
        text = before + filler + answer + " " + filler
        out = excerpt(text, QUESTION, 600)
        assert answer in out, before[:10]
    # "login" split by a sentence end names nothing: the beginning only
    broken = "Start here. " + filler + "The log. In the end it worked. " + filler
    assert excerpt(broken, "Which login broke?", 400).count("[…]") == 1


def test_review_edge_cases() -> None:
    """A memory of the latest's own time is not 'earlier'; chains given by a caller are followed, nothing
    repeated; questions about change are about the past; a nonsensical excerpt length is refused."""
    import pytest

    from llama_consciousness.scoring.recency import excerpt

    same = LOGIN_NEW.replace("120ms", "130ms")
    found = [c("old", LOGIN_OLD, 0), c("new", LOGIN_NEW, 30), c("same", same, 30)]
    out = later_versions(QUESTION, found)
    assert out.get("old") in ("new", "same") and "new" not in out and "same" not in out
    ranked = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
    when = {k: T0 + timedelta(days=i) for i, k in enumerate("abc")}
    assert [k for k, _ in latest_first(ranked, {"a": "b", "b": "c"}, when)] == ["c", "b", "a"]
    assert asks_about_the_past("How has the login API response time changed?")
    assert asks_about_the_past("How did my salary evolve over the year?")
    # a summary asks for the whole story, the earlier values too
    assert asks_about_the_past("Can you summarize how my login API work went?")
    assert asks_about_the_past("Give me an overview of the deployment plan")
    assert not asks_about_the_past("What is the summit's current altitude?")
    with pytest.raises(ValueError):
        excerpt("x" * 50, QUESTION, 0)
    from llama_consciousness.retrievers.config import RetrievalConfig

    with pytest.raises(ValueError, match="finite"):
        RetrievalConfig(long_score_weights={"vector": float("nan")})
