"""``gcquiet``: full collections are rarer inside the block, and only there."""

from __future__ import annotations

import gc
import threading

from llama_consciousness.gcquiet import FULL_COLLECTION_THRESHOLD, fewer_full_collections


def test_threshold_is_raised_inside_and_restored_after_nested_and_concurrent_uses() -> None:
    before = gc.get_threshold()
    entered, release = threading.Event(), threading.Event()

    def other_user() -> None:
        with fewer_full_collections():
            entered.set()
            release.wait(5)

    thread = threading.Thread(target=other_user)
    with fewer_full_collections():
        assert gc.get_threshold()[2] == max(before[2], FULL_COLLECTION_THRESHOLD)
        assert gc.get_threshold()[:2] == before[:2]
        thread.start()
        entered.wait(5)
        with fewer_full_collections():
            pass
        assert gc.get_threshold()[2] == max(before[2], FULL_COLLECTION_THRESHOLD)
    assert gc.get_threshold()[2] == max(before[2], FULL_COLLECTION_THRESHOLD)  # the thread is still inside
    release.set()
    thread.join(5)
    assert gc.get_threshold() == before


def test_threshold_is_restored_when_the_block_fails() -> None:
    before = gc.get_threshold()
    try:
        with fewer_full_collections():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before
