"""Hand-made traversal graphs, shared by the tests of the traversal formulas
(``tests/scoring/test_traversal.py``) and of the graph exports
(``tests/postprocessors/test_traversal_paths.py``).
"""

from __future__ import annotations

from datetime import datetime, timezone

from llama_consciousness.schema.graph import GraphEdge, GraphNode, TraversalGraph

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def edge(source="a", target="b", *, energy=0.5, confidence=0.5, goal="g", emotions=None, transfer=0.5,
         weight=0.5, edge_id=None, relation_type="RELATES_TO") -> GraphEdge:
    return GraphEdge(edge_id=edge_id or f"{source}->{target}", source_id=source, target_id=target,
                     relation_type=relation_type, goal=goal, mindstate="m", energy=energy, confidence=confidence,
                     emotion_vector=emotions, energy_transfer_coefficient=transfer, resolution_state="in_progress",
                     traversal_weight=weight)


def gnode(node_id, node_type="Memory", activation=0.5, emotions=None, content=None, tier="focus") -> GraphNode:
    return GraphNode(node_id=node_id, node_type=node_type, content=content or node_id, activation_score=activation,
                     activation_tier=tier, energy=0.5, confidence=0.5, emotion_vector=emotions,
                     valid_at=T0, created_at=T0)


def _small_graph() -> TraversalGraph:
    nodes = [gnode("A", "Problem", 1.0, {"frustration": 0.8}), gnode("B", "Evidence", 0.5, {"frustration": 0.8}),
             gnode("C", "Conclusion", 0.25, None), gnode("D", "Evidence", 0.5), gnode("E", "Evidence", 0.0)]
    edges = [edge("A", "B", weight=0.9, edge_id="ab"), edge("B", "C", weight=0.9, edge_id="bc"),
             edge("A", "D", weight=0.95, edge_id="ad"), edge("D", "E", weight=0.2, edge_id="de")]
    return TraversalGraph(nodes=nodes, edges=edges, node_count=5, edge_count=4, path_count=0, graph_density=0.2)
