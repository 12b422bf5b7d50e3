"""``TraversalPathPostprocessor``: how the retrieved memories connect, and likely thoughts through them.

It builds the spec's ``TraversalGraph``: the memories (activation = score / best score), with
``include_connectors`` the unretrieved ones linked to at least two retrieved ones of the same level graph,
the links among them visible in the window weighted for the current state, suggested paths from the most
activated memories, hubs and themes.  Ids are prefixed by level (``"N2:decision_x"``): links never cross
levels.  A level whose vectors live in Postgres counts as the neutral 0.5 in semantic coherence.
"""

from __future__ import annotations

import html
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from llama_index.core.bridge.pydantic import Field, field_validator
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import SkipValidation, ValidationError

from llama_consciousness.postprocessors.base import StepResult, StreamPostprocessor, memory_of
from llama_consciousness.schema import ConsciousnessNode, ConsciousnessRelationship, MemoryNode
from llama_consciousness.schema.graph import GraphEdge, GraphNode, TraversalGraph, TraversalPath
from llama_consciousness.schema.intention import RetrievalIntention, StateBasedRetrieval
from llama_consciousness.schema.stream import ACTIVATION_TIERS as TIERS
from llama_consciousness.schema.trusted import trusted_model
from llama_consciousness.scoring.ranking import DEFAULT_FOCUS, DEFAULT_PERIPHERAL
from llama_consciousness.scoring.traversal import (
    calculate_traversal_probability,
    central_themes,
    coherence_of_similarities,
    generate_traversal_paths,
    graph_density,
    hub_nodes,
    traversal_band,
)
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.storage.neighbourhood import neighbourhood, pair_similarities
from llama_consciousness.storage.reader import MemoryReader
from llama_consciousness.temporal import TemporalWindow

logger = logging.getLogger(__name__)

__all__ = ["HUB_KEY", "TraversalPathPostprocessor", "connector_ids", "to_html", "to_mermaid", "to_networkx_dict"]

HUB_KEY = "hub"

_GraphKey = tuple[str, Optional[str]]  # a level graph: (level, citizen for N1)
_PLAIN_MEMORIES = (MemoryNode, ConsciousnessNode)


def _copy(emotions: Optional[Mapping[str, float]]) -> Optional[dict[str, float]]:
    """A graph's own copy of a valid emotion vector (validation would have made one)."""
    return None if emotions is None else dict(emotions)


def graph_id(level: str, node_id: str) -> str:
    """The id of a memory (or link) in the traversal graph: ``"<level>:<id>"``."""
    return f"{level}:{node_id}"


def connector_ids(graph: TraversalGraph, nodes: Sequence[NodeWithScore]) -> list[str]:
    """Graph ids of the connectors in ``graph``: its memories not among the ``nodes`` it was built from."""
    retrieved = set()
    for node in nodes:
        meta = node.node.metadata
        level = meta.get("level")
        if level:
            retrieved.add(graph_id(level, str(meta.get("node_id") or node.node.node_id)))
    return [n.node_id for n in graph.nodes if n.node_id not in retrieved]


@dataclass
class _Member:
    """A memory of the graph and where it lives."""

    gid: str
    level: str
    citizen_id: Optional[str]
    memory: MemoryNode
    score: float = 0.0
    retrieved: bool = True
    tier: Optional[str] = None


class TraversalPathPostprocessor(StreamPostprocessor):
    """Builds the traversal graph of the retrieved memories (spec components 4 and 5b)."""

    memory: SkipValidation[MemoryReader] = Field(exclude=True, description="The memory the nodes were retrieved from")
    max_paths: int = Field(default=10, ge=0, description="suggested paths kept, best first")
    max_path_length: int = Field(default=5, ge=1, le=20, description="links per suggested path, at most")
    start_nodes: int = Field(default=5, ge=1, description="most activated memories the paths start from")
    include_connectors: bool = Field(default=True, description="add unretrieved memories linking >= 2 retrieved ones")
    max_connectors: int = Field(default=10, ge=0, description="connectors per level graph, at most")
    directed: bool = Field(default=True, description="paths follow link direction (False: either way)")
    current_goal: Optional[str] = None
    current_emotions: Optional[dict[str, float]] = None
    current_energy: float = Field(default=0.5, ge=0.0, le=1.0)
    temporal_mode: Optional[str] = Field(
        default=None,
        description="window the links and connectors must be visible in; None: a RetrievalIntention's "
        "window when process() is given one, else 'current'",
    )

    @field_validator("temporal_mode")
    @classmethod
    def _check_mode(cls, value: Optional[str]) -> Optional[str]:
        if value is not None:
            TemporalWindow(value)  # a known mode, and one that needs no times
        return value

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises the class under."""
        return "TraversalPathPostprocessor"

    def process(self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None,
                intention: Any = None) -> StepResult:
        """The nodes unchanged (hubs marked) and ``{"traversal_graph": graph}``, for the intention's state
        and, without a ``temporal_mode`` field, a ``RetrievalIntention``'s window."""
        goal, emotions, energy = self.state_of(intention)
        window = None
        if self.temporal_mode is None and isinstance(intention, RetrievalIntention):
            window = TemporalWindow.from_intention(intention)
        graph = self.build_graph(nodes, goal=goal, emotions=emotions, energy=energy, window=window)
        return StepResult(nodes, {"traversal_graph": graph})

    def state_of(self, intention: Any = None) -> tuple[Optional[str], Optional[dict[str, float]], float]:
        """``(goal, emotions, energy)`` the weights are computed for: a ``StateBasedRetrieval``'s, a
        ``RetrievalIntention``'s ``required_emotions`` at 1.0, the fields for what the intention does not say."""
        goal, emotions, energy = self.current_goal, self.current_emotions, self.current_energy
        if isinstance(intention, StateBasedRetrieval):
            goal = intention.current_goal or goal
            emotions = dict(intention.current_emotions) or emotions
            energy = intention.current_energy
        elif isinstance(intention, RetrievalIntention) and intention.required_emotions:
            emotions = {name: 1.0 for name in intention.required_emotions}
        return goal, emotions, energy

    def build_graph(
        self,
        nodes: Sequence[NodeWithScore],
        *,
        goal: Optional[str] = None,
        emotions: Optional[Mapping[str, float]] = None,
        energy: Optional[float] = None,
        window: Optional[TemporalWindow] = None,
    ) -> TraversalGraph:
        """The traversal graph of ``nodes`` (hubs marked on them); arguments left None take the fields'."""
        goal = self.current_goal if goal is None else goal
        emotions = self.current_emotions if emotions is None else dict(emotions)
        energy = self.current_energy if energy is None else energy
        window = window or TemporalWindow(self.temporal_mode or "current")

        members, owners = self._retrieved(nodes)
        self._activate(members)
        relationships, similar = self._neighbourhoods(members, window)
        edges = self._edges(relationships, members, goal, emotions, energy)
        graph_nodes = [self._graph_node(m) for m in members.values()]

        graph = TraversalGraph(nodes=graph_nodes, edges=edges, node_count=len(graph_nodes),
                               edge_count=len(edges), path_count=0,
                               graph_density=graph_density(len(graph_nodes), len(edges)))
        retrieved = [m for m in members.values() if m.retrieved]
        # stable sort: ties keep the retrieval order
        starts = [m.gid for m in sorted(retrieved, key=lambda m: -m.score)][: self.start_nodes]
        paths: list[TraversalPath] = []
        if self.max_paths > 0:
            # the stored weights (computed above for this state) drive the search
            paths = generate_traversal_paths(graph, starts, max_paths=self.max_paths,
                                             max_path_length=self.max_path_length, directed=self.directed)
            paths = self._with_coherence(paths, members, similar)
        hubs = hub_nodes(edges, top=5)
        themes = central_themes({m.gid: m.memory for m in members.values()}, hubs, paths, top=5)
        graph = graph.model_copy(update={"suggested_paths": paths, "path_count": len(paths),
                                          "hub_nodes": hubs, "central_themes": themes})
        for gid, owned in owners.items():
            for node in owned:
                if gid in hubs:
                    node.node.metadata[HUB_KEY] = True
                else:
                    node.node.metadata.pop(HUB_KEY, None)  # a mark from an earlier run is stale
        return graph

    @staticmethod
    def _retrieved(nodes: Sequence[NodeWithScore]) -> tuple[dict[str, _Member], dict[str, list[NodeWithScore]]]:
        members: dict[str, _Member] = {}
        owners: dict[str, list[NodeWithScore]] = {}
        for node in nodes:
            meta = node.node.metadata
            try:
                memory = memory_of(node)
            except ValidationError:
                logger.debug("node %s carries no memory; left out of the traversal graph", node.node.node_id)
                continue
            level = meta.get("level") or memory.level
            gid = graph_id(level, memory.node_id)
            owners.setdefault(gid, []).append(node)
            score = node.score if node.score is not None else meta.get("relevance_score", 0.0)
            try:
                score = float(score)
            except (TypeError, ValueError):
                score = 0.0
            if gid in members:  # the same memory twice: keep its best score
                members[gid].score = max(members[gid].score, score)
                continue
            tier = meta.get("activation_tier")
            members[gid] = _Member(gid, level, memory.citizen_id if level == "N1" else None, memory,
                                   score if math.isfinite(score) else 0.0,
                                   tier=tier if tier in TIERS else None)
        return members, owners

    @staticmethod
    def _activate(members: dict[str, _Member]) -> None:
        """Scores -> activations in [0, 1] (divided by the best), tiers by rank when not given."""
        retrieved = [m for m in members.values() if m.retrieved]
        best = max((m.score for m in retrieved), default=0.0)
        for m in retrieved:
            m.score = max(0.0, min(1.0, m.score / best)) if best > 0 else 1.0
        for rank, m in enumerate(sorted(retrieved, key=lambda m: -m.score)):
            if m.tier is None:
                m.tier = ("focus" if rank < DEFAULT_FOCUS else "peripheral"
                          if rank < DEFAULT_FOCUS + DEFAULT_PERIPHERAL else "background")

    def _neighbourhoods(self, members: dict[str, _Member], window: TemporalWindow
                        ) -> tuple[list[tuple[str, Any]], dict[tuple[str, str], Optional[float]]]:
        """Connectors (added to ``members``), links, and the cosine across each link (by graph ids, both ways)."""
        memory_filter = MemoryFilter(window, include_entities=True)
        limit = self.max_connectors if self.include_connectors else 0
        relationships: list[tuple[str, Any]] = []
        similar: dict[tuple[str, str], Optional[float]] = {}
        groups: dict[_GraphKey, list[str]] = {}
        for m in members.values():
            groups.setdefault((m.level, m.citizen_id), []).append(m.memory.node_id)
        for key, ids in groups.items():
            found = self._read("links", key, neighbourhood, ids, memory_filter, limit)
            if found is None:
                continue
            level, citizen = key
            for c in found.connectors:
                gid = graph_id(level, c.node.node_id)
                if gid not in members:
                    members[gid] = _Member(gid, level, citizen, c.node, 0.0, retrieved=False, tier="background")
            relationships.extend((level, rel) for rel in found.relationships)
            for (a, b), cosine in found.similarities.items():
                ga, gb = graph_id(level, a), graph_id(level, b)
                similar[(ga, gb)] = similar[(gb, ga)] = cosine
        return relationships, similar

    def _read(self, what: str, key: _GraphKey, plan: Callable[..., Any], *args: Any) -> Any:
        """``plan(plans, *args)`` run on the level graph ``key``; None (and a warning) when it cannot be read."""
        try:
            store = self.memory.level(*key)
            return store.run(plan(store.plans, *args))
        except Exception as exc:
            level, citizen = key
            logger.warning("traversal graph: %s of %s%s unavailable: %s", what, level,
                           f" ({citizen})" if citizen else "", exc)
            return None

    @staticmethod
    def _edges(relationships: list[tuple[str, Any]], members: dict[str, _Member], goal: Optional[str],
               emotions: Optional[Mapping[str, float]], energy: float) -> list[GraphEdge]:
        edges: dict[str, GraphEdge] = {}
        for level, rel in relationships:
            source, target = graph_id(level, rel.source_id), graph_id(level, rel.target_id)
            if source not in members or target not in members:
                continue
            edge_id = graph_id(level, rel.edge_id)
            if edge_id in edges:
                continue
            fields = {"edge_id": edge_id, "source_id": source, "target_id": target,
                      **{f: getattr(rel, f) for f in ("relation_type", "goal", "mindstate", "energy", "confidence")},
                      "emotion_vector": _copy(rel.emotion_vector),
                      "energy_transfer_coefficient": rel.energy_transfer_coefficient,
                      "resolution_state": rel.resolution_state,
                      "traversal_weight": calculate_traversal_probability(rel, goal, emotions, energy)}
            # the fields of a valid relationship: not validated again (see ``_graph_node``)
            edges[edge_id] = (trusted_model(GraphEdge, fields) if type(rel) is ConsciousnessRelationship
                              else GraphEdge(**fields))
        return sorted(edges.values(), key=lambda e: (-e.traversal_weight, e.edge_id or ""))

    @staticmethod
    def _graph_node(m: _Member) -> GraphNode:
        """The member as a graph node, not validated again when its memory is a plain one (its fields are a
        valid memory's; validating again was a quarter of the build's client time)."""
        memory = m.memory
        fields = {"node_id": m.gid, "node_type": memory.node_type, "content": memory.name or memory.description,
                  "activation_score": float(m.score), "activation_tier": m.tier or "background",
                  "energy": memory.energy, "confidence": memory.confidence,
                  "emotion_vector": _copy(memory.emotion_vector),
                  **{f: getattr(memory, f) for f in ("valid_at", "invalid_at", "created_at", "expired_at")}}
        return trusted_model(GraphNode, fields) if type(memory) in _PLAIN_MEMORIES else GraphNode(**fields)

    def _with_coherence(self, paths: list[TraversalPath], members: dict[str, _Member],
                        known: dict[tuple[str, str], Optional[float]]) -> list[TraversalPath]:
        """Semantic coherence from cosines computed where the vectors are (``known``: those of the links)."""
        if not paths:
            return paths
        wanted: dict[_GraphKey, list[tuple[str, str]]] = {}
        for p in paths:
            for a, b in zip(p.path_nodes, p.path_nodes[1:]):
                ma, mb = members.get(a), members.get(b)
                if (a, b) in known or ma is None or mb is None:
                    continue
                if (ma.level, ma.citizen_id) != (mb.level, mb.citizen_id):
                    known[(a, b)] = None  # vectors in two graphs: neutral
                    continue
                wanted.setdefault((ma.level, ma.citizen_id), []).append((a, b))
        for key, steps in wanted.items():
            # a level without vectors in FalkorDB answers {} without a query: neutral
            found = self._read("embeddings", key, pair_similarities,
                               [(members[a].memory.node_id, members[b].memory.node_id) for a, b in steps]) or {}
            for a, b in steps:
                known[(a, b)] = found.get((members[a].memory.node_id, members[b].memory.node_id))
        return [p.model_copy(update={"semantic_coherence": coherence_of_similarities(
                    [known.get(step) for step in zip(p.path_nodes, p.path_nodes[1:])])})
                for p in paths]


# -- exports ---------------------------------------------------------------------------------


def to_networkx_dict(graph: TraversalGraph) -> dict[str, Any]:
    """The graph in networkx's node-link format (JSON-ready): ``networkx.node_link_graph(data, edges="edges")``
    rebuilds it as a ``MultiDiGraph`` (several relation types may link two memories)."""
    hubs = set(graph.hub_nodes)
    nodes = [{"id": node.node_id, **node.model_dump(mode="json"), "hub": node.node_id in hubs}
             for node in graph.nodes]
    edges = [{"source": edge.source_id, "target": edge.target_id, "key": edge.edge_id, **edge.model_dump(mode="json"),
              "traversal_band": traversal_band(edge.traversal_weight)} for edge in graph.edges]
    attributes = graph.model_dump(mode="json", exclude={"nodes", "edges"})
    return {"directed": True, "multigraph": True, "graph": attributes, "nodes": nodes, "edges": edges}


_MERMAID_SPECIAL = set("#;[](){}<>|`&\\")
_MERMAID_CLASSES = {"focus": "fill:#f8d7da,stroke:#b02a37", "peripheral": "fill:#fff3cd,stroke:#b58105",
                    "background": "fill:#e2f0fb,stroke:#3d7ea6", "hub": "stroke-width:4px"}


def mermaid_text(text: str, limit: int = 60) -> str:
    """Text safe inside a quoted Mermaid label: entity codes for quotes, brackets and friends."""
    flat = " ".join(str(text).split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return "".join("#quot;" if ch == '"' else f"#{ord(ch)};" if ch in _MERMAID_SPECIAL else ch for ch in flat)


def to_mermaid(graph: TraversalGraph) -> str:
    """A ``graph LR`` Mermaid flowchart; node ids are generated (``n0``...) so no memory id reaches the
    syntax, labels are escaped, tiers and hubs are classes."""
    ids = {node.node_id: f"n{i}" for i, node in enumerate(graph.nodes)}
    lines = ["graph LR"]
    for node in graph.nodes:
        label = f"{mermaid_text(node.content)}<br/>{mermaid_text(node.node_type, 30)}"
        lines.append(f'    {ids[node.node_id]}["{label}"]')
    for edge in graph.edges:
        for end in (edge.source_id, edge.target_id):
            if end not in ids:  # an edge to a node outside the list still gets a box
                ids[end] = f"n{len(ids)}"
                lines.append(f'    {ids[end]}["{mermaid_text(end)}"]')
        label = f"{mermaid_text(edge.relation_type, 64)} {edge.traversal_weight:.2f}"
        lines.append(f'    {ids[edge.source_id]} -->|"{label}"| {ids[edge.target_id]}')
    lines += [f"    classDef {name} {style}" for name, style in _MERMAID_CLASSES.items()]
    members = {tier: [ids[n.node_id] for n in graph.nodes if n.activation_tier == tier] for tier in TIERS}
    members["hub"] = [ids[h] for h in graph.hub_nodes if h in ids]
    lines += [f"    class {','.join(found)} {name}" for name, found in members.items() if found]
    return "\n".join(lines) + "\n"


_TIER_COLOURS = {"focus": "#d9534f", "peripheral": "#f0ad4e", "background": "#5bc0de"}


def to_html(graph: TraversalGraph, path: str | Path | None = None, *, title: str = "Traversal graph",
            size: int = 800) -> str:
    """A self-contained HTML page (no script, no external resource): an inline SVG and the suggested paths;
    written to ``path`` when given, returned either way."""
    esc = html.escape
    n = len(graph.nodes)
    centre = size / 2
    radius = 0 if n <= 1 else max(60.0, centre - 110)
    pos: dict[str, tuple[float, float]] = {}
    for i, node in enumerate(graph.nodes):
        angle = 2 * math.pi * i / max(n, 1) - math.pi / 2
        pos[node.node_id] = (centre + radius * math.cos(angle), centre + radius * math.sin(angle))
    sizes = {node.node_id: 8 + 14 * node.activation_score for node in graph.nodes}
    hubs = set(graph.hub_nodes)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" viewBox="0 0 {size} {size}" '
        'role="img" aria-label="traversal graph">',
        "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" "
        "markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#555\"/>"
        "</marker></defs>",
    ]
    if not n:
        parts.append(f'<text x="{centre}" y="{centre}" text-anchor="middle">no memories</text>')
    for edge in graph.edges:
        if edge.source_id not in pos or edge.target_id not in pos or edge.source_id == edge.target_id:
            continue
        (x1, y1), (x2, y2) = pos[edge.source_id], pos[edge.target_id]
        dx, dy = x2 - x1, y2 - y1
        length = math.hypot(dx, dy) or 1.0
        # bend to the right of the direction, so A->B and B->A do not overlap
        cx, cy = (x1 + x2) / 2 - dy / length * 24, (y1 + y2) / 2 + dx / length * 24
        ex, ey = x2 - cx, y2 - cy
        elen = math.hypot(ex, ey) or 1.0
        r = sizes[edge.target_id] + 3
        tx, ty = x2 - ex / elen * r, y2 - ey / elen * r
        width = 1 + 3 * edge.traversal_weight
        tip = (f"{edge.relation_type} {edge.traversal_weight:.2f} ({traversal_band(edge.traversal_weight)}); "
               f"goal: {edge.goal}; mindstate: {edge.mindstate}")
        parts.append(
            f'<path d="M {x1:.1f} {y1:.1f} Q {cx:.1f} {cy:.1f} {tx:.1f} {ty:.1f}" fill="none" stroke="#555" '
            f'stroke-opacity="{0.35 + 0.6 * edge.traversal_weight:.2f}" stroke-width="{width:.2f}" '
            f'marker-end="url(#arrow)"><title>{esc(tip)}</title></path>'
        )
        lx, ly = 0.25 * x1 + 0.5 * cx + 0.25 * x2, 0.25 * y1 + 0.5 * cy + 0.25 * y2
        parts.append(f'<text x="{lx:.1f}" y="{ly:.1f}" font-size="10" fill="#333" text-anchor="middle">'
                     f"{esc(edge.relation_type)} {edge.traversal_weight:.2f}</text>")
    for node in graph.nodes:
        x, y = pos[node.node_id]
        r = sizes[node.node_id]
        colour = _TIER_COLOURS.get(node.activation_tier, "#999")
        stroke = 'stroke="#111" stroke-width="4"' if node.node_id in hubs else 'stroke="#fff" stroke-width="1.5"'
        label = node.content if len(node.content) <= 32 else node.content[:31] + "…"
        tip = (f"{node.node_id} ({node.node_type}, {node.activation_tier}, activation "
               f"{node.activation_score:.2f}, energy {node.energy:.2f}): {node.content}")
        parts.append(f'<g><title>{esc(tip)}</title>'
                     f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{colour}" {stroke}/>'
                     f'<text x="{x:.1f}" y="{y + r + 13:.1f}" font-size="12" text-anchor="middle">'
                     f"{esc(label)}</text></g>")
    parts.append("</svg>")
    names = {node.node_id: node.content for node in graph.nodes}
    rows = "".join(
        f"<tr><td>{esc(p.path_id)}</td><td>{p.traversal_probability:.3f}</td><td>{esc(p.path_narrative)}</td>"
        f"<td>{esc(' → '.join(names.get(g, g) for g in p.path_nodes))}</td>"
        f"<td>{p.semantic_coherence:.2f}</td><td>{p.emotional_consistency:.2f}</td></tr>"
        for p in graph.suggested_paths
    )
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{esc(title)}</title><style>body{{font-family:sans-serif;margin:1.5em}}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}</style>"
        f"</head><body><h1>{esc(title)}</h1>"
        f"<p>{graph.node_count} memories, {graph.edge_count} links, density {graph.graph_density:.3f}; "
        f"hubs: {esc(', '.join(names.get(h, h) for h in graph.hub_nodes) or 'none')}; "
        f"themes: {esc(', '.join(graph.central_themes) or 'none')}</p>"
        + "".join(parts)
        + "<h2>Suggested paths</h2><table><tr><th>path</th><th>probability</th><th>narrative</th>"
        "<th>memories</th><th>coherence</th><th>emotional consistency</th></tr>"
        + rows + "</table></body></html>\n"
    )
    if path is not None:
        Path(path).write_text(page, encoding="utf-8")
    return page
