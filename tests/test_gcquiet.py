"""``gcquiet``: young and full collections are rarer inside the block, and only there."""

from __future__ import annotations

import gc
import threading

from llama_consciousness.gcquiet import (
    BULK_YOUNG_COLLECTION_THRESHOLD,
    FULL_COLLECTION_THRESHOLD,
    YOUNG_COLLECTION_THRESHOLD,
    fewer_collections,
)


def test_threshold_is_raised_inside_and_restored_after_nested_and_concurrent_uses() -> None:
    before = gc.get_threshold()
    entered, release = threading.Event(), threading.Event()

    def other_user() -> None:
        with fewer_collections():
            entered.set()
            release.wait(5)

    thread = threading.Thread(target=other_user)
    raised = (max(before[0], YOUNG_COLLECTION_THRESHOLD), before[1], max(before[2], FULL_COLLECTION_THRESHOLD))
    with fewer_collections():
        assert gc.get_threshold() == raised
        thread.start()
        entered.wait(5)
        with fewer_collections():
            pass
        assert gc.get_threshold() == raised
    assert gc.get_threshold() == raised  # the thread is still inside
    release.set()
    thread.join(5)
    assert gc.get_threshold() == before


def test_the_highest_young_threshold_asked_for_applies_while_its_block_runs() -> None:
    """An ingestion's bulk raise outlives a retrieval inside it, and a retrieval outliving it falls back."""
    before = gc.get_threshold()
    bulk = max(before[0], BULK_YOUNG_COLLECTION_THRESHOLD)
    retrieval = max(before[0], YOUNG_COLLECTION_THRESHOLD)
    assert bulk > retrieval
    with fewer_collections(young=BULK_YOUNG_COLLECTION_THRESHOLD):
        assert gc.get_threshold()[0] == bulk
        with fewer_collections():
            assert gc.get_threshold()[0] == bulk and fewer_collections.users == 2
        assert gc.get_threshold()[0] == bulk
    assert gc.get_threshold() == before
    # Overlapping, not nested: the retrieval's raise is back when the bulk block ends first.
    outer = fewer_collections()
    inner = fewer_collections(young=BULK_YOUNG_COLLECTION_THRESHOLD)
    outer.__enter__()
    inner.__enter__()
    assert gc.get_threshold()[0] == bulk
    inner.__exit__(None, None, None)
    assert gc.get_threshold() == (retrieval, before[1], max(before[2], FULL_COLLECTION_THRESHOLD))
    outer.__exit__(None, None, None)
    assert gc.get_threshold() == before and fewer_collections.users == 0


def test_threshold_is_restored_when_the_block_fails() -> None:
    before = gc.get_threshold()
    try:
        with fewer_collections():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before


def test_collection_switched_off_by_the_application_stays_off() -> None:
    before = gc.get_threshold()
    gc.set_threshold(0, before[1], before[2])
    try:
        with fewer_collections():
            assert gc.get_threshold()[0] == 0
        assert gc.get_threshold() == (0, before[1], before[2])
    finally:
        gc.set_threshold(*before)


def test_shared_setting_applies_once_and_restores_what_it_found() -> None:
    import pytest

    from llama_consciousness.shared_setting import SharedSetting

    calls: list[tuple[str, object]] = []
    setting = SharedSetting(lambda: calls.append(("apply", None)) or "found",
                            lambda saved: calls.append(("restore", saved)))
    with setting():
        with setting():
            assert setting.users == 2
        assert calls == [("apply", None)]
    assert calls == [("apply", None), ("restore", "found")] and setting.users == 0
    with pytest.raises(KeyError), setting():
        raise KeyError("x")
    assert calls[-1] == ("restore", "found") and setting.users == 0


def test_shared_setting_adjusts_to_what_the_blocks_inside_ask_for() -> None:
    from llama_consciousness.shared_setting import SharedSetting

    calls: list[tuple[str, object]] = []
    setting = SharedSetting(lambda: "found", lambda saved: calls.append(("restore", saved)),
                            lambda saved, asked: calls.append(("adjust", max(asked))))
    outer = setting(3)
    outer.__enter__()
    with setting(7):
        assert calls == [("adjust", 3), ("adjust", 7)]
    assert calls[-1] == ("adjust", 3)  # the inner block left: back to what the outer one asks
    outer.__exit__(None, None, None)
    assert calls[-1] == ("restore", "found") and setting.users == 0


def test_an_ingestion_runs_with_the_bulk_threshold_and_restores_it(memory, monkeypatch) -> None:
    import uuid

    from llama_consciousness.ingestion import pipeline
    from llama_consciousness.schema import MemoryNode

    before = gc.get_threshold()
    seen: list[int] = []
    original = pipeline._ingest

    def spy(*args, **kwargs):
        seen.append(gc.get_threshold()[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(pipeline, "_ingest", spy)
    tag = uuid.uuid4().hex[:8]
    record = MemoryNode(node_id=f"gc_{tag}", level="N2", node_type="Observation", name="Meter",
                        description="The meter read 7 litres.", energy=0.5, confidence=0.7)
    report = memory.ingest([record], worker="off", entities=False, duplicates="off")
    assert report.inserted == 1
    assert seen == [max(before[0], BULK_YOUNG_COLLECTION_THRESHOLD)]
    assert gc.get_threshold() == before


def test_a_memory_freezes_the_heap_when_it_opens_and_after_its_first_retrieval(memory, citizen) -> None:
    """What is alive then (libraries, the model, what the first retrieval imported) is never walked by a
    collection again: full collections stop adding tens of milliseconds to a question (gcquiet's docstring)."""
    from llama_consciousness import ConsciousnessMemory
    from llama_consciousness.schema import MemoryNode

    memory.upsert([MemoryNode(node_id="g1", level="N1", citizen_id=citizen, name="Garden", description="tomatoes",
                              energy=0.5, confidence=0.7)])
    url = memory._falkordb_server.url
    before = gc.get_freeze_count()
    with ConsciousnessMemory(falkordb_url=url) as frozen:
        opened = gc.get_freeze_count()
        assert opened > before
        made_later = [[i] for i in range(1000)]  # tracked objects made after the open
        frozen.retriever(citizen).retrieve("what grows in the garden?")
        after_first = gc.get_freeze_count()
        assert after_first >= opened + len(made_later)  # the first retrieval's survivors joined the frozen
        frozen.retriever(citizen).retrieve("what grows in the garden?")
        assert gc.get_freeze_count() == after_first  # once
    gc.unfreeze()  # the suite's own objects go back to the collector
    with ConsciousnessMemory(falkordb_url=url, freeze_heap=False) as untouched:
        untouched.retriever(citizen).retrieve("what grows in the garden?")
        assert gc.get_freeze_count() == 0
