"""Entities mentioned in memories (nodes linked by ``MENTIONS``) and queries (where traversal starts).

:class:`OfflineEntityExtractor` (rules, no model) runs on every query, so it must be fast;
:class:`LLMEntityExtractor` asks a LlamaIndex ``LLM`` and falls back to the rules.  Names are compared by
``normalize_entity_name``, so the extractors only find mentions.  Offline, a mention is a **lexicon** entry
(known people, vocabulary, the memory's concepts), a **run** of capitalised words, CamelCase words,
acronyms and codes ("Microsoft GraphRAG", "GPT-4", "Phase 3", "V2 architecture", "Bank of America"), or
a **quoted** term of at most six words.  A lone capitalised word opening a sentence needs evidence (a
known name, a possessive, a person cue); a lower-case first name with a possessive or cue is a Person,
as queries are often typed in lower case; mostly upper-case text is read as lower case.  Overlaps are
resolved longest first; codes, names and lexicon entries inside a longer mention are kept too, since
traversal benefits from every starting point.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import json
import logging
import operator
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llama_consciousness.scoring.names import EntityIndex, normalize_entity_name, split_type_prefix

__all__ = ["ENTITY_TYPES", "MAX_ENTITY_CHARS", "MAX_ENTITY_WORDS", "Entity", "EntityType", "LLMEntityExtractor",
           "OfflineEntityExtractor", "ENTITIES_KEY", "parse_entity_list"]

logger = logging.getLogger(__name__)

EntityType = Literal["Person", "Organization", "Concept", "Tool", "Project", "Entity"]
ENTITY_TYPES: tuple[str, ...] = ("Person", "Organization", "Concept", "Tool", "Project", "Entity")

#: Metadata key the transform writes.
ENTITIES_KEY = "lc_entities"

#: Size caps of an entity name: real names are far shorter, a longer span is a title, a shouted sentence
#: or a blob no query will name; the caps also keep extraction linear in the length of the text.
MAX_ENTITY_CHARS = 100
MAX_ENTITY_WORDS = 12


def _too_long(name: str) -> bool:
    return len(name) > MAX_ENTITY_CHARS or len(name.split()) > MAX_ENTITY_WORDS


class Entity(BaseModel):
    """One entity mention: ``key`` defaults to the name's key, ``span`` is ``(start, end)`` in the text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    entity_type: EntityType = "Entity"
    key: str = ""
    span: Optional[tuple[int, int]] = None
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)

    @model_validator(mode="before")
    @classmethod
    def _fill_key(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            if isinstance(data.get("name"), str):
                data["name"] = data["name"].strip()
                data["key"] = data.get("key") or normalize_entity_name(data["name"])
            if not data.get("key"):
                raise ValueError(f"entity name {data.get('name')!r} has no letters or digits")
        return data

    def to_metadata(self) -> dict[str, Any]:
        """The JSON form written under ``metadata["lc_entities"]``."""
        return {"name": self.name, "entity_type": self.entity_type, "key": self.key,
                "confidence": round(self.confidence, 3)}


# Word lists (casefolded), compact on purpose: the lexicon arguments carry the names a deployment knows.

#: Capitalised words that are never entities on their own.
STOP_WORDS: frozenset[str] = frozenset("""
i me my mine myself we us our ours ourselves you your yours yourself he him his she her hers
it its they them their theirs this that these those who whom whose which what when where why
how whatever whoever whenever wherever however the a an some any all each every no none both
either neither another other such many much more most few several one and or but nor so yet
for if then else than because since while although though unless until after before once as
at by in on of to from with without within into onto about above below over under between
among through during against per via like unlike near beyond despite instead also too very
just only even still already again ever never always often sometimes usually maybe perhaps
probably actually really basically finally first second third next last later now today
tonight tomorrow yesterday here there yes not ok okay please thanks thank hello hi hey dear
well oh ah wow sure indeed meanwhile overall otherwise therefore thus hence moreover
furthermore additionally anyway besides similarly likewise regardless nevertheless nonetheless
is are was were be been being am do does did done have has had having will would shall should
can could may might must let lets get got make made see look note remember consider use using
try going went come came think know knew want need feel felt said say says told tell asked
yeah nope lol etc eg ie vs re fwd fw cc subject update todo fyi asap tbd nb ps
mr mrs ms dr prof sir madam
monday tuesday wednesday thursday friday saturday sunday
january february march april june july august september october november december
morning afternoon evening night week weekend month year day
""".split())

#: Common first names (people are the entities queries name most).  Words that
#: are also common English words (Will, Mark, Grace, May, Max) are left out.
FIRST_NAMES: frozenset[str] = frozenset("""
aaron abigail ada adam adrian ahmed aisha alan albert alberto alec alejandro alessandra
alessandro alex alexander alexandra alexis alfred ali alice alicia alina amanda amelia amir
amy ana andre andrea andreas andrew andy angela anna anne annie anthony anton antonio arjun
arthur ava axel barbara beatrice ben benjamin bernard beth bianca boris brian bruno camille
carla carlos carlo carmen caroline catherine cecilia charles charlie charlotte chen chiara
chloe chris christian christina christopher claire clara claude claudia colin connor daniel
daniela daniele danny dario david davide deborah denis diana diego dmitri dominic dylan edward
elena eleanor elias elif elisa elizabeth ella emily emma enrico eric erik ethan eva evan fabio
farah fatima federico felix fernando filippo fiona francesca francesco francis frederick
gabriel gabriele gabriella george georgia giacomo gianluca giorgio giovanni giulia giulio
giuseppe greta hannah hans harry hassan helen helena henri henry hugo ian igor ingrid irene
iris isaac isabel isabella ivan jack jacob james jan jane jasmine jason javier jean jennifer
jens jessica joan joanna joe johan johannes john jonas jonathan jorge jose joseph josh joshua
juan julia julian julien juliette justin karen karim karl kate katherine kenji kevin klaus
laura lars lea leo leon leonardo liam lila lily lin linda lisa lorenzo louis louise luca lucas
lucia luciano luigi luis luke lukas marco marcus margaret maria marie marina mario marta
martin mary mateo matteo matthew mattia maya mehmet mei mia michael michele michelle miguel
mikhail milan mohamed mohammed nadia naomi natalia natalie nathan nicholas nick nicola nicolas
nicole niklas nikolai nina noah noemi nora oliver olivia omar oscar pablo paolo patrick paul
paula pedro peter petra philip pierre piero pietro priya rachel rafael raj ravi rebecca riccardo
richard rita robert roberto robin rosa ryan sabrina sam samuel sara sarah sebastian serena
sergio simon simone sofia sophia sophie stefan stefano stella stephen steven susan sven
takeshi teresa theo thomas tim timothy tobias tom tomas tommaso valentina valeria vera victor
victoria vincent viktor walter wei william xavier yuki yusuf zara zoe
""".split())

#: Words right before a name that mark it as a person.
PERSON_CUES_BEFORE: frozenset[str] = frozenset("""
asked ask asks told tell tells with by thanked thanks thank met meet meeting called call
emailed messaged pinged ping cc dear hi hello hey mr mrs ms dr prof colleague friend manager
""".split())

#: Words right after a name that mark it as a person.
PERSON_CUES_AFTER: frozenset[str] = frozenset("""
said says asked asks told tells thinks thought wrote writes suggested suggests mentioned
replied argued agreed disagreed noted explained proposed proposes wants wanted feels felt
believes believed decided decides insisted reminded realized realised prefers preferred
""".split())

#: Connectors allowed inside a run of capitalised words ("Bank of America").
_CONNECTORS = frozenset({"of", "de", "van", "von", "der", "den", "la", "le", "du", "da", "di", "del", "dos"})

#: Lower-case nouns that continue a run after a code, CamelCase word or acronym.
HEAD_NOUNS: frozenset[str] = frozenset("""
architecture architectures design system systems model models pipeline pipelines schema
schemas protocol spec specification engine layer layers graph graphs index release releases
version plan roadmap framework branch server database migration service api library prototype
launch rollout cluster store format interface sdk client integration milestone sprint phase
stream network agent agents memory memories level levels retrieval retriever query queries
""".split())

_ORG_SUFFIXES = frozenset("""
inc corp corporation ltd llc gmbh ag sa srl labs lab university institute foundation company
group association agency ministry department bank
""".split())
_KNOWN_ORGS = frozenset("""
microsoft google alphabet openai anthropic meta facebook apple amazon nvidia ibm intel mozilla
deepmind huggingface mistral cohere netflix tesla spacex oracle salesforce github gitlab
""".split())
_KNOWN_TOOLS = frozenset("""
python docker postgres postgresql redis falkordb neo4j kubernetes git linux llamaindex
langchain pytorch tensorflow numpy pandas react typescript javascript rust java fastapi
pgvector sqlite mysql mongodb elasticsearch claude chatgpt gemini llama telegram discord slack
notion jira figma excel vscode graphrag wordllama
""".split())
_PROJECT_WORDS = frozenset("""
phase sprint milestone project epic release iteration stage operation initiative workstream
""".split())

_PRIORITY = {"lexicon": 0, "run": 1, "quote": 2}

# An apostrophe inside a word needs two letters after it ("O'Brien", not "it's");
# the lookahead checks exactly two (``{2,}`` would scan the rest of the word).  Written as runs of word
# characters between the apostrophes, hyphens and dots (the same words as one alternation per character,
# ``[^\W_](?:[\w&+]|['\u2019](?=[^\W_]{2})|[-.](?=[^\W_]))*``, since at most one branch applies at a
# character): re scans a character class run in one loop, about a third faster on chat messages.
_TOKEN = re.compile(r"[^\W_][\w&+]*(?:(?:['\u2019](?=[^\W_]{2})|[-.](?=[^\W_]))[\w&+]*)*")
_POSSESSIVE_AFTER = re.compile(r"['\u2019]s(?![^\W_])")
_QUOTES = (
    re.compile(r'"([^"\n]{1,80})"'),
    re.compile(r"\u201c([^\u201d\n]{1,80})\u201d"),
    re.compile(r"\u00ab([^\u00bb\n]{1,80})\u00bb"),
    # The quote first, then what must not precede it (``(?<![\w'\u2019])'`` as ``'(?<![\w'\u2019]')``): the
    # same matches, but a pattern opening with a literal is scanned for it in C instead of tried at every
    # position (a twentieth of the time on chat messages).
    re.compile(r"'(?<![\w'\u2019]')([^'\n]{1,60})'(?![\w])"),
    re.compile(r"\u2018(?<![\w\u2019]\u2018)([^\u2019\n]{1,60})\u2019(?![\w])"),
)
_LOWER_CODE = re.compile(r"^[a-z]{1,6}-?\d+[a-z]{0,2}$")
_CAMEL = re.compile(r"[a-z][A-Z]")
_MC = re.compile(r"^Ma?c[A-Z][a-z]+$")
_OPENERS = set("\"'\u201c\u2018\u00ab([{*\u2022->#")
_SENTENCE_END = set(".!?\u2026:;")


@functools.lru_cache(maxsize=16384)
def _cached_key(text: str) -> str:
    return normalize_entity_name(text)


def _key(text: str) -> str:
    """:func:`normalize_entity_name`, cached for names (a long text is not kept in the cache)."""
    return normalize_entity_name(text) if len(text) > 2 * MAX_ENTITY_CHARS else _cached_key(text)


@dataclass
class _Tok:
    text: str
    start: int
    end: int
    lower: str
    kind: str  # code camel acronym cap letter num lower stop
    possessive: bool
    initial: bool  # starts a sentence (computed for "cap" words only)


@dataclass
class _Mention:
    start: int
    end: int
    entity_type: str
    confidence: float
    source: str  # lexicon | run | quote
    part_ok: bool = False
    parts: list["_Mention"] = field(default_factory=list)


def _sentence_initial(text: str, start: int) -> bool:
    i = start - 1
    while i >= 0 and text[i] != "\n" and (text[i].isspace() or text[i] in _OPENERS):
        i -= 1
    return i < 0 or text[i] == "\n" or text[i] in _SENTENCE_END


def _classify(word: str, shouting: bool) -> str:
    """The class of a word: fast answers for the common shapes, else :func:`_classify_by_rules`."""
    if word.isalpha():
        if word.islower():  # most words: no digit, no capital, so no code or camel
            return "lower"
        if word.istitle() and word[0].isupper():  # "Kofi": one capital, first (not camel, not an acronym)
            if shouting:
                return "lower"
            return "letter" if len(word) == 1 else "cap"
    return _classify_by_rules(word, shouting)


def _classify_by_rules(word: str, shouting: bool) -> str:
    first = word[0]
    if first.isdigit():
        return "num"
    letters = [c for c in word if c.isalpha()]
    if letters and any(c.isdigit() for c in word) and (
            any(c.isupper() for c in word) or _LOWER_CODE.match(word)):
        return "code"
    if _CAMEL.search(word) and not _MC.match(word) and "_" not in word:
        return "camel"
    if shouting or not first.isupper():
        return "lower"
    if len(letters) == 1:
        return "letter"
    if len(letters) >= 2 and all(c.isupper() for c in letters):
        return "acronym"
    return "cap"


_ALL_BYTES = bytes(range(256))
_NOT_LETTERS = bytes(b for b in _ALL_BYTES if not chr(b).isascii() or not chr(b).isalpha())
_NOT_UPPER = bytes(b for b in _ALL_BYTES if not chr(b).isascii() or not chr(b).isupper())


_ASCII = bytes(range(128))


def _letter_counts(text: str) -> tuple[int, int]:
    """(letters, upper-case letters) of ``text``: the ASCII characters by deleting the other bytes in one C
    call, a few times faster than ``str.isalpha`` / ``str.isupper`` per character; the others (a dash, a
    quote, an accent or an emoji in nearly every chat message) one by one."""
    if text.isascii():
        data, rest = text.encode("ascii"), ""
    else:
        # The UTF-8 bytes of the other characters are all >= 0x80: deleted by both tables, and what is left
        # once the ASCII bytes are deleted decodes to exactly those characters.
        data = text.encode("utf-8", "surrogatepass")
        rest = data.translate(None, _ASCII).decode("utf-8", "surrogatepass")
    letters, upper = len(data.translate(None, _NOT_LETTERS)), len(data.translate(None, _NOT_UPPER))
    if rest:
        letters += sum(map(str.isalpha, rest))
        upper += sum(map(str.isupper, filter(str.isalpha, rest)))
    return letters, upper


#: ``_TOKEN`` as the one group of a split pattern: ``split`` hands back gaps and words alternately, and
#: the running sum of their lengths gives every word's span, all in C (no match object per word).
_TOKEN_PARTS = re.compile(f"({_TOKEN.pattern})")
#: Kinds that start a run of capitalised words, CamelCase words, acronyms and codes.
_RUN_KINDS = frozenset({"cap", "camel", "acronym", "code"})
#: Words whose class an extractor remembers (per shouting mode), before it starts over.
_CLASS_CACHE_WORDS = 65536


_SHARED_CLASSES: dict[frozenset[str], dict[bool, dict[str, tuple[str, bool]]]] = {}
#: Sets of first names whose class caches are kept (the default set, and a few of known people).
_SHARED_CLASS_SETS = 8


def _shared_classes(first_names: frozenset[str]) -> dict[bool, dict[str, tuple[str, bool]]]:
    """The class cache of the extractors whose first names are ``first_names`` (a word's class is a pure
    function of the word, the shouting mode and the first names, so sharing it changes no answer)."""
    classes = _SHARED_CLASSES.get(first_names)
    if classes is None:
        if len(_SHARED_CLASSES) >= _SHARED_CLASS_SETS:
            _SHARED_CLASSES.clear()
        classes = _SHARED_CLASSES.setdefault(first_names, {})
    return classes


def _word_kind(word: str, shouting: bool) -> tuple[str, str]:
    """(kind, casefolded word): :func:`_classify`, and "stop" for a stop word of a kind that can be one."""
    lower = word.casefold()
    # most words are lower case: what _classify answers first, without the call
    kind = "lower" if word.isalpha() and word.islower() else _classify(word, shouting)
    if kind in ("cap", "acronym", "letter", "lower") and lower in STOP_WORDS:
        kind = "stop"
    return kind, lower


class _Tokens:
    """The words of a text, each a :class:`_Tok` built when first read, and the indices of the words the
    run rules start from (``candidates``).

    Why: a 2 KB chat message holds about 300 words, most of them ordinary lower-case ones that matter only
    as the neighbour of a name (a cue, a head noun, the end of a run).  Building a ``_Tok`` for each, in a
    Python loop, was three quarters of entity extraction.  Here the words and their spans come from one
    ``re.split`` and a running sum (C), a word's class from a per-extractor cache read by ``map`` (C), the
    candidates by ``compress`` (C); Python runs for the candidates, their neighbours and unseen words only.
    The words, spans, kinds and flags are exactly those of the per-word loop (``tests/ingestion/
    test_entity_speed_equivalence.py`` compares them with it).

    ``classes`` maps shouting mode -> word -> (kind, candidate); ``first_names`` decides which lower-case
    words are candidates, so an extractor passes its own cache.
    """

    __slots__ = ("text", "shouting", "words", "starts", "ends", "kinds", "candidates", "_built")

    def __init__(self, text: str, first_names: frozenset[str] | set[str] = FIRST_NAMES,
                 classes: Optional[dict[bool, dict[str, tuple[str, bool]]]] = None) -> None:
        letters, upper = _letter_counts(text)
        self.text = text
        self.shouting = shouting = letters >= 8 and upper > 0.6 * letters
        parts = _TOKEN_PARTS.split(text)
        bounds = list(itertools.accumulate(map(len, parts)))
        words: list[str] = parts[1::2]
        starts: list[int] = bounds[0:-1:2]
        ends: list[int] = bounds[1::2]
        if "'" in text or "\u2019" in text:
            words, starts, ends = _drop_possessive_s(text, words, starts, ends)
        self.words, self.starts, self.ends = words, starts, ends
        cache = (classes if classes is not None else {}).setdefault(shouting, {})
        entries: list[Optional[tuple[str, bool]]] = list(map(cache.get, words))
        missing = list(itertools.compress(range(len(words)), map(operator.not_, entries)))
        if missing:
            if len(cache) + len(missing) > _CLASS_CACHE_WORDS:
                cache.clear()
            for i in missing:
                word = words[i]
                entry = cache.get(word)
                if entry is None:
                    kind, lower = _word_kind(word, shouting)
                    entry = cache[word] = (kind, kind in _RUN_KINDS or (kind == "lower" and lower in first_names))
                entries[i] = entry
        self.kinds: list[str] = list(map(_KIND, entries))
        self.candidates: list[int] = list(itertools.compress(range(len(words)), map(_CANDIDATE, entries)))
        self._built: dict[int, _Tok] = {}

    def __len__(self) -> int:
        return len(self.words)

    def __iter__(self) -> Iterator[_Tok]:
        return map(self._tok, range(len(self.words)))

    def __getitem__(self, i: Union[int, slice]) -> Any:
        if isinstance(i, slice):
            return [self._tok(k) for k in range(*i.indices(len(self.words)))]
        if i < 0:
            i += len(self.words)
        if not 0 <= i < len(self.words):
            raise IndexError(i)
        return self._tok(i)

    def possessive(self, i: int) -> bool:
        """Whether word ``i`` is followed by "'s" (whose "s" _drop_possessive_s dropped), or ends in "s"
        and is followed by a quote ending a word ("Felix'")."""
        text, end = self.text, self.ends[i]
        if end < len(text) and text[end] in "'\u2019":  # most words are not followed by a quote
            return _POSSESSIVE_AFTER.match(text, end) is not None or (self.words[i][-1] in "sS" and (
                end + 1 == len(text) or not (text[end + 1].isalnum() or text[end + 1] == "_")))
        return False

    def _tok(self, i: int) -> _Tok:
        tok = self._built.get(i)
        if tok is None:
            word, start, kind = self.words[i], self.starts[i], self.kinds[i]
            # Only a capitalised word's position in its sentence matters (the run rules).
            tok = self._built[i] = _Tok(word, start, self.ends[i], word.casefold(), kind, self.possessive(i),
                                        kind == "cap" and _sentence_initial(self.text, start))
        return tok


_KIND = operator.itemgetter(0)
_CANDIDATE = operator.itemgetter(1)


def _drop_possessive_s(text: str, words: list[str], starts: list[int],
                       ends: list[int]) -> tuple[list[str], list[int], list[int]]:
    """The words without the "s" of each possessive "'s" (a word right after the quote that follows a kept
    word): the per-word loop skipped it, and a dropped "s" owns no "'s" of its own."""
    dropped: set[int] = set()
    for match in _POSSESSIVE_AFTER.finditer(text):
        quote = match.start()
        k = bisect.bisect_left(ends, quote)
        if k < len(ends) and ends[k] == quote and starts[k] not in dropped:
            dropped.add(quote + 1)  # "s" starts a word right there: it cannot continue one across the quote
    if not dropped:
        return words, starts, ends
    keep = [start not in dropped for start in starts]
    return (list(itertools.compress(words, keep)), list(itertools.compress(starts, keep)),
            list(itertools.compress(ends, keep)))


def _tokenize(text: str) -> list[_Tok]:
    """Every word of ``text`` as a :class:`_Tok` (the extractor reads :class:`_Tokens` lazily instead)."""
    return list(_Tokens(text))


def _adjacent(text: str, left: _Tok, right: _Tok) -> bool:
    return _adjacent_at(text, left.end, right.start)


def _adjacent_at(text: str, end: int, start: int) -> bool:
    """Whether a word ending at ``end`` and the next starting at ``start`` are neighbours in a name."""
    gap = text[end:start]
    return gap == " " or (0 < len(gap) <= 3 and gap.isspace() and "\n" not in gap)


class OfflineEntityExtractor:
    """Deterministic, model-free entity extraction (rules in the module docstring).

    ``known_people``: names (or ids such as "person_luca"); ``vocabulary``: concept names, or name -> type;
    ``emit_parts``: also the codes, names and lexicon entries inside longer mentions; ``max_entities``: the
    most confident ones kept, in text order.
    """

    def __init__(
        self,
        known_people: Iterable[str] = (),
        vocabulary: Union[Iterable[str], Mapping[str, str]] = (),
        *,
        emit_parts: bool = True,
        max_entities: Optional[int] = None,
    ) -> None:
        self.known_people = tuple(known_people)
        if isinstance(vocabulary, Mapping):
            self.vocabulary = tuple((str(k), _coerce_type(v) or "Concept") for k, v in vocabulary.items())
        else:
            self.vocabulary = tuple((str(k), "Concept") for k in vocabulary)
        self.emit_parts = emit_parts
        self.max_entities = max_entities
        entries = [(p, "Person", 0.95) for p in self.known_people] + [(n, t, 0.9) for n, t in self.vocabulary]
        # reversed: the first entry of a key wins
        self._lexicon = {key: (t, c) for name, t, c in reversed(entries) if (key := _key(name))}
        people = (_key(person) for person in self.known_people)
        self._first_names = frozenset(FIRST_NAMES | {key.split()[0] for key in people if key})
        # word -> (kind, starts a run or is a lower-case first name), per shouting mode: see _Tokens.  Shared
        # by the extractors of the same first names: the pipeline builds a new extractor per ingestion call
        # (a chat turn), whose words are mostly those of the turns before.
        self._classes: dict[bool, dict[str, tuple[str, bool]]] = _shared_classes(self._first_names)

    def extract(self, text: str, concepts: Iterable[str] = ()) -> list[Entity]:
        """Entities in ``text``, plus the memory's ``concepts`` (matched, or appended when absent)."""
        concepts = [c for c in concepts if isinstance(c, str) and c.strip() and not _too_long(c.strip())]
        lexicon = self._lexicon
        if concepts:  # the lexicon's own entries win
            lexicon = {**{key: ("Concept", 0.9) for concept in concepts if (key := _key(concept))}, **lexicon}
        tokens = _Tokens(text, self._first_names, self._classes)
        mentions = self._lexicon_mentions(text, tokens, lexicon)
        mentions += self._run_mentions(text, tokens, lexicon)
        mentions += self._quote_mentions(text, lexicon)
        return _finish_rows(self._resolve(text, mentions), concepts, self.max_entities)

    def extract_query_entities(self, query: str) -> list[str]:
        """The entity names mentioned in a query, in order ("Luca", "V2", "Felix")."""
        return [entity.name for entity in self.extract(query)]

    def _lexicon_mentions(
        self, text: str, tokens: _Tokens, lexicon: Mapping[str, tuple[str, float]]
    ) -> list[_Mention]:
        if not lexicon or not tokens:
            return []
        firsts = {key.split()[0] for key in lexicon}
        max_words = min(max(len(key.split()) for key in lexicon), 8)
        found: list[_Mention] = []
        for i, tok in enumerate(tokens):
            if tok.end - tok.start > MAX_ENTITY_CHARS:
                continue
            single = _key(tok.text)
            if not single or (single.split()[0] not in firsts and tok.lower not in firsts):
                continue
            best: Optional[_Mention] = None
            # The span grows one token at a time; the key of a span covers
            # every word of it, so "V2 architectures" finds "v2 architecture".
            for j in range(i, min(len(tokens), i + max_words)):
                end = tokens[j].end
                if j > i and (end - tok.start > MAX_ENTITY_CHARS
                              or "\n" in text[tokens[j - 1].end:tokens[j].start]):
                    break
                hit = lexicon.get(_key(text[tok.start:end]))
                if hit is not None:
                    best = _Mention(tok.start, end, hit[0], hit[1], "lexicon", part_ok=True)
            if best is not None:
                found.append(best)
        return found

    def _run_mentions(
        self, text: str, tokens: _Tokens, lexicon: Mapping[str, tuple[str, float]]
    ) -> list[_Mention]:
        """Runs start at the candidates alone (the other words only continue or end one), in order; a
        candidate inside the previous run is part of it.  The run rules read the word arrays of
        ``tokens`` (kinds, spans, words), building no ``_Tok`` but for the words of a run."""
        found: list[_Mention] = []
        n = len(tokens)
        kinds, words, starts, ends = tokens.kinds, tokens.words, tokens.starts, tokens.ends
        first_names = self._first_names
        resume = 0
        for i in tokens.candidates:
            if i < resume:
                continue
            if kinds[i] == "lower":  # a candidate: a lower-case first name
                # "luca's", "asked felix": a lower-case first name with evidence.
                if tokens.possessive(i) or (
                    i > 0 and words[i - 1].casefold() in PERSON_CUES_BEFORE
                    and _adjacent_at(text, ends[i - 1], starts[i])
                ) or (i + 1 < n and words[i + 1].casefold() in PERSON_CUES_AFTER
                      and _adjacent_at(text, ends[i], starts[i + 1])):
                    found.append(_Mention(starts[i], ends[i], "Person", 0.6, "run", part_ok=True))
                continue
            # a candidate of a run kind: the run is tokens[i:j].  A possessive ends a run, but needs a quote
            # right after the word, where a neighbour needs a space: adjacency alone decides.
            j = i + 1
            while j < n and _adjacent_at(text, ends[j - 1], starts[j]):
                nxt, prev = kinds[j], kinds[j - 1]
                if nxt in _RUN_KINDS:
                    if prev == "lower":  # a head noun ends the run
                        break
                elif nxt in ("num", "letter") and prev in ("cap", "camel", "acronym"):
                    pass
                elif (nxt == "lower" and words[j].casefold() in HEAD_NOUNS
                      and (prev in ("code", "camel", "acronym") or words[j - 1].casefold() in HEAD_NOUNS)):
                    pass
                elif (prev == "cap" and j + 1 < n and kinds[j + 1] == "cap" and words[j].casefold() in _CONNECTORS
                      and _adjacent_at(text, ends[j], starts[j + 1])):
                    j += 1
                else:
                    break
                j += 1
            found += self._classify_run(text, tokens, i, j, lexicon)
            resume = j
        return found

    def _classify_run(
        self, text: str, tokens: _Tokens, i: int, j: int, lexicon: Mapping[str, tuple[str, float]]
    ) -> list[_Mention]:
        """The mention of the run ``tokens[i:j]`` (none, or one with its parts; only the parts of a run
        over the size caps).  Read from the word arrays: most runs are one capitalised word, most of them
        dropped, and a rule's evidence (a sentence start, a cue, a possessive) is read only when it decides."""
        if j == i + 1:
            return self._classify_word(text, tokens, i, lexicon)
        kinds, words, starts, ends = tokens.kinds, tokens.words, tokens.starts, tokens.ends
        first_names = self._first_names
        first_kind, first_lower = kinds[i], words[i].casefold()
        # A sentence-initial capital is not evidence: drop it before a first name.
        if (j - i > 1 and first_kind == "cap" and kinds[i + 1] == "cap" and first_lower not in first_names
                and words[i + 1].casefold() in first_names and _sentence_initial(text, starts[i])):
            i += 1
            first_kind, first_lower = kinds[i], words[i].casefold()
        size = j - i
        start, end = starts[i], ends[j - 1]
        if end - start > MAX_ENTITY_CHARS or size > MAX_ENTITY_WORDS or _too_long(text[start:end]):
            if not self.emit_parts:
                return []
            return [p for p in self._run_parts(tokens, i, j, "Entity") if p.end - p.start <= MAX_ENTITY_CHARS]
        run_key = _key(text[start:end])
        last_kind, last_lower = kinds[j - 1], words[j - 1].casefold()

        def plain() -> bool:
            return all(kinds[k] in ("cap", "letter") or words[k].casefold() in _CONNECTORS for k in range(i, j))

        def cue() -> bool:
            return (i > 0 and words[i - 1].casefold() in PERSON_CUES_BEFORE
                    and text[ends[i - 1]:start] in (" ", ". ")) or (
                j < len(words) and words[j].casefold() in PERSON_CUES_AFTER and _adjacent_at(text, end, starts[j]))

        entity_type, confidence = "Entity", 0.6
        if run_key in lexicon:
            entity_type, confidence = lexicon[run_key]
        elif first_lower in first_names and plain():
            entity_type, confidence = "Person", 0.85
        elif size <= 3 and plain() and cue():
            entity_type, confidence = "Person", 0.7
        elif size <= 3 and first_kind == "cap" and tokens.possessive(j - 1) and plain():
            entity_type, confidence = "Person", 0.65
        elif (last_lower in _ORG_SUFFIXES and size > 1) or (size == 1 and first_lower in _KNOWN_ORGS):
            entity_type, confidence = "Organization", 0.7
        elif first_lower in _PROJECT_WORDS and size > 1:
            entity_type, confidence = "Project", 0.7
        elif ("camel" in kinds[i:j] or any(words[k].casefold() in _KNOWN_TOOLS for k in range(i, j))
              or run_key.replace(" ", "") in _KNOWN_TOOLS):
            entity_type, confidence = "Tool", 0.75
        elif last_kind == "lower" and last_lower in HEAD_NOUNS:
            entity_type, confidence = "Concept", 0.7
        elif size == 1 and first_kind in ("code", "acronym"):
            entity_type, confidence = "Entity", 0.75
        # A lone sentence-initial capital without evidence: its capital may be the sentence's.
        if (size == 1 and first_kind == "cap" and entity_type == "Entity" and confidence <= 0.6
                and not tokens.possessive(i) and _sentence_initial(text, start)):
            return []
        mention = _Mention(start, end, entity_type, confidence, "run")
        if size > 1:
            mention.parts = self._run_parts(tokens, i, j, entity_type)
        return [mention]

    def _classify_word(
        self, text: str, tokens: _Tokens, i: int, lexicon: Mapping[str, tuple[str, float]]
    ) -> list[_Mention]:
        """:meth:`_classify_run` of a run of one word (four runs in five), its rules worked out for one word:
        no first word to drop, no parts, no project or head-noun rule; "plain" is a capitalised word (or a
        connector); over the size cap means [] (its only part is the word itself)."""
        kind, word, start, end = tokens.kinds[i], tokens.words[i], tokens.starts[i], tokens.ends[i]
        if end - start > MAX_ENTITY_CHARS:  # a word holds no space: _too_long is its length alone
            return []
        lower = word.casefold()
        run_key = _key(word)
        plain = kind == "cap" or lower in _CONNECTORS
        entity_type, confidence = "Entity", 0.6
        if run_key in lexicon:
            entity_type, confidence = lexicon[run_key]
        elif plain and lower in self._first_names:
            entity_type, confidence = "Person", 0.85
        elif plain and ((i > 0 and tokens.words[i - 1].casefold() in PERSON_CUES_BEFORE
                         and text[tokens.ends[i - 1]:start] in (" ", ". ")) or (
                i + 1 < len(tokens.words) and tokens.words[i + 1].casefold() in PERSON_CUES_AFTER
                and _adjacent_at(text, end, tokens.starts[i + 1]))):
            entity_type, confidence = "Person", 0.7
        elif kind == "cap" and tokens.possessive(i):
            entity_type, confidence = "Person", 0.65
        elif lower in _KNOWN_ORGS:
            entity_type, confidence = "Organization", 0.7
        elif kind == "camel" or lower in _KNOWN_TOOLS or run_key.replace(" ", "") in _KNOWN_TOOLS:
            entity_type, confidence = "Tool", 0.75
        elif kind in ("code", "acronym"):
            entity_type, confidence = "Entity", 0.75
        # A lone sentence-initial capital without evidence: its capital may be the sentence's.
        if (kind == "cap" and entity_type == "Entity" and confidence <= 0.6 and not tokens.possessive(i)
                and _sentence_initial(text, start)):
            return []
        return [_Mention(start, end, entity_type, confidence, "run")]

    def _run_parts(self, tokens: _Tokens, i: int, j: int, entity_type: str) -> list[_Mention]:
        """The codes, CamelCase words and acronyms of the run ``tokens[i:j]``, and its leading first name."""
        parts: list[_Mention] = []
        kinds, words, starts, ends = tokens.kinds, tokens.words, tokens.starts, tokens.ends
        for k in range(i, j):
            kind = kinds[k]
            if kind in ("code", "camel", "acronym"):
                part_type = "Tool" if kind == "camel" or words[k].casefold() in _KNOWN_TOOLS else "Entity"
                parts.append(_Mention(starts[k], ends[k], part_type, 0.7, "run", part_ok=True))
            elif (kind == "cap" and k == i and words[k].casefold() in self._first_names
                  and entity_type != "Person"):
                parts.append(_Mention(starts[k], ends[k], "Person", 0.7, "run", part_ok=True))
        return parts

    def _quote_mentions(self, text: str, lexicon: Mapping[str, tuple[str, float]]) -> list[_Mention]:
        found: list[_Mention] = []
        for pattern in _QUOTES:
            for match in pattern.finditer(text):
                inner = match.group(1)
                stripped = inner.strip()
                if not stripped or stripped[-1] in ".!?,;:" or len(stripped.split()) > 6:
                    continue
                words = [w.casefold() for w in re.findall(r"[^\W_]+", stripped)]
                if not words or all(w in STOP_WORDS for w in words):
                    continue
                key = _key(stripped)
                if not key:
                    continue
                start = match.start(1) + (len(inner) - len(inner.lstrip()))
                entity_type, confidence = lexicon.get(key, ("Concept", 0.7))
                found.append(_Mention(start, start + len(stripped), entity_type, confidence, "quote"))
        return found

    def _resolve(self, text: str, mentions: list[_Mention]) -> list[_Row]:
        """Entities of the mentions, as rows: overlaps resolved, parts added, deduplicated by key.

        Linear (a text may hold a million mentions): a mention overlaps an accepted
        one exactly when one of its characters is taken, and a part lies in the
        accepted mention that starts last at or before it, if in any.
        """
        order = sorted(mentions, key=lambda m: (-(m.end - m.start), _PRIORITY[m.source], m.start))
        accepted: list[_Mention] = []
        rejected: list[_Mention] = []
        taken = bytearray(len(text))
        for mention in order:
            if taken.find(1, mention.start, mention.end) != -1:
                rejected.append(mention)
            else:
                taken[mention.start:mention.end] = b"\x01" * (mention.end - mention.start)
                accepted.append(mention)
        if self.emit_parts:
            by_start = sorted(accepted, key=lambda m: m.start)
            starts = [m.start for m in by_start]
            accepted += [c for c in rejected + [p for m in accepted for p in m.parts]
                         if c.part_ok and (k := bisect.bisect_right(starts, c.start) - 1) >= 0
                         and c.end <= by_start[k].end and by_start[k] is not c]
        accepted.sort(key=lambda m: (m.start, -(m.end - m.start), _PRIORITY[m.source]))
        rows: list[_Row] = []
        seen: set[str] = set()
        for mention in accepted:
            name = text[mention.start:mention.end]
            key = _key(name)
            if key and key not in seen:
                seen.add(key)
                rows.append((name, mention.entity_type, key, (mention.start, mention.end), mention.confidence))
        return rows


#: An entity before it is one: (name, entity_type, key, span, confidence); span None for a concept.
_Row = tuple[str, str, str, Optional[tuple[int, int]], float]


def _finish_rows(
    rows: Sequence[Union[_Row, Entity]], concepts: Sequence[str], limit: Optional[int]
) -> list[Entity]:
    """:func:`_finish` on rows, building the ``Entity`` (a validated pydantic model, the dearest step
    once the words are read) of the kept rows only: a 2 KB message has about twenty mentions, ten kept.
    An ``Entity`` among the rows (from a ``_resolve`` written when it returned entities) is kept as is."""
    rows = list(rows)
    if not all(isinstance(row, tuple) for row in rows):
        return _finish([row if isinstance(row, Entity) else _entity(row) for row in rows], concepts, limit)
    seen = {row[2] for row in rows}
    for concept in concepts:
        key = _key(concept)
        if key and key not in seen:
            seen.add(key)
            rows.append((concept.strip(), "Concept", key, None, 0.9))
    if limit is not None and len(rows) > limit:
        ranked = sorted(range(len(rows)), key=lambda i: (-rows[i][4], i))[:max(limit, 0)]
        rows = [rows[i] for i in sorted(ranked)]
    return [_entity(row) for row in rows]


def _entity(row: _Row) -> Entity:
    name, entity_type, key, span, confidence = row
    if span is None:  # a concept: no span given, as _finish builds it
        return Entity(name=name, entity_type=entity_type, key=key, confidence=confidence)
    return Entity(name=name, entity_type=entity_type, key=key, span=span, confidence=confidence)


def _finish(entities: list[Entity], concepts: Sequence[str], limit: Optional[int]) -> list[Entity]:
    """``entities`` plus the memory's concepts they miss (as Concepts); at most ``limit``, the most
    confident, kept in their order."""
    seen = {entity.key for entity in entities}
    for concept in concepts:
        key = _key(concept)
        if key and key not in seen:
            seen.add(key)
            entities.append(Entity(name=concept.strip(), entity_type="Concept", key=key, confidence=0.9))
    if limit is None or len(entities) <= limit:
        return entities
    ranked = sorted(range(len(entities)), key=lambda i: (-entities[i].confidence, i))[:max(limit, 0)]
    return [entities[i] for i in sorted(ranked)]


_TYPE_WORDS: dict[str, str] = {
    **dict.fromkeys(("person", "people", "human", "citizen", "agent", "user"), "Person"),
    **dict.fromkeys(("organization", "organisation", "org", "company", "team", "institution"), "Organization"),
    **dict.fromkeys(("project", "task", "phase", "milestone", "initiative"), "Project"),
    **dict.fromkeys(("tool", "software", "library", "technology", "product", "system", "service",
                     "framework", "database", "model"), "Tool"),
    **dict.fromkeys(("concept", "idea", "decision", "principle", "mechanism", "realization",
                     "realisation", "topic", "pattern", "insight"), "Concept"),
    "entity": "Entity",
}


def _coerce_type(value: Any) -> Optional[str]:
    """An entity type from a free-form type name ("person", "Company"); None if unknown."""
    if not isinstance(value, str):
        return None
    if value in ENTITY_TYPES:
        return value
    word = value.strip().casefold().replace("-", "_").split("_")[0]
    return _TYPE_WORDS.get(word)


#: Opening brackets of an LLM answer tried as the start of its JSON list: prose holds a few ("[1]"); each
#: try may read to the end, so a cap keeps a degenerate answer ("[[[[...") linear instead of quadratic.
_MAX_DECODE_TRIES = 64

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*(.*?)```", re.DOTALL)


def _as_list(value: Any) -> Optional[list[Any]]:
    if isinstance(value, dict) and isinstance(value.get("entities"), list):
        return value["entities"]
    return value if isinstance(value, list) else None


def _parse_json_list(text: str) -> Optional[list[Any]]:
    """The JSON list in an LLM answer, or None when there is none."""
    if not isinstance(text, str):
        return None
    decoder = json.JSONDecoder()
    for candidate in [m.group(1) for m in _FENCE.finditer(text)] + [text]:
        candidate = candidate.strip()
        # RecursionError: brackets nested deeper than the decoder goes, no list like any other.
        try:
            found = _as_list(json.loads(candidate))
        except (ValueError, RecursionError):
            found = None
            # Leading or trailing prose: decode from each opening bracket (the first few).
            for match in itertools.islice(re.finditer(r"[\[{]", candidate), _MAX_DECODE_TRIES):
                try:
                    found = _as_list(decoder.raw_decode(candidate, match.start())[0])
                except (ValueError, RecursionError):
                    continue
                if found is not None:
                    break
        if found is not None:
            return found
    return None


def parse_entity_list(text: str) -> list[Any]:
    """The JSON list in an LLM answer (fences, prose and ``{"entities": [...]}`` tolerated), else ``[]``."""
    value = _parse_json_list(text)
    if value is None:
        logger.warning("entity extraction: the LLM answer holds no JSON list: %.200r", text)
        return []
    return value


DEFAULT_PROMPT = """\
Extract the entities mentioned in the text below: people, organizations, \
projects, tools and concepts that might exist as nodes of a knowledge graph.

Graph schema:
{schema}

Known entity names (when the text refers to one of them, answer with that exact name):
{known_entities}

Text: {text}

Answer with a JSON list only, one object per entity: \
{{"name": "...", "type": "Person|Organization|Project|Tool|Concept|Entity"}}. \
Answer [] when the text names no entity. Do not invent entities that the text does not mention.

Example:
Text: How does Luca's approach to V2 differ from Felix's?
Entities: [{{"name": "person_Luca", "type": "Person"}}, {{"name": "person_felix", "type": "Person"}}, \
{{"name": "decision_v2_architecture", "type": "Concept"}}]

Entities:"""

DEFAULT_SCHEMA = (
    "Entity types: Person, Organization, Project, Tool, Concept, Entity. Node names may carry a "
    "type prefix (person_, org_, project_, task_, tool_, concept_, decision_), e.g. person_luca."
)


def _known_block(names: Sequence[str], budget: int) -> str:
    if not names:
        return "(none)"
    used = itertools.accumulate(len(name) + 2 for name in names)
    out = [name for name, _ in itertools.takewhile(lambda pair: pair[1] <= budget, zip(names, used))]
    rest = len(names) - len(out)
    return ", ".join(out) + (f" (+{rest} more)" if rest else "")


class LLMEntityExtractor:
    """Entity extraction by a LlamaIndex ``LLM`` (``llm.complete`` / ``acomplete``).

    The prompt carries ``schema`` and up to ``known_entities_budget`` characters of ``known_entities``;
    names matching a known one (fuzzily at ``match_threshold``) take its spelling, type prefixes
    ("person_Luca") set the type.  When the call raises or the answer holds no JSON list, ``fallback`` answers.
    """

    def __init__(
        self,
        llm: Any,
        known_entities: Sequence[str] = (),
        *,
        schema: str = DEFAULT_SCHEMA,
        known_entities_budget: int = 2000,
        fallback: Optional[OfflineEntityExtractor] = None,
        prompt_template: str = DEFAULT_PROMPT,
        match_threshold: float = 0.85,
        max_entities: Optional[int] = None,
    ) -> None:
        if llm is None or not hasattr(llm, "complete"):
            raise TypeError("LLMEntityExtractor needs a LlamaIndex LLM (an object with .complete)")
        self.llm = llm
        self.schema = schema
        self.known_entities_budget = known_entities_budget
        self.fallback = fallback if fallback is not None else OfflineEntityExtractor()
        self.prompt_template = prompt_template
        self.match_threshold = match_threshold
        self.max_entities = max_entities
        self.set_known_entities(known_entities)

    def set_known_entities(self, names: Sequence[str]) -> None:
        self.known_entities = tuple(dict.fromkeys(n for n in names if isinstance(n, str) and n.strip()))
        self._index = EntityIndex((name, name) for name in self.known_entities)

    def build_prompt(self, text: str, known_entities: Optional[Sequence[str]] = None) -> str:
        names = self.known_entities if known_entities is None else tuple(known_entities)
        return self.prompt_template.format(schema=self.schema, text=text,
                                           known_entities=_known_block(names, self.known_entities_budget))

    def extract(self, text: str, concepts: Iterable[str] = (), *,
                known_entities: Optional[Sequence[str]] = None) -> list[Entity]:
        prompt = self.build_prompt(text, known_entities)
        try:
            answer: Union[str, Exception] = self.llm.complete(prompt).text
        except Exception as exc:  # noqa: BLE001 -- any LLM failure degrades to the rules
            answer = exc
        return self._from_answer(text, answer, concepts, known_entities)

    async def aextract(self, text: str, concepts: Iterable[str] = (), *,
                       known_entities: Optional[Sequence[str]] = None) -> list[Entity]:
        prompt = self.build_prompt(text, known_entities)
        try:
            answer: Union[str, Exception] = (await self.llm.acomplete(prompt)).text
        except Exception as exc:  # noqa: BLE001
            answer = exc
        return self._from_answer(text, answer, concepts, known_entities)

    def extract_query_entities(self, query: str) -> list[str]:
        return [entity.name for entity in self.extract(query)]

    async def aextract_query_entities(self, query: str) -> list[str]:
        return [entity.name for entity in await self.aextract(query)]

    def _from_answer(self, text: str, answer: Union[str, Exception], concepts: Iterable[str],
                     known_entities: Optional[Sequence[str]]) -> list[Entity]:
        concepts = [c for c in concepts if isinstance(c, str) and c.strip()]
        items = None if isinstance(answer, Exception) else _parse_json_list(answer)
        if items is None:
            logger.warning("entity extraction: %s; using offline rules",
                           f"LLM call failed ({type(answer).__name__}: {answer})" if isinstance(answer, Exception)
                           else f"the LLM answer holds no JSON list ({answer!r:.200})")
            return self.fallback.extract(text, concepts)
        index = self._index if known_entities is None else EntityIndex((n, n) for n in known_entities)
        entities: dict[str, Entity] = {}
        for entity in (self._to_entity(text, item, index) for item in items):
            if entity is not None:
                entities.setdefault(entity.key, entity)
        return _finish(list(entities.values()), concepts, self.max_entities)

    def _to_entity(self, text: str, item: Any, index: EntityIndex) -> Optional[Entity]:
        if isinstance(item, str):
            raw, type_name, confidence = item, None, None
        elif isinstance(item, dict):
            raw = item.get("name") or item.get("entity") or item.get("text")
            type_name = item.get("type") or item.get("entity_type") or item.get("label")
            confidence = item.get("confidence")
        else:
            return None
        if not isinstance(raw, str) or not raw.strip() or len(raw) > 200:
            return None
        prefix, rest = split_type_prefix(raw.strip())
        entity_type = _coerce_type(type_name) or _coerce_type(prefix) or "Entity"
        match = index.best(raw, self.match_threshold) if len(index) else None
        if match is not None:
            name, score = match.name, 0.9 if match.score >= 1.0 else 0.8 * match.score
        else:
            name = rest.replace("_", " ").strip() if prefix else raw.strip()
            score = 0.6
        if isinstance(confidence, (int, float)) and not isinstance(confidence, bool) and 0 <= confidence <= 1:
            score = float(confidence)
        key = _key(name)
        if not key or _too_long(name):
            return None
        found = re.search(re.escape(name), text, re.IGNORECASE)
        return Entity(name=name, entity_type=entity_type, key=key, span=found.span() if found else None,
                      confidence=score)
