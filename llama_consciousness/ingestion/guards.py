"""Guards for memories on their way in: PII scrubbing and prompt-injection detection.

A memory is embedded, stored and later pasted into prompts of other sessions (and citizens), so
:class:`PIIScrubber` runs first (once embedded, an API key is in every backup) and
:class:`InjectionGuard` flags, quarantines or drops "ignore all previous instructions", an instruction
waiting for the next retrieval.  Both leave relationships alone and write their findings (never the
redacted values) under ``lc_`` metadata keys, besides the stored field ``injection_suspected``.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, get_args

from llama_index.core.schema import BaseNode
from pydantic import Field, PrivateAttr, field_validator

from llama_consciousness.ingestion.cognitive import MemoryTransform
from llama_consciousness.nodes import is_relationship

__all__ = [
    "DEFAULT_PATTERNS",
    "PII_KINDS",
    "InjectionGuard",
    "PIIScrubber",
    "detect_injection",
    "luhn_valid",
    "iban_valid",
    "scrub_text",
]

FLAGS_KEY = "lc_flags"
REDACTIONS_KEY = "lc_redactions"
INJECTION_MATCHES_KEY = "lc_injection_matches"
QUARANTINE_KEY = "lc_quarantine"
INJECTION_FLAG = "prompt_injection"
# The memory field the guard sets: unlike the ``lc_`` keys it is stored, so the flag outlives the ingestion.
INJECTION_FIELD = "injection_suspected"

PIIKind = Literal["email", "phone", "api_key", "credit_card", "ip_address", "iban"]
PII_KINDS: tuple[str, ...] = get_args(PIIKind)


# Checksums keep long numbers that merely look like cards / IBANs (order ids,
# build numbers, hashes) out of the redaction.


def luhn_valid(digits: str) -> bool:
    """Whether a digit string passes the Luhn checksum (every payment card does)."""
    if not digits.isdigit():
        return False
    doubled = (int(char) * 2 for char in digits[-2::-2])
    return (sum(int(char) for char in digits[::-2]) + sum(d - 9 if d > 9 else d for d in doubled)) % 10 == 0


def iban_valid(iban: str) -> bool:
    """Whether a compact IBAN (no spaces) passes the ISO 13616 mod-97 check."""
    iban = iban.upper()
    if not (15 <= len(iban) <= 34) or not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]+", iban):
        return False
    return int("".join(str(int(char, 36)) for char in iban[4:] + iban[:4])) % 97 == 1


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    # Whether the match (its "value" group, when the pattern has a "label") is
    # really PII: failed checksum, too short, ... leave it alone.
    valid: Callable[[str], bool] = lambda value: True
    # A necessary condition of every match that ``valid`` accepts: a substring, or a pattern found
    # (``search``) in any text where such a match is.  A text without it skips the rule.  Why: most rules
    # open with a lookbehind, so Python's engine tries them at every position of the text (~0.15 ms per
    # rule on a 2 KB message); a gate opening with a literal or a character class is scanned in C.
    gate: str | re.Pattern[str] | None = None

    def may_match(self, text: str) -> bool:
        """False only when the rule cannot redact anything in ``text`` (its gate is missing)."""
        gate = self.gate
        if gate is None:
            return True
        return gate in text if isinstance(gate, str) else gate.search(text) is not None

    def replace(self, match: re.Match[str]) -> str | None:
        """The match redacted (a labelled value keeps its label, which tells what was there), or None."""
        labelled = "label" in self.pattern.groupindex
        if not self.valid(match.group("value") if labelled else match.group()):
            return None
        return (match.group("label") if labelled else "") + f"[REDACTED:{self.kind}]"


def _digit_count(low: int, high: int) -> Callable[[str], bool]:
    return lambda value: low <= len(re.sub(r"\D", "", value)) <= high


def _card(value: str) -> bool:
    digits = re.sub(r"\D", "", value)
    return 13 <= len(digits) <= 19 and luhn_valid(digits) and len(set(digits)) > 1


def _secret(value: str) -> bool:
    return len(value) >= 16 and bool(re.search(r"\d", value)) and bool(re.search(r"[A-Za-z]", value))


_SECRET_LABELS = (
    r"(?:[a-z0-9]+[_\-.])*"
    r"(?:api[_\-]?key|apikey|access[_\-]?key(?:[_\-]?id)?|secret[_\-]?key|secret|client[_\-]?secret"
    r"|token|access[_\-]?token|auth[_\-]?token|refresh[_\-]?token|bearer[_\-]?token|private[_\-]?key)"
)
_PASSWORD_LABELS = r"(?:[a-z0-9]+[_\-.])*(?:password|passwd|passphrase|pwd)"
_ASSIGN = r"[\"']?\s*[:=]\s*[\"']?"
_VENDOR_KEYS = (  # (pattern, gate: a literal or pattern every match holds)
    (r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
     "PRIVATE KEY-----"),
    (r"(?<![\w-])sk-(?:proj-|ant-|live-|test-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}", "sk-"),  # OpenAI / Anthropic
    (r"(?<!\w)[rs]k_(?:live|test)_[A-Za-z0-9]{16,}", re.compile(r"k_(?:live|test)_")),  # Stripe
    (r"(?<!\w)gh[pousr]_[A-Za-z0-9]{30,}", re.compile(r"gh[pousr]_")),  # GitHub
    (r"(?<!\w)github_pat_[A-Za-z0-9_]{30,}", "github_pat_"),
    (r"(?<!\w)glpat-[A-Za-z0-9_\-]{20,}", "glpat-"),  # GitLab
    (r"(?<![A-Za-z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}(?![A-Za-z0-9])",
     re.compile(r"A(?:KIA|SIA|GPA|IDA|ROA|NPA)")),  # AWS access key id
    (r"(?<!\w)xox[abposr]-[A-Za-z0-9\-]{10,}", "xox"),  # Slack
    (r"(?<!\w)AIza[0-9A-Za-z_\-]{35}", "AIza"),  # Google
    (r"(?<!\w)hf_[A-Za-z0-9]{30,}", "hf_"),  # Hugging Face
    (r"(?<![\w-])eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", ".eyJ"),  # JSON Web Token
)
# A labelled secret is redacted only with a value of 16 characters or more (``_secret``), right after
# the assignment; the gate is that assignment and value, with the label rule's flags.
_SECRET_VALUE_GATE = re.compile(r"[:=]\s*[\"']?[A-Za-z0-9_\-+/.=~]{16}", re.IGNORECASE)
_VENDOR_PREFIXES = (
    "PRIVATE KEY", "sk-", "k_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
    "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "xox", "AIza", "hf_", "eyJ",
)
_DIGIT = re.compile(r"\d")  # any Unicode digit, as the rules' \d


def _has_label_word(text: str) -> bool:
    # casefold, not lower: the label rules ignore case the way ``re`` does,
    # where "ſ" (long s) matches "s" and the Kelvin sign matches "k".
    folded = text.casefold()
    return any(word in folded for word in ("key", "secret", "token", "bearer", "pass", "pwd"))


_Plan = tuple[tuple[Callable[[str], bool], tuple[_Rule, ...]], ...]

# The rules, applied in this order: secrets first (a key may hold digit runs that
# look like a phone or a card), then the checksum-validated numbers, then the
# loose phone patterns.  Each group has a hint, a necessary condition of every
# match of its rules (a vendor prefix, a label word, an '@', a digit): a text
# failing it skips the group.  Substring tests rather than regex alternations,
# which Python's engine tries position by position (10 us for a sentence).
_GROUPS: _Plan = (
    (lambda text: any(prefix in text for prefix in _VENDOR_PREFIXES),
     tuple(_Rule("api_key", re.compile(regex), gate=gate) for regex, gate in _VENDOR_KEYS)),
    (_has_label_word, (
        _Rule("api_key", re.compile(rf"(?P<label>\b{_SECRET_LABELS}{_ASSIGN})(?P<value>[A-Za-z0-9_\-+/.=~]+)",
                                    re.IGNORECASE), _secret, _SECRET_VALUE_GATE),
        _Rule("api_key", re.compile(r"(?P<label>\bbearer\s+)(?P<value>[A-Za-z0-9_\-+/.=~]+)", re.IGNORECASE),
              _secret, re.compile(r"bearer\s+[A-Za-z0-9_\-+/.=~]{16}", re.IGNORECASE)),
        _Rule("api_key", re.compile(rf"(?P<label>\b{_PASSWORD_LABELS}{_ASSIGN})(?P<value>[^\s\"',;]+)",
                                    re.IGNORECASE), lambda value: len(value) >= 4,
              re.compile(r"(?:pass(?:word|wd|phrase)|pwd)[\"']?\s*[:=]", re.IGNORECASE)),
    )),
    (lambda text: "@" in text, (_Rule("email", re.compile(
        r"(?<![\w.+\-])[A-Za-z0-9][A-Za-z0-9._%+\-]*@[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?"
        r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}(?![\w\-])"
    )),)),
    (lambda text: _DIGIT.search(text) is not None, (
        _Rule("iban", re.compile(
            r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])"
        ), lambda value: iban_valid(re.sub(r"\s", "", value)), re.compile(r"[A-Z]{2}\d{2}")),
        # 13-19 digits, optional space/dash groups
        _Rule("credit_card", re.compile(r"(?<![\d\-.])(?<!\d )\d(?:[ \-]?\d){12,18}(?![\d\-]|\.\d)"), _card,
              re.compile(r"\d(?:[ \-]?\d){12}")),
        # IPv4, each octet 0-255; not part of a longer dotted run
        _Rule("ip_address", re.compile(
            r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
            r"(?!\d|\.\d|\w)"
        ), gate=re.compile(r"\d\.\d{1,3}\.\d{1,3}\.\d")),
        # International, with '+' or '00' (E.164: at most 15 digits).  Phones never
        # start inside a run of digit groups ("... 3704 0044 0532"), which is how
        # longer numbers that failed their checksum stay intact.
        _Rule("phone", re.compile(
            r"(?<![\w+])(?<!\d[ .\-])(?:\+|\b00)[1-9]\d{0,3}(?:[ .\-]?\(?\d{1,4}\)?){2,6}(?![\w]|[.\-]\d)"
        ), _digit_count(8, 15), re.compile(r"(?:\+|00)[1-9]")),
        # US / NANP  (555) 123-4567, 555-123-4567, 555.123.4567, +1 555 123 4567
        _Rule("phone", re.compile(
            r"(?<![\w.+\-])(?<!\d[ .\-])(?:1[ .\-]?)?(?:\([2-9]\d{2}\) ?|[2-9]\d{2}[ .\-])\d{3}[ .\-]\d{4}"
            r"(?![\w]|[.\-]\d)"
        ), _digit_count(10, 15), re.compile(r"\d{3}[ .\-]\d{4}")),
    )),
)
_RULES = tuple(rule for _, rules in _GROUPS for rule in rules)


@lru_cache(maxsize=64)
def _plan(kinds: frozenset[str]) -> _Plan:
    """The groups, each with its rules of the wanted kinds."""
    groups = ((hint, tuple(rule for rule in rules if rule.kind in kinds)) for hint, rules in _GROUPS)
    return tuple((hint, rules) for hint, rules in groups if rules)


def scrub_text(text: str, kinds: Sequence[str] = PII_KINDS) -> tuple[str, dict[str, int]]:
    """``text`` with the given kinds of PII replaced by ``[REDACTED:<kind>]``, and counts per kind.

    Conservative on numbers: dates, versions, years and short numbers stay;
    cards and IBANs must pass their checksum; phones need a '+'/'00' prefix or
    the US 3-3-4 grouping.
    """
    return _scrub(text, _plan(frozenset(kinds)))


def _scrub(text: str, plan: _Plan, counts: dict[str, int] | None = None) -> tuple[str, dict[str, int]]:
    counts = {} if counts is None else counts
    for hint, rules in plan:
        if not hint(text):
            continue
        for rule in rules:
            if not rule.may_match(text):
                continue

            def substitute(match: re.Match[str], rule: _Rule = rule) -> str:
                replacement = rule.replace(match)
                if replacement is None:
                    return match.group()
                counts[rule.kind] = counts.get(rule.kind, 0) + 1
                return replacement

            text = rule.pattern.sub(substitute, text)
    return text, counts


def _texts(values: Sequence[Any]) -> Iterator[str]:
    """The strings among field values (strings, or lists of strings)."""
    for value in values:
        if isinstance(value, str):
            yield value
        elif isinstance(value, list):
            yield from (item for item in value if isinstance(item, str))


def _field_values(node: BaseNode, fields: Sequence[str]) -> list[Any]:
    return [node.get_content(metadata_mode="none") if field == "description" else node.metadata.get(field)
            for field in fields]


class PIIScrubber(MemoryTransform):
    """Replaces personal data and secrets with ``[REDACTED:<kind>]`` before anything is stored.

    Scrubs the node text (the memory's ``description``) and the metadata
    ``fields`` (strings, or lists of strings such as ``concepts``).  Counts per
    kind (never the values) are added to ``metadata["lc_redactions"]``.  A
    changed node loses its embedding (``reset_embedding``): it was computed from
    the secret.  ``last_report`` holds the totals of the last call.
    """

    kinds: tuple[PIIKind, ...] = Field(default=PII_KINDS, description="Kinds of PII to redact.")
    fields: tuple[str, ...] = Field(
        default=("name", "description", "goal", "mindstate", "formation_trigger", "felt_quality",
                 "emotion_description", "body_sensation", "spatial_context"),
        description="Memory fields to scrub (every free-text field); 'description' is the node text.",
    )
    reset_embedding: bool = Field(default=True, description="Drop embeddings of changed nodes.")

    _last_report: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def last_report(self) -> dict[str, Any]:
        """``{"nodes": scanned, "nodes_redacted": changed, "counts": {kind: n}}`` of the last call."""
        return self._last_report

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        totals: Counter[str] = Counter()
        changed_nodes = 0
        memory_nodes = self.memories(nodes)
        plan = _plan(frozenset(self.kinds))
        for node in memory_nodes:
            values = _field_values(node, self.fields)
            # Every hint tested once on all the node's texts: most memories hold
            # nothing to redact, and a field needs only the groups whose hint the
            # whole passed.  (No hint spans a line break.)
            joined = "\n".join(_texts(values))
            runs = tuple(group for group in plan if group[0](joined))
            if not runs:
                continue
            counts: dict[str, int] = {}
            for field, value in zip(self.fields, values):
                if isinstance(value, str):
                    scrubbed = _scrub(value, runs, counts)[0]
                elif isinstance(value, list) and all(isinstance(item, str) for item in value):
                    scrubbed = [_scrub(item, runs, counts)[0] for item in value]
                else:
                    continue
                if scrubbed == value:
                    continue
                if field == "description":
                    node.set_content(scrubbed)
                else:
                    node.metadata[field] = scrubbed
            if not counts:
                continue
            changed_nodes += 1
            if self.reset_embedding:
                node.embedding = None
            recorded = dict(node.metadata.get(REDACTIONS_KEY) or {})
            recorded.update({kind: int(recorded.get(kind, 0)) + count for kind, count in counts.items()})
            node.metadata[REDACTIONS_KEY] = recorded
            totals.update(counts)
        self._last_report = {"nodes": len(memory_nodes), "nodes_redacted": changed_nodes,
                             "counts": dict(totals)}
        return nodes


_CLAUSE_START = r"(?:^|[.!?;:\n]\s*)"

# name -> regex (compiled case-insensitive and multi-line).  Each pattern aims
# at the *imperative addressed to a model*, not at the words themselves:
# "ignore the noise from the previous sprint" and "nginx will act as a proxy"
# are ordinary notes and must pass.
DEFAULT_PATTERNS: dict[str, str] = {
    "ignore_previous_instructions": (
        r"\b(?:ignore|disregard|forget|skip|override|bypass)\s+(?:all\s+|any\s+|every\s+)?(?:of\s+)?"
        r"(?:the\s+|your\s+|my\s+|these\s+|those\s+)?"
        r"(?:previous|prior|above|earlier|preceding|former|original|initial|system)\s+"
        r"(?:instructions?|prompts?|directions?|directives?|rules|guidelines|messages?|commands?|context|orders)\b"
    ),
    "disregard_above": (
        r"\b(?:disregard|ignore|forget)\s+(?:everything\s+|all\s+)?(?:(?:the|that)\s+)?(?:above|foregoing)"
        r"\s*(?:[.!,;:]|$|and\b|text\b|content\b|instructions?\b|prompts?\b)"
    ),
    "override_rules": (
        r"\b(?:ignore|bypass|override|disable|forget|disregard)\s+(?:all\s+)?(?:of\s+)?your\s+"
        r"(?:previous\s+|prior\s+|safety\s+|content\s+|original\s+|core\s+)?"
        r"(?:guidelines|rules|policies|restrictions|filters|guardrails|programming|instructions|training)\b"
    ),
    "forget_everything": (
        r"\bforget\s+(?:everything|all)\s+(?:you(?:'ve|\s+have)?\s+(?:know|knew|learned|learnt|been\s+told|were\s+told)"
        r"|(?:that\s+)?(?:above|before|previously)\b|i\s+(?:said|told\s+you))"
        rf"|{_CLAUSE_START}forget\s+(?:everything|all\s+(?:previous|prior|that))\b"
    ),
    "you_are_now": (
        r"\byou\s+are\s+now\s+(?:(?:an?|the|my|no\s+longer)\s+|in\s+(?!charge\b)\w+\s+mode\b"
        r"|(?:DAN|unrestricted|unfiltered|jailbroken|uncensored)\b|free\s+(?:from|of)\b)"
    ),
    "act_as": (
        rf"(?:{_CLAUSE_START}|\b(?:you\s+(?:will|must|should|shall|are\s+to)|please|from\s+now\s+on,?)\s+)"
        r"act\s+as\s+(?:an?\s|the\s|if\b|my\s|DAN\b)"
    ),
    "new_instructions": r"\b(?:new|updated|revised|real|actual|true)\s+(?:system\s+)?instructions?\s*:",
    "system_prompt": r"\bsystem\s+prompt\s*:|\[\s*system\s*\]|<\s*/?\s*system\s*>",
    "reveal_system_prompt": (
        r"\b(?:reveal|print|show|repeat|output|leak|dump|display)\s+(?:me\s+)?(?:your|the)\s+"
        r"(?:full\s+|entire\s+|hidden\s+|original\s+|initial\s+)?"
        r"(?:system\s+prompt|(?:hidden|initial|original|system)\s+instructions)\b"
    ),
    "chat_template_token": (
        r"<\|\s*(?:im_start|im_end|system|user|assistant|endoftext|begin_of_text|end_of_text"
        r"|start_header_id|end_header_id|eot_id)\s*\|>|\[/?INST\]|<</?SYS>>"
    ),
    "instruction_header": r"#{3,}\s*(?:instructions?|system(?:\s+prompt)?|new\s+(?:task|instructions?))\b",
    "developer_mode": r"\b(?:enable|enter|activate|switch\s+to)\s+(?:developer|dev|god|jailbreak|DAN)\s+mode\b",
}

# Words that every match of a default pattern contains (lower case): groups of
# which each needs one member in the text.  A text lacking them skips the
# pattern's regex (most memories lack all of them).  Patterns a user replaced
# or added have no entry and always run.
_DEFAULT_HINTS: dict[str, tuple[tuple[str, ...], ...]] = {
    "ignore_previous_instructions": (
        ("ignore", "disregard", "forget", "skip", "override", "bypass"),
        ("previous", "prior", "above", "earlier", "preceding", "former", "original", "initial", "system"),
    ),
    "disregard_above": (("disregard", "ignore", "forget"), ("above", "foregoing")),
    "override_rules": (("ignore", "bypass", "override", "disable", "forget", "disregard"), ("your",)),
    "forget_everything": (("forget",),),
    "you_are_now": (("you",), ("now",)),
    "act_as": (("act",),),
    "new_instructions": (("instruction",), (":",)),
    "system_prompt": (("system",),),
    "reveal_system_prompt": (
        ("reveal", "print", "show", "repeat", "output", "leak", "dump", "display"),
        ("system", "instruction"),
    ),
    "chat_template_token": (("<|", "inst]", "sys>>"),),
    "instruction_header": (("###",),),
    "developer_mode": (("enable", "enter", "activate", "switch"), ("mode",)),
}

# Invisible characters used to split trigger words ("ig\u200bnore") past filters.
_INVISIBLE = re.compile(r"[\u00ad\u200b-\u200f\u2060-\u2064\ufeff]")

# Case-insensitive regexes also match these two with an ASCII "i" (NFKC has
# already folded the other two such letters, the long s and the Kelvin sign).
_DOTTED_I = str.maketrans({"\u0130": "i", "\u0131": "i"})


def _normalise(text: str) -> str:
    # NFKC folds full-width and other compatibility forms ("ｉｇｎｏｒｅ") to ASCII.
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))


@lru_cache(maxsize=32)
def _compile(patterns: tuple[tuple[str, str], ...]) -> tuple[tuple[str, re.Pattern[str], tuple], ...]:
    """Compiled patterns, each with its hint groups (empty: always searched)."""
    return tuple(
        (name, re.compile(regex, re.IGNORECASE | re.MULTILINE),
         _DEFAULT_HINTS.get(name, ()) if DEFAULT_PATTERNS.get(name) == regex else ())
        for name, regex in patterns
    )


def _candidates(patterns: Mapping[str, str], normalised: str) -> list[tuple[str, re.Pattern[str]]]:
    """The patterns whose hint words ``normalised`` (or any part of it) contains."""
    lowered = normalised.translate(_DOTTED_I).lower()
    return [(name, regex) for name, regex, hints in _compile(tuple(patterns.items()))
            if all(any(word in lowered for word in group) for group in hints)]


def detect_injection(text: str, patterns: Mapping[str, str] = DEFAULT_PATTERNS) -> list[str]:
    """Names of the injection patterns found in ``text`` (in pattern order; empty if clean)."""
    if not text:
        return []
    normalised = _normalise(text)
    return [name for name, regex in _candidates(patterns, normalised) if regex.search(normalised)]


class InjectionGuard(MemoryTransform):
    """Detects prompt-injection text in memories and flags, quarantines or drops them.

    * ``flag``: ``metadata["lc_flags"]`` gets ``"prompt_injection"``,
      ``metadata["lc_injection_matches"]`` the matched pattern names, and the
      memory field ``injection_suspected`` is set: stored, carried by retrieved
      nodes, and marking the text as untrusted in renderings for an LLM;
    * ``quarantine``: as flag, plus ``metadata["lc_quarantine"] = True``: stored
      for review, excluded by retrievers;
    * ``drop``: as flag, and the node leaves the output (kept in :attr:`dropped`).

    ``patterns`` maps a name to a regex (case-insensitive, multi-line; text is
    NFKC-normalised and stripped of zero-width characters first).
    """

    action: Literal["flag", "quarantine", "drop"] = Field(default="flag")
    patterns: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_PATTERNS))
    fields: tuple[str, ...] = Field(
        default=("name", "description"),
        description="Memory fields to scan; 'description' is the node text.",
    )

    _last_report: dict[str, Any] = PrivateAttr(default_factory=dict)
    _dropped: list[BaseNode] = PrivateAttr(default_factory=list)

    @field_validator("patterns")
    @classmethod
    def _check_patterns(cls, value: dict[str, str]) -> dict[str, str]:
        # Fail at construction, not at the first memory that reaches the guard.
        for name, regex in value.items():
            try:
                re.compile(regex)
            except re.error as exc:
                raise ValueError(f"pattern {name!r} is not a valid regex: {exc}") from None
        return value

    @property
    def last_report(self) -> dict[str, Any]:
        """Counts of the last call: ``scanned``, ``flagged``, ``quarantined``,
        ``dropped``, ``dropped_ids`` and ``matches`` (pattern name -> nodes)."""
        return self._last_report

    @property
    def dropped(self) -> list[BaseNode]:
        """The nodes removed by the last call (``action="drop"``), for review."""
        return self._dropped

    def scan(self, node: BaseNode) -> list[str]:
        """Pattern names matched in the node's scanned fields."""
        texts = [_normalise(item) for item in _texts(_field_values(node, self.fields)) if item]
        # The hint words are tested once on all the texts (none spans a line
        # break); each text is then searched only with the patterns left.
        candidates = _candidates(self.patterns, "\n".join(texts))
        found: list[str] = []
        for text in texts:
            found += [name for name, regex in candidates if name not in found and regex.search(text)]
        return found

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        kept: list[BaseNode] = []
        dropped: list[BaseNode] = []
        matches: dict[str, int] = {}
        flagged = 0
        for node in nodes:
            found = [] if is_relationship(node) else self.scan(node)
            if found:
                flagged += 1
                for name in found:
                    matches[name] = matches.get(name, 0) + 1
                flags = list(node.metadata.get(FLAGS_KEY) or [])
                node.metadata[FLAGS_KEY] = flags if INJECTION_FLAG in flags else flags + [INJECTION_FLAG]
                previous = list(node.metadata.get(INJECTION_MATCHES_KEY) or [])
                node.metadata[INJECTION_MATCHES_KEY] = previous + [n for n in found if n not in previous]
                node.metadata[INJECTION_FIELD] = True
                if self.action == "quarantine":
                    node.metadata[QUARANTINE_KEY] = True
            (dropped if found and self.action == "drop" else kept).append(node)
        self._dropped = dropped
        self._last_report = {
            "scanned": len(self.memories(nodes)),
            "flagged": flagged,
            "quarantined": flagged if self.action == "quarantine" else 0,
            "dropped": len(dropped),
            "dropped_ids": [node.node_id for node in dropped],
            "matches": matches,
        }
        return kept
