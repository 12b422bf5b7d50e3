"""State-based retrieval (decision #8) on one level graph, as query plans.

The four modes of ``StateBasedRetrieval``, each one query per level (plus
one for the neighbourhoods of resolutions), with every filter and the
ranking inside the query so that only the top rows travel:

``find_related_unresolved``
    blocked / in_progress memories (any state when the caller lifts
    ``include_only_unresolved``) whose goal matches the current goal,
    currently valid, ranked by ``energy * goal match``.
``find_similar_state``
    memories whose emotion vector has a cosine above the threshold with the
    current emotions and whose energy lies within ``energy_tolerance`` of
    the current energy (the range index on ``energy`` bounds the scan),
    ranked by ``cosine * (1 - |energy difference|)``.
``find_what_i_was_doing``
    in_progress memories, ranked by ``energy / (1 + days / 30)``.
``find_resolution_patterns``
    past *resolved* memories with a similar goal and emotions (cosine above
    0.6) that have a RESOLVED_BY link, ranked by ``discovery_energy`` (their
    energy when unset), then similarity; then Decision / Action / Learning
    memories within two links of each resolution.

Shared by every mode: memories must be current (valid now and believed now,
see ``temporal``), not quarantined and not entity hubs; with
``temporal_scope="recent"`` the matched memories (not the resolutions and
their neighbours, which are reached by links) must have been created within
the last ``recent_days``.

**Emotional similarity without ``gds``.**  FalkorDB has no similarity
functions, so the cosine is Cypher arithmetic over the parallel arrays the
store keeps (``emotion_canonical`` / ``emotion_values``): the current
emotions are one map parameter keyed by canonical name, and a memory's
vector is read by canonical name keeping the strongest intensity when two
of its names collapse into one ("excited 0.8, excitement 0.6" is 0.8), as
``scoring.emotions.canonical_vector`` does.  So the threshold and the order
are exact inside the query, only the top rows are returned, and the scan
is bounded by indexes (``energy`` for similar states, ``resolution_state``
for the others) plus a cheap "shares at least one emotion" test before the
arithmetic.  The alternative (fetch a bounded set of candidates, cosine in
Python) is measured in ``benchmarks/state_speed.py``.

**Days without datetime arithmetic.**  FalkorDB cannot subtract two
datetimes, so the age of a memory is computed from its date components
(days-from-civil, exact for the proleptic Gregorian calendar).

Plans are generators of queries (see ``level_store``), so the sync and the
asyncio store run the same code.  Values only ever travel as parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode
from llama_consciousness.scoring.state import (
    MIN_PARTIAL_SCORE,
    PARTIAL_CONTAINS_SCORE,
    PARTIAL_TERMS_WEIGHT,
    RECENCY_HORIZON_DAYS,
    epoch_seconds,
    goal_terms,
    normalise_goal,
)
from llama_consciousness.storage import records
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.storage.level_store import EDGE_TYPE, MAX_FETCH, NODE_LABEL, LevelPlans, Plan, Query
from llama_consciousness.temporal import TemporalWindow, cypher_predicate, cypher_time

UNRESOLVED = ("blocked", "in_progress")
RESOLUTION_DETAIL_TYPES = ("Decision", "Action", "Learning")
_EPS = 1e-9

_NODE_N = records.projection("n", records.NODE_READ_PROPS)
_NODE_C = records.projection("c", records.NODE_READ_PROPS)
_NODE_RES = records.projection("res", records.NODE_READ_PROPS)
_EDGE_R = records.projection("r", records.EDGE_READ_PROPS)
_EDGE_LIST = "[r IN relationships(p) | " + records.projection("r", records.EDGE_READ_PROPS) + "]"


# -- what a state asks for ---------------------------------------------------------


@dataclass(frozen=True)
class StateQuery:
    """A state-based request resolved into query inputs (built once per retrieval).

    ``emotions`` are canonical names -> intensities; ``goal_match`` is
    ``exact``, ``partial`` or ``semantic`` (then ``goal_embedding`` is the
    embedded goal, for levels whose vectors live in FalkorDB).
    """

    mode: str
    now: datetime
    energy: float
    emotions: dict[str, float] = field(default_factory=dict)
    emotion_norm: float = 0.0
    goal: str | None = None
    goal_match: str = "partial"
    goal_embedding: list[float] | None = None
    semantic_threshold: float = 0.5
    semantic_fetch: int = 200
    recent_days: int | None = 30
    unresolved_only: bool = True
    emotion_threshold: float = 0.7
    pattern_threshold: float = 0.6
    energy_tolerance: float = 0.2
    detail_types: tuple[str, ...] = RESOLUTION_DETAIL_TYPES
    max_related: int = 5

    @property
    def window(self) -> TemporalWindow:
        return TemporalWindow("current", now=self.now)

    @property
    def since(self) -> datetime | None:
        return None if self.recent_days is None else self.now - timedelta(days=self.recent_days)


@dataclass(frozen=True)
class StateHit:
    """A memory that fits the state, with the numbers that made it fit.

    ``role`` is ``state`` (matched by the state itself), ``resolution``
    (what RESOLVED_BY a matched past state) or ``related`` (a Decision /
    Action / Learning near a resolution); ``pattern_id`` names the matched
    past state a resolution or related memory belongs to, ``path`` the
    links from it (RESOLVED_BY, then the walk from the resolution).
    """

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
    """normalise_goal in Cypher."""
    return f"trim(replace(replace(toLower(coalesce({var}.goal, '')), '_', ' '), '-', ' '))"


def _partial_goal_score(var: str, ng: str) -> str:
    """goal_match_score(strategy='partial') in Cypher, ``ng`` the normalised memory goal."""
    return (
        f"CASE WHEN {var}.goal = $g_goal OR {ng} = $g_norm THEN 1.0 "
        f"WHEN size({ng}) >= 3 AND ({ng} CONTAINS $g_norm OR $g_norm CONTAINS {ng}) THEN {PARTIAL_CONTAINS_SCORE} "
        f"ELSE {PARTIAL_TERMS_WEIGHT} * size([t IN $g_terms WHERE {ng} CONTAINS t "
        f"OR t IN coalesce({var}.concepts, [])]) / $g_nterms END"
    )


def _emotion_cosine(var: str, out: str = "emo") -> str:
    """WITH clauses computing ``out``: cosine of ``var``'s emotions with ``$e_vec`` (canonical, max-merged)."""
    ec, ev = f"{var}_ec", f"{var}_ev"
    idx = f"range(0, size({ec}) - 1)"
    firsts = f"[i IN {idx} WHERE NOT {ec}[i] IN {ec}[0..i]]"
    strongest = f"reduce(m = 0.0, j IN {idx} | CASE WHEN {ec}[j] = {ec}[i] AND {ev}[j] > m THEN {ev}[j] ELSE m END)"
    return (
        f"WITH *, coalesce({var}.emotion_canonical, []) AS {ec}, coalesce({var}.emotion_values, []) AS {ev} "
        f"WITH *, [i IN {firsts} | [{ec}[i], {strongest}]] AS {var}_pairs "
        f"WITH *, reduce(d = 0.0, pr IN {var}_pairs | d + coalesce($e_vec[pr[0]], 0.0) * pr[1]) AS {var}_dot, "
        f"sqrt(reduce(s = 0.0, pr IN {var}_pairs | s + pr[1] * pr[1])) AS {var}_norm "
        f"WITH *, CASE WHEN {var}_norm = 0.0 OR $e_norm = 0.0 THEN 0.0 "
        f"ELSE {var}_dot / ({var}_norm * $e_norm) END AS {out} "
    )


def _epoch_seconds(dt: str) -> str:
    """Seconds since 1970 of a localdatetime expression (days-from-civil; no datetime subtraction in FalkorDB)."""
    y = f"({dt}.year - CASE WHEN {dt}.month <= 2 THEN 1 ELSE 0 END)"
    return (
        f"(({y} / 400) * 146097 + ({y} % 400) * 365 + ({y} % 400) / 4 - ({y} % 400) / 100 "
        f"+ (153 * (({dt}.month + 9) % 12) + 2) / 5 + {dt}.day - 1 - 719468) * 86400 "
        f"+ {dt}.hour * 3600 + {dt}.minute * 60 + {dt}.second"
    )


def _anchor_filter(q: StateQuery, var: str, prefix: str) -> tuple[str, dict[str, Any]]:
    """Current, not quarantined, not an entity hub, and within the temporal scope."""
    pred = MemoryFilter(q.window).cypher(var, prefix)
    text, params = pred.text, dict(pred.params)
    if q.since is not None:
        text += f" AND {var}.created_at > localdatetime(${prefix}since)"
        params[f"{prefix}since"] = cypher_time(q.since)
    return text, params


def _goal_params(q: StateQuery) -> dict[str, Any]:
    terms = goal_terms(q.goal)
    return {"g_goal": q.goal, "g_norm": normalise_goal(q.goal), "g_terms": terms, "g_nterms": max(1, len(terms))}


def _emotion_params(q: StateQuery) -> dict[str, Any]:
    return {"e_vec": dict(q.emotions), "e_names": sorted(q.emotions), "e_norm": float(q.emotion_norm)}


def _hits(rows: Sequence[Sequence[Any]], **fixed: Any) -> list[StateHit]:
    return [StateHit(records.node_from_props(row[0]), float(row[1]), **fixed,
                     **{k: (None if v is None else float(v)) for k, v in zip(("goal_match", "emotion_similarity", "days_ago"), row[2:5])})
            for row in rows]


# -- the modes --------------------------------------------------------------------


def _goal_stage(q: StateQuery, var: str = "n") -> tuple[str, str]:
    """(extra WHERE, WITH computing ``goal_score``) of exact and partial matching, and of no goal."""
    if q.goal is None:
        return "", "WITH *, null AS goal_score "
    if q.goal_match == "exact":
        return f" AND {var}.goal = $g_goal", "WITH *, 1.0 AS goal_score "
    ng = f"{var}_ng"
    return "", (f"WITH *, {_norm_goal(var)} AS {ng} WITH *, {_partial_goal_score(var, ng)} AS goal_score "
                f"WITH * WHERE goal_score >= {MIN_PARTIAL_SCORE - _EPS} ")


Head = Callable[[str], str]


def _sources(q: StateQuery, candidates: Sequence[tuple[str, float]] | None) -> list[tuple[Head, str, dict[str, Any]]]:
    """Where the memories of a query come from: (head given the filters, goal-score WITH, params).

    Exact and partial goals (and no goal) scan the label with the filters on
    the MATCH, so the range indexes (goal, resolution_state, energy) bound
    the scan.  A semantic goal has two sources, merged by the caller: the
    exact goal (index) and the memories nearest to the embedded goal (vector
    index, or ``candidates`` found in Postgres) with a cosine of at least
    the threshold.
    """
    if q.goal is None or q.goal_match != "semantic":
        extra, goal_with = _goal_stage(q)
        return [(lambda f, extra=extra: f"MATCH (n:{NODE_LABEL}) WHERE {f}{extra} WITH n, null AS v_sim ",
                 goal_with, {})]
    goal_with = "WITH *, CASE WHEN n.goal = $g_goal THEN 1.0 ELSE v_sim END AS goal_score "
    out: list[tuple[Head, str, dict[str, Any]]] = [
        (lambda f: f"MATCH (n:{NODE_LABEL}) WHERE n.goal = $g_goal AND {f} WITH n, 1.0 AS v_sim ", goal_with, {})]
    if candidates is not None:
        out.append((lambda f: (f"UNWIND $v_cands AS cand MATCH (n:{NODE_LABEL} {{node_id: cand.id}}) "
                               f"WHERE cand.sim >= $v_min AND {f} WITH n, cand.sim AS v_sim "),
                    goal_with, {"v_cands": [{"id": i, "sim": float(s)} for i, s in candidates]}))
    elif q.goal_embedding is not None:
        out.append((lambda f: (f"CALL db.idx.vector.queryNodes('{NODE_LABEL}', 'embedding', $v_fetch, vecf32($v_q)) "
                               f"YIELD node AS n, score AS v_dist WITH n, 1.0 - v_dist AS v_sim "
                               f"WHERE v_sim >= $v_min AND {f} "),
                    goal_with, {"v_q": records.wire_vector(q.goal_embedding),
                                "v_fetch": int(min(max(q.semantic_fetch, 1), MAX_FETCH))}))
    return out


def related_unresolved(plans: LevelPlans, q: StateQuery, k: int,
                       candidates: Sequence[tuple[str, float]] | None = None) -> Plan:
    """Unfinished business about the current goal, by ``energy * goal match``.

    Without a goal every unresolved memory qualifies, by ``energy * (0.5 +
    0.5 * emotional similarity)``.  ``candidates`` (node id, cosine) replace
    the vector index for semantic goals on levels whose vectors live in Postgres.
    """
    if k <= 0:
        return []
    where, params = _anchor_filter(q, "n", "a_")
    params.update(_goal_params(q))
    params.update(_emotion_params(q))
    params.update({"k": int(k), "v_min": float(q.semantic_threshold),
                   "states": list(UNRESOLVED) if q.unresolved_only else [*UNRESOLVED, "resolved"]})
    if q.goal is None:
        score, emo = _emotion_cosine("n") + "WITH *, n.energy * (0.5 + 0.5 * emo) AS score ", "emo"
    else:
        score, emo = "WITH *, n.energy * goal_score AS score ", "null"
    hits: dict[str, StateHit] = {}
    for head, goal_with, extra in _sources(q, candidates):
        cypher = (head(f"n.resolution_state IN $states AND {where}") + f"{goal_with}{score}"
                  f"RETURN {_NODE_N}, score, goal_score, {emo} AS emo_out, null AS days_out ORDER BY score DESC, n.node_id LIMIT $k")
        rows = yield Query(cypher, {**params, **extra}, read_only=True)
        for hit in _hits(rows):
            best = hits.get(hit.node.node_id)
            if best is None or hit.score > best.score:
                hits[hit.node.node_id] = hit
    return sorted(hits.values(), key=lambda h: (-h.score, h.node.node_id))[:k]


def similar_state(plans: LevelPlans, q: StateQuery, k: int) -> Plan:
    """Past moments that felt like now: cosine above the threshold, energy within the tolerance."""
    if k <= 0 or not q.emotions:
        return []
    where, params = _anchor_filter(q, "n", "a_")
    params.update(_emotion_params(q))
    params.update({"k": int(k), "e_lo": float(q.energy - q.energy_tolerance) - _EPS,
                   "e_hi": float(q.energy + q.energy_tolerance) + _EPS, "e_now": float(q.energy),
                   "e_min": float(q.emotion_threshold)})
    cypher = (
        f"MATCH (n:{NODE_LABEL}) WHERE n.energy >= $e_lo AND n.energy <= $e_hi AND {where} "
        "AND any(e IN coalesce(n.emotion_canonical, []) WHERE e IN $e_names) "
        + _emotion_cosine("n")
        + "WITH * WHERE emo > $e_min "
        "WITH *, emo * (1.0 - abs(n.energy - $e_now)) AS score "
        f"RETURN {_NODE_N}, score, null AS goal_out, emo, null AS days_out ORDER BY score DESC, n.node_id LIMIT $k"
    )
    rows = yield Query(cypher, params, read_only=True)
    return _hits(rows)


def what_i_was_doing(plans: LevelPlans, q: StateQuery, k: int) -> Plan:
    """Work in progress, by ``energy / (1 + days / 30)`` (the spec's recency weight)."""
    if k <= 0:
        return []
    where, params = _anchor_filter(q, "n", "a_")
    params.update({"k": int(k), "now_s": epoch_seconds(q.now), "horizon": float(RECENCY_HORIZON_DAYS)})
    cypher = (
        f"MATCH (n:{NODE_LABEL}) WHERE n.resolution_state = 'in_progress' AND {where} "
        f"WITH n, n.created_at AS dt WITH n, ($now_s - ({_epoch_seconds('dt')})) / 86400.0 AS days "
        "WITH n, CASE WHEN days < 0.0 THEN 0.0 ELSE days END AS days "
        "WITH n, days, n.energy / (1.0 + days / $horizon) AS score "
        f"RETURN {_NODE_N}, score, null AS goal_out, null AS emo_out, days ORDER BY score DESC, n.node_id LIMIT $k"
    )
    rows = yield Query(cypher, params, read_only=True)
    return _hits(rows)


def resolution_patterns(plans: LevelPlans, q: StateQuery, k: int, max_patterns: int = 5,
                        candidates: Sequence[tuple[str, float]] | None = None) -> Plan:
    """How similar situations were resolved: past states, their resolutions, and what surrounds those.

    Returns hits in pattern order: each past state, then what RESOLVED_BY it,
    then the Decision / Action / Learning memories within two links of the
    resolution (paths that go back through the past state do not count: they
    describe the blockage, not its resolution); at most ``k`` in all.
    """
    if k <= 0 or max_patterns <= 0:
        return []
    if q.goal is None and not q.emotions:
        return []
    where, params = _anchor_filter(q, "n", "a_")
    res_pred = MemoryFilter(q.window).cypher("res", "rs_")
    link = cypher_predicate(q.window, "r", "rl_")
    params.update(_goal_params(q))
    params.update(_emotion_params(q))
    params.update(res_pred.params)
    params.update(link.params)
    params.update({"kp": int(max_patterns), "p_min": float(q.pattern_threshold), "v_min": float(q.semantic_threshold)})
    if q.emotions:
        emo_where = " AND any(e IN coalesce(n.emotion_canonical, []) WHERE e IN $e_names)"
        emo_with = _emotion_cosine("n") + "WITH * WHERE emo > $p_min "
    else:
        emo_where, emo_with = "", "WITH *, null AS emo "
    anchors: dict[str, tuple[StateHit, list[tuple[dict[str, Any], dict[str, Any]]]]] = {}
    for head, goal_with, extra in _sources(q, candidates):
        cypher = (
            head(f"n.resolution_state = 'resolved' AND {where}{emo_where}") + f"{goal_with}{emo_with}"
            "WITH *, coalesce(goal_score, 1.0) * coalesce(emo, 1.0) AS sim "
            f"MATCH (n)-[r:{EDGE_TYPE}]->(res:{NODE_LABEL}) "
            f"WHERE r.relation_type = 'RESOLVED_BY' AND {link.text} AND {res_pred.text} "
            f"WITH n, goal_score, emo, sim, collect([{_NODE_RES}, {_EDGE_R}]) AS resolutions "
            "WITH n, goal_score, emo, sim, resolutions, coalesce(n.discovery_energy, n.energy) AS impact "
            f"RETURN {_NODE_N}, sim, goal_score, emo, impact, resolutions "
            "ORDER BY impact DESC, sim DESC, n.node_id LIMIT $kp"
        )
        rows = yield Query(cypher, {**params, **extra}, read_only=True)
        for props, sim, goal_score, emo, impact, resolutions in rows:
            node = records.node_from_props(props)
            hit = StateHit(node, float(sim), "state", None if goal_score is None else float(goal_score),
                           None if emo is None else float(emo))
            if node.node_id not in anchors or hit.score > anchors[node.node_id][0].score:
                anchors[node.node_id] = (hit, [(res, rel) for res, rel in resolutions])
    order = sorted(anchors.values(), key=lambda a: (-(a[0].node.discovery_energy if a[0].node.discovery_energy
                                                        is not None else a[0].node.energy),
                                                     -a[0].score, a[0].node.node_id))[:max_patterns]
    if not order:
        return []
    pairs = [{"pb": hit.node.node_id, "res": res["node_id"]} for hit, resolutions in order for res, _ in resolutions]
    related_rows: list[Any] = []
    if pairs and q.detail_types and q.max_related > 0:
        reach = MemoryFilter(q.window).cypher("c", "rc_")
        hop = MemoryFilter(q.window, include_entities=True).cypher("x", "rx_", entities=True)
        walk = cypher_predicate(q.window, "r", "rw_")
        walk_clause = "" if walk.text == "true" else f" AND all(r IN relationships(p) WHERE {walk.text})"
        related_rows = yield Query(
            "UNWIND $pairs AS pair "
            f"MATCH (res:{NODE_LABEL} {{node_id: pair.res}}) "
            f"MATCH p = (res)-[:{EDGE_TYPE}*1..2]-(c:{NODE_LABEL}) "
            f"WHERE c.node_type IN $types AND {reach.text} AND c.node_id <> pair.pb AND c.node_id <> pair.res "
            f"AND none(x IN nodes(p) WHERE x.node_id = pair.pb){walk_clause} "
            f"AND all(x IN nodes(p) WHERE {hop.text}) "
            "WITH pair, c, p, reduce(e = 0.0, r IN relationships(p) | e + coalesce(r.energy, 0.0)) / length(p) AS strength "
            "ORDER BY strength DESC, length(p) ASC, c.node_id "
            "WITH pair, collect([c, p, strength])[0..$per] AS best "
            "UNWIND best AS b WITH pair, b[0] AS c, b[1] AS p, b[2] AS strength "
            f"RETURN pair.pb, pair.res, {_NODE_C}, strength, length(p), {_EDGE_LIST}",
            {**reach.params, **hop.params, **walk.params, "pairs": pairs, "types": list(q.detail_types),
             "per": int(q.max_related)},
            read_only=True,
        )
    related: dict[tuple[str, str], list[Any]] = {}
    for pb, res, props, strength, depth, path in related_rows:
        related.setdefault((pb, res), []).append((props, float(strength), int(depth), path))
    out: list[StateHit] = []
    for hit, resolutions in order:
        out.append(hit)
        for res_props, rel_props in sorted(resolutions, key=lambda rr: (-(rr[1].get("energy") or 0.0), rr[0]["node_id"])):
            edge = records.edge_from_props(rel_props)
            out.append(StateHit(records.node_from_props(res_props), hit.score * edge.energy, "resolution",
                                pattern_id=hit.node.node_id, resolution_id=res_props["node_id"], depth=1,
                                path=[edge]))
            found = sorted(related.get((hit.node.node_id, res_props["node_id"]), []), key=lambda x: (-x[1], x[2]))
            for props, strength, depth, path in found[: q.max_related]:
                out.append(StateHit(records.node_from_props(props), hit.score * strength, "related",
                                    pattern_id=hit.node.node_id, resolution_id=res_props["node_id"],
                                    depth=1 + depth, path=[edge, *(records.edge_from_props(e) for e in path)]))
    return out[:k]


def state_plan(plans: LevelPlans, q: StateQuery, k: int, *, max_patterns: int = 5,
               candidates: Sequence[tuple[str, float]] | None = None) -> Plan:
    """The plan of ``q.mode`` on one level."""
    if q.mode == "find_related_unresolved":
        return (yield from related_unresolved(plans, q, k, candidates))
    if q.mode == "find_similar_state":
        return (yield from similar_state(plans, q, k))
    if q.mode == "find_what_i_was_doing":
        return (yield from what_i_was_doing(plans, q, k))
    if q.mode == "find_resolution_patterns":
        return (yield from resolution_patterns(plans, q, k, max_patterns, candidates))
    raise ValueError(f"unknown state query mode {q.mode!r}")


def relationships_among(plans: LevelPlans, node_ids: Sequence[str], q: StateQuery) -> Plan:
    """The current links between the given memories (what the energy feedback reads)."""
    if len(node_ids) < 2:
        return []
    link = cypher_predicate(q.window, "r", "fr_")
    rows = yield Query(
        f"MATCH (s:{NODE_LABEL})-[r:{EDGE_TYPE}]->(t:{NODE_LABEL}) "
        f"WHERE s.node_id IN $ids AND t.node_id IN $ids AND {link.text} RETURN {_EDGE_R}",
        {**link.params, "ids": list(node_ids)},
        read_only=True,
    )
    return [records.edge_from_props(r[0]) for r in rows]
