"""The emotional intent of a query, read by the lexicon."""

from __future__ import annotations

import pytest

from llama_consciousness.scoring.emotional_intent import extract_emotional_intent
from llama_consciousness.scoring.emotions import canonical_emotion

SPEC_QUERY = "Times when I felt excited but cautious"


def test_spec_query_reads_excitement_and_caution():
    assert extract_emotional_intent(SPEC_QUERY) == {"caution": 0.6, "excitement": 0.6}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I was stuck on the migration", {"frustration": 0.6}),
        ("blocked again by the vendor", {"frustration": 0.6}),
        ("the breakthrough on the parser", {"excitement": 0.6}),
        ("worried about the deadline", {"anxiety": 0.6}),
        ("very excited", {"excitement": 0.8}),
        ("really excited", {"excitement": 0.8}),
        ("extremely anxious", {"anxiety": 1.0}),
        ("slightly worried", {"anxiety": 0.3}),
        ("a bit frustrated", {"frustration": 0.3}),
        ("slightly worried but very excited", {"anxiety": 0.3, "excitement": 0.8}),
        ("not excited", {}),
        ("I was not at all excited", {}),
        ("no worries", {}),
        ("never afraid but hopeful", {"hope": 0.6}),
        ("not sure about the plan", {"uncertainty": 0.6}),  # the phrase's "not" negates nothing
        ("can't wait to see it", {"excitement": 0.6}),
        ("not tired, but curious", {"curiosity": 0.6}),
        ("the content of the drive", {}),  # ambiguous synonym-table words are not read
        ("", {}),
    ],
)
def test_emotional_intent_lexicon_rules(text, expected):
    assert extract_emotional_intent(text) == expected


def test_emotional_intent_outputs_canonical_names_in_unit_range():
    text = "Excited, thrilled, CAUTIOUS and wary; very frustrated, somewhat confused, really TIRED and grateful!"
    got = extract_emotional_intent(text)
    assert got == extract_emotional_intent(text)  # deterministic
    assert list(got) == sorted(got)
    assert set(got) == {"excitement", "caution", "frustration", "confusion", "fatigue", "gratitude"}
    assert all(canonical_emotion(name) == name for name in got)
    assert all(0.0 <= v <= 1.0 for v in got.values())
    assert got["frustration"] == 0.8 and got["confusion"] == 0.3


def test_phrases_are_read_anywhere_in_a_long_message_and_claim_their_words():
    """Phrases are looked for only where their first word is: a long message is read whole, a phrase at its end
    too, and a phrase's words are not read again as words of their own ("peace" is not calm twice)."""
    filler = "the build copies the wheel into the image and runs the tests " * 60
    text = filler + "honestly we hit a wall with the cache, I am at a loss, but I have peace of mind now"
    assert extract_emotional_intent(text) == {"calm": 0.6, "confusion": 0.6, "frustration": 0.6}
    assert extract_emotional_intent("very much at ease") == {"calm": 0.8}  # "very" before the phrase
    assert extract_emotional_intent("at a") == {}  # a phrase cut off by the end of the text
