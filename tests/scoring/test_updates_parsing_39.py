"""The update judge on real chat messages: colons that are no speaker label, and a sentence that gives the new
value and denies the old one in one breath."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from llama_consciousness.scoring.updates import (
    Statement, extract_facts, judge_update, speaker_of, statement_of, states_something,
)

MARCH = datetime(2025, 3, 1, tzinfo=timezone.utc)
SEPTEMBER = datetime(2025, 9, 1, tzinfo=timezone.utc)


def pair(old: str, new: str, old_speaker: str | None = None, new_speaker: str | None = None):
    return (Statement("old", old, old_speaker, MARCH, MARCH), Statement("new", new, new_speaker, SEPTEMBER, SEPTEMBER))


def memory(node_id: str, description: str, when: datetime, extra: dict | None = None) -> SimpleNamespace:
    return SimpleNamespace(node_id=node_id, description=description, name="", extra=extra, valid_at=when,
                           created_at=when)


# -- speaker labels ---------------------------------------------------------------------------------------------

NOT_LABELS = [
    "We moved: I live in Berlin now.",
    "Note: the deploy is at 5pm",
    "Update: I live in Berlin now.",
    "Information Update: the office moved to Lyon.",
    "Here's my code: print('hi')",
    "Here’s my code: print('hi')",
    "Performance & Optimization Labels:Memory Management: use a pool.",
    "Memory Management: use a pool.",
    "Step 1: install the package.",
    "I moved: Berlin, finally.",
    "Anna's notes: buy milk.",
    "the plan: ship on Friday.",
]


@pytest.mark.parametrize("text", NOT_LABELS)
def test_a_heading_or_a_sentence_before_a_colon_is_no_speaker(text: str) -> None:
    assert speaker_of(text) == (None, text)


LABELS = [
    ("Caroline: I moved to Berlin", "caroline", "I moved to Berlin"),
    ("Melanie Smith: I live in Lyon.", "melanie smith", "I live in Lyon."),
    ("user: I live in Lyon.", "user", "I live in Lyon."),
    ("assistant: Noted, you live in Lyon.", "assistant", "Noted, you live in Lyon."),
    ("System: be brief.", "system", "be brief."),
    ("Dr. Smith: take two a day.", "dr. smith", "take two a day."),
]


@pytest.mark.parametrize("text,speaker,rest", LABELS)
def test_a_name_or_a_role_before_a_colon_is_the_speaker(text: str, speaker: str, rest: str) -> None:
    assert speaker_of(text) == (speaker, rest)


def test_a_given_speaker_takes_off_only_its_own_label() -> None:
    assert speaker_of("Caroline: I live in Lyon.", {"speaker": "caroline"}) == ("caroline", "I live in Lyon.")
    assert speaker_of("caroline: I live in Lyon.", {"speaker": "Caroline"}) == ("caroline", "I live in Lyon.")
    assert speaker_of("Note: the deploy is at 5pm", {"speaker": "Mel"}) == ("mel", "Note: the deploy is at 5pm")
    assert speaker_of("Melanie: I live in Lyon.", {"speaker": "Caroline"}) == ("caroline", "Melanie: I live in Lyon.")


def test_a_colon_in_a_message_does_not_make_it_someone_elses() -> None:
    older = statement_of(memory("old", "I live in Lyon.", MARCH))
    newer = statement_of(memory("new", "We moved: I live in Berlin now.", SEPTEMBER))
    assert newer.speaker is None and newer.text == "We moved: I live in Berlin now."
    judgement = judge_update(older, newer)
    assert (judgement.verdict, judgement.older, judgement.newer) == ("update", "old", "new"), judgement
    # the same with a speaker given, and with real labels on both sides
    older = statement_of(memory("old", "I live in Lyon.", MARCH, {"speaker": "Caroline"}))
    newer = statement_of(memory("new", "Update: I live in Berlin now.", SEPTEMBER, {"speaker": "Caroline"}))
    assert judge_update(older, newer).verdict == "update"
    older = statement_of(memory("old", "Caroline: I live in Lyon.", MARCH))
    newer = statement_of(memory("new", "Caroline: I moved to Berlin", SEPTEMBER))
    assert (older.speaker, newer.speaker) == ("caroline", "caroline")
    assert judge_update(older, newer).verdict == "update"
    # a label still tells two people apart
    other = statement_of(memory("new", "Melanie: I moved to Berlin", SEPTEMBER))
    assert judge_update(older, other).verdict == "none"


# -- the new value and the old one denied in one sentence -------------------------------------------------------

def _old_to_new(why: str, old: str, new: str) -> bool:
    """The judgement's ``why`` reads "<old> -> <new>"."""
    before, arrow, after = why.partition("->")
    return bool(arrow) and old in before and new in after and new not in before


SAID_AT_ONCE = [
    ("I work at Google.", "I work at Microsoft now, no longer at Google.", "google", "microsoft"),
    ("I work at Google.", "I'm now at Microsoft and no longer at Google.", "google", "microsoft"),
    ("I live in Lyon.", "I live in Berlin now, not in Lyon any more.", "lyon", "berlin"),
    ("I live in Lyon.", "I don't live in Lyon any more, I live in Berlin.", None, None),
]


@pytest.mark.parametrize("old,new,old_value,new_value", SAID_AT_ONCE)
def test_the_denied_value_is_the_one_the_negation_is_about(old: str, new: str, old_value: str | None,
                                                           new_value: str | None) -> None:
    judgement = judge_update(*pair(old, new))
    assert (judgement.verdict, judgement.reason) == ("update", "reality_changed"), judgement
    assert (judgement.older, judgement.newer) == ("old", "new")
    if old_value:
        assert _old_to_new(judgement.why, old_value, new_value), judgement.why
    else:
        assert "lyon" in judgement.why and "berlin" not in judgement.why, judgement.why


def test_said_at_once_counts_as_much_as_the_new_value_alone() -> None:
    alone = judge_update(*pair("I work at Google.", "I work at Microsoft now."))
    at_once = judge_update(*pair("I work at Google.", "I work at Microsoft now, no longer at Google."))
    assert (at_once.verdict, at_once.confidence) == (alone.verdict, alone.confidence) == ("update", alone.confidence)
    alone = judge_update(*pair("I live in Lyon.", "I live in Berlin now."))
    at_once = judge_update(*pair("I live in Lyon.", "I live in Berlin now, not in Lyon any more."))
    assert (at_once.verdict, at_once.confidence) == (alone.verdict, alone.confidence)


def test_the_new_value_is_never_read_as_denied() -> None:
    facts = extract_facts("I work at Microsoft now, no longer at Google.")
    assert ("employer", "microsoft", "present") in {(f.slot, f.value, f.tense) for f in facts}
    assert not any(f.tense == "deny" and f.value == "microsoft" for f in facts)
    facts = {(f.slot, f.value, f.tense) for f in extract_facts("I live in Berlin now, not in Lyon any more.")}
    assert ("residence", "berlin", "present") in facts
    facts = {(f.slot, f.value, f.tense) for f in extract_facts("I don't live in Lyon any more, I live in Berlin.")}
    assert ("residence", "lyon", "deny") in facts and ("residence", "berlin", "deny") not in facts
    # a denial of the value itself still is one
    assert [(f.value, f.tense) for f in extract_facts("I'm no longer working at Renault.")] == [("renault", "deny")]
    assert [(f.value, f.tense) for f in extract_facts("I don't work at Google anymore.")] == [("google", "deny")]


@pytest.mark.parametrize("old,new", [
    ("I work at Microsoft.", "I work at Microsoft now, no longer at Google."),
    ("I work at Microsoft.", "I'm now at Microsoft and no longer at Google."),
    ("I live in Berlin.", "I live in Berlin now, not in Lyon any more."),
    ("I live in Berlin.", "I don't live in Lyon any more, I live in Berlin."),
    ("My dentist is Dr Moss.", "Turns out my dentist is Dr Moss, not Dr Hale."),
])
def test_a_later_statement_that_keeps_the_earlier_value_ends_nothing(old: str, new: str) -> None:
    assert judge_update(*pair(old, new)).verdict == "none", judge_update(*pair(old, new))


def test_a_denial_without_a_new_value_still_ends_the_old_one() -> None:
    judgement = judge_update(*pair("I work at Google.", "I'm no longer at Google."))
    assert judgement.verdict != "none", judgement
    assert judge_update(*pair("I work at Google.", "I don't work at Google anymore.")).verdict == "update"


# -- long messages ------------------------------------------------------------------------------------------------

def _long_message(size: int = 100_000) -> str:
    block = (
        "Note: here is the config: it moved.\n"
        "```python\n"
        "CONFIG = {'host': 'db:5432', 'user': 'admin', 'labels': 'a:b:c:d:e'}\n"
        "def handler(event: dict) -> dict:  # Update: no longer at v1, not in prod any more\n"
        "    return {'status': 'done', 'time': '10:30'}\n"
        "```\n"
        "Performance & Optimization Labels:Memory Management: pools, arenas: and caches.\n"
        "Information Update: I work at Microsoft now, no longer at Google, not in Lyon any more.\n"
        + "Aaaa Bbbb: " * 5 + "x" * 300 + ":" * 200 + " no longer " * 20 + "\n"
    )
    return (block * (size // len(block) + 1))[:size]


def test_long_messages_with_code_and_colons_are_read_quickly() -> None:
    text = _long_message()
    heading = "Aaaa Bbbb " * 10_000 + ": " + text  # a prefix far longer than any label
    start = time.perf_counter()
    assert speaker_of(text) == (None, text)
    assert speaker_of(heading)[0] is None
    assert speaker_of("A" * 100_000 + ": x")[0] is None
    older = statement_of(memory("old", "I work at Google. " + text, MARCH))
    newer = statement_of(memory("new", text + " And I work at Microsoft now, no longer at Google.", SEPTEMBER))
    judge_update(older, newer)
    judge_update(newer, older)
    judge_update(*pair("I work at Google.", text))
    states_something(text)
    assert time.perf_counter() - start < 2.0
