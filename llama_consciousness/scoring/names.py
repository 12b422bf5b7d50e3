"""Entity names, normalised so that "person_Luca", "Luca's" and "LUCA" meet.

Entity names reach the graph from many hands: people write "Luca's V2
decision", LLMs answer "person_Luca" or "decision_v2_architecture", importers
write "FalkorDB" or "Falkor DB".  Graph traversal starts from the names
mentioned in a query, so every comparison of names goes through one key,
:func:`normalize_entity_name`, and near misses are scored by
:func:`name_similarity`.  :class:`EntityIndex` answers "which stored entities
could this name mean?" for ~100k names without scanning them.

Everything here is pure Python, deterministic and model-free: it runs on every
query.

The key
-------
:func:`normalize_entity_name` applies, in this order:

1. Unicode NFKC (full-width letters, ligatures) and ``casefold``;
   typographic apostrophes and dashes become ASCII.
2. Surrounding punctuation and quotes are dropped.
3. A leading article ("the", "a", "an") is dropped when words follow it.
4. One type prefix of :data:`TYPE_PREFIXES` written with ``_`` or ``:``
   ("person_luca", "decision:v2") is dropped, when something follows it.
   Only these spellings count: "Person Luca" keeps its first word.  The list
   holds the spec's node-type prefixes and no everyday words, so that
   "phase_3" or "memory_consolidation" keep their first word.
5. Possessives are dropped at the end of every word: "luca's" -> "luca",
   "james'" -> "james".
6. Underscores, hyphens, dots, slashes and whitespace collapse into single
   spaces ("gpt-4" -> "gpt 4", "node.js" -> "node js").
7. The last word is made singular (:func:`singularize`).

Singular forms
--------------
:func:`singularize` is a small rule set, not a lemmatiser, applied to the
last word only (the head noun of an English noun phrase), and only to purely
alphabetic words of at least four letters:

* irregular forms from :data:`IRREGULAR_PLURALS` ("indices" -> "index",
  "analyses" -> "analysis", "caches" -> "cache", "apis" -> "api");
* words in :data:`INVARIANT_WORDS` are left alone: singular words ending in
  "s" ("analysis", "status", "series", "news"), names of people ("lucas",
  "thomas", "andreas", "chris") and tools ("kubernetes", "postgres",
  "redis", "devops");
* words ending in "ss", "us", "is" or "js" are left alone ("class",
  "corpus", "basis", "nextjs");
* "-ies" -> "-y" ("policies" -> "policy"); "-sses", "-xes", "-zzes",
  "-ches", "-shes" lose "es" ("classes" -> "class", "indexes" -> "index");
  "-uses" loses "es" when the stem is an invariant word ("statuses" ->
  "status"), otherwise "s" ("causes" -> "cause"); any other final "s" is
  dropped ("tasks" -> "task", "architectures" -> "architecture").

Names that do not end in "s" ("FalkorDB", "V2") are never touched.  The
rule is deliberately predictable: a wrong guess for a rare word costs a fuzzy
match (the trigram score of "kubernete" vs "kubernetes" is still high), while
a clever guesser would make keys depend on context.
"""

from __future__ import annotations

import math
import re
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
    "compact_key",
    "name_similarity",
    "normalize_entity_name",
    "singularize",
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

#: Words ending in "s" that are not plurals (compared after casefolding).
INVARIANT_WORDS: frozenset[str] = frozenset({
    # singular nouns and function words
    "analysis", "basis", "status", "class", "series", "species", "news", "means", "lens",
    "atlas", "canvas", "alias", "bias", "chaos", "ethos", "pathos", "kudos", "cosmos",
    "always", "perhaps", "across", "whereas", "thus", "plus", "minus", "bus", "gas",
    "bonus", "campus", "census", "consensus", "corpus", "focus", "genus", "nexus",
    "radius", "virus", "genius", "stimulus", "apparatus", "circus", "octopus", "status",
    "physics", "mathematics", "analytics", "semantics", "ethics", "economics", "politics",
    "linguistics", "logistics", "dynamics", "graphics", "robotics", "genetics", "mechanics",
    "optics", "aesthetics", "ergonomics", "forensics", "athletics", "gymnastics",
    "christmas", "diabetes", "measles", "mumps", "headquarters", "whereabouts",
    "lotus", "cactus", "walrus", "hummus", "asbestos",
    # first names of people
    "lucas", "thomas", "nicolas", "nicholas", "andreas", "elias", "jonas", "tobias",
    "matthias", "mathias", "marcus", "markus", "linus", "klaus", "chris", "charles",
    "james", "agnes", "doris", "iris", "louis", "denis", "dennis", "francis", "lewis",
    "davis", "douglas", "silas", "miles", "jules", "moses", "amos", "carlos", "marcos",
    "mateus", "julius", "cyrus", "magnus", "rasmus", "niels", "hans", "frances",
    "williams", "jones", "phillips", "adams", "roberts", "evans", "edwards", "collins",
    "stevens", "harris", "morris", "jenkins", "hughes", "reyes", "torres", "flores",
    # places
    "paris", "athens", "texas", "kansas", "arkansas", "vegas", "los", "wales", "brussels",
    "barbados", "bahamas", "philippines", "netherlands", "venus", "mars", "uranus",
    # tools, products and practices
    "kubernetes", "postgres", "redis", "jenkins", "windows", "express", "rails", "sass",
    "less", "ios", "macos", "ipados", "watchos", "tvos", "https", "aws", "dns", "nats",
    "devops", "mlops", "gitops", "dataops", "aiops", "llmops", "secops", "finops",
    "pandas", "numpy", "mathjs", "nodejs", "nextjs", "vuejs", "threejs", "argos",
    "prometheus", "zeus", "hermes", "atlas", "olympus", "pegasus", "nautilus", "janus",
})

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
    """``("person", "Luca")`` for "person_Luca"; ``(None, name)`` without a known prefix.

    The prefix is returned casefolded; the rest keeps its spelling.
    """
    text = unicodedata.normalize("NFKC", name).strip()
    match = _PREFIX_ANY_CASE.match(text)
    if match is None:
        return None, name
    return match.group(1).casefold(), text[match.end():]


def normalize_entity_name(name: str) -> str:
    """The key two entity names are compared by (see the module docstring).

    ``normalize_entity_name("person_Luca") == normalize_entity_name("luca's") == "luca"``;
    ``normalize_entity_name("the V2 architectures") == "v2 architecture"``.
    Returns ``""`` for a name with no letters or digits.
    """
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


def _score_keys(ka: str, kb: str, tri_a: Optional[frozenset[str]] = None) -> float:
    if ka == kb:
        return 1.0 if ka else 0.0
    if not ka or not kb:
        return 0.0
    tri = _dice(tri_a if tri_a is not None else trigrams(compact_key(ka)), trigrams(compact_key(kb)))
    tokens_a, tokens_b = ka.split(), kb.split()
    score = tri
    if len(tokens_a) > 1 or len(tokens_b) > 1:
        set_a, set_b = set(tokens_a), set(tokens_b)
        jaccard = len(set_a & set_b) / len(set_a | set_b)
        sorted_tri = _dice(trigrams("".join(sorted(set_a))), trigrams("".join(sorted(set_b))))
        score = max(score, 0.6 * sorted_tri + 0.4 * jaccard)
    # Only equal keys are certain.
    return min(score, 0.99)


def name_similarity(a: str, b: str) -> float:
    """How likely two entity names mean the same entity, in [0, 1].

    1.0 exactly when the keys (:func:`normalize_entity_name`) are equal.
    Otherwise the larger of

    * the Dice coefficient of the character trigrams of the keys without
      spaces ("falkor db" vs "falkordb" -> 0.99 after the cap), and
    * for multi-word names, ``0.6 * trigram Dice of the sorted words +
      0.4 * word Jaccard`` (word order: "architecture v2" vs "v2 architecture"),

    capped at 0.99.  "Felix" vs "Flux" scores about 0.2.
    """
    return _score_keys(normalize_entity_name(a), normalize_entity_name(b))


class EntityMatch(NamedTuple):
    entity_id: str
    name: str
    score: float


class EntityIndex:
    """Stored entity names, looked up by key and by fuzzy name.

    Built from ``(entity_id, name)`` pairs.  :meth:`match` returns exact-key
    hits first (score 1.0), then fuzzy hits at or above ``threshold``, best
    first, one row per entity id.

    Lookups do not scan the names: exact keys come from a dictionary, word-
    order variants from a dictionary of sorted-word keys, and fuzzy candidates
    from an inverted index of trigrams probed with the size and prefix filters
    of set-similarity joins (a name reaching Dice ``t`` with the query must
    share one of the query's rarest ``|Q| - m + 1`` trigrams, ``m`` the least
    overlap ``t`` allows).  Candidates are then scored with
    :func:`name_similarity`'s formula.  A fuzzy hit is therefore guaranteed
    when its trigram score reaches the threshold; hits that only the word
    blend lifts over the threshold are found when they share the query's
    words (sorted-word key) or its rare trigrams.
    """

    def __init__(self, entries: Iterable[tuple[str, str]] = ()) -> None:
        self._keys: list[str] = []
        self._grams: list[array] = []  # key id -> its trigram ids
        self._key_ids: dict[str, int] = {}
        # Tuples and arrays rather than lists: an index of a 50K-memory level
        # would otherwise add tens of thousands of containers to every full
        # garbage collection of a long-running process (a pause in any query).
        self._entries: list[tuple[tuple[str, str], ...]] = []  # key id -> ((entity_id, name), ...)
        self._sorted: dict[str, array] = {}  # sorted-word key -> key ids
        self._gram_ids: dict[str, int] = {}
        self._postings: list[array] = []  # trigram id -> key ids
        self._count = 0
        self.add_many(entries)

    def __len__(self) -> int:
        return self._count

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalize_entity_name(name) in self._key_ids

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for entries in self._entries:
            yield from entries

    def add(self, entity_id: str, name: str) -> None:
        """Index one name of an entity (an entity may have several names)."""
        key = normalize_entity_name(name)
        if not key:
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
            self._entries.append(())
            self._sorted.setdefault(_sorted_key(key), array("I")).append(key_id)
        entries = self._entries[key_id]
        if (entity_id, name) not in entries:
            self._entries[key_id] = entries + ((entity_id, name),)
            self._count += 1

    def add_many(self, entries: Iterable[tuple[str, str]]) -> None:
        for entity_id, name in entries:
            self.add(entity_id, name)

    def exact(self, name: str) -> list[tuple[str, str]]:
        """The ``(entity_id, name)`` pairs whose key equals the key of ``name``."""
        key_id = self._key_ids.get(normalize_entity_name(name))
        return list(self._entries[key_id]) if key_id is not None else []

    def match(self, name: str, threshold: float = 0.85, limit: Optional[int] = None) -> list[EntityMatch]:
        """Entities ``name`` may mean: ``(entity_id, name, score)``, best first.

        Exact keys first (score 1.0), then fuzzy matches scoring at least
        ``threshold``; ties broken by stored name, then id, so the order is
        deterministic.  An entity appears once, with its best name.
        """
        key = normalize_entity_name(name)
        if not key:
            return []
        scored: dict[int, float] = {}
        exact_id = self._key_ids.get(key)
        if exact_id is not None:
            scored[exact_id] = 1.0
        query_grams = trigrams(compact_key(key))
        for key_id in self._sorted.get(_sorted_key(key), ()):
            if key_id not in scored:
                scored[key_id] = _score_keys(key, self._keys[key_id], query_grams)
        for key_id in self._candidates(query_grams, threshold):
            if key_id not in scored:
                scored[key_id] = _score_keys(key, self._keys[key_id], query_grams)
        rows: list[EntityMatch] = []
        for key_id, score in scored.items():
            if score >= threshold or key_id == exact_id:
                rows.extend(EntityMatch(eid, stored, score) for eid, stored in self._entries[key_id])
        rows.sort(key=lambda row: (-row.score, row.name, row.entity_id))
        seen: set[str] = set()
        out: list[EntityMatch] = []
        for row in rows:
            if row.entity_id not in seen:
                seen.add(row.entity_id)
                out.append(row)
                if limit is not None and len(out) >= limit:
                    break
        return out

    def best(self, name: str, threshold: float = 0.85) -> Optional[EntityMatch]:
        """The best match of ``name``, or ``None``."""
        found = self.match(name, threshold, limit=1)
        return found[0] if found else None

    def _candidates(self, query_grams: frozenset[str], threshold: float) -> list[int]:
        """Key ids whose trigram Dice with ``query_grams`` reaches ``threshold``."""
        size = len(query_grams)
        if size == 0 or threshold > 1.0:
            return []
        t = min(max(threshold, 1e-6), 1.0)
        # Dice(Q, C) >= t  =>  |C| in [|Q| t / (2 - t), |Q| (2 - t) / t]
        # and |Q & C| >= t (|Q| + |C|) / 2 >= t (|Q| + min|C|) / 2.
        min_size = math.ceil(size * t / (2.0 - t) - 1e-9)
        max_size = math.floor(size * (2.0 - t) / t + 1e-9)
        min_overlap = max(1, math.ceil(t * (size + min_size) / 2.0 - 1e-9))
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


def _sorted_key(key: str) -> str:
    return " ".join(sorted(set(key.split())))
