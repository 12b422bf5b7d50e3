"""The offline knowledge-update judge: which later statements replace earlier ones, and which never do."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from llama_consciousness.scoring.fusion import later_first
from llama_consciousness.scoring.updates import (
    CONFIRM_AT, LONG_STATEMENT_WORDS, Statement, extract_facts, judge_update, order_pair, speaker_of,
)

MARCH = datetime(2025, 3, 1, tzinfo=timezone.utc)
SEPTEMBER = datetime(2025, 9, 1, tzinfo=timezone.utc)


def pair(old: str, new: str, old_speaker: str | None = None, new_speaker: str | None = None):
    return (Statement("old", old, old_speaker, MARCH, MARCH), Statement("new", new, new_speaker, SEPTEMBER, SEPTEMBER))


UPDATES = [
    ("I live in Lyon.", "We moved to Berlin last week.", "reality_changed"),
    ("I work at Google as an engineer.", "I just joined Stripe.", "reality_changed"),
    ("I work at Google.", "I quit my job at Google last month.", "reality_changed"),
    ("I work at Google.", "I don't work at Google anymore.", "reality_changed"),
    ("My favourite food is pizza.", "My favorite food is sushi now.", "reality_changed"),
    ("I'm 30 years old.", "I turned 31 yesterday.", "reality_changed"),
    ("Ticket #42 is blocked.", "Ticket #42 is resolved.", "reality_changed"),
    ("The meeting with Acme is on Monday.", "The meeting with Acme was moved to Friday.", "reality_changed"),
    ("My boss is Sarah.", "My boss is now Tom.", "reality_changed"),
    ("I'm single.", "I got engaged last month!", "reality_changed"),
    ("I live in Lyon.", "Actually, I was wrong, I live in Lille.", "discovered_false"),
    ("My dentist is Dr Hale.", "Turns out my dentist is Dr Moss, not Dr Hale.", "discovered_false"),
]

NOT_UPDATES = [
    ("I live in Lyon.", "Anna lives in Berlin."),  # another person
    ("I live in Lyon.", "My sister lives in Rome."),  # another person, through "my"
    ("I live in Lyon.", "She lives in Rome."),  # who? never guessed
    ("I live in Lyon.", "I might move to Berlin next year."),  # hypothetical
    ("I live in Lyon.", "If I moved to Berlin I would miss the food."),
    ("I live in Lyon.", "I used to live in Paris."),  # the quoted past
    ("I work at Google.", "Back in 2015 I worked at IBM."),
    ("I live in Lyon.", "I still live in Lyon, near the river."),  # the same value again
    ("I love pizza.", "I love sushi."),  # many values at once
    ("I went hiking.", "I went swimming."),
    ("My mom is amazing.", "My mom is sick."),  # not a value that replaces another
    ("The party is on Friday.", "The party is on Saturday."),  # maybe two parties
    ("The painting is done.", "The painting is finished."),  # the same state in other words
    ("Tom said that he lives in Rome.", "I live in Oslo."),
]


@pytest.mark.parametrize("old,new,kind", UPDATES)
def test_a_later_statement_that_changes_a_value_is_an_update(old: str, new: str, kind: str) -> None:
    judgement = judge_update(*pair(old, new))
    assert judgement.verdict == "update", judgement
    assert judgement.confidence >= CONFIRM_AT
    assert judgement.reason == kind
    assert (judgement.older, judgement.newer) == ("old", "new")
    assert judgement.why


@pytest.mark.parametrize("old,new", NOT_UPDATES)
def test_distractors_are_not_updates(old: str, new: str) -> None:
    assert judge_update(*pair(old, new)).verdict == "none"


def test_speakers_are_the_subjects_of_first_person_statements() -> None:
    # In one conversation, Caroline's "I live in X" and Melanie's "I live in Y" are two people.
    assert judge_update(*pair("I live in Lyon.", "I live in Berlin.", "caroline", "melanie")).verdict == "none"
    assert judge_update(*pair("I live in Lyon.", "We moved to Berlin.", "caroline", "caroline")).verdict == "update"
    # A third-person statement about the speaker names the same subject.
    assert judge_update(*pair("I live in Lyon.", "Caroline moved to Berlin.", "caroline", "melanie")).verdict == "update"


def test_speaker_prefix_and_extra() -> None:
    assert speaker_of("Caroline: I live in Lyon.") == ("caroline", "I live in Lyon.")
    assert speaker_of("I live in Lyon.", {"speaker": "Mel"}) == ("mel", "I live in Lyon.")
    assert speaker_of("I live in Lyon.") == (None, "I live in Lyon.")


def test_a_long_older_memory_is_only_possibly_outdated() -> None:
    filler = " ".join(["We talked about many other things that day."] * (LONG_STATEMENT_WORDS // 8 + 1))
    judgement = judge_update(*pair("I live in Lyon. " + filler, "We moved to Berlin."))
    assert judgement.verdict == "possible" and judgement.confidence < CONFIRM_AT


def test_same_instant_without_a_word_of_change_is_only_possible() -> None:
    a = Statement("a", "I live in Lyon.", None, MARCH, MARCH)
    b = Statement("b", "I live in Berlin.", None, MARCH, MARCH)
    assert order_pair(a, b) is None
    assert judge_update(a, b).verdict == "possible"


def test_order_is_by_validity_not_arrival() -> None:
    early = Statement("e", "x", None, MARCH, SEPTEMBER)  # recorded late, true since March
    late = Statement("l", "y", None, SEPTEMBER, MARCH)
    assert order_pair(late, early) == (early, late)


def test_facts_read_contractions_coordination_and_denial() -> None:
    facts = extract_facts("I live in Lyon with my family and work at Renault.")
    assert {(f.subject, f.slot, f.value) for f in facts} == {("self", "residence", "lyon"),
                                                             ("self", "employer", "renault")}
    (denied,) = extract_facts("I'm no longer working at Renault.")
    assert (denied.slot, denied.value, denied.tense) == ("employer", "renault", "deny")
    assert extract_facts("How are you?") == []
    assert all(f.hedged for f in extract_facts("Maybe I'll live in Rome someday."))


def test_later_first_moves_a_possibly_outdated_memory_below_its_successor() -> None:
    ranked = [("N1:a", 0.9), ("N1:x", 0.8), ("N1:b", 0.5), ("N1:c", 0.4)]
    successor = {"N1:a": "N1:b"}.get
    assert later_first(ranked, successor) == [("N1:x", 0.8), ("N1:b", 0.5), ("N1:a", 0.5), ("N1:c", 0.4)]
    # a chain: a -> b -> c, all ranked above their successors
    chain = {"N1:a": "N1:b", "N1:b": "N1:c"}.get
    assert [k for k, _ in later_first(ranked, chain)] == ["N1:x", "N1:c", "N1:b", "N1:a"]
    # a successor that is not in the list, or already above: unchanged
    assert later_first(ranked, {"N1:a": "N1:zz", "N1:c": "N1:b"}.get) == ranked


def test_both_retrievers_mark_and_demote_a_possibly_outdated_memory() -> None:
    """The six-way and the state-based retriever share ``later_statements_first``."""
    from llama_consciousness.retrievers.base import later_statements_first
    from llama_consciousness.schema import MemoryNode

    def entry(node_id: str, later: str | None = None, expired: bool = False) -> dict:
        node = MemoryNode(node_id=node_id, level="N1", citizen_id="ada", name=node_id, energy=0.5, confidence=0.5,
                          created_at=MARCH, possibly_superseded_by=later,
                          expired_at=SEPTEMBER if expired else None)
        return {"node": node, "level": "N1", "details": {}}

    found = {"N1:old": entry("old", "new"), "N1:x": entry("x"), "N1:new": entry("new"),
             "N1:gone": entry("gone", "x", expired=True)}
    ranked = [("N1:old", 0.9), ("N1:x", 0.7), ("N1:new", 0.4), ("N1:gone", 0.3)]
    assert later_statements_first(ranked, found) == [("N1:x", 0.7), ("N1:new", 0.4), ("N1:old", 0.4),
                                                     ("N1:gone", 0.3)]
    assert found["N1:old"]["details"] == {"possibly_outdated_by": "new", "possibly_outdated": True}
    assert found["N1:gone"]["details"] == {}  # expired since: the confirmed supersession speaks for it


# -- the named rule: something named ended, was replaced or was wrong ("possible" only) -------------------------

NAMED = [
    ("I drive a VW Golf, it's ancient.", "I don't have the Golf anymore, sold it in May.", "reality_changed"),
    ("We have two cats, Miso and Tofu.", "Tofu passed away last week.", "reality_changed"),
    ("I'm studying at the Sorbonne.", "I said Sorbonne but my uni is actually Sciences Po.", "discovered_false"),
]
NOT_NAMED = [
    # still the same employer, another team
    ("I'm a software engineer at Revolut.", "Switched from the cards team to the crypto team, still at Revolut."),
    # one name in two roles
    ("My coach is Claire Dubois.", "I don't have Claire Dubois as my accountant any more."),
    # the person spoken to is not a value
    ("Thanks, Caroline! I love painting.", "No worries, Caroline! I stopped for a while."),
    # someone else's news
    ("I work at Roche in Basel.", "My wife just left Roche for Novartis."),
    # a date in common is not a thing in common
    ("The dentist appointment is on April 9th.", "The quarterly planning moved, April 9th didn't work for them."),
]


@pytest.mark.parametrize("old,new,kind", NAMED)
def test_a_named_thing_that_ended_is_possibly_outdated(old: str, new: str, kind: str) -> None:
    judgement = judge_update(*pair(old, new))
    assert (judgement.verdict, judgement.reason) == ("possible", kind), judgement
    assert judgement.confidence < CONFIRM_AT


@pytest.mark.parametrize("old,new", NOT_NAMED)
def test_a_name_in_common_is_not_enough(old: str, new: str) -> None:
    assert judge_update(*pair(old, new)).verdict == "none"


def test_two_different_things_never_update_each_other() -> None:
    # two roles with one person's name in common
    assert judge_update(*pair("Nina Petrova took over as my accountant.",
                              "I misspoke, my landlord is Claire Dubois, not Nina Petrova.")).verdict == "none"
    # the vet appointment is not the dentist appointment
    assert judge_update(*pair("Got the dentist appointment on Monday.",
                              "The vet appointment on August 17th is off.")).verdict == "none"
    # "didn't work for them" names no job
    assert judge_update(*pair("I started at Booking last month.", "The vet appointment is on Friday now, "
                              "Wednesday didn't work for them.")).verdict == "none"
    # a date does not replace a car
    assert judge_update(*pair("The car service is on April 9th.",
                              "I drive a Fiat Panda now, the Kona is gone.")).verdict == "none"
    # the same appointment, one side naming it in full, is still an update
    assert judge_update(*pair("Got the dentist appointment on Monday.",
                              "The appointment moved to Friday.")).verdict == "update"


def test_capitalised_words_are_names_only_when_they_are() -> None:
    from llama_consciousness.scoring.updates import about_words, ended_names, states_something

    # "Long day" is no name ("da" is a particle only before a name: "Lorenzo da Ponte")
    assert ended_names("Long day, I'm just glad it's over.") == frozenset()
    assert not states_something("Long day, I'm just glad it's over.")
    assert states_something("I don't have the Golf anymore.")
    # what "my employer is X" is about, in the words a question uses
    assert set("job work company employer".split()) <= set(about_words("Turns out my employer is Siemens.").split())


def test_a_short_memory_is_one_frame_and_a_day_names_its_date() -> None:
    # the thing in one sentence, its date in the next; the correction names only the day
    judgement = judge_update(*pair("I got an interview at Vestas! Planning role. It's on May 8th.",
                                   "Correction on the interview, it's May 15th, not the 8th."))
    assert (judgement.verdict, judgement.reason) == ("update", "discovered_false"), judgement
    judgement = judge_update(*pair("I finally booked my driving test, it's on March 18th.",
                                   "And correction, the test is March 28th, not the 18th."))
    assert judgement.verdict == "update", judgement
    # two parties on two dates, no word of change: both may be
    assert judge_update(*pair("The party at Anna's is on Friday.", "The party at the club is on Saturday.")
                        ).verdict == "none"
    # a long memory is not read as one frame
    long = "I got an interview at Vestas. " + "We talked about the weather for a while. " * 6 + "It's on May 8th."
    assert judge_update(*pair(long, "Correction on the interview, it's May 15th, not the 8th.")).verdict != "update"


def test_what_a_sentence_says_ended_in_its_own_words() -> None:
    from llama_consciousness.scoring.updates import states_something

    for old, new in (("I drink coffee, four cans a day.", "I quit coffee three weeks ago."),
                     ("I have guitar lessons every Thursday.", "I stopped my guitar lessons, no time."),
                     ("I'm on keto since January.", "Keto is over, I had bread today.")):
        assert judge_update(*pair(old, new)).verdict == "possible", (old, new)
        assert states_something(new)
    # "stopped and I felt", "a lost tourist": no object of an ending
    assert judge_update(*pair("I felt calm at the lake.", "Time stopped and I felt alive.")).verdict == "none"
    assert judge_update(*pair("I love finding new places.", "I helped a lost tourist find the station.")
                        ).verdict == "none"
