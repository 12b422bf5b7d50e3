"""Entity names, normalised so that "person_Luca", "Luca's" and "LUCA" meet.

Names reach the graph from people ("Luca's V2 decision"), LLMs
("decision_v2_architecture") and importers ("Falkor DB"), and graph traversal
starts from the names in a query, so every comparison goes through one key,
:func:`normalize_entity_name`; near misses are scored by :func:`name_similarity`,
and :class:`EntityIndex` finds candidates among ~100k names without scanning.
Pure Python and deterministic: it runs on every query.

The key: NFKC + casefold (typographic apostrophes and dashes made ASCII);
surrounding punctuation, a leading article, one type prefix of
:data:`TYPE_PREFIXES` written with ``_`` or ``:`` ("person_luca"; the list
holds no everyday words, so "phase_3" keeps its first word) and possessives
dropped; ``_ - . /`` and whitespace collapse into single spaces; the last word
(the head noun) made singular by :func:`singularize`.

:func:`singularize` is a small predictable rule set, not a lemmatiser: it
touches only alphabetic words of four letters or more ending in "s", knows
:data:`IRREGULAR_PLURALS` and leaves :data:`INVARIANT_WORDS` ("status",
"lucas", "kubernetes") and "-ss/-us/-is/-js" alone.  A wrong guess for a rare
word costs a fuzzy match; a cleverer guesser would make keys depend on context.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from array import array
from collections.abc import Iterable, Iterator
from typing import NamedTuple, Optional

__all__ = [
    "EntityIndex",
    "EntityMatch",
    "INVARIANT_WORDS",
    "IRREGULAR_PLURALS",
    "TYPE_PREFIXES",
    "best_per_entity",
    "compact_key",
    "fuzzy_bounds",
    "key_similarity",
    "name_similarity",
    "normalize_entity_name",
    "singularize",
    "sorted_words_key",
    "split_type_prefix",
    "trigrams",
]

#: Type prefixes stripped from names such as "person_luca" (graph node names
#: and LLM answers follow the spec's ``type_name`` convention).
TYPE_PREFIXES: tuple[str, ...] = (
    "person", "citizen",
    "org", "organization", "organisation", "company",
    "project", "task", "tool",
    "concept", "decision", "principle", "mechanism", "realization", "realisation",
    "entity",
)

#: Irregular plural -> singular (compared after casefolding).
IRREGULAR_PLURALS: dict[str, str] = {
    "analyses": "analysis", "bases": "base", "crises": "crisis", "diagnoses": "diagnosis",
    "hypotheses": "hypothesis", "syntheses": "synthesis", "theses": "thesis",
    "indices": "index", "matrices": "matrix", "vertices": "vertex", "appendices": "appendix",
    "criteria": "criterion", "phenomena": "phenomenon", "children": "child",
    "caches": "cache", "niches": "niche", "headaches": "headache",
    "movies": "movie", "cookies": "cookie", "zombies": "zombie", "rookies": "rookie",
    "calories": "calorie", "selfies": "selfie", "goalies": "goalie", "brownies": "brownie",
    "menus": "menu", "gurus": "guru", "haikus": "haiku", "emus": "emu",
    "apis": "api", "kpis": "kpi", "uris": "uri", "clis": "cli", "guis": "gui",
    "taxis": "taxi", "skis": "ski", "gpus": "gpu", "cpus": "cpu", "tpus": "tpu", "npus": "npu",
    "vpus": "vpu", "skus": "sku",
}

#: Words ending in "s" that are not plurals (compared after casefolding): singular nouns and function
#: words, people, places, tools.
INVARIANT_WORDS: frozenset[str] = frozenset("""
analysis basis class series species news means lens atlas canvas alias bias chaos ethos pathos kudos
cosmos always perhaps across whereas thus plus minus bus gas bonus campus census consensus corpus
focus genus nexus radius virus genius stimulus apparatus circus octopus status physics mathematics
analytics semantics ethics economics politics linguistics logistics dynamics graphics robotics
genetics mechanics optics aesthetics ergonomics forensics athletics gymnastics christmas diabetes
measles mumps headquarters whereabouts lotus cactus walrus hummus asbestos
lucas thomas nicolas nicholas andreas elias jonas tobias matthias mathias marcus markus linus klaus
chris charles james agnes doris iris louis denis dennis francis lewis davis douglas silas miles
jules moses amos carlos marcos mateus julius cyrus magnus rasmus niels hans frances williams jones
phillips adams roberts evans edwards collins stevens harris morris jenkins hughes reyes torres
flores
paris athens texas kansas arkansas vegas los wales brussels barbados bahamas philippines netherlands
venus mars uranus
kubernetes postgres redis windows express rails sass less ios macos ipados watchos tvos https aws
dns nats devops mlops gitops dataops aiops llmops secops finops pandas numpy mathjs nodejs nextjs
vuejs threejs argos prometheus zeus hermes olympus pegasus nautilus janus
""".split())

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u2032": "'", "`": "'",
                              "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-",
                              "\u2014": "-", "\u2212": "-"})
_EDGE_PUNCT = "\"'\u201c\u201d\u00ab\u00bb()[]{}<>,;:!?*#@~^|\\/.-_ \t\r\n"
_ARTICLE = re.compile(r"^(?:the|a|an)\s+(?=\S)")
_PREFIX = re.compile(r"^(" + "|".join(sorted(TYPE_PREFIXES, key=len, reverse=True)) + r")[_:](?=[^\W_])")
_PREFIX_ANY_CASE = re.compile(_PREFIX.pattern, re.IGNORECASE)
_POSSESSIVE = re.compile(r"(?<=[^\W_])'s\b|(?<=s)'(?=\s|$|[_\-./])")
_SEPARATORS = re.compile(r"[\s_\-./]+")
_ALPHA = re.compile(r"^[^\W\d_]+$")


def singularize(word: str) -> str:
    """The singular of one (casefolded) word; see the module docstring for the rule."""
    if word in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[word]
    if len(word) < 4 or not word.endswith("s") or word in INVARIANT_WORDS or not _ALPHA.match(word):
        return word
    if word.endswith(("ss", "us", "is", "js")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "zzes", "ches", "shes")):
        return word[:-2]
    if word.endswith("uses"):
        return word[:-2] if word[:-2] in INVARIANT_WORDS else word[:-1]
    return word[:-1]


def split_type_prefix(name: str) -> tuple[Optional[str], str]:
    """``("person", "Luca")`` for "person_Luca" (the rest keeps its spelling); ``(None, name)`` without."""
    text = unicodedata.normalize("NFKC", name).strip()
    match = _PREFIX_ANY_CASE.match(text)
    if match is None:
        return None, name
    return match.group(1).casefold(), text[match.end():]


def normalize_entity_name(name: str) -> str:
    """The key names are compared by ("person_Luca", "luca's" -> "luca"); "" without letters or digits."""
    text = unicodedata.normalize("NFKC", name).casefold().translate(_APOSTROPHES)
    text = text.strip(_EDGE_PUNCT)
    text = _ARTICLE.sub("", text)
    text = _PREFIX.sub("", text, count=1)
    text = _POSSESSIVE.sub("", text)
    text = _SEPARATORS.sub(" ", text).strip(_EDGE_PUNCT)
    if not text:
        return ""
    head, _, last = text.rpartition(" ")
    last = singularize(last)
    return f"{head} {last}" if head else last


def compact_key(key: str) -> str:
    """A key without its spaces: "falkor db" and "falkordb" compact alike."""
    return key.replace(" ", "")


def trigrams(text: str) -> frozenset[str]:
    """Character trigrams of ``text`` padded like pg_trgm ("  ab", " ab", "ab ")."""
    padded = f"  {text} "
    return frozenset(padded[i:i + 3] for i in range(len(padded) - 2))


def _dice(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return 2.0 * len(a & b) / (len(a) + len(b))


def key_similarity(ka: str, kb: str, tri_a: Optional[frozenset[str]] = None) -> float:
    if ka == kb:
        return 1.0 if ka else 0.0
    if not ka or not kb:
        return 0.0
    score = _dice(tri_a if tri_a is not None else trigrams(compact_key(ka)), trigrams(compact_key(kb)))
    if " " in ka or " " in kb:
        set_a, set_b = set(ka.split()), set(kb.split())
        jaccard = len(set_a & set_b) / len(set_a | set_b)
        sorted_tri = _dice(trigrams("".join(sorted(set_a))), trigrams("".join(sorted(set_b))))
        score = max(score, 0.6 * sorted_tri + 0.4 * jaccard)
    return min(score, 0.99)  # only equal keys are certain


def name_similarity(a: str, b: str) -> float:
    """How likely two entity names mean the same entity, in [0, 1]; 1.0 exactly when the keys are equal.

    Otherwise the larger of the trigram Dice of the keys without spaces and, for
    multi-word names, ``0.6 * trigram Dice of the sorted words + 0.4 * word
    Jaccard`` (word order), capped at 0.99.
    """
    return key_similarity(normalize_entity_name(a), normalize_entity_name(b))


class EntityMatch(NamedTuple):
    entity_id: str
    name: str
    score: float


class EntityIndex:
    """Stored ``(entity_id, name)`` pairs, looked up by key and by fuzzy name.

    Lookups do not scan the names: exact keys and sorted-word keys come from
    dictionaries, fuzzy candidates from an inverted index of trigrams probed with
    the size and prefix filters of set-similarity joins (a name reaching Dice
    ``t`` must share one of the query's rarest ``|Q| - m + 1`` trigrams, ``m``
    the least overlap ``t`` allows).  So a fuzzy hit is guaranteed when its
    trigram score reaches the threshold; hits only the word blend lifts over it
    are found when they share the query's words or its rare trigrams.

    Adding a pair costs the same however many entities share its key (a level's
    memories often do: thousands of "Session notes"), so building is linear in
    the pairs.  One index may be read by many threads while a write through the
    memory adds or renames entities: a lock makes each change whole before any
    lookup sees it.
    """

    def __init__(self, entries: Iterable[tuple[str, str]] = ()) -> None:
        self._lock = threading.Lock()
        self._keys: list[str] = []
        self._grams: list[array] = []  # key id -> its trigram ids
        self._key_ids: dict[str, int] = {}
        # Flat lists, arrays and ints rather than a container per key or pair: an
        # index of a 50K-memory level would otherwise add tens of thousands of
        # containers to every full garbage collection of a long-running process
        # (a pause in any query).  A pair is an entry position; a removed one is None.
        self._ids: list[Optional[str]] = []
        self._names: list[Optional[str]] = []
        self._entry_keys = array("I")  # entry -> key id
        self._first = array("q")  # key id -> its first entry, -1 when none is left
        self._more: dict[int, array] = {}  # key id -> its further entries (keys many entities share)
        self._by_entity: dict[str, int | array] = {}  # entity id -> its entry, or entries with several names
        self._sorted: dict[str, array] = {}  # sorted-word key -> key ids
        self._gram_ids: dict[str, int] = {}
        self._postings: list[array] = []  # trigram id -> key ids
        self._count = 0
        self._add_all(entries)

    def __len__(self) -> int:
        return self._count

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        with self._lock:
            key_id = self._key_ids.get(normalize_entity_name(name))
            return key_id is not None and self._first[key_id] >= 0

    def __iter__(self) -> Iterator[tuple[str, str]]:
        with self._lock:
            pairs = [(eid, name) for eid, name in zip(self._ids, self._names) if eid is not None]
        return iter(pairs)

    def add(self, entity_id: str, name: str) -> None:
        """Index one name of an entity (an entity may have several names)."""
        with self._lock:
            self._add(entity_id, name)

    def add_many(self, entries: Iterable[tuple[str, str]]) -> None:
        """Index these names, all visible to lookups at once."""
        with self._lock:
            self._add_all(entries)

    def assign(self, entries: Iterable[tuple[str, str]]) -> None:
        """Give each entity of ``entries`` exactly the name it has there (the last one when repeated): its
        other names go, and an entity whose name is empty leaves the index.  A memory written again (perhaps
        renamed) is assigned its stored name; all the changes are visible to lookups at once."""
        latest = dict(entries)
        with self._lock:
            for entity_id, name in latest.items():
                for position in list(_positions(self._by_entity.get(entity_id, ()))):
                    if self._names[position] != name:
                        self._remove(position)
                self._add(entity_id, name)

    def exact(self, name: str) -> list[tuple[str, str]]:
        """The ``(entity_id, name)`` pairs whose key equals the key of ``name``."""
        with self._lock:
            key_id = self._key_ids.get(normalize_entity_name(name))
            return [] if key_id is None else [(self._ids[p], self._names[p]) for p in self._entries(key_id)]

    def match(self, name: str, threshold: float = 0.85, limit: Optional[int] = None) -> list[EntityMatch]:
        """Entities ``name`` may mean, best first: the exact key (score 1.0), then fuzzy matches
        scoring at least ``threshold``; ties by stored name, then id.  One row per entity."""
        key = normalize_entity_name(name)
        if not key:
            return []
        query_grams = trigrams(compact_key(key))
        with self._lock:
            exact_id = self._key_ids.get(key)
            scored: dict[int, float] = {} if exact_id is None else {exact_id: 1.0}
            for key_id in (*self._sorted.get(sorted_words_key(key), ()), *self._candidates(query_grams, threshold)):
                if key_id not in scored:
                    scored[key_id] = key_similarity(key, self._keys[key_id], query_grams)
            ids, names = self._ids, self._names
            rows = [EntityMatch(ids[p], names[p], score) for key_id, score in scored.items()
                    if score >= threshold or key_id == exact_id for p in self._entries(key_id)]
        return best_per_entity(rows, limit)

    def best(self, name: str, threshold: float = 0.85) -> Optional[EntityMatch]:
        """The best match of ``name``, or ``None``."""
        found = self.match(name, threshold, limit=1)
        return found[0] if found else None

    def _add_all(self, entries: Iterable[tuple[str, str]]) -> None:
        keys: dict[str, str] = {}  # a level's memories repeat few names: each is normalised once
        for entity_id, name in entries:
            key = keys.get(name)
            if key is None:
                key = keys[name] = normalize_entity_name(name)
            self._add(entity_id, name, key)

    def _add(self, entity_id: str, name: str, key: Optional[str] = None) -> None:
        key = normalize_entity_name(name) if key is None else key
        if not key:
            return
        held = self._by_entity.get(entity_id)
        if held is not None and any(self._names[p] == name for p in _positions(held)):
            return
        key_id = self._key_ids.get(key)
        if key_id is None:
            key_id = len(self._keys)
            gram_ids = array("I")
            for gram in sorted(trigrams(compact_key(key))):
                gram_id = self._gram_ids.get(gram)
                if gram_id is None:
                    gram_id = self._gram_ids[gram] = len(self._postings)
                    self._postings.append(array("I"))
                self._postings[gram_id].append(key_id)
                gram_ids.append(gram_id)
            self._keys.append(key)
            self._grams.append(gram_ids)
            self._key_ids[key] = key_id
            self._first.append(-1)
            self._sorted.setdefault(sorted_words_key(key), array("I")).append(key_id)
        position = len(self._ids)
        self._ids.append(entity_id)
        self._names.append(name)
        self._entry_keys.append(key_id)
        if self._first[key_id] < 0:
            self._first[key_id] = position
        else:
            self._more.setdefault(key_id, array("I")).append(position)
        if held is None:
            self._by_entity[entity_id] = position
        elif isinstance(held, int):
            self._by_entity[entity_id] = array("I", (held, position))
        else:
            held.append(position)
        self._count += 1

    def _remove(self, position: int) -> None:
        """Drop one entry (its key and trigrams stay: a key without entries matches nothing)."""
        entity_id, key_id = self._ids[position], self._entry_keys[position]
        more = self._more.get(key_id)
        if self._first[key_id] == position:
            self._first[key_id] = more.pop(0) if more else -1
        else:
            more.remove(position)
        if more is not None and not more:
            del self._more[key_id]
        held = self._by_entity[entity_id]
        if isinstance(held, int):
            del self._by_entity[entity_id]
        else:
            held.remove(position)
            if len(held) == 1:
                self._by_entity[entity_id] = held[0]
        self._ids[position] = self._names[position] = None
        self._count -= 1

    def _entries(self, key_id: int) -> Iterator[int]:
        """The entry positions of a key, oldest first."""
        first = self._first[key_id]
        if first >= 0:
            yield first
            yield from self._more.get(key_id, ())

    def _candidates(self, query_grams: frozenset[str], threshold: float) -> list[int]:
        """Key ids whose trigram Dice with ``query_grams`` reaches ``threshold``."""
        bounds = fuzzy_bounds(len(query_grams), threshold)
        if bounds is None:
            return []
        min_size, max_size, min_overlap = bounds
        size, t = len(query_grams), min(max(threshold, 1e-6), 1.0)
        probe = size - min_overlap + 1
        postings = self._postings
        gram_ids = self._gram_ids
        known = sorted((len(postings[gram_ids[g]]), gram_ids[g]) for g in query_grams if g in gram_ids)
        # Grams no stored key has count as already probed.
        probe -= size - len(known)
        if probe <= 0:
            return []
        query_ids = {gram_id for _, gram_id in known}
        grams = self._grams
        seen: set[int] = set()
        found: list[int] = []
        for _, gram_id in known[:probe]:
            for key_id in postings[gram_id]:
                if key_id in seen:
                    continue
                seen.add(key_id)
                stored = grams[key_id]
                if not min_size <= len(stored) <= max_size:
                    continue
                overlap = len(query_ids.intersection(stored))
                if 2.0 * overlap >= t * (size + len(stored)) - 1e-9:
                    found.append(key_id)
        return found


def best_per_entity(rows: Iterable[EntityMatch], limit: Optional[int] = None) -> list[EntityMatch]:
    """Each entity once, by its best row, best first; ties by name, then id (what every match returns)."""
    best: dict[str, EntityMatch] = {}
    for row in sorted(rows, key=lambda row: (-row.score, row.name, row.entity_id)):
        best.setdefault(row.entity_id, row)
    return list(best.values())[:limit]


def sorted_words_key(key: str) -> str:
    """A key with its words sorted and each once: "db falkor" for "falkor db" (word order does not matter)."""
    return " ".join(sorted(set(key.split())))


def fuzzy_bounds(size: int, threshold: float) -> Optional[tuple[int, int, int]]:
    """For a query of ``size`` trigrams, the ``(least, most)`` trigrams a stored key may have and the least
    overlap it needs to reach trigram Dice ``threshold``; None when no key can (no trigrams, threshold > 1).

    Set-similarity joins' size and prefix filters: Dice(Q, C) >= t implies
    ``|C|`` in ``[|Q| t / (2 - t), |Q| (2 - t) / t]`` and ``|Q & C| >= t (|Q| + min|C|) / 2``, so a
    match shares one of the query's ``|Q| - overlap + 1`` rarest trigrams: those alone need probing.
    """
    if size == 0 or threshold > 1.0:
        return None
    t = min(max(threshold, 1e-6), 1.0)
    min_size = math.ceil(size * t / (2.0 - t) - 1e-9)
    max_size = math.floor(size * (2.0 - t) / t + 1e-9)
    return min_size, max_size, max(1, math.ceil(t * (size + min_size) / 2.0 - 1e-9))


def _positions(held: int | array | tuple[()]) -> Iterable[int]:
    return (held,) if isinstance(held, int) else held
