"""``gcquiet``: young and full collections are rarer inside the block, and only there."""

from __future__ import annotations

import gc
import threading

from llama_consciousness.gcquiet import FULL_COLLECTION_THRESHOLD, YOUNG_COLLECTION_THRESHOLD, fewer_collections


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
