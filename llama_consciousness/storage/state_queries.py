"""State-based retrieval (decision #8) on one level graph, as query plans; filters and ranking in the queries.

The four modes and their scores are ``scoring.state``'s, computed in Cypher.  FalkorDB has no similarity
procedures, so the emotional cosine is arithmetic against one map parameter; a memory naming one feeling
twice counts it once, which would triple the query's cost, so those rare rows get an upper bound in the
query and their exact cosine in Python (:func:`_verified`).  Indexes narrow the scans: ``emotion_canonical``
to memories carrying one of :func:`necessary_emotions`, ``goal``/``concepts`` to the goals that can match
(:func:`matching_goals`).  Values only travel as parameters (generated names: ``$s_0``, ``$g_t0``...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode
from llama_consciousness.scoring.state import (
    GOAL_SPACES,
    MIN_PARTIAL_SCORE,
    PARTIAL_CONTAINS_SCORE,
    PARTIAL_TERMS_WEIGHT,
    RECENCY_HORIZON_DAYS,
    effective_goal,
    emotional_similarity,
    goal_match_score,
    goal_terms,
    normalise_goal,
    pattern_similarity,
    similar_state_score,
    unresolved_score,
)
from llama_consciousness.storage import records
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.storage.level_store import (EDGE_TYPE, MAX_FETCH, NODE_LABEL, LevelPlans, Plan, Query,
                                                     create_missing, indexed, range_index)
from llama_consciousness.temporal import TemporalWindow, cypher_predicate, cypher_time

UNRESOLVED = ("blocked", "in_progress")
RESOLUTION_DETAIL_TYPES = ("Decision", "Action", "Learning")
STATE_INDEXES = ("emotion_canonical", "concepts")
VERIFY_EXTRA = 16
_EPS = 1e-9


_NODE_N = records.node_projection("n")
_NODE_C = records.node_projection("c")
_EDGE_R = records.edge_projection("r")
_EDGE_LIST = f"[r IN relationships(p) | {_EDGE_R}]"


# -- what a state asks for ---------------------------------------------------------


@dataclass(frozen=True)
class StateQuery:
    """A state-based request resolved into query inputs: ``emotions`` are canonical names -> non-zero
    intensities; a goal with nothing left once normalised ("___") becomes None."""

    mode: str
    now: datetime
    energy: float
    emotions: dict[str, float] = field(default_factory=dict)
    emotion_norm: float = 0.0
    goal: str | None = None
    goal_match: str = "partial"
    goal_embedding: list[float] | None = None
    goal_vocabulary: tuple[str, ...] | None = None
    semantic_threshold: float = 0.5
    semantic_fetch: int = 200
    recent_days: int | None = 30
    unresolved_only: bool = True
    emotion_threshold: float = 0.7
    pattern_threshold: float = 0.6
    energy_tolerance: float = 0.2
    detail_types: tuple[str, ...] = RESOLUTION_DETAIL_TYPES
    max_related: int = 3

    def __post_init__(self) -> None:
        goal = effective_goal(self.goal)
        if goal != self.goal:
            object.__setattr__(self, "goal", goal)
            if goal is None:
                object.__setattr__(self, "goal_embedding", None)

    @property
    def window(self) -> TemporalWindow:
        return TemporalWindow("current", now=self.now)

    @property
    def since(self) -> datetime | None:
        return None if self.recent_days is None else self.now - timedelta(days=self.recent_days)


@dataclass(frozen=True)
class StateHit:
    """A memory that fits the state: ``role`` is ``state``, ``resolution`` (what RESOLVED_BY the past state
    ``pattern_id``) or ``related`` (near a resolution); ``path`` is the links from the past state."""

    node: MemoryNode
    score: float
    role: str = "state"
    goal_match: float | None = None
    emotion_similarity: float | None = None
    days_ago: float | None = None
    pattern_id: str | None = None
    resolution_id: str | None = None
    depth: int = 0
    path: list[ConsciousnessRelationship] = field(default_factory=list)


# -- Cypher fragments (fixed text; values are parameters) --------------------------


def _norm_goal(var: str) -> str:
    """``scoring.state.normalise_goal`` in Cypher (``trim`` strips spaces only, hence the replacements)."""
    text = f"toLower(coalesce({var}.goal, ''))"
    for i in range(len(GOAL_SPACES)):
        text = f"replace({text}, $g_sp{i}, ' ')"
    return f"trim({text})"


def _partial_goal_score(var: str, ng: str) -> str:
    """``goal_match_score(strategy='partial')`` in Cypher, ``ng`` the normalised memory goal."""
    return (
        f"CASE WHEN {var}.goal = $g_goal OR {ng} = $g_norm THEN 1.0 "
        f"WHEN size({ng}) >= 3 AND ({ng} CONTAINS $g_norm OR $g_norm CONTAINS {ng}) THEN {PARTIAL_CONTAINS_SCORE} "
        f"ELSE {PARTIAL_TERMS_WEIGHT} * size([t IN $g_terms WHERE {ng} CONTAINS t "
        f"OR t IN coalesce({var}.concepts, [])]) / $g_nterms END"
    )


def necessary_emotions(emotions: dict[str, float], threshold: float) -> list[str]:
    """Emotions of which a memory must carry one for its cosine with ``emotions`` to exceed ``threshold``.

    The cosine is at most the norm of the state's unit vector restricted to
    the shared emotions (Cauchy-Schwarz): sharing only emotions whose squared
    weights sum to at most threshold^2 cannot pass.
    """
    total = sum(v * v for v in emotions.values())
    if total <= 0.0:
        return []
    out: list[str] = []
    left = 1.0
    for name, value in sorted(emotions.items(), key=lambda kv: (-kv[1], kv[0])):
        if left <= threshold * threshold - _EPS:  # margin: when in doubt, one emotion more
            break
        out.append(name)
        left -= value * value / total
    return sorted(out)


def _shares_emotion(names: Sequence[str], var: str = "n") -> tuple[str, dict[str, Any]]:
    """The memory carries at least one of ``names`` (one ``IN`` each, so the array index answers)."""
    text = "(" + " OR ".join(f"$s_{i} IN {var}.emotion_canonical" for i in range(len(names))) + ")"
    return text, {f"s_{i}": name for i, name in enumerate(names)}


def _emotion_bound(var: str = "n", out: str = "emo") -> str:
    """WITH clauses computing ``out``: the cosine of ``var``'s emotions with ``$e_vec``, exact when the names
    are all different, else an upper bound (cosine x sqrt(number of names), capped at 1)."""
    ec, ev, dot, nn = f"{var}_ec", f"{var}_ev", f"{var}_dot", f"{var}_nn"
    bound = f"{dot} * sqrt(toFloat(size({ec})))"
    return (
        f"WITH *, coalesce({var}.emotion_canonical, []) AS {ec}, coalesce({var}.emotion_values, []) AS {ev} "
        f"WITH *, reduce(d = 0.0, i IN range(0, size({ec}) - 1) | d + coalesce($e_vec[{ec}[i]], 0.0) * {ev}[i]) "
        f"AS {dot}, sqrt(reduce(s = 0.0, v IN {ev} | s + v * v)) AS {nn} "
        f"WITH *, CASE WHEN {nn} = 0.0 OR $e_norm = 0.0 THEN 0.0 "
        f"WHEN size(list.dedup({ec})) = size({ec}) THEN {dot} / ({nn} * $e_norm) "
        f"WHEN {bound} >= {nn} * $e_norm THEN 1.0 ELSE {bound} / ({nn} * $e_norm) END AS {out} "
    )


def _anchor_filter(q: StateQuery, **extra: Any) -> tuple[str, dict[str, Any]]:
    """``n`` current, not quarantined, not an entity hub, within the temporal scope: the predicate, and its
    parameters with ``extra``."""
    pred = MemoryFilter(q.window).cypher("n", "a_")
    text, params = pred.text, {**pred.params, **extra}
    if q.since is not None:
        text += " AND n.created_at > $a_since"
        params["a_since"] = cypher_time(q.since)
    return text, params


def _goal_params(q: StateQuery) -> dict[str, Any]:
    terms = goal_terms(q.goal)
    params = {"g_goal": q.goal, "g_norm": normalise_goal(q.goal), "g_terms": terms, "g_nterms": max(1, len(terms)),
              **{f"g_t{i}": t for i, t in enumerate(terms)}, **{f"g_sp{i}": c for i, c in enumerate(GOAL_SPACES)}}
    listed = matching_goals(q)
    if listed is not None:
        params["g_list"] = listed
    return params


def _emotion_params(q: StateQuery) -> dict[str, Any]:
    return {"e_vec": dict(q.emotions), "e_norm": float(q.emotion_norm)}


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _hits(rows: Sequence[Sequence[Any]]) -> list[StateHit]:
    """Rows of (node, score, goal match, emotional similarity, days) as hits."""
    return [StateHit(records.node_from_props(props), float(score), goal_match=_float(goal),
                     emotion_similarity=_float(emo), days_ago=_float(days)) for props, score, goal, emo, days in rows]


def _top(hits: Sequence[StateHit], k: int) -> list[StateHit]:
    """The best k, each memory once at its best score."""
    best: dict[str, StateHit] = {}
    for hit in hits:
        if hit.node.node_id not in best or hit.score > best[hit.node.node_id].score:
            best[hit.node.node_id] = hit
    return sorted(best.values(), key=lambda h: (-h.score, h.node.node_id))[:k]


# -- sources ----------------------------------------------------------------

Head = Callable[[str], str]


def matching_goals(q: StateQuery) -> list[str] | None:
    """The goals of ``q.goal_vocabulary`` that match the current goal partially on their own (None without one).

    A memory matches partially through its goal or its concepts, so "goal in
    this list, or a goal term in the concepts" finds every partial match,
    both halves through range indexes (``goal``, ``concepts``).
    """
    if q.goal_vocabulary is None or q.goal is None:
        return None
    return [g for g in q.goal_vocabulary if goal_match_score(q.goal, g) >= MIN_PARTIAL_SCORE - _EPS]


def _goal_stage(q: StateQuery, var: str = "n") -> tuple[str, str]:
    """(extra WHERE, WITH computing ``goal_score``) of exact and partial matching, and of no goal."""
    if q.goal is None:
        return "", "WITH *, null AS goal_score "
    if q.goal_match == "exact":
        return f" AND {var}.goal = $g_goal", "WITH *, 1.0 AS goal_score "
    ng = f"{var}_ng"
    narrow = ""
    if q.goal_vocabulary is not None:
        terms = goal_terms(q.goal)
        narrow = " AND (" + " OR ".join([f"{var}.goal IN $g_list"] + [f"$g_t{i} IN {var}.concepts"
                                                                         for i in range(len(terms))]) + ")"
    return narrow, (f"WITH *, {_norm_goal(var)} AS {ng} WITH *, {_partial_goal_score(var, ng)} AS goal_score "
                    f"WITH * WHERE goal_score >= {MIN_PARTIAL_SCORE - _EPS} ")


def _sources(q: StateQuery, candidates: Sequence[tuple[str, float]] | None
             ) -> list[tuple[Head, str, dict[str, Any]]]:
    """Where the memories of a query come from: (head given the filters, goal WITH, params).

    Exact, partial and no goal scan the label, range indexes bounding the
    scan.  A semantic goal has two sources, merged by the caller: the exact
    goal, and the memories nearest to the embedded goal (vector index, or
    ``candidates`` from Postgres).
    """
    if q.goal is None or q.goal_match != "semantic":
        extra, goal_with = _goal_stage(q)
        return [(lambda f: f"MATCH (n:{NODE_LABEL}) WHERE {f}{extra} WITH n, null AS v_sim ", goal_with, {})]
    goal_with = "WITH *, CASE WHEN n.goal = $g_goal THEN 1.0 ELSE v_sim END AS goal_score "
    out: list[tuple[Head, str, dict[str, Any]]] = [
        (lambda f: f"MATCH (n:{NODE_LABEL}) WHERE n.goal = $g_goal AND {f} WITH n, 1.0 AS v_sim ",
         goal_with, {})]
    if candidates is not None:
        out.append((lambda f: (f"UNWIND $v_cands AS cand MATCH (n:{NODE_LABEL} {{node_id: cand.id}}) "
                               f"WHERE cand.sim >= $v_min AND {f} WITH n, cand.sim AS v_sim "),
                    goal_with, {"v_cands": [{"id": i, "sim": float(s)} for i, s in candidates]}))
    elif q.goal_embedding is not None:
        out.append((lambda f: (f"CALL db.idx.vector.queryNodes('{NODE_LABEL}', 'embedding', $v_fetch, "
                               "vecf32($v_q)) YIELD node AS n, score AS v_dist "
                               f"WHERE 1.0 - v_dist >= $v_min AND {f} WITH n, 1.0 - v_dist AS v_sim "),
                    goal_with, {"v_q": records.wire_vector(q.goal_embedding),
                                "v_fetch": int(min(max(q.semantic_fetch, 1), MAX_FETCH))}))
    return out


Rescore = Callable[[StateHit], "StateHit | None"]


def _refetch(cypher: str, params: dict[str, Any], k: int, exact: Callable[[list[Any]], list[StateHit]],
             row_bound: Callable[[Any], tuple], hit_key: Callable[[StateHit], tuple]) -> Plan:
    """``exact(rows)`` of a query returning rows by an upper bound DESC under ``LIMIT $lim``: k rows first
    (usually exact already), more until k exact hits reach the bound of the last row fetched, so that a
    row left behind can do no better."""
    limit = int(k)
    while True:
        rows = yield Query(cypher, {**params, "lim": limit}, read_only=True)
        hits = exact(rows)
        if len(rows) < limit or limit >= MAX_FETCH:
            return hits
        floor = row_bound(rows[-1])
        if sum(1 for hit in hits if hit_key(hit) >= floor) >= k:
            return hits
        limit = min(max(limit * 4, limit + VERIFY_EXTRA), MAX_FETCH)


def _verified(cypher: str, params: dict[str, Any], k: int, rescore: Rescore | None) -> Plan:
    """The top k of a query returning hits by ``score`` DESC under ``LIMIT $lim``; with ``rescore`` the
    scores are upper bounds (:func:`_emotion_bound`), ``rescore`` the exact hit (None: below the threshold)."""
    if rescore is None:
        return _hits((yield Query(cypher, {**params, "lim": int(k)}, read_only=True)))
    exact = yield from _refetch(cypher, params, k, lambda rows: [h for h in map(rescore, _hits(rows)) if h],
                                lambda row: (float(row[1]),), lambda hit: (hit.score + _EPS,))
    return _top(exact, k)


# -- the modes --------------------------------------------------------------------


def related_unresolved(plans: LevelPlans, q: StateQuery, k: int,
                       candidates: Sequence[tuple[str, float]] | None = None) -> Plan:
    """Unfinished business about the current goal, by ``energy * goal match``.

    Without a goal every unresolved memory qualifies, by ``energy * (0.5 +
    0.5 * emotional similarity)``.  ``candidates`` (node id, cosine) replace
    the vector index for semantic goals on levels whose vectors live in Postgres.
    """
    if k <= 0:
        return []
    where, params = _anchor_filter(q, **_goal_params(q), **_emotion_params(q), v_min=float(q.semantic_threshold),
                                   states=list(UNRESOLVED) if q.unresolved_only else [*UNRESOLVED, "resolved"])
    rescore: Rescore | None = None
    if q.goal is None:
        score = (_emotion_bound("n") if q.emotions else "WITH *, 0.0 AS emo ") + \
            "WITH *, n.energy * (0.5 + 0.5 * emo) AS score "
        emo = "emo"
        if q.emotions:
            def rescore(hit: StateHit) -> StateHit:
                sim = emotional_similarity(q.emotions, hit.node.emotion_vector)
                return replace(hit, score=unresolved_score(hit.node.energy, None, sim), emotion_similarity=sim)
    else:
        score, emo = "WITH *, n.energy * goal_score AS score ", "null"
    hits: list[StateHit] = []
    for head, goal_with, extra in _sources(q, candidates):
        cypher = (head(f"n.resolution_state IN $states AND {where}") + f"{goal_with}{score}"
                  f"WITH n, score, goal_score, {emo} AS emo ORDER BY score DESC, n.node_id LIMIT $lim "
                  f"RETURN {_NODE_N}, score, goal_score, emo, null AS days")
        hits += yield from _verified(cypher, {**params, **extra}, k, rescore)
    return _top(hits, k)


def similar_state(plans: LevelPlans, q: StateQuery, k: int) -> Plan:
    """Past moments that felt like now: cosine above the threshold, energy within the tolerance.

    One query: the energy index bounds the band, the emotion index the
    memories that can pass (:func:`necessary_emotions`).
    """
    if k <= 0 or not q.emotions:
        return []
    shares, shares_params = _shares_emotion(necessary_emotions(q.emotions, q.emotion_threshold))
    where, params = _anchor_filter(q, **_emotion_params(q), **shares_params,
                                   e_lo=float(q.energy - q.energy_tolerance) - _EPS,
                                   e_hi=float(q.energy + q.energy_tolerance) + _EPS, e_now=float(q.energy),
                                   e_min=float(q.emotion_threshold))
    cypher = (
        f"MATCH (n:{NODE_LABEL}) WHERE n.energy >= $e_lo AND n.energy <= $e_hi AND {shares} AND {where} "
        + _emotion_bound("n")
        + "WITH n, emo WHERE emo > $e_min "
        "WITH n, emo, emo * (1.0 - abs(n.energy - $e_now)) AS score ORDER BY score DESC, n.node_id LIMIT $lim "
        f"RETURN {_NODE_N}, score, null AS goal_score, emo, null AS days"
    )

    def rescore(hit: StateHit) -> StateHit | None:
        sim = emotional_similarity(q.emotions, hit.node.emotion_vector)
        if sim <= q.emotion_threshold:
            return None
        return replace(hit, score=similar_state_score(sim, q.energy, hit.node.energy), emotion_similarity=sim)

    return (yield from _verified(cypher, params, k, rescore))


def what_i_was_doing(plans: LevelPlans, q: StateQuery, k: int) -> Plan:
    """Work in progress, by ``energy / (1 + days / 30)`` (the spec's recency weight).

    A memory created after "now" (a state dated in the past) counts as created now.
    """
    if k <= 0:
        return []
    where, params = _anchor_filter(q, now_s=cypher_time(q.now), horizon=float(RECENCY_HORIZON_DAYS))
    cypher = (
        f"MATCH (n:{NODE_LABEL}) WHERE n.resolution_state = 'in_progress' AND {where} "
        "WITH n, ($now_s - n.created_at) / 86400.0 AS days "
        "WITH n, CASE WHEN days < 0.0 THEN 0.0 ELSE days END AS days "
        "WITH n, days, n.energy / (1.0 + days / $horizon) AS score ORDER BY score DESC, n.node_id LIMIT $lim "
        f"RETURN {_NODE_N}, score, null AS goal_score, null AS emo, days"
    )
    return (yield from _verified(cypher, params, k, None))


def _impact(node: MemoryNode) -> float:
    """What orders past states in ``find_resolution_patterns``: their discovery energy, else their energy."""
    return node.discovery_energy if node.discovery_energy is not None else node.energy


def resolution_patterns(plans: LevelPlans, q: StateQuery, k: int, max_patterns: int = 5,
                        candidates: Sequence[tuple[str, float]] | None = None) -> Plan:
    """How similar situations were resolved: past states, their resolutions, and what surrounds those.

    Hits in pattern order, at most ``k``: each past state, what RESOLVED_BY it,
    then the Decision / Action / Learning memories within two links of the
    resolution (not through the past state: that is the blockage).
    """
    if k <= 0 or max_patterns <= 0 or (q.goal is None and not q.emotions):
        return []
    res_pred = MemoryFilter(q.window).cypher("res", "rs_")
    link = cypher_predicate(q.window, "r", "rl_")
    where, params = _anchor_filter(q, **_goal_params(q), **_emotion_params(q), **res_pred.params, **link.params,
                                   p_min=float(q.pattern_threshold), v_min=float(q.semantic_threshold))
    if q.emotions:
        shares, shares_params = _shares_emotion(necessary_emotions(q.emotions, q.pattern_threshold))
        params.update(shares_params)
        emo_where = f" AND {shares}"
        emo_with = _emotion_bound("n") + "WITH * WHERE emo > $p_min "
    else:
        emo_where, emo_with = "", "WITH *, null AS emo "
    anchors: dict[str, tuple[StateHit, list[Any]]] = {}

    def exact(rows: list[Any]) -> list[StateHit]:
        """The rows' past states with their exact similarity (the query's may be a bound); into ``anchors``."""
        kept: list[StateHit] = []
        for props, sim, goal_score, emo, resolutions in rows:
            node = records.node_from_props(props)
            emotion = emotional_similarity(q.emotions, node.emotion_vector) if q.emotions else None
            if emotion is not None and emotion <= q.pattern_threshold:
                continue
            goal = _float(goal_score)
            kept.append(hit := StateHit(node, pattern_similarity(goal, emotion), "state", goal, emotion))
            if node.node_id not in anchors or hit.score > anchors[node.node_id][0].score:
                anchors[node.node_id] = (hit, [(records.node_from_props(res), records.edge_from_props(rel))
                                               for res, rel in resolutions])
        return kept

    for head, goal_with, extra in _sources(q, candidates):
        cypher = (
            head(f"n.resolution_state = 'resolved'{emo_where} AND {where}") + f"{goal_with}{emo_with}"
            "WITH n, goal_score, emo, coalesce(goal_score, 1.0) * coalesce(emo, 1.0) AS sim "
            f"MATCH (n)-[r:{EDGE_TYPE}]->(res:{NODE_LABEL}) "
            f"WHERE r.relation_type = 'RESOLVED_BY' AND {link.text} AND {res_pred.text} "
            "WITH n, goal_score, emo, sim, collect(res) AS ress, collect(r) AS rs "
            "WITH n, goal_score, emo, sim, ress, rs, coalesce(n.discovery_energy, n.energy) AS impact "
            "ORDER BY impact DESC, sim DESC, n.node_id LIMIT $lim "
            f"RETURN {_NODE_N}, sim, goal_score, emo, "
            "[i IN range(0, size(ress) - 1) | "
            f"[{records.node_projection('ress[i]')}, {records.edge_projection('rs[i]')}]]"
        )
        # rows by (impact, similarity bound)
        yield from _refetch(cypher, {**params, **extra}, max_patterns, exact,
                            lambda row: (_impact(records.node_from_props(row[0])), float(row[1])),
                            lambda hit: (_impact(hit.node), hit.score + _EPS))

    order = sorted(anchors.values(),
                   key=lambda a: (-_impact(a[0].node), -a[0].score, a[0].node.node_id))[:max_patterns]
    pairs = [{"pb": hit.node.node_id, "res": res.node_id} for hit, resolutions in order for res, _ in resolutions]
    # Past states and their resolutions come first; related memories share what is left of k.
    slots = max(0, k - len(order) - len(pairs))
    for i, pair in enumerate(pairs):
        base = min(q.max_related, slots // len(pairs))
        pair["per"] = base + (1 if base < q.max_related and i < slots - base * len(pairs) else 0)
    pairs = [pair for pair in pairs if pair["per"] > 0]
    related: dict[tuple[str, str], list[Any]] = {}
    if pairs and q.detail_types:
        reach = MemoryFilter(q.window).cypher("c", "rc_")
        hop = MemoryFilter(q.window, include_entities=True).cypher("x", "rx_", entities=True)
        walk = cypher_predicate(q.window, "r", "rw_")
        walk_clause = "" if walk.text == "true" else f" AND all(r IN relationships(p) WHERE {walk.text})"
        rows = yield Query(
            "UNWIND $pairs AS pair "
            f"MATCH (res:{NODE_LABEL} {{node_id: pair.res}}) "
            # The filters on c come in a WITH: inline, the planner would start from
            # every Decision / Action / Learning (node_type index) and walk to res.
            # A path form, not (a)-[r]-(b): see channels.links_of_ids.
            f"MATCH p = (res)-[:{EDGE_TYPE}*1..2]-(c:{NODE_LABEL}) "
            f"WITH pair, p, c WHERE c.node_type IN $types AND {reach.text} AND c.node_id <> pair.pb "
            "AND c.node_id <> pair.res "
            f"AND none(x IN nodes(p) WHERE x.node_id = pair.pb){walk_clause} "
            f"AND all(x IN nodes(p) WHERE {hop.text}) "
            "WITH pair, c, p, reduce(e = 0.0, r IN relationships(p) | e + coalesce(r.energy, 0.0)) / length(p) AS strength "
            "ORDER BY strength DESC, length(p) ASC, c.node_id "
            "WITH pair, collect([c, p, strength])[0..pair.per] AS best "
            "UNWIND best AS b WITH pair, b[0] AS c, b[1] AS p, b[2] AS strength "
            f"RETURN pair.pb, pair.res, {_NODE_C}, strength, length(p), {_EDGE_LIST}",
            {**reach.params, **hop.params, **walk.params, "pairs": pairs, "types": list(q.detail_types)},
            read_only=True,
        )
        for pb, res, props, strength, depth, path in rows:
            related.setdefault((pb, res), []).append(
                (records.node_from_props(props), float(strength), int(depth), path))
    out: list[StateHit] = []
    for hit, resolutions in order:
        out.append(hit)
        for res, edge in sorted(resolutions, key=lambda pair: (-pair[1].energy, pair[0].node_id)):
            out.append(StateHit(res, hit.score * edge.energy, "resolution", pattern_id=hit.node.node_id,
                                resolution_id=res.node_id, depth=1, path=[edge]))
            found = sorted(related.get((hit.node.node_id, res.node_id), []),
                           key=lambda x: (-x[1], x[2], x[0].node_id))
            for node, strength, depth, path in found:
                out.append(StateHit(node, hit.score * strength, "related", pattern_id=hit.node.node_id,
                                    resolution_id=res.node_id, depth=1 + depth,
                                    path=[edge, *(records.edge_from_props(e) for e in path)]))
    return out[:k]


def state_plan(plans: LevelPlans, q: StateQuery, k: int, *, max_patterns: int = 5,
               candidates: Sequence[tuple[str, float]] | None = None) -> Plan:
    """The plan of ``q.mode`` on one level (``k`` memories at most)."""
    if q.mode == "find_related_unresolved":
        return (yield from related_unresolved(plans, q, k, candidates))
    if q.mode == "find_similar_state":
        return (yield from similar_state(plans, q, k))
    if q.mode == "find_what_i_was_doing":
        return (yield from what_i_was_doing(plans, q, k))
    if q.mode == "find_resolution_patterns":
        return (yield from resolution_patterns(plans, q, k, max_patterns, candidates))
    raise ValueError(f"unknown state query mode {q.mode!r}")


def ensure_state_indexes(plans: LevelPlans) -> Plan:
    """Create the range indexes on ``emotion_canonical`` and ``concepts`` if missing; the properties indexed.

    For graphs older than ``level_store.NODE_RANGE_INDEXES``; not waited for
    (the filters are right without them, only slower).  Safe against other
    writers creating them at once (``level_store.create_missing``).
    """

    def missing() -> Plan:
        have, _ = yield from indexed()
        return range_index(have, "NODE", STATE_INDEXES)

    created = yield from create_missing(missing)
    return [p for item in created for p in item.attributes]


def goal_vocabulary(plans: LevelPlans) -> Plan:
    """The distinct goals of a level's memories (for index-narrowed partial goal matching)."""
    rows = yield Query(f"MATCH (n:{NODE_LABEL}) WHERE n.goal IS NOT NULL RETURN DISTINCT n.goal", read_only=True)
    return sorted(r[0] for r in rows if isinstance(r[0], str))
