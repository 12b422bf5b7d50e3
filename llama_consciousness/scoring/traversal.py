"""Traversal probability and thought paths (spec components 4 and 5b), as pure functions.

A path's probability is the product of its links' weights.  Conventions the spec leaves open: emotions
are compared by canonical name; ``current_energy`` is in the spec's signature but not its formula
(ignored); a comparison that cannot be made scores the neutral 0.5, a path of fewer than two nodes 1.0.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llama_consciousness.scoring.emotions import canonical_emotion
from llama_consciousness.scoring.ranking import calculate_emotional_similarity
from llama_consciousness.scoring.ranking import cosine_similarity as _spec_cosine

__all__ = [
    "BANDS", "NEUTRAL", "TRAVERSAL_WEIGHTS", "PathCandidate", "build_adjacency", "calculate_traversal_probability",
    "central_themes", "cosine_similarity", "dfs_with_probability", "emotional_consistency",
    "generate_traversal_paths", "goal_match", "graph_density", "hub_nodes", "path_narrative", "semantic_coherence",
    "traversal_band",
]

# The spec's weights of the five factors (they sum to 1).
TRAVERSAL_WEIGHTS: dict[str, float] = {"energy": 0.3, "goal": 0.2, "emotion": 0.3, "confidence": 0.1, "transfer": 0.1}
# Lower bounds (inclusive) of the spec's "Traversal Weight Semantics" bands.
BANDS: tuple[tuple[float, str], ...] = ((0.8, "very_high"), (0.6, "high"), (0.4, "medium"), (0.2, "low"),
                                        (0.0, "very_low"))
NEUTRAL = 0.5  # a comparison that cannot be made (missing embedding or emotions)

NARRATIVE_ARROW = " → "

# Safety net for graphs whose weights are all 1.0 (nothing can be pruned):
# the search stops expanding after this many steps and returns what it has.
MAX_EXPANSIONS = 200_000


_MISSING = object()


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """A field of a model or a key of a mapping (the common cases first: no ABC check)."""
    if type(obj) is dict:
        return obj.get(name, default)
    value = getattr(obj, name, _MISSING)
    if value is not _MISSING:
        return value
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return default


# -- the formula -------------------------------------------------------------------


def cosine_similarity(
    vec_a: Mapping[str, float] | None, vec_b: Mapping[str, float] | None, *, canonical: bool = True
) -> float:
    """The spec's cosine of two emotion vectors in [0, 1], over canonical names unless ``canonical=False``."""
    if canonical:
        return calculate_emotional_similarity(vec_a or {}, vec_b or {})
    return _spec_cosine(vec_a, vec_b)


def goal_match(edge_goal: str | None, current_goal: str | None) -> float:
    """1.0 for the same goal, 0.7 when one contains the other, else 0.3 (the spec)."""
    if edge_goal == current_goal and edge_goal is not None:
        return 1.0
    if edge_goal and current_goal and (edge_goal in current_goal or current_goal in edge_goal):
        return 0.7
    return 0.3


def calculate_traversal_probability(
    edge: Any,
    current_goal: str | None = None,
    current_emotional_state: Mapping[str, float] | None = None,
    current_energy: float | None = None,
) -> float:
    """How likely consciousness is to follow ``edge`` (a model or a mapping) now, in [0, 1] (spec 5b).

    ``0.3 * energy + 0.2 * goal_match + 0.3 * emotion cosine + 0.1 * confidence + 0.1 * transfer``, clamped.
    """
    del current_energy  # in the spec's signature, not in its formula
    w = TRAVERSAL_WEIGHTS
    energy = float(_get(edge, "energy", 0.0) or 0.0)
    confidence = float(_get(edge, "confidence", 0.0) or 0.0)
    transfer = float(_get(edge, "energy_transfer_coefficient", 0.0) or 0.0)
    emotion = cosine_similarity(_get(edge, "emotion_vector") or {}, current_emotional_state or {})
    total = (energy * w["energy"] + goal_match(_get(edge, "goal"), current_goal) * w["goal"] + emotion * w["emotion"]
             + confidence * w["confidence"] + transfer * w["transfer"])
    return min(1.0, max(0.0, total))


def traversal_band(weight: float) -> str:
    """The spec's band of a traversal weight: very_high, high, medium, low, very_low."""
    for lower, name in BANDS:
        if weight >= lower:
            return name
    return "very_low"


# -- path search ----------------------------------------------------------------------


@dataclass(frozen=True)
class PathCandidate:
    """A path found by the search; ``order`` (when found) is the last tie-break."""

    nodes: tuple[str, ...]
    edges: tuple[str, ...]
    probability: float
    order: int = 0

    def sort_key(self) -> tuple[float, int, int]:
        # best first: higher probability, then longer (on a tie, more of the
        # thought), then found earlier
        return (-self.probability, -len(self.edges), self.order)


Adjacency = Mapping[str, Iterable[Sequence[Any]]]


def _out_edges(adjacency: Adjacency, node: str) -> list[tuple[str, float, str]]:
    """Outgoing ``(target, weight, edge_id)`` of a node, strongest first."""
    out = []
    for item in adjacency.get(node, ()):
        target, weight = item[0], float(item[1])
        edge_id = item[2] if len(item) > 2 and item[2] is not None else f"{node}->{target}"
        out.append((target, max(0.0, min(1.0, weight)), str(edge_id)))
    out.sort(key=lambda e: (-e[1], e[0], e[2]))
    return out


def dfs_with_probability(
    adjacency: Adjacency,
    start: str,
    max_depth: int = 5,
    max_paths: int = 10,
    min_probability: float = 0.0,
) -> list[PathCandidate]:
    """The ``max_paths`` most probable paths from ``start`` (``adjacency``: node -> ``(target, weight[, id])``),
    best first, then longer, then found first; no node twice in a path.

    Extending a path never raises its product, so a prefix that cannot beat the current ``max_paths``-th
    candidate is pruned with all its extensions: the result is exact, not a beam.
    """
    if max_depth < 1 or max_paths < 1:
        return []
    cache: dict[str, list[tuple[str, float, str]]] = {}
    # min-heap keyed by goodness (probability, length, -order): the worst on top
    best: list[tuple[float, int, int, PathCandidate]] = []
    found = 0

    def hopeless(probability: float) -> bool:
        """No path with this prefix can enter the full heap."""
        if len(best) < max_paths:
            return probability < min_probability
        worst_p, worst_len = best[0][0], best[0][1]
        # an extension is at most max_depth long and found later than the worst
        return probability < min_probability or (probability, max_depth) <= (worst_p, worst_len)

    stack: list[tuple[str, tuple[str, ...], tuple[str, ...], float]] = [(start, (start,), (), 1.0)]
    steps = 0
    while stack:
        node, nodes, edges, probability = stack.pop()
        steps += 1
        if steps > MAX_EXPANSIONS:
            break
        if edges:
            if hopeless(probability):
                continue  # candidates found meanwhile beat this prefix and all its extensions
            candidate = PathCandidate(nodes, edges, probability, found)
            found += 1
            entry = (probability, len(edges), -candidate.order, candidate)
            if len(best) < max_paths:
                heapq.heappush(best, entry)
            elif entry[:3] > best[0][:3]:
                heapq.heapreplace(best, entry)
        if len(edges) >= max_depth:
            continue
        if node not in cache:
            cache[node] = _out_edges(adjacency, node)
        children = []
        for target, weight, edge_id in cache[node]:
            if target in nodes:
                continue
            p = probability * weight
            if not hopeless(p):
                children.append((target, nodes + (target,), edges + (edge_id,), p))
        stack.extend(reversed(children))  # the strongest link is popped, so explored, first
    return sorted((entry[3] for entry in best), key=PathCandidate.sort_key)


def build_adjacency(
    edges: Iterable[Any], *, directed: bool = True, weight: Any = None
) -> dict[str, list[tuple[str, float, str]]]:
    """``{source: [(target, weight, edge_id)]}`` from ``GraphEdge``-like edges (``weight``: a function of the
    edge, default its ``traversal_weight``); undirected adds each edge backwards too, under the same id."""
    adjacency: dict[str, list[tuple[str, float, str]]] = {}
    for edge in edges:
        source, target = _get(edge, "source_id"), _get(edge, "target_id")
        edge_id = _get(edge, "edge_id") or f"{source}->{target}"
        w = float(weight(edge) if weight is not None else _get(edge, "traversal_weight", 0.0))
        adjacency.setdefault(source, []).append((target, w, edge_id))
        if not directed and source != target:
            adjacency.setdefault(target, []).append((source, w, edge_id))
    return adjacency


def generate_traversal_paths(
    graph: Any,
    start_nodes: Sequence[str],
    current_goal: str | None = None,
    current_emotional_state: Mapping[str, float] | None = None,
    current_energy: float | None = None,
    max_paths: int = 10,
    max_path_length: int = 5,
    *,
    embeddings: Mapping[str, Sequence[float] | None] | None = None,
    directed: bool = True,
    min_probability: float = 0.0,
) -> list[Any]:
    """The top ``max_paths`` paths of a ``TraversalGraph`` from the starts, weights recomputed for the given
    state (without one, the stored ``traversal_weight``); ``embeddings`` feed semantic coherence."""
    from llama_consciousness.schema.graph import TraversalPath

    stored = current_goal is None and current_emotional_state is None and current_energy is None
    adjacency = build_adjacency(graph.edges, directed=directed, weight=None if stored else (
        lambda edge: calculate_traversal_probability(edge, current_goal, current_emotional_state, current_energy)))
    found: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[tuple, PathCandidate]] = {}
    for index, start in enumerate(dict.fromkeys(start_nodes)):
        for cand in dfs_with_probability(adjacency, start, max_path_length, max_paths, min_probability):
            # equal paths: the earlier start node, then the search's order
            found.setdefault((cand.nodes, cand.edges), ((*cand.sort_key()[:2], index, cand.order), cand))
    ranked = [cand for _, cand in sorted(found.values(), key=lambda item: item[0])][:max_paths]
    by_id = {n.node_id: n for n in graph.nodes}
    vectors = embeddings or {}
    paths = []
    for rank, cand in enumerate(ranked, start=1):
        members = [by_id.get(node_id) for node_id in cand.nodes]
        paths.append(TraversalPath(
            path_id=f"path_{rank}",
            path_nodes=list(cand.nodes),
            path_edges=list(cand.edges),
            total_activation=sum(m.activation_score for m in members if m is not None),
            semantic_coherence=semantic_coherence([vectors.get(node_id) for node_id in cand.nodes]),
            emotional_consistency=emotional_consistency([m.emotion_vector if m else None for m in members]),
            path_narrative=path_narrative([m.node_type if m else "?" for m in members]),
            traversal_probability=max(0.0, min(1.0, cand.probability)),
        ))
    return paths


# -- path quality -----------------------------------------------------------------------


def _vector_cosine(a: Sequence[float] | None, b: Sequence[float] | None) -> float | None:
    if a is None or b is None or len(a) == 0 or len(a) != len(b):
        return None
    dot = sum(float(x) * float(y) for x, y in zip(a, b))
    mag_a = math.sqrt(sum(float(x) ** 2 for x in a))
    mag_b = math.sqrt(sum(float(y) ** 2 for y in b))
    if mag_a == 0.0 or mag_b == 0.0:
        return None
    return dot / (mag_a * mag_b)


def semantic_coherence(vectors: Sequence[Sequence[float] | None]) -> float:
    """Mean cosine of consecutive embeddings, clamped to [0, 1] (an unusable pair counts 0.5)."""
    if len(vectors) < 2:
        return 1.0
    return coherence_of_similarities([_vector_cosine(a, b) for a, b in zip(vectors, vectors[1:])])


def coherence_of_similarities(similarities: Sequence[float | None]) -> float:
    """``semantic_coherence`` from the cosines of the pairs (computed where the vectors live; None counts 0.5)."""
    if not similarities:
        return 1.0
    scores = [NEUTRAL if cos is None or not math.isfinite(cos) else max(0.0, min(1.0, cos)) for cos in similarities]
    return max(0.0, min(1.0, sum(scores) / len(scores)))


def emotional_consistency(emotion_vectors: Sequence[Mapping[str, float] | None]) -> float:
    """Mean emotional cosine (canonical names) of consecutive nodes, in [0, 1] (a side without emotions: 0.5)."""
    pairs = zip(emotion_vectors, emotion_vectors[1:])
    return coherence_of_similarities([cosine_similarity(a, b) if a and b else None for a, b in pairs])


def path_narrative(node_types: Sequence[str]) -> str:
    """``"Problem → Evidence → Conclusion"``: node types, consecutive repeats collapsed."""
    out: list[str] = []
    for node_type in node_types:
        label = str(node_type).strip() or "?"
        if not out or out[-1] != label:
            out.append(label)
    return NARRATIVE_ARROW.join(out)


# -- structure --------------------------------------------------------------------------


def hub_nodes(edges: Iterable[Any], top: int = 5) -> list[str]:
    """The best-connected nodes (degree >= 2, either direction, a self-loop once): highest first, ties by id."""
    degree: Counter[str] = Counter()
    for edge in edges:
        if isinstance(edge, (tuple, list)):
            source, target = edge[0], edge[1]
        else:
            source, target = _get(edge, "source_id"), _get(edge, "target_id")
        degree[source] += 1
        if target != source:
            degree[target] += 1
    ranked = sorted((node for node, d in degree.items() if d >= 2), key=lambda n: (-degree[n], n))
    return ranked[: max(0, top)]


def central_themes(
    nodes: Mapping[str, Any],
    hubs: Iterable[str],
    paths: Iterable[Any],
    top: int = 5,
    *,
    min_intensity: float = 0.5,
) -> list[str]:
    """The most frequent goals, concepts and emotions (felt at ``min_intensity``) among hubs and path nodes.

    Each node counts once, each of its themes once; themes compare case-insensitively (the first
    spelling seen is returned), most frequent first, ties alphabetical.
    """
    members = dict.fromkeys(hubs)
    for path in paths:
        members.update(dict.fromkeys(getattr(path, "path_nodes", path)))
    counts: Counter[str] = Counter()
    spelling: dict[str, str] = {}
    for node_id in members:
        node = nodes.get(node_id)
        if node is None:
            continue
        emotions = (_get(node, "emotion_vector") or {}).items()
        themes = [_get(node, "goal") or "", *map(str, _get(node, "concepts") or ()),
                  *(canonical_emotion(name) for name, value in emotions if float(value) >= min_intensity)]
        own: dict[str, str] = {}
        for theme in themes:
            text = " ".join(theme.split()) if isinstance(theme, str) else ""
            if text:
                own.setdefault(text.casefold(), text)
        for key, text in own.items():
            spelling.setdefault(key, text)
            counts[key] += 1
    ranked = sorted(counts, key=lambda k: (-counts[k], k))
    return [spelling[k] for k in ranked[: max(0, top)]]


def graph_density(n_nodes: int, n_edges: int) -> float:
    """Directed density ``edges / (n * (n - 1))`` in [0, 1]; 0 for fewer than 2 nodes."""
    if n_nodes < 2:
        return 0.0
    return max(0.0, min(1.0, n_edges / (n_nodes * (n_nodes - 1))))
