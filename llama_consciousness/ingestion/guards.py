"""Guards for memories on their way in: PII scrubbing and prompt-injection detection.

A memory outlives the conversation it came from: it is embedded, stored,
and later pasted back into prompts of other sessions (and, at N2/N3, of
other citizens).  Two things must therefore be stopped at the door:

* **personal data and secrets** (:class:`PIIScrubber`): once embedded, a
  phone number or an API key is in the vector store and in every backup;
  scrubbing afterwards does not reach the copies.  Run it *first*, before
  concept extraction and before the embedding model / the writer::

      IngestionPipeline(transformations=[PIIScrubber(), InjectionGuard(), ...,
                                         embed_model, writer])

* **stored prompt injection** (:class:`InjectionGuard`): a memory that says
  "ignore all previous instructions" is an instruction waiting for the next
  retrieval.  The guard flags it, quarantines it (stored for review, but
  excluded by retrievers), or drops it.  A flagged memory keeps the flag:
  the memory field ``injection_suspected`` is stored with it, comes back in
  a retrieved node's metadata, and marks its text as untrusted wherever it
  is rendered for an LLM.

Both are LlamaIndex ``TransformComponent``s that leave relationship nodes
(``metadata["kind"] == "relationship"``) alone and write their findings
under ``lc_`` metadata keys (instructions for the writer and the retrievers,
not memory fields), besides that one field.  Findings never include the
redacted values.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from llama_index.core.schema import BaseNode, TransformComponent
from pydantic import Field, PrivateAttr, field_validator

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
# The memory field (``MemoryNode.injection_suspected``) the guard sets: unlike
# the ``lc_`` keys it is stored, so the flag outlives the ingestion.
INJECTION_FIELD = "injection_suspected"

PIIKind = Literal["email", "phone", "api_key", "credit_card", "ip_address", "iban"]
PII_KINDS: tuple[str, ...] = ("email", "phone", "api_key", "credit_card", "ip_address", "iban")


def _placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# ---------------------------------------------------------------------------
# Validators: checksums keep long numbers that merely look like cards / IBANs
# (order ids, build numbers, hashes) out of the redaction.
# ---------------------------------------------------------------------------


def luhn_valid(digits: str) -> bool:
    """Whether a digit string passes the Luhn checksum (every payment card does)."""
    if not digits.isdigit():
        return False
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def iban_valid(iban: str) -> bool:
    """Whether a compact IBAN (no spaces) passes the ISO 13616 mod-97 check."""
    iban = iban.upper()
    if not (15 <= len(iban) <= 34) or not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]+", iban):
        return False
    rearranged = iban[4:] + iban[:4]
    numeric = "".join(str(int(char, 36)) for char in rearranged)
    return int(numeric) % 97 == 1


# ---------------------------------------------------------------------------
# PII rules
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    # Returns the replacement for a match, or None to leave the match alone
    # (failed checksum, too short, ...).
    replace: Callable[[re.Match[str]], str | None]


def _whole(kind: str) -> Callable[[re.Match[str]], str | None]:
    return lambda match: _placeholder(kind)


def _keep_label(kind: str, min_length: int, need_digit: bool) -> Callable[[re.Match[str]], str | None]:
    """Replace only the value of ``label = value`` (the label tells the reader what was there)."""

    def replace(match: re.Match[str]) -> str | None:
        value = match.group("value")
        if len(value) < min_length:
            return None
        if need_digit and not (re.search(r"\d", value) and re.search(r"[A-Za-z]", value)):
            return None
        return match.group("label") + _placeholder(kind)

    return replace


def _card(match: re.Match[str]) -> str | None:
    digits = re.sub(r"\D", "", match.group())
    if 13 <= len(digits) <= 19 and luhn_valid(digits) and len(set(digits)) > 1:
        return _placeholder("credit_card")
    return None


def _iban(match: re.Match[str]) -> str | None:
    return _placeholder("iban") if iban_valid(re.sub(r"\s", "", match.group())) else None


def _phone(min_digits: int) -> Callable[[re.Match[str]], str | None]:
    def replace(match: re.Match[str]) -> str | None:
        digits = re.sub(r"\D", "", match.group())
        return _placeholder("phone") if min_digits <= len(digits) <= 15 else None

    return replace


_SECRET_LABELS = (
    r"(?:[a-z0-9]+[_\-.])*"
    r"(?:api[_\-]?key|apikey|access[_\-]?key(?:[_\-]?id)?|secret[_\-]?key|secret|client[_\-]?secret"
    r"|token|access[_\-]?token|auth[_\-]?token|refresh[_\-]?token|bearer[_\-]?token|private[_\-]?key)"
)
_PASSWORD_LABELS = r"(?:[a-z0-9]+[_\-.])*(?:password|passwd|passphrase|pwd)"
_ASSIGN = r"[\"']?\s*[:=]\s*[\"']?"

# Applied in this order: secrets first (a key may contain digit runs that look
# like a phone or a card), then the checksum-validated numbers, then the loose
# phone patterns last.
_RULES: tuple[_Rule, ...] = (
    # -- api_key: vendor-specific shapes ------------------------------------
    _Rule("api_key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"
    ), _whole("api_key")),
    _Rule("api_key", re.compile(  # OpenAI / Anthropic: sk-..., sk-proj-..., sk-ant-api03-...
        r"(?<![\w-])sk-(?:proj-|ant-|live-|test-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}"
    ), _whole("api_key")),
    _Rule("api_key", re.compile(r"(?<!\w)[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"), _whole("api_key")),  # Stripe
    _Rule("api_key", re.compile(r"(?<!\w)gh[pousr]_[A-Za-z0-9]{30,}"), _whole("api_key")),  # GitHub
    _Rule("api_key", re.compile(r"(?<!\w)github_pat_[A-Za-z0-9_]{30,}"), _whole("api_key")),
    _Rule("api_key", re.compile(r"(?<!\w)glpat-[A-Za-z0-9_\-]{20,}"), _whole("api_key")),  # GitLab
    _Rule("api_key", re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
          _whole("api_key")),  # AWS access key id
    _Rule("api_key", re.compile(r"(?<!\w)xox[abposr]-[A-Za-z0-9\-]{10,}"), _whole("api_key")),  # Slack
    _Rule("api_key", re.compile(r"(?<!\w)AIza[0-9A-Za-z_\-]{35}"), _whole("api_key")),  # Google
    _Rule("api_key", re.compile(r"(?<!\w)hf_[A-Za-z0-9]{30,}"), _whole("api_key")),  # Hugging Face
    _Rule("api_key", re.compile(  # JSON Web Token
        r"(?<![\w-])eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"
    ), _whole("api_key")),
    # -- api_key: generic "label = value" (hex / base64 secrets) ----------
    _Rule("api_key", re.compile(
        rf"(?P<label>\b{_SECRET_LABELS}{_ASSIGN})(?P<value>[A-Za-z0-9_\-+/.=~]+)", re.IGNORECASE
    ), _keep_label("api_key", min_length=16, need_digit=True)),
    _Rule("api_key", re.compile(
        r"(?P<label>\bbearer\s+)(?P<value>[A-Za-z0-9_\-+/.=~]+)", re.IGNORECASE
    ), _keep_label("api_key", min_length=16, need_digit=True)),
    _Rule("api_key", re.compile(
        rf"(?P<label>\b{_PASSWORD_LABELS}{_ASSIGN})(?P<value>[^\s\"',;]+)", re.IGNORECASE
    ), _keep_label("api_key", min_length=4, need_digit=False)),
    # -- email -------------------------------------------------------------
    _Rule("email", re.compile(
        r"(?<![\w.+\-])[A-Za-z0-9][A-Za-z0-9._%+\-]*@[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?"
        r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}(?![\w\-])"
    ), _whole("email")),
    # -- iban (mod-97 checked) ---------------------------------------------
    _Rule("iban", re.compile(
        r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])"
    ), _iban),
    # -- credit_card (Luhn checked, 13-19 digits, optional space/dash groups)
    _Rule("credit_card", re.compile(r"(?<![\d\-.])(?<!\d )\d(?:[ \-]?\d){12,18}(?![\d\-]|\.\d)"), _card),
    # -- ip_address (IPv4, each octet 0-255; not part of a longer dotted run)
    _Rule("ip_address", re.compile(
        r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
        r"(?!\d|\.\d|\w)"
    ), _whole("ip_address")),
    # -- phone: international, with '+' or '00' (E.164: at most 15 digits) ---
    # Phones never start inside a run of digit groups ("... 3704 0044 0532"),
    # which is how longer numbers that failed their checksum stay intact.
    _Rule("phone", re.compile(
        r"(?<![\w+])(?<!\d[ .\-])(?:\+|\b00)[1-9]\d{0,3}(?:[ .\-]?\(?\d{1,4}\)?){2,6}(?![\w]|[.\-]\d)"
    ), _phone(min_digits=8)),
    # -- phone: US / NANP  (555) 123-4567, 555-123-4567, 555.123.4567, +1 555 123 4567
    _Rule("phone", re.compile(
        r"(?<![\w.+\-])(?<!\d[ .\-])(?:1[ .\-]?)?(?:\([2-9]\d{2}\) ?|[2-9]\d{2}[ .\-])\d{3}[ .\-]\d{4}(?![\w]|[.\-]\d)"
    ), _phone(min_digits=10)),
)


def _hint(rule: _Rule) -> Callable[[str], bool]:
    """A cheap test that every match of ``rule`` passes: most texts skip most rules.

    Each hint is a necessary condition of its rule's pattern (an '@' for an
    email, a digit for numbers, a label word or a vendor prefix for keys), so
    skipping a rule whose hint fails never misses a match.  Substring tests
    rather than regex alternations, which Python's engine tries position by
    position (10 us for a sentence).
    """
    if rule.kind == "email":
        return _has_at
    if rule.kind in ("iban", "credit_card", "ip_address", "phone"):
        return _has_digit
    if "(?P<label>" in rule.pattern.pattern:
        return _has_label_word
    return _has_vendor_prefix


def _has_at(text: str) -> bool:
    return "@" in text


_DIGIT = re.compile(r"\d")  # any Unicode digit, as the rules' \d


def _has_digit(text: str) -> bool:
    return _DIGIT.search(text) is not None


# casefold, not lower: the label rules ignore case the way ``re`` does, where
# "ſ" (long s) matches "s" and the Kelvin sign matches "k".
_LABEL_WORDS = ("key", "secret", "token", "bearer", "pass", "pwd")
_VENDOR_PREFIXES = (
    "PRIVATE KEY", "sk-", "k_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
    "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "xox", "AIza", "hf_", "eyJ",
)


def _has_label_word(text: str) -> bool:
    folded = text.casefold()
    return any(word in folded for word in _LABEL_WORDS)


def _has_vendor_prefix(text: str) -> bool:
    return any(prefix in text for prefix in _VENDOR_PREFIXES)


_HINTS = tuple(_hint(rule) for rule in _RULES)


@lru_cache(maxsize=64)
def _plan(kinds: frozenset[str]) -> tuple[tuple[Callable[[str], bool], tuple[_Rule, ...]], ...]:
    """The wanted rules in their order, grouped into runs that share a hint.

    Rules sharing a hint are consecutive in ``_RULES``, so a text runs each
    hint once.
    """
    runs: list[tuple[Callable[[str], bool], list[_Rule]]] = []
    for rule, hint in zip(_RULES, _HINTS):
        if rule.kind not in kinds:
            continue
        if runs and runs[-1][0] is hint:
            runs[-1][1].append(rule)
        else:
            runs.append((hint, [rule]))
    return tuple((hint, tuple(rules)) for hint, rules in runs)


def scrub_text(text: str, kinds: Sequence[str] = PII_KINDS) -> tuple[str, dict[str, int]]:
    """``text`` with the given kinds of PII replaced by ``[REDACTED:<kind>]``, and counts per kind.

    Deliberately conservative on numbers: dates (2025-09-01), versions
    (1.2.3), years and short numbers are not PII and stay; cards and IBANs
    must pass their checksum; phones need a '+'/'00' prefix or the US
    3-3-4 grouping.
    """
    return _scrub(text, _plan(frozenset(kinds)))


def _scrub(text: str, runs: tuple[tuple[Callable[[str], bool], tuple[_Rule, ...]], ...]) -> tuple[str, dict[str, int]]:
    counts: dict[str, int] = {}
    for hint, rules in runs:
        if not hint(text):
            continue
        for rule in rules:

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


def _memory_nodes(nodes: Sequence[BaseNode]) -> list[BaseNode]:
    return [node for node in nodes if not is_relationship(node)]


def _field_values(node: BaseNode, field: str) -> Any:
    if field == "description":
        return node.get_content(metadata_mode="none")
    return node.metadata.get(field)


class PIIScrubber(TransformComponent):
    """Replaces personal data and secrets with ``[REDACTED:<kind>]`` before anything is stored.

    Scrubs the node text (the memory's ``description``) and the metadata
    fields listed in ``fields`` (strings, or lists of strings such as
    ``concepts``).  Counts per kind (never the values) are added to
    ``metadata["lc_redactions"]``; a node with nothing to redact is left
    untouched.  If a node already carried an embedding and its text changed,
    the embedding is dropped (``reset_embedding``): it was computed from the
    secret and would keep its meaning in the vector store.

    Place it before concept extraction and before the embedding model and the
    writer in the pipeline.  ``last_report`` holds the totals of the last call.
    """

    kinds: tuple[PIIKind, ...] = Field(default=PII_KINDS, description="Kinds of PII to redact.")
    fields: tuple[str, ...] = Field(
        default=("name", "description", "goal", "mindstate", "formation_trigger", "felt_quality",
                 "emotion_description", "body_sensation", "spatial_context"),
        description="Memory fields to scrub (every free-text field); 'description' is the node text.",
    )
    reset_embedding: bool = Field(default=True, description="Drop embeddings of changed nodes.")

    _last_report: dict[str, Any] = PrivateAttr(default_factory=dict)

    @classmethod
    def class_name(cls) -> str:
        return "PIIScrubber"

    @property
    def last_report(self) -> dict[str, Any]:
        """``{"nodes": scanned, "nodes_redacted": changed, "counts": {kind: n}}`` of the last call."""
        return self._last_report

    def _scrub_value(self, value: Any, counts: dict[str, int], runs: tuple) -> Any:
        if isinstance(value, str):
            scrubbed, found = _scrub(value, runs)
        elif isinstance(value, list) and all(isinstance(item, str) for item in value):
            return [self._scrub_value(item, counts, runs) for item in value]
        else:
            return value
        for kind, count in found.items():
            counts[kind] = counts.get(kind, 0) + count
        return scrubbed

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        totals: dict[str, int] = {}
        changed_nodes = 0
        memory_nodes = _memory_nodes(nodes)
        plan = _plan(frozenset(self.kinds))
        for node in memory_nodes:
            values = [_field_values(node, field) for field in self.fields]
            # Every hint tested once on all the node's texts: most memories
            # hold nothing to redact, and a field needs only the rules whose
            # hint the whole passed.  (No hint spans a line break, so the
            # joined text passes a hint whenever one of its parts does.)
            joined = "\n".join(_texts(values))
            runs = tuple(run for run in plan if run[0](joined))
            if not runs:
                continue
            counts: dict[str, int] = {}
            for field, value in zip(self.fields, values):
                scrubbed = self._scrub_value(value, counts, runs)
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
            for kind, count in counts.items():
                recorded[kind] = int(recorded.get(kind, 0)) + count
                totals[kind] = totals.get(kind, 0) + count
            node.metadata[REDACTIONS_KEY] = recorded
        self._last_report = {
            "nodes": len(memory_nodes),
            "nodes_redacted": changed_nodes,
            "counts": totals,
        }
        return nodes

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        # Regexes over short texts: cheaper than a thread hop.
        return self.__call__(nodes, **kwargs)


# ---------------------------------------------------------------------------
# Prompt injection
# ---------------------------------------------------------------------------

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

# Words that every match of a default pattern contains (lower case): for each
# pattern, groups of which each needs one member in the text.  A text lacking
# them skips the pattern's regex (most memories lack all of them).  Patterns a
# user replaced or added have no entry and always run.
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
def _compile(
    patterns: tuple[tuple[str, str], ...],
) -> tuple[tuple[str, re.Pattern[str], tuple[tuple[str, ...], ...]], ...]:
    """Compiled patterns, each with its hint groups (empty: always searched)."""
    return tuple(
        (name, re.compile(regex, re.IGNORECASE | re.MULTILINE),
         _DEFAULT_HINTS.get(name, ()) if DEFAULT_PATTERNS.get(name) == regex else ())
        for name, regex in patterns
    )


def detect_injection(text: str, patterns: Mapping[str, str] = DEFAULT_PATTERNS) -> list[str]:
    """Names of the injection patterns found in ``text`` (in pattern order; empty if clean)."""
    if not text:
        return []
    normalised = _normalise(text)
    return [name for name, regex in _candidates(_compile(tuple(patterns.items())), normalised)
            if regex.search(normalised)]


def _candidates(
    compiled: tuple[tuple[str, re.Pattern[str], tuple[tuple[str, ...], ...]], ...], normalised: str
) -> list[tuple[str, re.Pattern[str]]]:
    """The patterns whose hint words ``normalised`` (or any part of it) contains."""
    lowered = normalised.translate(_DOTTED_I).lower()
    return [(name, regex) for name, regex, hints in compiled
            if all(any(word in lowered for word in group) for group in hints)]


class InjectionGuard(TransformComponent):
    """Detects prompt-injection text in memories and flags, quarantines or drops them.

    * ``flag``: ``metadata["lc_flags"]`` gets ``"prompt_injection"``,
      ``metadata["lc_injection_matches"]`` the names of the matched patterns,
      and the memory field ``metadata["injection_suspected"]`` is set to
      True: the writer stores it, retrieved nodes carry it in their
      metadata, and renderings for an LLM mark the memory's text as
      untrusted;
    * ``quarantine``: as flag, plus ``metadata["lc_quarantine"] = True``: the
      writer stores the memory (so that a human can review it) but retrievers
      exclude it;
    * ``drop``: as flag, and the node is removed from the output; the dropped
      nodes are kept in :attr:`dropped` and their ids in ``last_report``.

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

    @classmethod
    def class_name(cls) -> str:
        return "InjectionGuard"

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
        texts = [_normalise(item) for item in _texts([_field_values(node, field) for field in self.fields]) if item]
        # The hint words are tested once on all the texts (none spans a line
        # break); each text is then searched only with the patterns left.
        candidates = _candidates(_compile(tuple(self.patterns.items())), "\n".join(texts))
        found: list[str] = []
        if candidates:
            for text in texts:
                for name, regex in candidates:
                    if name not in found and regex.search(text):
                        found.append(name)
        return found

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        kept: list[BaseNode] = []
        dropped: list[BaseNode] = []
        matches: dict[str, int] = {}
        scanned = flagged = quarantined = 0
        for node in nodes:
            if is_relationship(node):
                kept.append(node)
                continue
            scanned += 1
            found = self.scan(node)
            if not found:
                kept.append(node)
                continue
            flagged += 1
            for name in found:
                matches[name] = matches.get(name, 0) + 1
            flags = list(node.metadata.get(FLAGS_KEY) or [])
            if INJECTION_FLAG not in flags:
                flags.append(INJECTION_FLAG)
            node.metadata[FLAGS_KEY] = flags
            previous = list(node.metadata.get(INJECTION_MATCHES_KEY) or [])
            node.metadata[INJECTION_MATCHES_KEY] = previous + [n for n in found if n not in previous]
            node.metadata[INJECTION_FIELD] = True
            if self.action == "drop":
                dropped.append(node)
                continue
            if self.action == "quarantine":
                node.metadata[QUARANTINE_KEY] = True
                quarantined += 1
            kept.append(node)
        self._dropped = dropped
        self._last_report = {
            "scanned": scanned,
            "flagged": flagged,
            "quarantined": quarantined,
            "dropped": len(dropped),
            "dropped_ids": [node.node_id for node in dropped],
            "matches": matches,
        }
        return kept

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        return self.__call__(nodes, **kwargs)
