"""The fast offline entity extraction reads text exactly as the straightforward per-word rules do.

``llama_consciousness.entities`` tokenises with one ``re.split`` and a per-extractor class cache, starts
runs at candidate words only, classifies one-word runs by a shortcut of the run rules, scans quote
patterns that open with a literal and builds ``Entity`` models for the kept mentions only (issue 40
item 4: long chat messages).  Here the reference is the code before that, kept verbatim: a loop building
every word, the run rules over every word, the quote patterns led by a lookbehind.  Equality is checked on
varied text (code, tables, names, punctuation, possessives, quotes, unicode, shouting) and on generated
text; there is no timing assertion (see ``benchmarks/ingest_speed.py --beam``).
"""

from __future__ import annotations

import re
from dataclasses import astuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llama_consciousness import entities as E
from llama_consciousness.entities import (
    _CONNECTORS, _KNOWN_ORGS, _KNOWN_TOOLS, _ORG_SUFFIXES, _POSSESSIVE_AFTER, _PROJECT_WORDS, HEAD_NOUNS,
    MAX_ENTITY_CHARS, MAX_ENTITY_WORDS, PERSON_CUES_AFTER, PERSON_CUES_BEFORE, STOP_WORDS, OfflineEntityExtractor,
    _classify, _key, _Mention, _sentence_initial, _Tok, _too_long,
)

# -- the reference: the per-word code as it was -----------------------------------------------------------

_REF_TOKEN = re.compile(r"[^\W_](?:[\w&+]|['\u2019](?=[^\W_]{2})|[-.](?=[^\W_]))*")
_REF_QUOTES = (
    re.compile(r'"([^"\n]{1,80})"'),
    re.compile(r"\u201c([^\u201d\n]{1,80})\u201d"),
    re.compile(r"\u00ab([^\u00bb\n]{1,80})\u00bb"),
    re.compile(r"(?<![\w'\u2019])'([^'\n]{1,60})'(?![\w])"),
    re.compile(r"(?<![\w\u2019])\u2018([^\u2019\n]{1,60})\u2019(?![\w])"),
)


def _ref_letter_counts(text: str) -> tuple[int, int]:
    return sum(map(str.isalpha, text)), sum(map(str.isupper, filter(str.isalpha, text)))


def ref_tokenize(text: str) -> list[_Tok]:
    letters, upper = _ref_letter_counts(text)
    shouting = letters >= 8 and upper > 0.6 * letters
    tokens: list[_Tok] = []
    skip_at = -1
    size = len(text)
    for match in _REF_TOKEN.finditer(text):
        start, end = match.span()
        if start == skip_at:
            continue
        word = text[start:end]
        possessive = False
        if end < size and text[end] in "'\u2019":
            if _POSSESSIVE_AFTER.match(text, end) is not None:
                possessive = True
                skip_at = end + 1
            elif word[-1] in "sS" and (end + 1 == size or not (text[end + 1].isalnum() or text[end + 1] == "_")):
                possessive = True
        lower = word.casefold()
        kind = _classify(word, shouting)
        if kind in ("cap", "acronym", "letter", "lower") and lower in STOP_WORDS:
            kind = "stop"
        initial = kind == "cap" and _sentence_initial(text, start)
        tokens.append(_Tok(word, start, end, lower, kind, possessive, initial))
    return tokens


def _adjacent(text: str, left: _Tok, right: _Tok) -> bool:
    gap = text[left.end:right.start]
    return gap == " " or (0 < len(gap) <= 3 and gap.isspace() and "\n" not in gap)


def _ref_run_parts(x: OfflineEntityExtractor, run: list[_Tok], first: _Tok, entity_type: str) -> list[_Mention]:
    parts: list[_Mention] = []
    for tok in run:
        if tok.kind in ("code", "camel", "acronym"):
            part_type = "Tool" if tok.kind == "camel" or tok.lower in _KNOWN_TOOLS else "Entity"
            parts.append(_Mention(tok.start, tok.end, part_type, 0.7, "run", part_ok=True))
        elif tok.kind == "cap" and tok is first and tok.lower in x._first_names and entity_type != "Person":
            parts.append(_Mention(tok.start, tok.end, "Person", 0.7, "run", part_ok=True))
    return parts


def _ref_classify_run(x: OfflineEntityExtractor, text: str, tokens: list[_Tok], i: int, j: int,
                      lexicon: dict) -> list[_Mention]:
    run = tokens[i:j]
    first = run[0]
    if (first.kind == "cap" and first.initial and len(run) > 1 and run[1].kind == "cap"
            and first.lower not in x._first_names and run[1].lower in x._first_names):
        i += 1
        run = run[1:]
        first = run[0]
    before = tokens[i - 1] if i > 0 else None
    last = run[-1]
    after = tokens[j] if j < len(tokens) else None
    plain = all(t.kind in ("cap", "letter") or t.lower in _CONNECTORS for t in run)
    cue_before = (before is not None and before.lower in PERSON_CUES_BEFORE
                  and text[before.end:first.start] in (" ", ". "))
    cue_after = after is not None and after.lower in PERSON_CUES_AFTER and _adjacent(text, last, after)
    start, end = first.start, last.end
    if end - start > MAX_ENTITY_CHARS or len(run) > MAX_ENTITY_WORDS or _too_long(text[start:end]):
        if not x.emit_parts:
            return []
        return [p for p in _ref_run_parts(x, run, first, "Entity") if p.end - p.start <= MAX_ENTITY_CHARS]
    run_key = _key(text[start:end])
    entity_type, confidence = "Entity", 0.6
    if run_key in lexicon:
        entity_type, confidence = lexicon[run_key]
    elif plain and first.lower in x._first_names:
        entity_type, confidence = "Person", 0.85
    elif plain and len(run) <= 3 and (cue_before or cue_after):
        entity_type, confidence = "Person", 0.7
    elif plain and len(run) <= 3 and last.possessive and first.kind == "cap":
        entity_type, confidence = "Person", 0.65
    elif (last.lower in _ORG_SUFFIXES and len(run) > 1) or (len(run) == 1 and first.lower in _KNOWN_ORGS):
        entity_type, confidence = "Organization", 0.7
    elif first.lower in _PROJECT_WORDS and len(run) > 1:
        entity_type, confidence = "Project", 0.7
    elif (any(t.kind == "camel" or t.lower in _KNOWN_TOOLS for t in run)
          or run_key.replace(" ", "") in _KNOWN_TOOLS):
        entity_type, confidence = "Tool", 0.75
    elif last.kind == "lower" and last.lower in HEAD_NOUNS:
        entity_type, confidence = "Concept", 0.7
    elif len(run) == 1 and first.kind in ("code", "acronym"):
        entity_type, confidence = "Entity", 0.75
    if (len(run) == 1 and first.kind == "cap" and first.initial and entity_type == "Entity"
            and confidence <= 0.6 and not first.possessive):
        return []
    mention = _Mention(start, end, entity_type, confidence, "run")
    if len(run) > 1:
        mention.parts = _ref_run_parts(x, run, first, entity_type)
    return [mention]


def ref_run_mentions(x: OfflineEntityExtractor, text: str, tokens: list[_Tok], lexicon: dict) -> list[_Mention]:
    found: list[_Mention] = []
    i, n = 0, len(tokens)
    while i < n:
        tok = tokens[i]
        if tok.kind == "lower" and tok.lower in x._first_names:
            before = tokens[i - 1] if i > 0 else None
            after = tokens[i + 1] if i + 1 < n else None
            if tok.possessive or (
                before is not None and before.lower in PERSON_CUES_BEFORE and _adjacent(text, before, tok)
            ) or (after is not None and after.lower in PERSON_CUES_AFTER and _adjacent(text, tok, after)):
                found.append(_Mention(tok.start, tok.end, "Person", 0.6, "run", part_ok=True))
            i += 1
            continue
        if tok.kind not in ("cap", "camel", "acronym", "code"):
            i += 1
            continue
        run = [tok]
        j = i + 1
        while j < n and not run[-1].possessive and _adjacent(text, run[-1], tokens[j]):
            nxt, prev = tokens[j], run[-1]
            if nxt.kind in ("cap", "camel", "acronym", "code"):
                if prev.kind == "lower":
                    break
                run.append(nxt)
            elif nxt.kind in ("num", "letter") and prev.kind in ("cap", "camel", "acronym"):
                run.append(nxt)
            elif (nxt.kind == "lower" and nxt.lower in HEAD_NOUNS
                  and (prev.kind in ("code", "camel", "acronym") or prev.lower in HEAD_NOUNS)):
                run.append(nxt)
            elif (nxt.lower in _CONNECTORS and prev.kind == "cap" and j + 1 < n
                  and tokens[j + 1].kind == "cap" and _adjacent(text, nxt, tokens[j + 1])):
                run.extend((nxt, tokens[j + 1]))
                j += 1
            else:
                break
            j += 1
        found += _ref_classify_run(x, text, tokens, i, j, lexicon)
        i = j
    return found


def _mentions(found: list[_Mention]) -> list[tuple]:
    return [(m.start, m.end, m.entity_type, m.confidence, m.source, m.part_ok, _mentions(m.parts)) for m in found]


def _quotes(patterns: tuple, text: str) -> list[tuple]:
    return [(i, m.span(), m.span(1)) for i, p in enumerate(patterns) for m in p.finditer(text)]


# -- texts -------------------------------------------------------------------------------------------------

TEXTS = [
    "",
    "Luca asked Felix about the V2 architecture. Then Ada said the GPT-4 pipeline at Bank of America stalls.",
    "asked felix yesterday; luca's idea was better than nicolas' plan. hi sarah! james said no.",
    "Microsoft GraphRAG vs LlamaIndex: Phase 3 starts Monday. The O'Brien team (Acme Corp) uses FalkorDB.",
    "```python\ndef load_user(user_id: int) -> User:\n    return db.query(User).filter_by(id=user_id).first()\n```\n"
    "Call `getUserById` then `setState({ isOpen: true })`; see README.md and src/app.tsx, v2.3.1-rc1.",
    "| Name | Role | Since |\n|---|---|---|\n| Maria Rossi | CTO | 2021 |\n| Kenji Sato | Engineer | 2023 |\n"
    "| Ops Team | SRE Group | n/a |",
    "THE SERVER IS DOWN AGAIN!!! CALL LUCA NOW, HE SAID THE DISK IS FULL.",
    "\u00c9mile Zola met Ana\u00efs Nin in Z\u00fcrich \u2014 \u201cQuantum Leap\u201d, \u00abLa Vie\u00bb, "
    "\u2018Deep Work\u2019 and 'Project Atlas'. Stra\u00dfe, \u0130stanbul, \u212aelvin, \u01c5ungla, \U0001F600 ok.",
    "It's Felix's and James's and Chris' turn; the boss's car; Luca's's; 's alone; Ross'_x; "
    "O\u2019Neil\u2019s plan and McDonald's MacBook; rock 'n' roll; 'quoted' isn't 'it's'.",
    "e.g. i.e. U.S.A. A.B. x-Ray snake_case Snake_Case __init__ a&b C++ AT&T R2-D2 node.js 3.14 1,000 -5 v2 gpt4o",
    "Dear Dr. Smith,\n\nPlease meet Prof Jane Doe and Mr. Van Helsing of the Royal Society.\n\n-- Sent by Alex",
    "Sprint Planning for the Search API migration: Alice Chen owns the Retrieval Layer; Bob owns KPI dashboards.",
    "  leading spaces \t\tTabs\tBetween  Words\u00a0NBSP\u2003EM SPACE\nNew Line Start\n\n\nAfter Blank",
    "a " * 40 + "The End",
    " ".join(["Word"] * 30) + ". " + " ".join(["Acme"] * 13) + " Inc",
    "'" * 7 + "s" + "\u2019s" * 3 + " A's B\u2019s C' D\u2019 ' s 's",
]


def _check(text: str, **kwargs) -> None:
    x = OfflineEntityExtractor(**kwargs)
    reference = ref_tokenize(text)
    fast = E._Tokens(text, x._first_names, x._classes)
    assert [astuple(t) for t in fast] == [astuple(t) for t in reference]
    assert [astuple(t) for t in E._tokenize(text)] == [astuple(t) for t in reference]
    lexicon = x._lexicon
    assert _mentions(x._run_mentions(text, fast, lexicon)) == _mentions(ref_run_mentions(x, text, reference, lexicon))
    assert _quotes(E._QUOTES, text) == _quotes(_REF_QUOTES, text)
    assert E._letter_counts(text) == _ref_letter_counts(text)


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("variant", [str, str.upper, str.lower, str.title])
def test_words_runs_and_quotes_equal_the_reference(text: str, variant) -> None:
    _check(variant(text))


@pytest.mark.parametrize("text", TEXTS)
def test_with_a_lexicon_and_known_people(text: str) -> None:
    """Known people add first names (one a stop word); a vocabulary adds lexicon entries."""
    _check(text, known_people=["Luca Rossi", "person_will", "\u00c9mile"],
           vocabulary={"memory": "Concept", "Python": "Tool", "search api": "Project"}, emit_parts=False)


def test_the_class_cache_starts_over_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(E, "_CLASS_CACHE_WORDS", 5)
    x = OfflineEntityExtractor()
    classes: dict = {}
    for text in TEXTS:
        fast = E._Tokens(text, x._first_names, classes)
        assert [astuple(t) for t in fast] == [astuple(t) for t in ref_tokenize(text)]
        assert len(classes[fast.shouting]) <= max(5, len(set(fast.words)))


def test_extractors_of_the_same_first_names_share_their_class_cache() -> None:
    """The pipeline builds an extractor per call: the words of the calls before are classified already."""
    assert OfflineEntityExtractor()._classes is OfflineEntityExtractor(vocabulary=["memory"])._classes
    assert OfflineEntityExtractor()._classes is not OfflineEntityExtractor(known_people=["Zorba Q"])._classes
    assert (OfflineEntityExtractor(known_people=["Zorba Q"])._classes
            is OfflineEntityExtractor(known_people=["person_zorba"])._classes)


_PIECES = st.sampled_from([
    "Luca", "luca", "LUCA", "Felix", "asked", "said", "told", "hi", "the", "The", "of", "Bank", "America", "Inc",
    "GPT-4", "V2", "v2", "architecture", "pipeline", "Phase", "3", "McDonald", "iPhone", "LlamaIndex", "AT&T",
    "x", "A", "I", "e.g.", "'s", "\u2019s", "'", "\u2019", "\"", "\u201c", "\u201d", "\u2018", "(", ")", "|", "-",
    ".", ",", ";", ":", "!", "?", "\n", "\n\n", "  ", "\t", "_", "__x", "snake_case", "\u00c9mile", "\u0130", "\u00df",
    "O'Brien", "rock'n", "Acme", "Corp", "Sprint", "KPI", "FalkorDB", "2025", "1.0", "#", "*", "`code`",
])


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(st.tuples(_PIECES, st.sampled_from(["", " ", "  ", "\n", ". ", "'", ", "])), max_size=40),
       shout=st.booleans())
def test_generated_text_equals_the_reference(pieces: list[tuple[str, str]], shout: bool) -> None:
    text = "".join(piece + gap for piece, gap in pieces)
    _check(text.upper() if shout else text)


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_arbitrary_unicode_equals_the_reference(text: str) -> None:
    _check(text)


def test_extract_on_the_texts_is_unchanged_by_the_limit() -> None:
    """Entities built for the kept rows only: the first ``max_entities`` most confident of the full list."""
    full, limited = OfflineEntityExtractor(), OfflineEntityExtractor(max_entities=3)
    for text in TEXTS:
        everything = full.extract(text, ["a concept", "Luca"])
        ranked = sorted(range(len(everything)), key=lambda i: (-everything[i].confidence, i))[:3]
        expected = [everything[i] for i in sorted(ranked)]
        got = limited.extract(text, ["a concept", "Luca"])
        assert got == expected
        assert [e.model_fields_set for e in got] == [e.model_fields_set for e in expected]
