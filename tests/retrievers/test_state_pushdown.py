"""The state-based scores FalkorDB computes equal their ``scoring.state`` functions, on random inputs.

The project's rule: every formula lives once, in ``scoring/``; a Cypher
pushdown of a formula is tested equal to its ``scoring/`` function.  The
state-based retriever ranks and filters inside Cypher
(``storage.state_queries``); each test here writes a few hundred random
memories into one citizen's N1 graph, runs random states through
``StateBasedRetriever`` and checks two things:

* **scores**: for every row a state query returned (the raw Cypher rows,
  recorded around ``state_queries.state_plan``) and for every node the
  retriever returned, the number the store computed equals the ``scoring``
  function applied to that memory's stored fields and to the state;
* **filters**: a memory the Python formula puts above the mode's threshold
  (within the returned count) is never missing, and no returned memory is
  below it.

Precision: FalkorDB keeps 64-bit floats, but a reply's cells carry 15
significant digits (see ``storage.records``), so the raw Cypher numbers are
compared within 1e-9 relative (1e-12 absolute near zero), far looser than
what is lost.  Times are kept at one-second resolution; ``scoring.state.days_ago``
truncates to the second the same way, so ages are compared with the same
tolerance.

Random inputs cover emotion names in several spellings ("excited",
"excitement", "Excited", "Deep Focus" / "deep-focus"), two spellings of one
feeling in one memory (the rows the query only bounds), emotions absent,
zero intensities, energies at 0 and 1 and exactly at the tolerance band's
edges, creation times from a minute to 65 years ago (both branches of the
query's date arithmetic: the month table and days-from-civil), the three
resolution states, memories that are not current or quarantined, and goals
that differ by ``_`` / ``-`` / spaces / tabs / newlines / case, contain one
another, share words, or share concepts; goals written with outer whitespace
(``MemoryNode`` strips it: FalkorDB's range index on ``goal`` would not find
them), with inner tabs and newlines or outer ``_`` next to whitespace
(FalkorDB's ``trim`` strips spaces only), with accented, Turkish and Greek
letters ("café", "İstanbul", "ΟΔΟΣ": ``toLower`` is not ``str.lower``, see
``scoring.state.goal_lower``), and goals with nothing left once normalised
("___", "-"; as the state's goal: no goal at all).  A state's goal may carry
outer whitespace: the retriever strips it.  Resolution patterns are checked
exactly at the ``max_patterns`` cut, where a memory naming one feeling twice
(whose similarity the query only bounds) competes with others of its impact.
The last tests pin the cases down: the Cypher goal normalisation on every
cased letter, the partial goal score on goals made to break it, and the
concrete cut a bounded similarity used to get wrong.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from llama_consciousness.retrievers.state_based import StateBasedRetriever, StateRetrievalConfig
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode, StateBasedRetrieval
from llama_consciousness.schema._time import to_utc, utcnow
from llama_consciousness.schema.common import MAX_RESULTS_PER_LEVEL
from llama_consciousness.scoring import state as st
from llama_consciousness.scoring.emotions import canonical_emotion
from llama_consciousness.storage import records
from llama_consciousness.storage import state_queries as sq
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.storage.level_store import LevelGraphStore
from llama_consciousness.temporal import TemporalWindow

N_MEMORIES = 260
STATES_PER_TEST = 8
SMALL_K = 7
REL, ABS = 1e-9, 1e-12
AMBIGUOUS = 1e-9  # a memory this close to a threshold may fall on either side

# Spellings of a few feelings: canonical, synonym, capitalised; one unknown
# name written with different separators.
SPELLINGS: dict[str, tuple[str, ...]] = {
    "excitement": ("excited", "excitement", "Excited", "EXCITEMENT", "enthusiastic", "Thrilled"),
    "caution": ("cautious", "Caution", "wary", "careful"),
    "frustration": ("frustrated", "Frustration", "annoyed"),
    "uncertainty": ("uncertain", "Doubt", "unsure", "uncertainty"),
    "calm": ("calm", "Serene", "peaceful", "calmness"),
    "joy": ("joy", "Happy", "delighted"),
    "fear": ("fear", "scared", "Afraid"),
    "deep_focus": ("deep_focus", "Deep Focus", "deep-focus"),
}
FEELINGS = tuple(SPELLINGS)

PHRASES = (
    ("design", "retrieval", "architecture"),
    ("café", "über", "piñata"),
    ("İstanbul", "ΟΔΟΣ", "route"),
    ("bake", "sourdough", "bread"),
    ("plan", "the", "next", "phase"),
    ("write", "the", "quarterly", "report"),
    ("fix", "login", "bug"),
)
EXTRA_GOALS = ("designing the new retrieval layer", "retrieval", "architecture review", "ux", "db",
               "api", "the next phase", "sourdough", "design the retrieval architecture for N2",
               "report on bread", "plan a bug bash")
CONCEPTS = ("retrieval", "architecture", "design", "bread", "phase", "report", "login", "Retrieval", "bug", "route")
SEPARATORS = (" ", "_", "-", "__", " - ", "\t", "\n", "_\t", " \r\n")
# around a goal as written: the model strips whitespace, not "_" / "-" (nor "\x1c", which is no
# whitespace to pydantic but is to str.strip)
OUTER = (" ", "\t", "\n", "\r\n", "\xa0", "_", "-", "_\t", "\t_", "\x1c")
EMPTY_GOALS = ("___", "-", "_", " - ", "_-_", "\t_\n")  # nothing left once normalised


# -- random inputs -------------------------------------------------------------------


def _intensity(rng: random.Random) -> float:
    return rng.choice((0.0, 1.0, rng.random(), rng.random(), round(rng.random(), 1)))


def _spell(rng: random.Random, feeling: str) -> str:
    return rng.choice(SPELLINGS[feeling])


def _prototypes(rng: random.Random) -> list[dict[str, float]]:
    """A few canonical emotion profiles that memories and states are drawn around (so that some match)."""
    out = []
    for _ in range(4):
        feelings = rng.sample(FEELINGS, rng.randint(1, 3))
        out.append({f: rng.uniform(0.2, 1.0) for f in feelings})
    return out


def _emotions(rng: random.Random, protos: list[dict[str, float]], *,
              allow_none: bool = True) -> dict[str, float] | None:
    roll = rng.random()
    if allow_none and roll < 0.12:
        return None
    if allow_none and roll < 0.17:
        return {}
    out: dict[str, float] = {}
    if rng.random() < 0.55:  # near a prototype, in other spellings
        for feeling, value in rng.choice(protos).items():
            if rng.random() < 0.1:
                continue
            nearby = min(1.0, max(0.0, value + rng.gauss(0.0, 0.15)))
            value = rng.choice((value, nearby, 0.0 if rng.random() < 0.2 else value))
            out[_spell(rng, feeling)] = value
    for feeling in rng.sample(FEELINGS, rng.randint(0 if out else 1, 2)):
        out.setdefault(_spell(rng, feeling), _intensity(rng))
    if rng.random() < 0.15:  # one feeling named twice ("excited" and "excitement"): the query bounds these
        feeling = canonical_emotion(rng.choice(list(out)))
        if feeling in SPELLINGS:
            for name in rng.sample(SPELLINGS[feeling], len(SPELLINGS[feeling])):
                if name not in out:
                    out[name] = _intensity(rng)
                    break
    return out


def _goal_variant(rng: random.Random, words: tuple[str, ...]) -> str:
    """The words in random case, joined by spaces, ``_``, ``-``, tabs or newlines, sometimes with outer ones."""
    cased = [rng.choice((w, w.lower(), w.capitalize(), w.upper())) for w in words]
    if rng.random() < 0.3:
        goal = "".join(w + rng.choice(SEPARATORS) for w in cased[:-1]) + cased[-1]
    else:
        goal = rng.choice((" ", "_", "-")).join(cased)
    if rng.random() < 0.15:
        goal = rng.choice(("", *OUTER)) + goal + rng.choice(("", *OUTER))
    return goal


def _goal(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.6:
        words = rng.choice(PHRASES)
        if rng.random() < 0.3:  # a part of the phrase: one contains the other
            start = rng.randrange(len(words))
            words = words[start:rng.randint(start + 1, len(words))]
        return _goal_variant(rng, words)
    if roll < 0.9:
        return _goal_variant(rng, tuple(rng.choice(EXTRA_GOALS).split()))
    return _goal_variant(rng, tuple(rng.sample([w for p in PHRASES for w in p], rng.randint(1, 4))))


def _age(rng: random.Random) -> timedelta:
    """From a minute to 65 years, log-uniform, and a few ages on edges (30 days, the month table's reach)."""
    special = (timedelta(minutes=1), timedelta(days=29, hours=23), timedelta(days=30, hours=1),
               timedelta(days=365 * 10 + 200), timedelta(days=365 * 12 + 10), timedelta(days=365 * 65))
    if rng.random() < 0.1:
        return rng.choice(special) + timedelta(seconds=rng.randint(0, 59), microseconds=rng.randint(0, 999_999))
    seconds = math.exp(rng.uniform(math.log(60.0), math.log(65 * 365.25 * 86400.0)))
    return timedelta(seconds=seconds)


def _energy(rng: random.Random) -> float:
    roll = rng.random()
    if roll < 0.1:
        return 0.0
    if roll < 0.2:
        return 1.0
    if roll < 0.6:  # a grid: some land exactly on a tolerance band's edge
        return rng.randrange(21) / 20
    return rng.random()


def _memory_goal(rng: random.Random, goals: list[str]) -> str | None:
    roll = rng.random()
    if roll < 0.2:
        return None
    if roll < 0.24:
        return rng.choice((*EMPTY_GOALS, "  ", "\t"))
    return rng.choice(goals) if rng.random() < 0.6 else _goal(rng)


def _memory(rng: random.Random, citizen: str, i: int, now: datetime, protos: list[dict[str, float]],
            goals: list[str], resolved_share: float = 0.34) -> MemoryNode:
    created = now - _age(rng)
    kw: dict[str, Any] = {}
    roll = rng.random()
    if roll < 0.05:  # no longer valid
        kw["invalid_at"] = created + (now - created) / 2
    elif roll < 0.08:  # no longer believed
        kw["expired_at"] = created + (now - created) / 3
    elif roll < 0.11:
        kw["quarantined"] = True
    if rng.random() < 0.35:
        kw["discovery_energy"] = rng.choice((1.0, 0.0, rng.random(), rng.randrange(11) / 10))
    state = rng.random()
    resolution = ("resolved" if state < resolved_share
                  else "blocked" if state < (1 + resolved_share) / 2 else "in_progress")
    goal = _memory_goal(rng, goals)
    return MemoryNode(
        node_id=f"m{i:04d}", level="N1", citizen_id=citizen, name=f"memory {i}", confidence=0.6,
        energy=_energy(rng), emotion_vector=_emotions(rng, protos), created_at=created, valid_at=created,
        goal=goal, concepts=rng.sample(CONCEPTS, rng.choice((0, 0, 1, 2, 3))),
        resolution_state=resolution, extra={"goal_as_written": goal}, **kw,
    )


def _write_memories(memory, rng: random.Random, citizen: str, n: int = N_MEMORIES,
                    resolved_share: float = 0.34) -> tuple[dict[str, MemoryNode], list[dict[str, float]]]:
    now = utcnow()
    protos = _prototypes(rng)
    goals = [_goal(rng) for _ in range(12)]  # goals some memories share verbatim
    nodes = [_memory(rng, citizen, i, now, protos, goals, resolved_share) for i in range(n)]
    memory.upsert(nodes, embed=False)
    return {node.node_id: node for node in nodes}, protos


def _state(rng: random.Random, citizen: str, mode: str, protos: list[dict[str, float]], *,
           goal: str | None = None, emotions: bool = True, **kw: Any) -> StateBasedRetrieval:
    feel: dict[str, float] = {}
    if emotions:
        while not any(v > 0 for v in feel.values()):
            feel = _emotions(rng, protos, allow_none=False) or {}
        if rng.random() < 0.3:  # a zero intensity the state names
            feel.setdefault(_spell(rng, rng.choice(FEELINGS)), 0.0)
    kw.setdefault("temporal_scope", rng.choice(("recent", "all_time", "all_time")))
    if goal is not None and rng.random() < 0.2:  # the retriever strips the state's goal
        goal = rng.choice((" ", "\t", "  ")) + goal + rng.choice((" ", "\n", ""))
    return StateBasedRetrieval(citizen_id=citizen, query_mode=mode, current_goal=goal,
                               current_energy=rng.choice((0.0, 1.0, rng.randrange(11) / 10, rng.random())),
                               current_emotions=feel, generated_at=utcnow(), **kw)


# -- the raw Cypher rows -------------------------------------------------------------------


def _recorded(plan: Any, sink: list[tuple[Any, ...]]) -> Any:
    """``plan``, forwarding its queries, keeping every state row it receives (node, score or sim, goal, emo, days)."""
    result = None
    while True:
        try:
            step = plan.send(result)
        except StopIteration as stop:
            return stop.value
        result = yield step
        if isinstance(result, list):
            sink.extend(tuple(row) for row in result if len(row) == 5)


@pytest.fixture
def raw_rows(monkeypatch) -> Iterator[list[tuple[Any, ...]]]:
    """The rows every ``state_queries.state_plan`` run by the retriever received from FalkorDB."""
    rows: list[tuple[Any, ...]] = []
    original = sq.state_plan

    def recording(*args: Any, **kwargs: Any) -> Any:
        return _recorded(original(*args, **kwargs), rows)

    monkeypatch.setattr(sq, "state_plan", recording)
    yield rows


# -- the Python side -------------------------------------------------------------------------


def close(got: float, want: float) -> bool:
    return math.isclose(float(got), float(want), rel_tol=REL, abs_tol=ABS)


def _goal_of(state: StateBasedRetrieval) -> str | None:
    """The goal the retriever matches: stripped; none when nothing is left once normalised ("___")."""
    return st.effective_goal(state.current_goal)


def _has_emotions(state: StateBasedRetrieval) -> bool:
    return any(v > 0 for v in state.current_emotions.values())


def _distinct_names(node: MemoryNode) -> bool:
    """Whether no two of the memory's emotion names are one feeling (then the query's cosine is exact)."""
    names = [canonical_emotion(n) for n in (node.emotion_vector or {})]
    return len(set(names)) == len(names)


def _eligible(node: MemoryNode, state: StateBasedRetrieval, cfg: StateRetrievalConfig) -> bool:
    """Current, not quarantined, not an entity, within the temporal scope (the filter shared by every mode)."""
    if not MemoryFilter(TemporalWindow("current", now=state.generated_at)).accepts(node):
        return False
    if state.temporal_scope == "recent":
        since = to_utc(state.generated_at - timedelta(days=cfg.recent_days)).replace(microsecond=0)
        return to_utc(node.created_at).replace(microsecond=0) > since
    return True


def _goal_score(state: StateBasedRetrieval, cfg: StateRetrievalConfig, node: MemoryNode) -> float | None:
    goal = _goal_of(state)
    if goal is None:
        return None
    return st.goal_match_score(goal, node.goal, node.concepts, cfg.goal_match)


def expected(node: MemoryNode, state: StateBasedRetrieval, cfg: StateRetrievalConfig) -> tuple[bool, float, bool]:
    """(passes the mode's filter, score, ambiguous) by the ``scoring.state`` functions alone.

    ``ambiguous``: within AMBIGUOUS of a threshold, where either answer is right.
    """
    mode = state.query_mode
    if not _eligible(node, state, cfg):
        return False, 0.0, False
    sim = st.emotional_similarity(state.current_emotions, node.emotion_vector)
    if mode == "find_similar_state":
        score = st.similar_state_score(sim, state.current_energy, node.energy)
        within = abs(node.energy - state.current_energy) <= cfg.energy_tolerance + AMBIGUOUS
        near = abs(sim - cfg.similar_state_threshold) < AMBIGUOUS
        return within and sim > cfg.similar_state_threshold, score, within and near
    if mode == "find_what_i_was_doing":
        days = st.days_ago(node.created_at, state.generated_at)
        return node.resolution_state == "in_progress", st.doing_score(node.energy, days), False
    if mode == "find_related_unresolved":
        states = sq.UNRESOLVED if state.include_only_unresolved else (*sq.UNRESOLVED, "resolved")
        if node.resolution_state not in states:
            return False, 0.0, False
        goal = _goal_score(state, cfg, node)
        if goal is None:
            return True, st.unresolved_score(node.energy, None, sim), False
        return st.goal_matches(goal, cfg.goal_match), st.unresolved_score(node.energy, goal), False
    raise AssertionError(mode)


def _meta_id(n: Any) -> str:
    return n.node.metadata["node_id"]


# -- the checks ------------------------------------------------------------------------------


def check_raw_rows(rows: list[tuple[Any, ...]], written: dict[str, MemoryNode], state: StateBasedRetrieval,
                   cfg: StateRetrievalConfig, seen: Counter | None = None) -> int:
    """Every row a state query returned: its Cypher numbers equal the ``scoring`` functions; returns the count.

    ``seen`` counts what the rows covered (bounded cosines, date branches, kinds of goal match...).
    """
    mode = state.query_mode
    has_emotions = _has_emotions(state)
    seen = Counter() if seen is None else seen
    for props, score, goal_score, emo, last in rows:
        stored = records.node_from_props(props)
        node = written[stored.node_id]
        _count(seen, node, state, goal_score, emo)
        where = (mode, state.model_dump(mode="json"), node.model_dump(mode="json", exclude={"embedding"}))
        # what the store read back is what was written (to the 15 digits of a reply's cells); the
        # formulas below take the written values, which the store holds as 64-bit floats
        assert close(stored.energy, node.energy) and stored.goal == node.goal, where
        assert (stored.emotion_vector or {}).keys() == (node.emotion_vector or {}).keys(), where
        assert all(close(v, node.emotion_vector[k]) for k, v in (stored.emotion_vector or {}).items()), where
        assert _eligible(node, state, cfg), where
        sim = st.emotional_similarity(state.current_emotions, node.emotion_vector)
        if emo is not None:
            if _distinct_names(node):  # the exact cosine
                assert close(emo, sim), (where, "cypher cosine", emo, "python", sim)
            else:  # an upper bound of it, the exact value checked in Python
                assert float(emo) >= sim - ABS, (where, "cypher bound", emo, "python", sim)
        exact_emo = not has_emotions or _distinct_names(node)
        if mode == "find_similar_state":
            assert abs(node.energy - state.current_energy) <= cfg.energy_tolerance + AMBIGUOUS, where
            assert float(emo) > cfg.similar_state_threshold, where
            assert close(score, float(emo) * st.energy_proximity(state.current_energy, node.energy)), where
            if exact_emo:
                want = st.similar_state_score(sim, state.current_energy, node.energy)
                assert close(score, want), (where, "cypher", score, "python", want)
        elif mode == "find_what_i_was_doing":
            days = st.days_ago(node.created_at, state.generated_at)
            assert node.resolution_state == "in_progress", where
            assert close(last, days), (where, "cypher days", last, "python", days)
            want = st.doing_score(node.energy, days)
            assert close(score, want), (where, "cypher", score, "python", want)
        elif mode == "find_related_unresolved":
            states = sq.UNRESOLVED if state.include_only_unresolved else (*sq.UNRESOLVED, "resolved")
            assert node.resolution_state in states, where
            goal = _goal_score(state, cfg, node)
            if goal is None:
                assert goal_score is None, where
                assert close(emo, sim) or not exact_emo, where
                assert close(score, st.unresolved_score(node.energy, None, float(emo))), where
                if exact_emo:
                    want = st.unresolved_score(node.energy, None, sim)
                    assert close(score, want), (where, "cypher", score, "python", want)
            else:
                assert close(goal_score, goal), (where, "cypher goal match", goal_score, "python", goal)
                assert st.goal_matches(goal, cfg.goal_match), where
                want = st.unresolved_score(node.energy, goal)
                assert close(score, want), (where, "cypher", score, "python", want)
        elif mode == "find_resolution_patterns":
            assert node.resolution_state == "resolved", where
            goal = _goal_score(state, cfg, node)
            if goal is None:
                assert goal_score is None, where
            else:
                assert close(goal_score, goal), (where, "cypher goal match", goal_score, "python", goal)
                assert st.goal_matches(goal, cfg.goal_match), where
            if has_emotions:
                assert float(emo) > cfg.resolution_threshold, where
            else:
                assert emo is None, where
            # the pattern similarity of the row (``sim``, in the score column here)
            cypher_sim = st.pattern_similarity(None if goal_score is None else float(goal_score),
                                               None if emo is None else float(emo))
            assert close(score, cypher_sim), (where, "cypher", score, "python", cypher_sim)
            if exact_emo:
                want = st.pattern_similarity(goal, sim if has_emotions else None)
                assert close(score, want), (where, "cypher", score, "python", want)
        else:
            raise AssertionError(mode)
    return len(rows)


def _count(seen: Counter, node: MemoryNode, state: StateBasedRetrieval, goal_score: Any, emo: Any) -> None:
    seen["rows"] += 1
    if emo is not None and _has_emotions(state):
        seen["cosine exact" if _distinct_names(node) else "cosine bounded"] += 1
    if any(v == 0.0 for v in (node.emotion_vector or {}).values()):
        seen["zero intensity"] += 1
    if node.emotion_vector and any(canonical_emotion(n) != n for n in node.emotion_vector):
        seen["other spelling"] += 1
    if not node.emotion_vector:
        seen["no emotions"] += 1
    if node.energy in (0.0, 1.0):
        seen[f"energy {node.energy}"] += 1
    days = st.days_ago(node.created_at, state.generated_at)
    seen["days < 1" if days < 1 else "days < 3650 (month table)" if days < 3650 else
         "days > 4400 (civil)" if days > 4400 else "days between"] += 1
    written_goal = (node.extra or {}).get("goal_as_written")
    if written_goal is not None and written_goal != node.goal:
        seen["goal written with outer whitespace"] += 1
    if node.goal and any(c in node.goal for c in "\t\n\r"):
        seen["goal with inner tab or newline"] += 1
    if node.goal and not node.goal.isascii():
        seen["goal not ascii"] += 1
    if node.goal is not None and not st.normalise_goal(node.goal):
        seen["goal empty once normalised"] += 1
    if state.current_goal is not None and _goal_of(state) is None:
        seen["state goal empty once normalised"] += 1
    if goal_score is not None:
        goal = float(goal_score)
        if goal == 1.0:
            seen["goal same" if node.goal == _goal_of(state) else "goal same once normalised"] += 1
        else:
            seen["goal contains" if goal == st.PARTIAL_CONTAINS_SCORE else "goal shares terms"] += 1
            if any(c in st.goal_terms(_goal_of(state)) for c in node.concepts):
                seen["goal term in concepts"] += 1


def check_top_k(got: list[tuple[str, float]], written: dict[str, MemoryNode], state: StateBasedRetrieval,
                cfg: StateRetrievalConfig, k: int) -> None:
    """``got`` ((node id, score) as returned) is the top ``k`` of what the formula lets through, by score."""
    mode = state.query_mode
    wanted: dict[str, float] = {}
    maybe: set[str] = set()
    for node_id, node in written.items():
        passes, score, ambiguous = expected(node, state, cfg)
        if ambiguous:
            maybe.add(node_id)
        elif passes:
            wanted[node_id] = score
    ids = [i for i, _ in got]
    assert len(ids) == len(set(ids)), (mode, ids)
    for node_id, score in got:
        assert node_id in wanted or node_id in maybe, (mode, "returned below the threshold", node_id, score,
                                                       state.model_dump(mode="json"), written[node_id])
        if node_id in wanted:
            assert close(score, wanted[node_id]), (mode, node_id, "store", score, "python", wanted[node_id],
                                                   state.model_dump(mode="json"), written[node_id])
    scores = [s for _, s in got]
    assert all(a >= b - ABS for a, b in zip(scores, scores[1:])), (mode, got)  # best first
    missing = {i: s for i, s in wanted.items() if i not in set(ids)}
    if len(got) < k:
        assert not missing, (mode, "missing above the threshold", missing, state.model_dump(mode="json"))
    else:
        assert len(got) == k, (mode, len(got), k)
        floor = min(scores)
        better = {i: s for i, s in missing.items() if s > floor + REL * max(1.0, floor) + ABS}
        assert not better, (mode, "missing from the top k", better, "k-th score", floor)


def run(memory, state: StateBasedRetrieval, cfg: StateRetrievalConfig, written: dict[str, MemoryNode],
        raw_rows: list[tuple[Any, ...]], seen: Counter) -> list[tuple[str, float]]:
    """Retrieve ``state``, check the raw rows and the returned metadata; the returned (node id, score) pairs."""
    raw_rows.clear()
    nodes = StateBasedRetriever(memory, config=cfg).retrieve_state(state)
    check_raw_rows(raw_rows, written, state, cfg, seen)
    seen["returned"] += len(nodes)
    for n in nodes:  # the numbers reported with each memory are the scoring functions' too
        meta = n.node.metadata
        node = written[meta["node_id"]]
        assert meta["relevance_score"] == n.score and close(meta["energy"], node.energy)
        assert close(meta["days_ago"], st.days_ago(node.created_at, state.generated_at))
        assert close(meta["energy_proximity"], st.energy_proximity(state.current_energy, node.energy))
        if state.query_mode == "find_what_i_was_doing":
            assert close(meta["recency_weight"], st.recency_weight(st.days_ago(node.created_at, state.generated_at)))
        if _has_emotions(state):
            sim = st.emotional_similarity(state.current_emotions, node.emotion_vector)
            assert close(meta["emotion_similarity"], sim)
        goal = _goal_score(state, cfg, node)
        if goal is not None and meta["state_role"] == "state":
            assert close(meta["goal_match"], goal), (meta["node_id"], meta["goal_match"], goal)
    return [(_meta_id(n), n.score) for n in nodes]


def direct(memory, citizen: str, state: StateBasedRetrieval, cfg: StateRetrievalConfig, k: int,
           raw_rows: list[tuple[Any, ...]], **changes: Any) -> list[tuple[str, float]]:
    """The mode's plan run straight on the level store, with ``changes`` to its ``StateQuery`` (checked rows)."""
    plans = memory.plans("N1", citizen)
    q = replace(StateBasedRetriever(memory, config=cfg)._state_query(state, None), **changes)
    raw_rows.clear()
    hits = LevelGraphStore(memory.db, plans).run(sq.state_plan(plans, q, k))  # recorded: state_plan is patched
    return [(h.node.node_id, h.score) for h in hits]


def big(**kw: Any) -> StateRetrievalConfig:
    return StateRetrievalConfig(query_levels=("N1",), max_results_per_level=MAX_RESULTS_PER_LEVEL, **kw)


# -- the modes ----------------------------------------------------------------------------------


def test_find_similar_state_scores_and_filter_equal_scoring(memory, citizen, raw_rows) -> None:
    rng = random.Random(20240611)
    written, protos = _write_memories(memory, rng, citizen)
    seen: Counter = Counter()
    for _ in range(STATES_PER_TEST):
        state = _state(rng, citizen, "find_similar_state", protos)
        cfg = big(similar_state_threshold=rng.choice((0.5, 0.6, 0.7, 0.8)),
                  energy_tolerance=rng.choice((0.1, 0.2, 0.25, 0.5, 1.0)))
        for k in (cfg.max_results_per_level, SMALL_K):
            sized = cfg.model_copy(update={"max_results_per_level": k})
            check_top_k(run(memory, state, sized, written, raw_rows, seen), written, state, sized, k)
    assert seen["returned"] >= 40 and seen["rows"] >= seen["returned"] and seen["cosine bounded"] >= 1


def test_find_what_i_was_doing_scores_and_filter_equal_scoring(memory, citizen, raw_rows) -> None:
    rng = random.Random(977)
    written, protos = _write_memories(memory, rng, citizen)
    seen: Counter = Counter()
    for _ in range(STATES_PER_TEST):
        state = _state(rng, citizen, "find_what_i_was_doing", protos, emotions=rng.random() < 0.5)
        # k = 1 and 7: the top k read in energy bands (all time) or by the created_at index (recent)
        for k in (MAX_RESULTS_PER_LEVEL, 1, SMALL_K):
            cfg = big().model_copy(update={"max_results_per_level": k})
            check_top_k(run(memory, state, cfg, written, raw_rows, seen), written, state, cfg, k)
    assert seen["returned"] >= 50 and seen["rows"] >= seen["returned"]
    assert seen["days > 4400 (civil)"] >= 5 and seen["days < 3650 (month table)"] >= 5


@pytest.mark.parametrize("goal_match", ["exact", "partial"])
def test_find_related_unresolved_with_a_goal_scores_and_filter_equal_scoring(memory, citizen, raw_rows,
                                                                             goal_match) -> None:
    rng = random.Random(31337 if goal_match == "exact" else 4242)
    written, protos = _write_memories(memory, rng, citizen)
    goals = [n.goal for n in written.values() if n.goal]  # by frequency: the shared ones most
    seen: Counter = Counter()
    for i in range(STATES_PER_TEST):
        # most states name a goal some memories carry verbatim, the others a variant of one
        goal = rng.choice(goals) if i % 4 != 3 else _goal(rng)
        if i == 6:  # nothing left once normalised: the retriever runs without a goal
            goal = EMPTY_GOALS[0 if goal_match == "exact" else 3]
        state = _state(rng, citizen, "find_related_unresolved", protos, goal=goal,
                       include_only_unresolved=rng.random() < 0.7)
        cfg = big(goal_match=goal_match)
        got = run(memory, state, cfg, written, raw_rows, seen)
        check_top_k(got, written, state, cfg, cfg.max_results_per_level)
        small = cfg.model_copy(update={"max_results_per_level": SMALL_K})
        check_top_k(run(memory, state, small, written, raw_rows, seen), written, state, small, SMALL_K)
        if goal_match == "partial":
            # without the level's goal vocabulary (more than GOAL_VOCABULARY_MAX goals) the label is
            # scanned in energy bands and the goal score is the query's alone: the same answer
            for k in (cfg.max_results_per_level, SMALL_K):
                scanned = direct(memory, citizen, state, cfg, k, raw_rows, goal_vocabulary=None)
                check_raw_rows(raw_rows, written, state, cfg, seen)
                check_top_k(scanned, written, state, cfg, k)
                if k == cfg.max_results_per_level:
                    assert sorted(scanned) == sorted(got) or {i for i, _ in scanned} == {i for i, _ in got}
    assert seen["returned"] >= 20 and seen["rows"] >= seen["returned"]
    assert seen["state goal empty once normalised"] >= 1
    if goal_match == "partial":
        assert min(seen["goal same once normalised"], seen["goal contains"], seen["goal shares terms"],
                   seen["goal term in concepts"], seen["goal written with outer whitespace"],
                   seen["goal with inner tab or newline"], seen["goal not ascii"]) >= 1, seen


def test_find_related_unresolved_without_a_goal_scores_and_filter_equal_scoring(memory, citizen, raw_rows) -> None:
    rng = random.Random(8080)
    written, protos = _write_memories(memory, rng, citizen)
    seen: Counter = Counter()
    for i in range(STATES_PER_TEST):
        state = _state(rng, citizen, "find_related_unresolved", protos, emotions=i % 4 != 3,
                       include_only_unresolved=rng.random() < 0.7)
        for k in (MAX_RESULTS_PER_LEVEL, 1, SMALL_K):
            cfg = big().model_copy(update={"max_results_per_level": k})
            check_top_k(run(memory, state, cfg, written, raw_rows, seen), written, state, cfg, k)
    assert seen["returned"] >= 50 and seen["rows"] >= seen["returned"] and seen["cosine bounded"] >= 1


# -- resolution patterns: the goal match (and the cosine) in Cypher, the ranking by impact ------------


def _write_resolutions(memory, rng: random.Random, citizen: str,
                       written: dict[str, MemoryNode]) -> dict[str, list[tuple[str, float]]]:
    """A RESOLVED_BY link from most resolved memories to a resolution of their own (never a pattern itself)."""
    now = utcnow()
    resolutions, links, out = [], [], {}
    for node_id, node in written.items():
        if node.resolution_state != "resolved" or rng.random() < 0.25:
            continue
        res_id = f"r{node_id}"
        created = now - timedelta(minutes=1)
        resolutions.append(MemoryNode(node_id=res_id, level="N1", citizen_id=citizen, name=f"resolution of {node_id}",
                                      node_type="Action", energy=_energy(rng), confidence=0.6,
                                      resolution_state="in_progress", created_at=created, valid_at=created))
        energy = _energy(rng)
        links.append(ConsciousnessRelationship(source_id=node_id, target_id=res_id, relation_type="RESOLVED_BY",
                                               goal="get unstuck", mindstate="reflective", energy=energy,
                                               confidence=0.6, level="N1", citizen_id=citizen))
        out[node_id] = [(res_id, energy)]
    memory.upsert(resolutions, links, embed=False)
    return out


def _impact(node: MemoryNode) -> float:
    return node.discovery_energy if node.discovery_energy is not None else node.energy


def check_patterns(nodes: list[tuple[str, float, str, str | None]], written: dict[str, MemoryNode],
                   resolved_by: dict[str, list[tuple[str, float]]], state: StateBasedRetrieval,
                   cfg: StateRetrievalConfig, seen: Counter | None = None) -> int:
    """The past states returned are exactly the first ``max_patterns`` by impact, then similarity, then
    node id, each scored by ``pattern_similarity``; each is followed by its resolutions, scored pattern
    score x link energy."""
    seen = Counter() if seen is None else seen
    has_goal, has_emotions = _goal_of(state) is not None, _has_emotions(state)
    patterns = [(i, s) for i, s, role, _ in nodes if role == "state"]
    if not has_goal and not has_emotions:  # a goal with nothing to match on ("___") and no emotions
        assert nodes == [], nodes
        return 0
    wanted: dict[str, tuple[float, float]] = {}  # id -> (impact, similarity)
    maybe: set[str] = set()
    for node_id, node in written.items():
        if node_id not in resolved_by or node.resolution_state != "resolved" or not _eligible(node, state, cfg):
            continue
        goal = _goal_score(state, cfg, node)
        if goal is not None and not st.goal_matches(goal, cfg.goal_match):
            continue
        sim = st.emotional_similarity(state.current_emotions, node.emotion_vector) if has_emotions else None
        if sim is not None and abs(sim - cfg.resolution_threshold) < AMBIGUOUS:
            maybe.add(node_id)
            continue
        if sim is not None and sim <= cfg.resolution_threshold:
            continue
        wanted[node_id] = (_impact(node), st.pattern_similarity(goal if has_goal else None, sim))
    for node_id, score in patterns:
        assert node_id in wanted or node_id in maybe, ("returned below the threshold", node_id, written[node_id])
        if node_id in wanted:
            assert close(score, wanted[node_id][1]), (node_id, "store", score, "python", wanted[node_id][1])
    keys = [(_impact(written[i]), s) for i, s in patterns]
    for (a_imp, a_sim), (b_imp, b_sim) in zip(keys, keys[1:]):  # by impact, then similarity
        assert a_imp > b_imp or (a_imp == b_imp and a_sim >= b_sim - ABS), keys
    # Exactly the first max_patterns of the formula's order (a memory within AMBIGUOUS of the
    # threshold may or may not take a place): at the cut too, where a memory naming one feeling
    # twice, whose similarity the query only bounds, competes with others of the same impact.
    ranked = sorted(wanted, key=lambda i: (-wanted[i][0], -wanted[i][1], i))
    got = [i for i, _ in patterns if i not in maybe]
    assert len(patterns) == min(cfg.max_patterns, len(wanted) + len([i for i, _ in patterns if i in maybe]))
    for mine, want in zip(got, ranked):  # the same memory, or one tied with it (to the reply's digits)
        assert mine == want or (wanted[mine][0] == wanted[want][0] and close(wanted[mine][1], wanted[want][1])), (
            "pattern order", got, ranked[:len(got)], {i: wanted[i] for i in {*got, *ranked[:len(got)]}},
            state.model_dump(mode="json"))
    if len(patterns) == cfg.max_patterns and len(wanted) > len(got):
        seen["patterns cut"] += 1
        cut = wanted[ranked[len(got) - 1]][0]
        if any(wanted[i][0] == cut and not _distinct_names(written[i]) for i in ranked):
            seen["patterns cut among a bounded similarity"] += 1
    # each past state, then what resolved it (score: pattern score x the link's energy)
    current = None
    for node_id, score, role, pattern_id in nodes:
        if role == "state":
            current = (node_id, score)
        else:
            assert role == "resolution" and current is not None and pattern_id == current[0], (node_id, role)
            (res_id, energy), = resolved_by[current[0]]
            assert node_id == res_id and close(score, current[1] * energy), (node_id, score, current, energy)
    return len(patterns)


def test_find_resolution_patterns_goal_and_emotion_similarity_equal_scoring(memory, citizen, raw_rows) -> None:
    rng = random.Random(1999)
    written, protos = _write_memories(memory, rng, citizen, resolved_share=0.7)
    resolved_by = _write_resolutions(memory, rng, citizen, written)
    goals = [n.goal for n in written.values() if n.goal]  # by frequency: the shared ones most
    seen: Counter = Counter()
    found = 0
    for i in range(2 * STATES_PER_TEST):
        shape = i % 4  # goal and emotions, goal alone, emotions alone
        goal = None if shape == 3 else (rng.choice(goals) if i % 2 == 0 else _goal(rng))
        if i in (5, 10):  # a goal with nothing to match on: no goal (alone: nothing to compare with)
            goal = EMPTY_GOALS[i % len(EMPTY_GOALS)]
        state = _state(rng, citizen, "find_resolution_patterns", protos, goal=goal, emotions=shape != 1)
        for max_patterns in (100, 5):
            cfg = big(goal_match=rng.choice(("exact", "partial", "partial")), max_patterns=max_patterns,
                      resolution_threshold=rng.choice((0.3, 0.5, 0.6)), max_related=0)
            raw_rows.clear()
            nodes = StateBasedRetriever(memory, config=cfg).retrieve_state(state)
            check_raw_rows(raw_rows, written, state, cfg, seen)
            got = [(_meta_id(n), n.score, n.node.metadata["state_role"], n.node.metadata.get("pattern_id"))
                   for n in nodes]
            found += check_patterns(got, written, resolved_by, state, cfg, seen)
            for n in nodes:
                meta = n.node.metadata
                if meta["state_role"] == "state":
                    node = written[meta["node_id"]]
                    goal_score = _goal_score(state, cfg, node)
                    if goal_score is not None:
                        assert close(meta["goal_match"], goal_score)
    assert found >= 30 and seen["rows"] >= found and seen["cosine bounded"] >= 1
    assert seen["patterns cut among a bounded similarity"] >= 1 and seen["state goal empty once normalised"] >= 1, seen


# -- goals: the Cypher normalisation and partial score on every kind of goal the model holds ------------

# Goals as written: outer whitespace (the model strips it), inner tabs and newlines, separators next to
# whitespace (the Cypher's trim strips spaces only), letters whose lower case differs between FalkorDB's
# toLower and str.lower, and goals with nothing left once normalised.
TRICKY_GOALS = (
    "goal", "\tgoal\n", " lead space", "trail space ", "\tlead tab", "trail nl\n", "_\tgoal", "goal-\r\n_",
    "design\tretrieval\narchitecture", "Design__Retrieval - Architecture", "a\x0bb\x0cc", "two  spaces",
    "_\xa0goal", "\x1cgoal\x1c", "İstanbul route", "ISTANBUL_ROUTE", "ΟΔΟΣ route", "οδος route", "οδοσ-route",
    "Café über piñata", "CAFÉ_ÜBER_PIÑATA", "cafe", "___", "-", "_", " - ", "", "  ", None,
)


def _as_held(goal: str | None) -> str | None:
    """The goal a memory holds once validated."""
    return MemoryNode(node_id="g", level="N2", name="g", energy=0.5, confidence=0.5, goal=goal).goal


def test_goal_normalisation_in_cypher_equals_normalise_goal_on_every_cased_letter(fresh_graph) -> None:
    import sys
    import unicodedata

    graph = fresh_graph("N2").graph
    letters = [chr(c) for c in range(0x20, 0x20000) if unicodedata.category(chr(c)) in ("Lu", "Ll", "Lt")]
    goals = [g for g in {_as_held(g) for g in TRICKY_GOALS} if g is not None]
    # each letter alone and at a word's end (the final sigma), between separators and whitespace
    goals += letters + [f"x{c}" for c in letters] + [f"_\t{c}{c}\n-" for c in letters[::7]]
    params = {f"g_sp{i}": c for i, c in enumerate(st.GOAL_SPACES)}
    rows = graph.query(f"UNWIND $goals AS g WITH {{goal: g}} AS x RETURN x.goal, {sq._norm_goal('x')}",
                       {**params, "goals": goals}).result_set
    assert len(rows) == len(goals) and len(letters) > 2500
    differ = [(g, got, st.normalise_goal(g)) for g, got in rows if got != st.normalise_goal(g)]
    assert not differ, (f"Python's Unicode {unicodedata.unidata_version} ({sys.version_info[:2]})", differ[:20])


def test_partial_goal_score_in_cypher_equals_goal_match_score_on_tricky_goals(fresh_graph) -> None:
    graph = fresh_graph("N2").graph
    memories = [{"goal": _as_held(g), "concepts": concepts} for g in TRICKY_GOALS
                for concepts in ([], ["route", "design"])]
    currents = [g.strip() for g in TRICKY_GOALS if g and g.strip()] + ["route", "design retrieval", "istanbul"]
    cypher = (f"UNWIND $mems AS x WITH x, {sq._norm_goal('x')} AS x_ng "
              f"RETURN x.goal, x.concepts, {sq._partial_goal_score('x', 'x_ng')}")
    checked = 0
    for goal in currents:
        q = sq.StateQuery(mode="find_related_unresolved", now=utcnow(), energy=0.5, goal=goal)
        if q.goal is None:  # nothing left once normalised: no goal, never sent to the store
            assert st.normalise_goal(goal) == "" and all(
                st.goal_match_score(goal, m["goal"], m["concepts"]) == 0.0 for m in memories)
            continue
        rows = graph.query(cypher, {**sq._goal_params(q), "mems": memories}).result_set
        for mine, concepts, got in rows:
            want = st.goal_match_score(goal, mine, concepts)
            assert close(got, want), (goal, mine, concepts, "cypher", got, "python", want)
            checked += 1
    assert checked >= 500
    # the examples: tabs and newlines read as spaces on both sides; "_" no longer the empty goal's match
    assert st.goal_match_score("goal", "_\tgoal") == 1.0 and st.goal_match_score("goal", "\tgoal\n") == 1.0
    assert st.goal_match_score("istanbul route", "İstanbul route") == 1.0
    assert st.goal_match_score("οδοσ route", "ΟΔΟΣ route") == 1.0  # toLower has no final sigma


def test_resolution_patterns_cut_at_max_patterns_by_the_exact_similarity(memory, citizen, raw_rows) -> None:
    # b_dup names joy twice (Happy is joy): the query's similarity is a bound (1.0), its exact one 0.8137,
    # below c_better's 0.9487; all three have impact 0.5, so the bound alone would keep b_dup at the cut
    created = utcnow() - timedelta(days=1)
    feelings = {"a_exact": {"joy": 1.0}, "b_dup": {"joy": 0.7, "Happy": 0.7, "fear": 0.5},
                "c_better": {"joy": 0.9, "fear": 0.3}}
    nodes, links = [], []
    for node_id, emotions in feelings.items():
        for i, kind in ((node_id, "Memory"), (f"{node_id}_fix", "Action")):
            nodes.append(MemoryNode(node_id=i, level="N1", citizen_id=citizen, name=i, node_type=kind, energy=0.5,
                                    confidence=0.6, resolution_state="resolved", created_at=created,
                                    valid_at=created, emotion_vector=emotions if i == node_id else None))
        links.append(ConsciousnessRelationship(source_id=node_id, target_id=f"{node_id}_fix",
                                               relation_type="RESOLVED_BY", goal="get unstuck", mindstate="calm",
                                               energy=0.5, confidence=0.6, level="N1", citizen_id=citizen))
    memory.upsert(nodes, links, embed=False)
    now = StateBasedRetrieval(citizen_id=citizen, query_mode="find_resolution_patterns", current_energy=0.5,
                              current_emotions={"joy": 1.0}, generated_at=utcnow())
    assert st.emotional_similarity(now.current_emotions, feelings["b_dup"]) == pytest.approx(0.8137, abs=1e-4)
    assert st.emotional_similarity(now.current_emotions, feelings["c_better"]) == pytest.approx(0.9487, abs=1e-4)
    cfg = big(max_patterns=2, max_related=0)
    got = StateBasedRetriever(memory, config=cfg).retrieve_state(now)
    assert [_meta_id(n) for n in got] == ["a_exact", "a_exact_fix", "c_better", "c_better_fix"]
    c_sim = st.emotional_similarity(now.current_emotions, feelings["c_better"])
    assert [n.score for n in got] == pytest.approx([1.0, 0.5, c_sim, c_sim * 0.5], rel=REL)
    bounds = {records.node_from_props(props).node_id: sim for props, sim, *_ in raw_rows}
    assert bounds["b_dup"] == 1.0  # the query's order put b_dup second: more rows were fetched
    written = {n.node_id: n for n in nodes}
    check_patterns([(_meta_id(n), n.score, n.node.metadata["state_role"], n.node.metadata.get("pattern_id"))
                    for n in got], written, {i: [(f"{i}_fix", 0.5)] for i in feelings}, now, cfg)
