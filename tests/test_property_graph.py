"""Stock LlamaIndex property-graph retrievers over a level graph, through ``memory.property_graph_store``."""

from __future__ import annotations

import pytest
from llama_index.core import PropertyGraphIndex
from llama_index.core.graph_stores.types import ChunkNode, EntityNode, Relation
from llama_index.core.indices.property_graph import TextToCypherRetriever, VectorContextRetriever
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.vector_stores.types import VectorStoreQuery

from llama_consciousness import ConsciousnessRelationship, MemoryNode


class CypherWriter(CustomLLM):
    """A scripted LLM that writes one Cypher query (and keeps the prompt it was given)."""

    cypher: str = ""
    prompts: list[str] = []

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="cypher-writer")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs):
        self.prompts.append(prompt)
        return CompletionResponse(text=self.cypher)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs):
        yield self.complete(prompt)


@pytest.fixture
def linked(memory, citizen):
    def node(node_id: str, text: str, node_type: str = "Memory") -> MemoryNode:
        return MemoryNode(node_id=node_id, level="N1", citizen_id=citizen, node_type=node_type, name=text[:40],
                          description=text, energy=0.6, confidence=0.8, emotion_vector={"calm": 0.5})

    def link(source: str, target: str, kind: str) -> ConsciousnessRelationship:
        return ConsciousnessRelationship(source_id=source, target_id=target, relation_type=kind, goal="plan",
                                         mindstate="planning", energy=0.7, confidence=0.8,
                                         emotion_vector={"calm": 0.5})

    memory.upsert([node("dentist", "My dentist is Dr Moss on Rue Cler."),
                   node("checkup", "Book the yearly dental checkup before March.", "Task"),
                   node("insurance", "The dental insurance renews in January.")],
                  [link("dentist", "checkup", "ENABLES"), link("checkup", "insurance", "DEPENDS_ON")])
    return memory.property_graph_store("N1", citizen)


def test_vector_context_retriever_reads_memories_and_their_links(memory, linked) -> None:
    index = PropertyGraphIndex.from_existing(property_graph_store=linked, embed_model=memory.embed_model,
                                             llm=CypherWriter(), embed_kg_nodes=False)
    retriever = VectorContextRetriever(linked, embed_model=memory.embed_model, similarity_top_k=2, path_depth=2,
                                       include_text=False, include_properties=True)
    found = index.as_retriever(sub_retrievers=[retriever]).retrieve("who is my dentist")
    texts = "\n".join(n.node.get_content() for n in found)
    assert "My dentist is Dr Moss on Rue Cler. -> ENABLES" in texts
    assert "-> Book the yearly dental checkup before March." in texts
    assert "-> The dental insurance renews in January." in texts  # two hops out
    # without properties the stock retriever names memories by id
    plain = VectorContextRetriever(linked, embed_model=memory.embed_model, similarity_top_k=2, include_text=False)
    assert "dentist -> ENABLES -> checkup" in [n.node.get_content() for n in plain.retrieve("who is my dentist")]


def test_text_to_cypher_retriever_runs_read_only_over_our_schema(memory, linked) -> None:
    llm = CypherWriter(cypher="MATCH (m:Memory)-[r:LINK]->(t:Memory) WHERE r.relation_type = 'ENABLES' "
                              "RETURN m.description AS from_memory, t.description AS to_memory", prompts=[])
    retriever = TextToCypherRetriever(linked, llm=llm)
    found = retriever.retrieve("what does knowing my dentist enable?")
    assert "Dr Moss" in found[0].node.get_content() and "yearly dental checkup" in found[0].node.get_content()
    assert "relation_type" in llm.prompts[0] and "Node label: Memory" in llm.prompts[0]  # our schema, described
    # a write is refused by the server: the view is read-only
    with pytest.raises(Exception):
        linked.structured_query("MATCH (m:Memory) SET m.energy = 0.0")
    assert memory.get_node("dentist", "N1", linked.citizen_id).energy == pytest.approx(0.6)


def test_the_view_gets_by_id_and_property_and_refuses_writes(linked) -> None:
    (dentist,) = linked.get(ids=["dentist"])
    assert isinstance(dentist, ChunkNode) and dentist.text == "My dentist is Dr Moss on Rue Cler."
    assert dentist.properties["current"] is True
    assert [n.id for n in linked.get(properties={"node_type": "Task"})] == ["checkup"]
    assert linked.get(properties={"node_type": "Task"}, ids=["dentist"]) == []
    with pytest.raises(ValueError, match="cannot match"):
        linked.get(properties={"description": "x' OR 1=1"})
    triplets = linked.get_triplets(ids=["checkup"], relation_names=["DEPENDS_ON"])
    assert [(s.id, r.label, t.id) for s, r, t in triplets] == [("checkup", "DEPENDS_ON", "insurance")]
    nodes, scores = linked.vector_query(VectorStoreQuery(query_str="dental insurance", similarity_top_k=1))
    assert [n.id for n in nodes] == ["insurance"] and 0 < scores[0] <= 1
    parametrised = linked.structured_query("MATCH (m:Memory {node_id: $id}) RETURN m.name AS name", {"id": "dentist"})
    assert parametrised == [{"name": "My dentist is Dr Moss on Rue Cler."}]
    for write in (lambda: linked.upsert_nodes([EntityNode(name="x")]),
                  lambda: linked.upsert_relations([Relation(label="R", source_id="a", target_id="b")]),
                  lambda: linked.delete(ids=["dentist"])):
        with pytest.raises(NotImplementedError, match="read-only"):
            write()


def test_what_review_found(memory, linked) -> None:
    import asyncio

    # a returned node reaches the LLM as its properties, without the vector
    (row,) = linked.structured_query("MATCH (m:Memory {node_id: 'dentist'}) RETURN m")
    assert row["m"]["description"] == "My dentist is Dr Moss on Rue Cler." and "embedding" not in row["m"]
    # the async reads run off the event loop and answer the same
    nodes, _ = asyncio.run(linked.avector_query(VectorStoreQuery(query_str="dental insurance", similarity_top_k=1)))
    assert [n.id for n in nodes] == ["insurance"]
    assert [t[2].id for t in asyncio.run(linked.aget_triplets(ids=["checkup"], relation_names=["DEPENDS_ON"]))] == \
        ["insurance"]
    with pytest.raises(ValueError):
        memory.property_graph_store("N1", linked.citizen_id, temporal_mode="bogus")
