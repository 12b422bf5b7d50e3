"""Forget and restore (issue 41) on the real embedded servers: a bitemporal retraction that stays in the
history, and an exact undo within a window."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from llama_consciousness import forgetting
from llama_consciousness.memory_block import ConsciousnessMemoryBlock
from llama_consciousness.render import render_stream
from llama_consciousness.schema import ConsciousnessRelationship, ForgetReason, MemoryNode
from llama_consciousness.storage import channels
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.temporal import TemporalWindow

UTC = timezone.utc
T0 = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)
TEXTS = {
    "home": "I moved to Lyon in March and I love the markets there.",
    "sister": "My sister Ada works at the observatory on the hill.",
    "cat": "We adopted a cat called Pixel last week.",
    "deadline": "The project deadline is Friday the 12th.",
    "cello": "I started learning the cello in January.",
}


def _load(memory, citizen: str) -> None:
    memory.ingest([MemoryNode(node_id=key, level="N1", citizen_id=citizen, name=text[:40], description=text,
                              energy=0.5, confidence=0.8, created_at=T0, valid_at=T0)
                   for key, text in TEXTS.items()])


def _found(memory, citizen: str, question: str, **intention) -> list[tuple[str, float]]:
    retriever = memory.retriever(citizen_id=citizen, intention_defaults=intention or None)
    return [(n.node.node_id, round(n.score, 6)) for n in retriever.retrieve(question)]


def test_a_forgotten_memory_leaves_current_recall_and_stays_in_the_history(memory, citizen) -> None:
    _load(memory, citizen)
    before = _found(memory, citizen, "Where do I live now?")
    assert before[0][0] == "N1:home"

    report = memory.forget(["home", "nobody"], "N1", citizen, reason="user_requested", by="ada", note="moved away")
    assert report.forgotten == ["home"] and report.missing == ["nobody"] and report.reason is ForgetReason.USER_REQUESTED
    assert "N1:home" not in [i for i, _ in _found(memory, citizen, "Where do I live now?")]
    assert memory.vector_search("Where do I live?", "N1", citizen, k=5)[0].node_id != "home"

    # what was believed then is still what was believed then; the full history shows it, with why
    then = T0 + timedelta(days=1)
    assert "N1:home" in [i for i, _ in _found(memory, citizen, "Where do I live now?", temporal_mode="point_in_time",
                                              as_of_time=then)]
    history = memory.retrieve_stream(memory.retriever(citizen_id=citizen).intention_for("Where do I live?")
                                     .model_copy(update={"temporal_mode": "full_history"}))
    node = next(n for level in history.levels.values()
                for n in level.vector_results + level.graph_results + level.keyword_results if n.node_id == "home")
    assert node.forgotten_reason is ForgetReason.USER_REQUESTED and node.forgotten_by == "ada"
    assert [(r.event, r.note) for r in node.retractions] == [("forgotten", "moved away")]
    assert "[forgotten " in render_stream(history).text and "user requested]" in render_stream(history).text

    # idempotent: forgetting again changes nothing, whatever the reason given
    again = memory.forget("home", "N1", citizen, reason="obsolete")
    assert again.forgotten == [] and again.already_forgotten == ["home"]
    stored = memory.get_node("home", "N1", citizen)
    assert stored.forgotten_reason is ForgetReason.USER_REQUESTED and len(stored.retractions) == 1


def test_a_restore_gives_back_exactly_what_was_recalled_before(memory, citizen) -> None:
    _load(memory, citizen)
    questions = ["Where do I live now?", "Who works at the observatory?", "What instrument am I learning?"]
    before = [_found(memory, citizen, q) for q in questions]
    memory.forget(["home", "sister"], "N1", citizen, reason=ForgetReason.INCORRECT)
    assert [_found(memory, citizen, q) for q in questions] != before

    report = memory.restore(["home", "sister", "cat"], "N1", citizen, by="support")
    assert report.restored == ["home", "sister"] and report.not_forgotten == ["cat"]
    assert [_found(memory, citizen, q) for q in questions] == before
    node = memory.get_node("home", "N1", citizen)
    assert node.forgotten_at is None and node.expired_at is None
    assert [(r.event, r.by) for r in node.retractions] == [("forgotten", None), ("restored", "support")]
    assert memory.restore("home", "N1", citizen).not_forgotten == ["home"]


def test_a_restore_after_the_window_is_refused_and_a_superseded_memory_comes_back_superseded(memory, citizen) -> None:
    _load(memory, citizen)
    long_ago = datetime.now(UTC) - timedelta(days=31)
    forgetting.forget(memory, ["cat"], "N1", citizen, reason="obsolete", at=long_ago)
    late = memory.restore("cat", "N1", citizen)
    assert late.too_late == ["cat"] and late.restored == []
    assert memory.restore("cat", "N1", citizen, window=timedelta(days=40)).restored == ["cat"]

    memory.upsert([MemoryNode(node_id="deadline_v2", level="N1", citizen_id=citizen, name="deadline",
                              description="The project deadline moved to Monday the 15th.", energy=0.5,
                              confidence=0.8, supersedes="deadline", created_at=T0 + timedelta(days=3))])
    superseded = memory.get_node("deadline", "N1", citizen)
    assert superseded.superseded_by == "deadline_v2" and superseded.expired_at is not None
    memory.forget("deadline", "N1", citizen, reason="obsolete")
    memory.restore("deadline", "N1", citizen)
    back = memory.get_node("deadline", "N1", citizen)
    assert back.expired_at == superseded.expired_at and back.superseded_by == "deadline_v2"

    with pytest.raises(ValueError, match="restore window"):
        memory.restore("cat", "N1", citizen, window=timedelta(0))


def test_walks_do_not_pass_through_a_forgotten_memory(memory) -> None:
    citizen = "t" + uuid.uuid4().hex[:12]
    nodes = [MemoryNode(node_id=k, level="N1", citizen_id=citizen, name=f"step {k}", description=f"step {k}",
                        energy=0.6, confidence=0.8) for k in ("a", "b", "c")]
    links = [ConsciousnessRelationship(source_id=s, target_id=t, relation_type="LEADS_TO", level="N1",
                                       citizen_id=citizen, goal="g", mindstate="m", energy=0.8, confidence=0.8,
                                       formation_trigger="test")
             for s, t in (("a", "b"), ("b", "c"))]
    memory.upsert(nodes, links)
    store = memory.level("N1", citizen)

    def reached() -> set[str]:
        return {h.node.node_id for h in store.run(channels.traverse(store.plans, ["a"], 10, MemoryFilter(TemporalWindow())))}

    assert reached() == {"b", "c"}
    memory.forget("b", "N1", citizen, reason="incorrect")
    assert reached() == set()
    memory.restore("b", "N1", citizen)
    assert reached() == {"b", "c"}


def test_a_selector_forgets_what_it_names_and_nothing_more(memory, citizen) -> None:
    _load(memory, citizen)
    report = memory.forget(None, "N1", citizen, reason="retention", where={"contains": "CELLO"})
    assert report.forgotten == ["cello"]
    assert memory.forget(None, "N1", citizen, reason="retention", where={"contains": "cello"}).forgotten == []
    with pytest.raises(ValueError, match="needs at least one condition"):
        memory.forget(None, "N1", citizen, reason="obsolete", where={})
    with pytest.raises(ValueError):
        memory.forget("cat", "N1", citizen, reason="because")
    with pytest.raises(ValueError, match="not both"):
        memory.forget("cat", "N1", citizen, reason="obsolete", where={"contains": "cat"})
    # an edit written later does not bring a forgotten memory back
    memory.upsert([MemoryNode(node_id="cello", level="N1", citizen_id=citizen, name="cello",
                              description="I started learning the cello in February.", energy=0.5, confidence=0.8,
                              created_at=T0)])
    edited = memory.get_node("cello", "N1", citizen)
    assert edited.description.endswith("February.") and edited.forgotten_at is not None
    assert edited.expired_at is not None


def test_pgvector_levels_follow_a_forget_and_a_restore(memory) -> None:
    key = "pg" + uuid.uuid4().hex[:10]
    memory.upsert([MemoryNode(node_id=key, level="N3", name="Tide tables of Saint-Malo",
                              description=f"{key}: the tide tables of Saint-Malo, printed every spring",
                              energy=0.5, confidence=0.8)])
    assert memory.vector_backends["N3"] == "pgvector"

    def top() -> list[str]:
        return [n.node_id for n in memory.vector_search("tide tables of Saint-Malo", "N3", k=3)]

    assert key in top()
    memory.forget(key, "N3", reason="obsolete")
    assert key not in top()
    evolution = [n.node_id for n in memory.vector_search("tide tables of Saint-Malo", "N3", k=3,
                                                         temporal_mode="evolution")]
    assert key not in evolution  # Postgres mirrors the expiry, the graph's record hides the forget
    memory.restore(key, "N3")
    assert key in top()


def test_the_memory_block_forgets_what_a_message_said(memory, citizen) -> None:
    block = ConsciousnessMemoryBlock(memory=memory, citizen_id=citizen)

    def recall(question: str) -> str:
        return asyncio.run(block.aget([ChatMessage(role=MessageRole.USER, content=question)]))

    said = ChatMessage(role=MessageRole.USER, content="My door code is 4711, keep it in mind.")
    block.put_messages([said, ChatMessage(role=MessageRole.USER, content="I like jazz on Sundays.")])
    assert "4711" in recall("What is my door code?")
    report = block.forget_message(said)
    assert len(report.forgotten) == 1 and report.reason is ForgetReason.USER_REQUESTED
    assert "4711" not in recall("What is my door code?")
    assert "jazz" in recall("What music do I like?")
    with pytest.raises(ValueError):
        block.forget_message(ChatMessage(role=MessageRole.SYSTEM, content="be nice"))


def test_the_command_line_forgets_restores_and_shows_it(memory, citizen, capsys: pytest.CaptureFixture[str]) -> None:
    from llama_consciousness.cli import main

    _load(memory, citizen)
    where = ["--citizen", citizen, "--data-dir", str(memory.data_dir)]
    assert main(["forget", "cat", "--reason", "obsolete", "--by", "cli-user", *where]) == 0
    assert "forgotten in" in capsys.readouterr().out
    assert memory.get_node("cat", "N1", citizen).forgotten_by == "cli-user"
    assert main(["inspect", "memory", "cat", *where]) == 0
    shown = capsys.readouterr().out
    assert "FORGOTTEN" in shown and "(obsolete) by cli-user" in shown and "[forgotten]" in shown
    assert main(["forget", "--contains", "observatory", "--reason", "incorrect", "--json", *where]) == 0
    assert '"sister"' in capsys.readouterr().out
    assert main(["forget", "cat", "--contains", "cat", "--reason", "obsolete", *where]) == 2  # not both
    assert main(["restore", "cat", "sister", *where]) == 0
    assert memory.get_node("cat", "N1", citizen).forgotten_at is None
    assert memory.get_node("sister", "N1", citizen).forgotten_at is None


def test_acts_on_a_graph_that_does_not_exist_create_none(memory) -> None:
    nobody = "t" + uuid.uuid4().hex[:12]
    assert memory.forget("x", "N1", nobody, reason="obsolete").missing == ["x"]
    assert memory.forget(None, "N1", nobody, reason="obsolete", where={"contains": "x"}).forgotten == []
    assert memory.restore("x", "N1", nobody).missing == ["x"]
    assert memory.erase("x", "N1", nobody, wait=False).memories == 0
    assert nobody not in memory.citizens() and not memory.level("N1", nobody).exists()
