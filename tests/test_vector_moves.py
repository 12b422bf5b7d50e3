"""Moving a level's vectors between FalkorDB and Postgres (issue 40, item 6): a level that grew restarts in
seconds with its vectors in Postgres, whose index is on disk, where FalkorDB rebuilds its own at every start.
On the real servers: the same retrieval answers before and after each move, vectors arrive unchanged, an
interrupted move completes when run again, and the other levels are untouched."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from llama_consciousness import ConsciousnessMemory, MemoryNode, RetrievalIntention, VectorBackendError
from llama_consciousness.vector_moves import VectorMoveReport

TEXTS = ["The harbour tides were logged at dawn", "Ada moved the ingestion pipeline to Postgres",
         "The lighthouse keeper repaired the lamp", "A storm closed the northern road for two days",
         "The bakery on the corner sells rye bread", "Grace reviewed the quarterly budget twice"]


def _memories(level: str, citizen: str | None, prefix: str) -> list[MemoryNode]:
    return [MemoryNode(node_id=f"{prefix}{i}", level=level, citizen_id=citizen, name=text[:30], description=text,
                       energy=0.5, confidence=0.8) for i, text in enumerate(TEXTS)]


def _ranked(memory: ConsciousnessMemory, level: str, citizen: str | None) -> list[tuple[str, float]]:
    hits = memory.vector_search("lamp of the lighthouse", level=level, citizen_id=citizen, k=6)
    return [(h.node_id, round(h.relevance_score, 5)) for h in hits]


@pytest.fixture
def directory(data_root: Path) -> Path:
    return data_root / f"mv{uuid.uuid4().hex[:6]}"


def test_a_level_moves_to_postgres_and_back_with_the_same_answers(directory: Path, postgres_url: str,
                                                                  citizen: str) -> None:
    other = "o" + citizen
    with ConsciousnessMemory(data_dir=directory, postgres_url=postgres_url, vector_backends={}) as memory:
        memory.upsert(_memories("N1", citizen, "a") + _memories("N1", other, "b") + _memories("N2", None, "c"))
        before = {c: _ranked(memory, "N1", c) for c in (citizen, other)}
        n2_before = _ranked(memory, "N2", None)
        assert before[citizen][0][0] == "a2"

        report = memory.move_vectors("N1", "pgvector")
        assert isinstance(report, VectorMoveReport) and report.to == "pgvector"
        assert report.moved == {f"citizen_{citizen}": 6, f"citizen_{other}": 6} and report.total == 12
        assert memory.vector_backends["N1"] == "pgvector"
        assert {c: _ranked(memory, "N1", c) for c in (citizen, other)} == before  # every citizen's graph
        assert memory.pgvector.count(f"citizen_{citizen}") == 6
        graph = memory.level("N1", citizen).graph
        assert "VECTOR" not in str(graph.query("CALL db.indexes() YIELD types RETURN types").result_set)  # gone
        assert graph.query("MATCH (n:Memory) WHERE n.embedding IS NOT NULL RETURN count(n)").result_set == [[0]]
        assert _ranked(memory, "N2", None) == n2_before  # another level is untouched
        memory.upsert([MemoryNode(node_id="a_new", level="N1", citizen_id=citizen, name="Lamp oil",
                                  description="The lighthouse lamp needs new oil", energy=0.5, confidence=0.8)])
        assert "a_new" in [h for h, _ in _ranked(memory, "N1", citizen)]
        assert memory.move_vectors("N1", "pgvector").total == 0  # already there: nothing to do

    # a later process opens the level with its new home; the old one is refused at its first write
    with ConsciousnessMemory(data_dir=directory, postgres_url=postgres_url, vector_backends={}) as memory:
        with pytest.raises(VectorBackendError, match="pgvector"):
            memory.upsert(_memories("N1", citizen, "z")[:1])
    with ConsciousnessMemory(data_dir=directory, postgres_url=postgres_url,
                             vector_backends={"N1": "pgvector"}) as memory:
        moved_once = _ranked(memory, "N1", citizen)
        back = memory.move_vectors("N1", "falkordb")
        assert back.moved[f"citizen_{citizen}"] == 7
        assert memory.pgvector.count(f"citizen_{citizen}") == 0
        assert _ranked(memory, "N1", citizen) == moved_once  # float32 vectors, both ways
        graph = memory.level("N1", citizen).graph
        assert "VECTOR" in str(graph.query("CALL db.indexes() YIELD types RETURN types").result_set)  # made again
        stream = memory.retrieve_stream(RetrievalIntention(query_text="lighthouse lamp", citizen_id=citizen,
                                                           query_levels=["N1"]))
        assert "a2" in {n.node_id for nodes in stream.activation_tiers.values() for n in nodes}
    with ConsciousnessMemory(data_dir=directory, postgres_url=postgres_url, vector_backends={}) as memory:
        memory.upsert(_memories("N1", citizen, "y")[:1])  # FalkorDB again: accepted


def test_an_interrupted_move_completes_when_run_again(directory: Path, postgres_url: str, citizen: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from llama_consciousness import vector_moves

    with ConsciousnessMemory(data_dir=directory, postgres_url=postgres_url, vector_backends={}) as memory:
        memory.upsert(_memories("N1", citizen, "a"))
        before = _ranked(memory, "N1", citizen)
        calls = {"n": 0}
        clear = vector_moves._clear_vectors

        def crash_after_first_batch(node_ids):  # the process dies after one batch reached Postgres
            calls["n"] += 1
            if calls["n"] == 2:
                raise RuntimeError("killed")
            return clear(node_ids)

        monkeypatch.setattr(vector_moves, "_clear_vectors", crash_after_first_batch)
        with pytest.raises(RuntimeError, match="killed"):
            vector_moves.move_vectors(memory, "N1", "pgvector", batch=2)
        assert memory.vector_backends["N1"] == "falkordb"  # not switched: the move did not finish
        monkeypatch.undo()
        assert memory.move_vectors("N1", "pgvector").total == 4  # the two of the first batch are done
        assert _ranked(memory, "N1", citizen) == before


def test_bad_moves_are_refused(directory: Path, postgres_url: str) -> None:
    with ConsciousnessMemory(data_dir=directory, postgres_url=postgres_url, vector_backends={}) as memory:
        with pytest.raises(ValueError, match="one of"):
            memory.move_vectors("N2", "qdrant")
        with pytest.raises(ValueError, match="level"):
            memory.move_vectors("N9", "pgvector")


def test_the_cli_moves_a_level(directory: Path, postgres_url: str, citizen: str,
                               monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from llama_consciousness.cli import main
    from llama_consciousness.memory import PGVECTOR_LEVELS_ENV, POSTGRES_URL_ENV

    with ConsciousnessMemory(data_dir=directory, postgres_url=postgres_url, vector_backends={}) as memory:
        memory.upsert(_memories("N2", None, "c"))
        before = _ranked(memory, "N2", None)
    monkeypatch.setenv(POSTGRES_URL_ENV, postgres_url)
    monkeypatch.delenv(PGVECTOR_LEVELS_ENV, raising=False)
    assert main(["move-vectors", "--level", "N2", "--to", "pgvector", "--data-dir", str(directory)]) == 0
    out = capsys.readouterr().out
    assert "collective_n2: 6 vectors moved" in out and "vector_backends={'N2': 'pgvector'}" in out
    monkeypatch.setenv(PGVECTOR_LEVELS_ENV, "N2")
    with ConsciousnessMemory(data_dir=directory) as memory:
        assert memory.vector_backends["N2"] == "pgvector"
        assert _ranked(memory, "N2", None) == before
        memory.move_vectors("N2", "falkordb")  # the shared Postgres keeps no collective_n2 rows of this test
        assert memory.pgvector.count("collective_n2") == 0
