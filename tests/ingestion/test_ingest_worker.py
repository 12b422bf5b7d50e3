"""The ingestion worker process: pure steps of later chunks, run beside the writer.

These tests talk to a real worker process (``python -m
llama_consciousness.ingestion.worker``); the end-to-end equivalence with
in-process runs is in ``test_ingestion_pipeline.py`` (``worker="on"``).
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

from llama_consciousness.ingestion import worker as workers
from llama_consciousness.nodes import text_node_to_memory
from llama_consciousness.ingestion.pipeline import IngestOptions, _raw_text_node
from llama_consciousness.ingestion.validator import MemoryValidationError
from llama_consciousness.ingestion.worker import IngestWorkerError, PureStageWorker, from_records, to_records
from llama_consciousness.nodes import memory_text


def _record(i: int, **fields) -> dict:
    record = {
        "node_id": f"w_{i}", "level": "N2", "node_type": "Observation", "name": f"Reading {i}",
        "description": f"Meter {i} showed {i * 7} litres; mail ops{i}@example.com about it.",
        "energy": 0.5, "confidence": 0.7, "emotion_vector": {"curiosity": 0.3}, "goal": "measure",
        "mindstate": "attentive", "formation_trigger": "a test", "created_at": "2019-03-01T09:00:00Z",
    }
    record.update(fields)
    return record


def _nodes(start: int, count: int, **fields):
    return [_raw_text_node(_record(i, **fields), i + 1) for i in range(start, start + count)]


def test_records_cross_the_pipe_with_all_the_store_steps_read() -> None:
    nodes = _nodes(0, 3)
    nodes[1].embedding = [0.25, -0.5]
    back = from_records(pickle.loads(pickle.dumps(to_records(nodes))))
    assert [(n.node_id, n.text, n.metadata, n.embedding) for n in back] == \
        [(n.node_id, n.text, n.metadata, n.embedding) for n in nodes]


def test_a_validation_error_crosses_processes_with_its_fields() -> None:
    error = pickle.loads(pickle.dumps(MemoryValidationError("m1", ["energy: too high", "goal: missing"], 12)))
    assert (error.item_id, error.reasons, error.line) == ("m1", ["energy: too high", "goal: missing"], 12)
    assert "line 12" in str(error)


def test_the_worker_answers_in_order_and_raises_the_failing_chunk() -> None:
    worker = PureStageWorker()
    try:
        options = IngestOptions()
        first = worker.submit(options, _nodes(0, 4))
        broken = worker.submit(options, _nodes(4, 2, energy=3.0))
        third = worker.submit(options, _nodes(6, 2))
        with pytest.raises(ValueError, match="not the next answer"):
            worker.result(third)
        out, report, _ = worker.result(first)
        assert [n.node_id for n in out] == [f"w_{i}" for i in range(4)]
        # the pure steps ran there: PII scrubbed, completeness scored, concepts found
        assert all("[REDACTED:email]" in n.text and "@example.com" not in n.text for n in out)
        assert all(0 < n.metadata["metadata_completeness"] <= 1 and n.metadata["concepts"] for n in out)
        assert report.rejected == []
        with pytest.raises(MemoryValidationError, match="energy") as raised:
            worker.result(broken)
        assert (raised.value.item_id, raised.value.line) == ("w_4", 5)
        out, _, _ = worker.result(third)  # an error does not poison the chunks after it
        assert [n.node_id for n in out] == ["w_6", "w_7"]

        dropped, report, _ = worker.result(worker.submit(IngestOptions(on_invalid="drop"), _nodes(8, 2, energy=3.0)))
        assert dropped == [] and [r.item_id for r in report.rejected] == ["w_8", "w_9"]
    finally:
        worker.close()


def test_the_worker_embeds_exactly_as_this_process(memory) -> None:
    worker = PureStageWorker()
    try:
        out, _, _ = worker.result(worker.submit(IngestOptions(), _nodes(0, 5), memory.embed_model))
    finally:
        worker.close()
    expected = memory.embed_model.get_text_embedding_batch([memory_text(text_node_to_memory(n)) for n in out])
    assert all(n.embedding is not None for n in out)
    np.testing.assert_array_equal(np.array([n.embedding for n in out]), np.array(expected))


def test_a_dead_worker_is_a_clear_error_and_is_not_reused() -> None:
    worker = workers.acquire()
    assert worker is not None
    worker._process.kill()
    worker._process.wait()
    with pytest.raises(IngestWorkerError):
        worker.result(worker.submit(IngestOptions(), _nodes(0, 2)))
    workers.release(worker, healthy=True)  # dead: closed, not kept
    fresh = workers.acquire()
    try:
        assert fresh is not worker and fresh.alive()
        out, _, _ = fresh.result(fresh.submit(IngestOptions(), _nodes(0, 2)))
        assert len(out) == 2
    finally:
        workers.release(fresh, healthy=True)
    again = workers.acquire()  # the healthy one was kept for the next ingestion
    assert again is fresh
    workers.release(again, healthy=False)
    assert not again.alive()


def test_unknown_worker_option_is_refused() -> None:
    with pytest.raises(ValueError, match="worker"):
        IngestOptions(worker="sometimes")


@pytest.mark.parametrize(("field", "value"), [
    ("entities", "false"), ("pii", 0), ("concepts", None),  # text or numbers for a switch: truthy, or not
    ("duplicate_threshold", 0), ("duplicate_threshold", 1.5), ("duplicate_threshold", "0.9"),
    ("chunk_size", 0), ("batch_size", "500"), ("chunk_size", True), ("batch_size", 2.5),
])
def test_options_of_the_wrong_kind_are_refused_by_name(field: str, value: Any) -> None:
    """A switch given as text ("false" from JSON) would leave its step on; a threshold or size of another
    kind would fail minutes later inside a step: each is refused when the options are made, by name."""
    with pytest.raises(ValueError, match=f"^{field} must be"):
        IngestOptions(**{field: value})
    assert IngestOptions(**{field: IngestOptions.__dataclass_fields__[field].default})  # the default is fine


def test_record_text_nodes_equal_validated_ones_with_containers_of_their_own() -> None:
    from llama_index.core.schema import TextNode

    from llama_consciousness.nodes import record_text_node

    fast = record_text_node("m1", "Meter read 7 litres.", {"level": "N2", "energy": 0.5}, [0.25, 0.5])
    slow = TextNode(id_="m1", text="Meter read 7 litres.", metadata={"level": "N2", "energy": 0.5},
                    embedding=[0.25, 0.5])
    assert fast == slow and fast.model_dump() == slow.model_dump() and fast.hash == slow.hash
    other = record_text_node("m2", "", {})
    fast.excluded_llm_metadata_keys.append("energy")
    fast.relationships["x"] = "y"  # not shared with other nodes
    assert other.excluded_llm_metadata_keys == [] and other.relationships == {}


def test_without_a_worker_process_everything_runs_here(memory, monkeypatch, caplog) -> None:
    import subprocess
    import uuid

    def refuse(*args, **kwargs):
        raise OSError("no processes in this sandbox")

    workers.shutdown()  # no idle worker to fall back on
    monkeypatch.setattr(subprocess, "Popen", refuse)
    tag = uuid.uuid4().hex[:8]
    records = [_record(i, node_id=f"nw_{tag}_{i}") for i in range(5)]
    report = memory.ingest([_raw_text_node(r, 1) for r in records], worker="on", chunk_size=2,
                           entities=False, duplicates="off")
    assert report.inserted == 5 and report.rejected == []
    assert "cannot start an ingestion worker" in caplog.text
    ids = [r["node_id"] for r in records]
    assert {n.node_id for n in memory.get_nodes(ids, "N2")} == set(ids)


def test_a_worker_that_fails_midway_hands_its_chunks_back(memory, monkeypatch, caplog) -> None:
    """The chunks the worker held, and all later ones, run in this process: nothing is lost."""
    import uuid

    real = PureStageWorker.result
    calls = []

    def dies_on_second_answer(self, ticket):
        calls.append(ticket)
        if len(calls) == 2:
            self._process.kill()
            raise IngestWorkerError("the ingestion worker died (test)")
        return real(self, ticket)

    monkeypatch.setattr(PureStageWorker, "result", dies_on_second_answer)
    tag = uuid.uuid4().hex[:8]
    records = [_record(i, node_id=f"fw_{tag}_{i}") for i in range(9)]
    report = memory.ingest([_raw_text_node(r, i + 1) for i, r in enumerate(records)], worker="on",
                           chunk_size=2, entities=False, duplicates="off")
    assert report.inserted == 9 and report.rejected == []
    assert len(calls) == 2  # after the failure, no chunk went to a worker again
    assert "the ingestion worker failed" in caplog.text
    ids = [r["node_id"] for r in records]
    stored = memory.get_nodes(ids, "N2")
    assert {n.node_id for n in stored} == set(ids)
    assert all("[REDACTED:email]" in n.description for n in stored)  # the pure steps ran for every chunk


def test_the_worker_answers_placed_relationships_with_their_rows(memory) -> None:
    """Relationships with a graph come back as upsert rows too; one without a level is left to the writer."""
    from llama_consciousness.nodes import text_node_to_relationship
    from llama_consciousness.ingestion.writer import ConsciousnessGraphWriter
    from llama_consciousness.storage.records import PreparedEdge, prepare_edge

    relationship = {"kind": "relationship", "source_id": "w_0", "target_id": "w_1", "relation_type": "TRIGGERED",
                    "goal": "measure", "mindstate": "attentive", "energy": 0.4, "confidence": 0.6,
                    "emotion_vector": {"curiosity": 0.2},
                    "created_at": "2019-03-01T09:00:00Z"}
    nodes = _nodes(0, 2) + [_raw_text_node({**relationship, "level": "N2"}, 3), _raw_text_node(relationship, 4)]
    worker = workers.acquire()
    try:
        out, _, prepared = worker.result(worker.submit(IngestOptions(), nodes))
    finally:
        workers.release(worker, healthy=True)
    assert list(prepared) == [2]  # by position among the kept nodes; the unplaced one has none
    assert isinstance(prepared[2], PreparedEdge)
    here, _ = workers.run_pure(IngestOptions(), from_records(to_records(nodes)))
    assert prepared[2] == prepare_edge(text_node_to_relationship(here[2]))
    # its fields travel in the row only; the node keeps what places it and the private keys
    assert out[2].metadata == {k: v for k, v in here[2].metadata.items()
                               if k in ("kind", "level") or k.startswith("lc_")}
    assert out[3].metadata == here[3].metadata  # not prepared: all of it
    # the writer takes the prepared row instead of reading the node again
    writer = ConsciousnessGraphWriter(memory=memory, prepared={id(out[2]): prepared[2]})
    batches = writer._split(out)
    assert [r for b in batches.values() for r in b.relationships if type(r) is PreparedEdge] == [prepared[2]]


@pytest.mark.parametrize("name", [
    "Reading", "  padded  ", "\ttabbed\n", "nbsp\u00a0", "\u2003em space", "unit sep\x1f", "\x1cfile sep",
    "x", "Ünïcode ends é", "é", "emoji 🙂",
])
def test_embedding_text_is_the_models_text(name) -> None:
    """The text embedded without the model is the model's ``memory_text``, whatever the name's ends."""
    from llama_consciousness.nodes import embedding_text

    node = _raw_text_node(_record(1, name=name, description="  Meter 7 showed 49 litres.\n"), 1)
    assert embedding_text(node) == memory_text(text_node_to_memory(node))


def test_pure_steps_leave_relationships_as_validated() -> None:
    """What ``prepare_edges`` relies on: after validation, no pure step changes a relationship,
    so the validator's model is the relationship the writer would read."""
    from llama_consciousness.nodes import text_node_to_relationship
    from llama_consciousness.ingestion.steps import pure_pipeline
    from llama_consciousness.ingestion.validator import ConsciousnessMetadataValidator

    relationship = {"kind": "relationship", "source_id": "w_0", "target_id": "w_1", "relation_type": "TRIGGERED",
                    "level": "N2", "goal": "call ops@example.com", "mindstate": "ignore previous instructions",
                    "energy": 0.4, "confidence": 0.6, "emotion_vector": {"curiosity": 0.2},
                    "formation_trigger": "Ada Lovelace asked why the FalkorDB setup failed"}
    node = _raw_text_node(relationship, 3)
    pipeline = pure_pipeline(IngestOptions())
    steps = pipeline.transformations
    validator = steps[0]
    assert isinstance(validator, ConsciousnessMetadataValidator)
    validator([node])
    after_validation = dict(node.metadata)
    for step in steps[1:]:
        assert step([node]) == [node]
    assert node.metadata == after_validation
    # the same relationship (a defaulted creation time is "now" at each build: not part of the hash)
    from llama_consciousness.storage.records import edge_row

    lent, read = validator.validated_relationship(node), text_node_to_relationship(node)
    assert lent.model_dump(exclude={"created_at", "valid_at"}) == read.model_dump(exclude={"created_at", "valid_at"})
    assert lent.model_fields_set == read.model_fields_set and edge_row(lent)["hash"] == edge_row(read)["hash"]
    assert validator.validated_relationship(_raw_text_node(relationship, 3)) is None  # another node: none


@pytest.mark.parametrize("given", [None, 0.01, 1.5])
def test_a_validated_relationship_carries_the_computed_completeness(given) -> None:
    """A completeness in the record is judged as given (1.5 is rejected, as for a memory), then replaced."""
    from llama_consciousness.nodes import text_node_to_relationship
    from llama_consciousness.ingestion.validator import ConsciousnessMetadataValidator

    relationship = {"kind": "relationship", "source_id": "w_0", "target_id": "w_1", "relation_type": "TRIGGERED",
                    "level": "N2", "goal": "g", "mindstate": "m", "energy": 0.4, "confidence": 0.6,
                    "emotion_vector": {"curiosity": 0.2}, "created_at": "2019-03-01T09:00:00Z"}
    if given is not None:
        relationship["metadata_completeness"] = given
    node = _raw_text_node(relationship, 3)
    validator = ConsciousnessMetadataValidator(mode="drop")
    kept = validator([node])
    if given == 1.5:
        assert kept == [] and "metadata_completeness" in validator.report.rejected[0].reasons[0]
        return
    lent, read = validator.validated_relationship(node), text_node_to_relationship(node)
    assert lent.metadata_completeness == node.metadata["metadata_completeness"] == round(7 / 13, 6)  # the seven required fields, defaults included
    assert lent == read and lent.model_fields_set == read.model_fields_set


def test_the_package_does_not_import_the_worker_module() -> None:
    """``python -m llama_consciousness.ingestion.worker`` runs the module as ``__main__``: had the
    package imported it already, the process would hold two copies of it (and runpy warns)."""
    import subprocess
    import sys

    code = ("import sys, llama_consciousness, llama_consciousness.ingestion, llama_consciousness.ingestion.pipeline; "
            "print('llama_consciousness.ingestion.worker' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_worker_says_when_it_has_started_and_answers_after() -> None:
    """``ready`` never waits; the child's hello is read once, by ``ready`` or by the first ``result``."""
    import time

    worker = PureStageWorker()
    try:
        assert worker.ready() is False  # its imports take about a second
        deadline = time.monotonic() + 60
        while not worker.ready():
            assert time.monotonic() < deadline, "the worker never started"
            time.sleep(0.02)
        out, _, _ = worker.result(worker.submit(IngestOptions(), _nodes(0, 2)))
        assert [n.node_id for n in out] == ["w_0", "w_1"]
    finally:
        worker.close()
    unread = PureStageWorker()  # submitted before it started: the hello is skipped by ``result``
    try:
        out, _, _ = unread.result(unread.submit(IngestOptions(), _nodes(2, 1)))
        assert [n.node_id for n in out] == ["w_2"] and unread.ready()
    finally:
        unread.close()


def _ingest_auto_over_a_low_bar(memory, monkeypatch, count: int):
    """``count`` records in chunks of 2 with ``worker="auto"`` and its text bars at 100 characters, into a
    citizen of its own: the report, the ids, the citizen."""
    import uuid

    from llama_consciousness.ingestion import pipeline

    monkeypatch.setattr(pipeline, "WORKER_CHARS", 100)
    monkeypatch.setattr(pipeline, "WORKER_CHARS_KEPT", 100)
    citizen = "au_" + uuid.uuid4().hex[:8]
    records = [_record(i, node_id=f"{citizen}_{i}", level="N1", citizen_id=citizen) for i in range(count)]
    report = memory.ingest([_raw_text_node(r, i + 1) for i, r in enumerate(records)], chunk_size=2,
                           entities=False, duplicates="off")
    return report, [r["node_id"] for r in records], citizen


@pytest.mark.parametrize("started", [False, True])
def test_auto_runs_chunks_here_until_its_worker_has_started(memory, monkeypatch, started) -> None:
    """``worker="auto"`` over enough text starts a worker, but gives it chunks only once it is ready: a run
    does not wait a second of imports; ``"on"`` always waits (the tests above)."""
    from llama_consciousness.ingestion import pipeline

    here, sent = [], []
    pure_here, submit = pipeline._pure_here, PureStageWorker.submit
    monkeypatch.setattr(pipeline, "_pure_here", lambda o, chunk: here.append(len(chunk)) or pure_here(o, chunk))
    monkeypatch.setattr(PureStageWorker, "submit",
                        lambda self, o, nodes, embed=None: sent.append(len(nodes)) or submit(self, o, nodes, embed))
    monkeypatch.setattr(PureStageWorker, "ready", lambda self: started)
    report, ids, citizen = _ingest_auto_over_a_low_bar(memory, monkeypatch, 6)
    assert report.inserted == 6
    assert (here, sent) == (([], [2, 2, 2]) if started else ([2, 2, 2], []))
    stored = memory.get_nodes(ids, "N1", citizen)
    assert len(stored) == 6 and all("[REDACTED:email]" in n.description for n in stored)


def test_auto_starts_a_worker_for_long_text_not_for_a_few_messages(memory, monkeypatch) -> None:
    """The choice reads the text's size as well as the records' number (2 KB messages pay a worker long before
    3,000 of them); a worker kept from an earlier run lowers the bar, since it costs no start."""
    import uuid

    from llama_consciousness.ingestion import pipeline

    acquired = []
    real = workers.acquire
    monkeypatch.setattr(workers, "acquire", lambda: acquired.append(1) or real())
    tag = uuid.uuid4().hex[:8]

    def ingest(count: int, size: int) -> None:
        # a citizen of its own: long texts in a shared level would crowd other tests' rendered streams
        records = [_record(i, node_id=f"lt_{tag}_{size}_{i}", description=f"Reading {i}. " + "x" * size,
                           level="N1", citizen_id=f"lt_{tag}") for i in range(count)]
        assert memory.ingest([_raw_text_node(r, 1) for r in records], entities=False).inserted == count

    workers.shutdown()  # none kept
    ingest(3, 1_000)
    assert acquired == []
    monkeypatch.setattr(pipeline, "WORKER_CHARS", 20_000)
    ingest(3, 10_000)
    assert acquired == [1]  # 30,000 characters in 3 records
    assert workers.idle()
    monkeypatch.setattr(pipeline, "WORKER_CHARS_KEPT", 5_000)
    ingest(3, 2_000)
    assert acquired == [1, 1]


def test_chunks_end_at_their_records_or_their_text() -> None:
    from llama_consciousness.ingestion.pipeline import _chunks

    nodes = [_raw_text_node(_record(i, description="y" * length), 1) for i, length in enumerate([10, 50, 45, 5, 200, 1])]
    assert [[n.node_id for n in c] for c in _chunks(nodes, 3, 100)] == [["w_0", "w_1", "w_2"], ["w_3", "w_4"], ["w_5"]]
    assert [len(c) for c in _chunks(nodes, 2, 10_000)] == [2, 2, 2]
    assert [len(c) for c in _chunks(nodes, 10, 1)] == [1] * 6


def test_auto_finishes_here_when_its_worker_dies_before_it_starts(memory, monkeypatch) -> None:
    def dead_on_arrival() -> PureStageWorker:
        worker = PureStageWorker()
        worker._process.kill()
        worker._process.wait()
        return worker

    monkeypatch.setattr(workers, "acquire", dead_on_arrival)
    report, _, _ = _ingest_auto_over_a_low_bar(memory, monkeypatch, 5)
    assert report.inserted == 5 and report.rejected == []
    assert all(w.alive() for w in workers._idle)  # the dead one was not kept
