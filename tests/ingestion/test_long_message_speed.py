"""The shortcuts that make long messages cheaper to ingest must not change what is stored.

PII rules carry a gate (a necessary condition of any redaction) so a 2 KB message skips the rules that
cannot fire in it; ``infer_surfaces_when`` reads clause positions only for imperative cues.  Both are
checked here against the full computation they replace.
"""

from __future__ import annotations

import dataclasses
import random

from llama_consciousness.ingestion import guards
from llama_consciousness.scoring import cognitive

PII_SAMPLES = [
    "mail me at ana.perez+work@example.co.uk today",
    "card 4111 1111 1111 1111 exp 12/29", "card 4111-1111-1111-1111", "cc 5500005555555559",
    "server 192.168.10.254 and 10.0.0.1", "not an ip 1.2.3.4.5 nor 999.1.1.1",
    "call +44 20 7946 0958 or 0044 20 7946 0958", "US (415) 555-2671, 415-555-2671, 415.555.2671",
    "IBAN DE89 3704 0044 0532 0130 00 and GB82WEST12345698765432",
    "api_key = 'sk1234567890abcdefXYZ'", "API-KEY: ABCDEFGH12345678zz", "token=\"abc123def456ghi789\"",
    "my.access_key_id: AKIA1234567890ABCD12", "Authorization: Bearer abcdef1234567890abcdef",
    "password = hunter22", "db.passwd: s3cr3t!", "PWD=abcd", "passphrase: 'long words here'",
    "sk-proj-abcdefghijklmnop1234", "rk_live_abcdefghijklmnop1234", "ghp_" + "a1" * 20,
    "github_pat_" + "B2" * 20, "glpat-abcdefghij1234567890", "AKIAIOSFODNN7EXAMPLE", "xoxb-1234567890-abc",
    "AIza" + "x1" * 18, "hf_" + "Q9" * 16, "eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeKKF2QT4",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
    "\u017fecret: abcdefgh12345678", "\u212aEY = abcdefgh12345678",  # long s, Kelvin sign: re's case folding
]
FILLER = ["version 2.3.4", "id: 7", "tokens: 512", "the key point", "2024-01-15", "port 5432", "x = 10",
          "step 3 of 12", "+1", "00 7", "a-b", "keys: []", "pass it on", "AB12", "1234567", "bearer of news"]


def _ungated(plan: guards._Plan) -> guards._Plan:
    return tuple((hint, tuple(dataclasses.replace(rule, gate=None) for rule in rules)) for hint, rules in plan)


def test_gated_scrubbing_equals_the_full_rules():
    plan = guards._plan(frozenset(guards.PII_KINDS))
    full = _ungated(plan)
    rng = random.Random(40)
    texts = list(PII_SAMPLES)
    for _ in range(600):
        parts = rng.sample(FILLER, 4) + rng.sample(PII_SAMPLES, rng.randint(0, 2))
        rng.shuffle(parts)
        texts.append(rng.choice([" ", "\n", ", "]).join(parts))
    redacted = 0
    for text in texts:
        gated = guards._scrub(text, plan)
        assert gated == guards._scrub(text, full), text
        redacted += bool(gated[1])
    assert redacted > 300  # the samples were redacted: the comparison was not between two no-ops


def test_every_redacted_match_holds_its_rules_gate():
    """A gate is a necessary condition: each match a rule redacts contains it."""
    checked = 0
    for rule in guards._RULES:
        if rule.gate is None:
            continue
        for text in PII_SAMPLES:
            for match in rule.pattern.finditer(text):
                if rule.replace(match) is not None:
                    assert rule.may_match(match.group()), (rule.kind, match.group())
                    checked += 1
    assert checked >= 25


def test_a_rule_whose_gate_is_missing_is_not_run():
    rule = next(r for r in guards._RULES if r.kind == "credit_card")
    assert not rule.may_match("build 2024-01-15, version 1.2.3, 4111 1111")
    assert rule.may_match("4111 1111 1111 1111")


def _old_tokens(text: str) -> list[tuple[str, bool]]:
    """Every token with its clause position, as ``_tokens`` computed it before ``_Words``."""
    lowered = cognitive._PLACEHOLDER_RE.sub(",", text).lower()
    out, previous_end = [], 0
    for index, match in enumerate(cognitive._TOKEN_RE.finditer(lowered)):
        gap = lowered[previous_end:match.start()]
        start = index == 0 or (gap != " " and cognitive._CLAUSE_BREAK_RE.search(gap) is not None)
        out.append((match.group().replace("\u2019", "'"), start))
        previous_end = match.end()
    return out


def test_lazy_clause_positions_equal_the_eager_ones():
    words = ["use", "Always", "don\u2019t", "run", "do", "not", "keep", "paths", ",", ";", "-", " - ", ".",
             "(", "[REDACTED:email]", "node.js", "setup", "errors", "why", "how", "to", "\n", "make"]
    rng = random.Random(4)
    for _ in range(500):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 30)))
        tokens = cognitive._Words(text)
        assert [(w, tokens.clause_start(i)) for i, w in enumerate(tokens.words)] == _old_tokens(text), text
        assert [tuple(t) for t in cognitive._tokens(text)] == _old_tokens(text)
        assert tokens.words == cognitive.tokenize(text)


def test_triggers_skip_only_words_that_cannot_fire():
    text = "Why does it crash? Use absolute paths, do not guess; the setup is broken. We use X. set up"
    triggers = cognitive._category_triggers(cognitive._Words(text))
    words = cognitive.tokenize(text)
    assert [words[i] for i in triggers["question"]] == ["why"]
    assert [words[i] for i in triggers["error"]] == ["crash", "broken"]
    assert [words[i] for i in triggers["rule"]] == ["use", "do"]  # "we use x" is mid-clause: a fact
    assert [words[i] for i in triggers["config"]] == ["setup", "set"]
    every_cue = (cognitive._ERROR_WORDS | cognitive._RULE_WORDS | cognitive._IMPERATIVE_WORDS
                 | cognitive._CONFIG_WORDS | {"why", "how", "set"})
    assert every_cue <= cognitive._FIRING_WORDS
