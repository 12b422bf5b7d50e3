"""Cognitive retrieval fields (spec 004): concepts, surfaces_when, authority.

A memory should be found when the query shares its key terms (``concepts``),
has the shape of a question it answers (``surfaces_when``), and it deserves to
rank high (``authority_score``).  Pure and deterministic (no LLM, no clock):
the same memory gets the same fields on every machine and re-ingestion, or
concept overlap and rankings would depend on when each memory was written.
The spec's worked examples are requirements; the weights are chosen so they hold.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Optional

from llama_consciousness.schema._time import parse_time

__all__ = [
    "CONCEPT_FREQUENCY_WEIGHT",
    "CONCEPT_POSITION_WEIGHT",
    "CONCEPT_SHAPE_BOOST",
    "CONCEPT_TECHNICAL_BOOST",
    "DEFAULT_TECHNICAL_TERMS",
    "STOP_WORDS",
    "SURFACE_CATEGORIES",
    "authority_from_metadata",
    "compute_authority_score",
    "finite_number",
    "parse_time",
    "recency_share",
    "usage_share",
    "extract_concepts",
    "infer_surfaces_when",
    "tokenize",
    "AUTHORITY_ACCESS_DECAY",
    "AUTHORITY_ACCESS_WEIGHT",
    "AUTHORITY_CREATION_DECAY",
    "AUTHORITY_CREATION_WEIGHT",
    "AUTHORITY_IMPORTANCE_WEIGHT",
    "AUTHORITY_USAGE_SATURATION",
    "AUTHORITY_USAGE_WEIGHT",
    "NEUTRAL_IMPORTANCE",
]

# A word is a run of letters/digits, optionally joined by '.', '_', '-', or an
# apostrophe ("node.js", "snake_case", "pre-commit", "don't"), optionally
# followed by '+'/'#' ("c++", "c#").  A trailing sentence '.' is not part of a
# word because a joiner must be followed by another letter or digit.
_TOKEN_RE = re.compile(r"[a-z0-9]+(?:['\u2019._\-][a-z0-9]+)*[+#]*")
# Clause boundaries: an imperative verb right after one of these is a rule
# ("..., use absolute paths"); in the middle of a clause it is not ("we use X").
_CLAUSE_BREAK_RE = re.compile(r"[,;:.!?\n()\[\]\u2014\u2013]|\s[-\u2013\u2014]\s")


class _Token(NamedTuple):
    word: str
    clause_start: bool


# Placeholders left by the PII scrubber ("[REDACTED:email]"): a redaction is
# not a topic, and "redacted" must not become the concept that links every
# scrubbed memory to every other one.
_PLACEHOLDER_RE = re.compile(r"\[REDACTED:[a-z_]+\]", re.IGNORECASE)


def _lowered(text: str) -> str:
    return _PLACEHOLDER_RE.sub(",", text).lower()


def _words(lowered: str) -> list[str]:
    words = _TOKEN_RE.findall(lowered)
    if "\u2019" in lowered:
        words = [word.replace("\u2019", "'") for word in words]
    return words


class _Words:
    """The tokens of a text (``tokenize``), with whether token ``i`` opens a clause worked out on demand.

    Why: only an imperative cue reads its clause position, a few tokens of a 2 KB message; building a
    ``_Token`` (and testing its gap) for each of its ~400 words was most of ``infer_surfaces_when``.
    """

    __slots__ = ("lowered", "words", "_spans")

    def __init__(self, text: str) -> None:
        self.lowered = _lowered(text)
        self.words = _words(self.lowered)
        self._spans: list[re.Match[str]] | None = None

    def clause_start(self, i: int) -> bool:
        if i == 0:
            return True
        if self._spans is None:
            self._spans = list(_TOKEN_RE.finditer(self.lowered))
        gap = self.lowered[self._spans[i - 1].end():self._spans[i].start()]
        # most gaps are one space, which never breaks a clause
        return gap != " " and _CLAUSE_BREAK_RE.search(gap) is not None


def _tokens(text: str) -> list[_Token]:
    """Every token of ``text`` with whether it opens a clause (``_Words``, spelt out)."""
    words = _Words(text)
    return [_Token(word, words.clause_start(i)) for i, word in enumerate(words.words)]


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens of ``text``, stop words included; "node.js", "c++" stay whole."""
    return _words(_lowered(text))


# English stop words, minus those that carry the *polarity of a rule* ("always
# use X" and "never use X" are different memories).  Generic verbs ("use",
# "get", "make") are stop words: they would crowd out the actual subject.
STOP_WORDS: frozenset[str] = frozenset("""
a about above after again against ago all almost along already also although am among an and another
any anybody anyone anything anyway anywhere are aren't around as at away back be became because
become becomes been before being below beside besides between beyond both but by can can't cannot
could couldn't did didn't do does doesn't doing don't done down during each either else enough etc
even ever every everybody everyone everything everywhere few for from further get gets getting got
gotten had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself him
himself his how how's however i i'd i'll i'm i've ie if in inside instead into is isn't it it's its
itself just let let's like likely made make makes making many may maybe me might mine more most
mostly much must mustn't my myself namely near need needs neither no nobody none nor not nothing now
of off often oh ok okay on once one ones only onto or other others otherwise ought our ours
ourselves out over own per perhaps please quite rather really said same say says seem seemed seems
several shall shan't she she'd she'll she's should shouldn't since so some somebody someone
something sometimes somewhat still such than that that's the their theirs them themselves then there
there's therefore these they they'd they'll they're they've thing things this those though through
throughout thus to together too toward towards under unless until up upon us use used uses using
usually very via was wasn't way we we'd we'll we're we've well were weren't what what's whatever
when when's whenever where where's whereas wherever whether which while who who's whoever whole whom
whose why why's will with within without won't would wouldn't yes yet you you'd you'll you're you've
your yours yourself yourselves
""".split())

# Tools, languages and stores: what a note about a system is *about*.
DEFAULT_TECHNICAL_TERMS: frozenset[str] = frozenset("""
elefante falkordb pgvector postgres postgresql psql sqlite redis chromadb chroma neo4j mongodb mysql
qdrant weaviate pinecone milvus faiss cypher sql graphql llamaindex llama_index langchain openai
anthropic ollama huggingface llm llms embedding embeddings mcp rag python pip pipx uv venv conda
poetry pytest pydantic fastapi django flask numpy pandas asyncio javascript typescript node.js
nodejs npm yarn react vue deno bun rust cargo golang java kotlin c++ c# swift ruby php bash zsh
powershell docker dockerfile compose kubernetes k8s helm terraform ansible nginx systemd linux macos
windows wsl git github gitlab ci ssh http https grpc rest api json yaml toml aws gcp azure s3 lambda
""".split())

# score(w) = F*freq(w) + P*(1 - first(w)/n) + boost(w), first(w) the index of
# w's first occurrence among all n tokens.  The position term lies in (0, 1], so
# it only orders words of equal frequency (a note opens with its subject).  A
# listed technical term outranks any single ordinary word, but not one repeated
# three times; a technical-looking token ("v2", "utils.py") gets half a point.
CONCEPT_FREQUENCY_WEIGHT = 1.0
CONCEPT_POSITION_WEIGHT = 1.0
CONCEPT_TECHNICAL_BOOST = 2.0
CONCEPT_SHAPE_BOOST = 0.5


def tech_shape(word: str) -> bool:
    """Whether a token looks technical: letters with digits, a dot or underscore, a trailing "+"/"#".

    Plain character tests, linear in the word: the regex this replaced retried
    ``.*`` from every letter, and one 40 KB token took 8.8 s.
    """
    if "." in word or "_" in word or word.endswith(("+", "#")):
        return True
    return any(c.isdigit() for c in word) and any("a" <= c <= "z" for c in word)


_NOT_LETTERS = "0123456789'._-+#"  # every character of a token (``_TOKEN_RE``) that is not a letter


def _is_candidate(word: str) -> bool:
    # Single letters and pure numbers ("2025", "1.2.3") are not concepts.
    return len(word) >= 2 and word not in STOP_WORDS and bool(word.strip(_NOT_LETTERS))


@functools.lru_cache(maxsize=32)
def _boost_set(terms: frozenset[str] | tuple[str, ...]) -> frozenset[str]:
    """Lower-cased boost terms (the same few lists are passed for every memory)."""
    return frozenset(term.lower() for term in terms)


def extract_concepts(
    text: str,
    k: int = 5,
    boost_terms: Iterable[str] = DEFAULT_TECHNICAL_TERMS,
) -> list[str]:
    """The ``k`` key terms of ``text``, best first (spec 004): frequency + position + technical boost.

    >>> extract_concepts("Always use absolute paths in Elefante to avoid errors")
    ['elefante', 'always', 'absolute', 'paths', 'avoid']
    """
    if k <= 0:
        return []
    boost = _boost_set(boost_terms if isinstance(boost_terms, (frozenset, tuple)) else tuple(boost_terms))
    tokens = tokenize(text)
    n = len(tokens)
    frequency: dict[str, int] = {}
    first: dict[str, int] = {}
    for index, word in enumerate(tokens):
        if not _is_candidate(word):
            continue
        frequency[word] = frequency.get(word, 0) + 1
        first.setdefault(word, index)

    def score(word: str) -> float:
        bonus = CONCEPT_TECHNICAL_BOOST if word in boost else CONCEPT_SHAPE_BOOST if tech_shape(word) else 0.0
        position = CONCEPT_POSITION_WEIGHT * (1.0 - first[word] / n)
        return CONCEPT_FREQUENCY_WEIGHT * frequency[word] + position + bonus

    return sorted(frequency, key=lambda word: (-score(word), first[word], word))[:k]


@dataclass(frozen=True)
class _Category:
    """One row of the spec's table.  ``noun_cues``: the cues are nouns ("errors",
    "setup"), so the word before one names the thing concerned ("path errors")."""

    name: str
    templates: tuple[str, ...]
    noun_cues: bool = False


# The spec's table, in the spec's order (also each round's output order).
SURFACE_CATEGORIES: tuple[_Category, ...] = (
    _Category("question", ("how to {c}", "why {c}")),
    _Category("error", ("{c} error", "{c} problem"), noun_cues=True),
    _Category("rule", ("{c} best practice", "how to {c}")),
    _Category("config", ("{c} setup", "{c} configuration"), noun_cues=True),
)

_ERROR_WORDS = frozenset("""
error errors exception exceptions fix fixes fixed fixing bug bugs buggy fail fails failed
failing failure failures crash crashes crashed crashing broken traceback
""".split())
# Modal words that make a sentence a rule wherever they occur.
_RULE_WORDS = frozenset("always never must mustn't should shouldn't shall required mandatory".split())
# Imperative verbs: a rule only when they open a clause ("..., use absolute
# paths" / "Prefer X"), not mid-clause ("we use X daily" is a fact).
_IMPERATIVE_WORDS = frozenset("use avoid prefer don't ensure remember make do stop keep run".split())
_CONFIG_WORDS = frozenset("""
config configs configure configured configuring configuration configurations setup setups
install installs installed installing installation settings
""".split())
# Words that only restate a cue ("errors error") never become the {c} of a pattern.
_CUE_ONLY_WORDS = (
    _ERROR_WORDS | _RULE_WORDS | _IMPERATIVE_WORDS | _CONFIG_WORDS
    | frozenset("how why problem problems issue issues best practice practices".split())
)


# Every word ``_category_triggers`` can fire on.
_CUE_WORDS = _ERROR_WORDS | _RULE_WORDS | _IMPERATIVE_WORDS | _CONFIG_WORDS | frozenset(("why", "how", "set"))
# The same words, read by ``_category_triggers`` itself to skip every other token (``_CUE_WORDS`` is the
# shortcut for a text without any cue, which a test replaces to run the full rules).
_FIRING_WORDS = _CUE_WORDS


def _category_triggers(tokens: _Words) -> dict[str, list[int]]:
    """Token indexes of the cue words of each category found in ``tokens``."""
    found: dict[str, list[int]] = {category.name: [] for category in SURFACE_CATEGORIES}
    words = tokens.words
    # Only a cue word can fire: the rest of a long message is skipped in one comprehension.
    for i in [i for i, word in enumerate(words) if word in _FIRING_WORDS]:
        word = words[i]
        following = words[i + 1] if i + 1 < len(words) else ""
        if word == "why" or (word == "how" and following in {"to", "do", "does", "can", "should"}):
            found["question"].append(i)
        if word in _ERROR_WORDS:
            found["error"].append(i)
        if word in _RULE_WORDS:
            found["rule"].append(i)
        elif word in _IMPERATIVE_WORDS and tokens.clause_start(i):
            if word != "do" or following == "not":
                found["rule"].append(i)
        if word in _CONFIG_WORDS or (word == "set" and following == "up"):
            found["config"].append(i)
    return found


def _question_templates(words: Sequence[str]) -> tuple[str, ...]:
    present = set(words)
    return tuple(template for template, cue in (("how to {c}", "how"), ("why {c}", "why")) if cue in present)


def infer_surfaces_when(
    text: str,
    concepts: Sequence[str],
    max_patterns: int = 8,
) -> list[str]:
    """Query patterns that should surface this memory (spec 004, "Surfaces When").

    "elefante error" is how someone *asks* for "Always use absolute paths in
    Elefante to avoid errors", with little embedding mass in common; stored
    query shapes let a retriever match them literally.  Categories (the spec's
    table): question (how to / why), error, rule (a modal word anywhere, or an
    imperative verb opening a clause: "..., use absolute paths") and config.
    Subjects: the first concept that does not merely restate a cue, plus, for
    the noun-cue rows, every concept right before a cue ("path errors" ->
    'path').  Categories take turns, two patterns per round, so no single cue
    uses up ``max_patterns``.

    >>> infer_surfaces_when("Always use absolute paths in Elefante to avoid errors",
    ...                     ['elefante', 'always', 'absolute', 'paths', 'avoid'])[:3]
    ['elefante error', 'elefante problem', 'elefante best practice']
    >>> infer_surfaces_when("When debugging path errors, use absolute paths",
    ...                     ['debugging', 'path', 'errors', 'absolute', 'paths'])[:3]
    ['debugging error', 'path error', 'debugging best practice']
    """
    if max_patterns <= 0:
        return []
    topical = list(dict.fromkeys(c.strip().lower() for c in concepts
                                 if c and c.strip().lower() not in _CUE_ONLY_WORDS))
    if not topical:
        return []
    tokens = _Words(text)
    if _CUE_WORDS.isdisjoint(tokens.words):  # three short memories in four have no cue
        return []
    triggers = _category_triggers(tokens)
    queues: list[list[str]] = []
    for category in SURFACE_CATEGORIES:
        positions = triggers[category.name]
        if not positions:
            continue
        templates = _question_templates(tokens.words) if category.name == "question" else category.templates
        before = {tokens.words[p - 1] for p in positions if p > 0} if category.noun_cues else set()
        # in concept order (most important first)
        subjects = sorted({topical[0]} | before.intersection(topical), key=topical.index)
        queues.append([template.format(c=subject) for template in templates for subject in subjects])
    # Rounds of two patterns per category; duplicates dropped, first wins.
    rounds = range(0, max(map(len, queues), default=0), 2)
    ordered = (pattern for offset in rounds for queue in queues for pattern in queue[offset:offset + 2])
    return list(dict.fromkeys(ordered))[:max_patterns]


# Spec 004: authority = 0.35 importance + 0.25 usage + 0.20 creation freshness
#                       + 0.20 access recency.
AUTHORITY_IMPORTANCE_WEIGHT = 0.35
AUTHORITY_USAGE_WEIGHT = 0.25
AUTHORITY_CREATION_WEIGHT = 0.20
AUTHORITY_ACCESS_WEIGHT = 0.20
AUTHORITY_USAGE_SATURATION = 50  # log(n)/log(50): 50 accesses = full usage credit
AUTHORITY_CREATION_DECAY = 0.007  # per day: half-life ~99 days
AUTHORITY_ACCESS_DECAY = 0.05  # per day: half-life ~14 days
NEUTRAL_IMPORTANCE = 5.0

def _finite_or(value: float | None, default: float) -> float:
    if value is None:
        return default
    value = float(value)
    return value if math.isfinite(value) else default


def compute_authority_score(
    importance: float | None,
    access_count: int,
    days_since_created: float,
    days_since_accessed: float | None,
) -> float:
    """Composite ranking score in [0, 1] (spec 004, "Authority Score").

    ``0.35*(importance/10) + 0.25*log(access_count)/log(50)
    + 0.20*exp(-0.007*days_since_created) + 0.20*exp(-0.05*days_since_accessed)``:
    what the author said, what retrieval proved (the 50th access tells less
    than the 2nd), knowledge ageing slowly, and what is being worked on now.
    Importance None -> neutral 5, else clamped to [0, 10]; 0 or 1 accesses earn
    nothing; never accessed -> as recent as the creation; negative days -> 0;
    non-finite inputs count as missing; the result is clamped to [0, 1].
    """
    importance_value = min(10.0, max(0.0, _finite_or(importance, NEUTRAL_IMPORTANCE)))
    created = max(0.0, _finite_or(days_since_created, 0.0))
    accessed = created if days_since_accessed is None else max(0.0, _finite_or(days_since_accessed, created))
    score = (
        AUTHORITY_IMPORTANCE_WEIGHT * (importance_value / 10.0)
        + AUTHORITY_USAGE_WEIGHT * usage_share(access_count)
        + AUTHORITY_CREATION_WEIGHT * math.exp(-AUTHORITY_CREATION_DECAY * created)
        + AUTHORITY_ACCESS_WEIGHT * recency_share(accessed)
    )
    return min(1.0, max(0.0, score))


def usage_share(access_count: int) -> float:
    """The usage term of the authority score: log(n)/log(50), in [0, 1]; 0 or 1 accesses earn nothing."""
    count = int(access_count or 0)
    return min(1.0, math.log(count) / math.log(AUTHORITY_USAGE_SATURATION)) if count > 1 else 0.0


def recency_share(days_since_accessed: float) -> float:
    """The access-recency term of the authority score: exp(-0.05 x days), 1 for now (negative days: now)."""
    return math.exp(-AUTHORITY_ACCESS_DECAY * max(0.0, days_since_accessed))


def finite_number(value: Any) -> Optional[float]:
    """``value`` as a float; None when it is not a finite number (booleans are not numbers here)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def authority_from_metadata(metadata: Mapping[str, Any], now: datetime, *, access_count: Any = None,
                            last_accessed_at: Any = None) -> float:
    """The authority of the memory whose metadata is given, as of ``now``.

    Reads ``extra["importance"]`` (missing: neutral 5) and ``created_at`` (missing: ``now``); the use,
    from ``access_count`` and ``last_accessed_at`` when given (what the store recorded), else from
    ``extra`` (what a record brought; missing: 0 accesses, as recent as the creation).
    """
    extra = metadata.get("extra")
    extra = extra if isinstance(extra, dict) else {}
    access = finite_number(extra.get("access_count") if access_count is None else access_count)
    created = parse_time(metadata.get("created_at")) or now
    accessed = parse_time(extra.get("last_accessed_at") if last_accessed_at is None else last_accessed_at)
    return compute_authority_score(
        finite_number(extra.get("importance")),
        int(access) if access is not None else 0,
        (now - created).total_seconds() / 86_400.0,
        (now - accessed).total_seconds() / 86_400.0 if accessed is not None else None,
    )
