"""One BLAS thread during the near-duplicate filter's products (``llama_consciousness.blas``)."""

from __future__ import annotations

import threading

import pytest

from llama_consciousness import blas
from llama_consciousness.ingestion.dedupe import NearDuplicateFilter
from llama_consciousness.ingestion.pipeline import IngestOptions, build_pipeline

pytestmark = pytest.mark.skipif(blas.blas_threads() is None, reason="numpy was built without a BLAS threadpoolctl knows")


@pytest.fixture
def two_blas_threads():
    """A BLAS with two threads outside the block, whatever this machine's default is."""
    controller = blas._blas_controller()
    limiter = controller.limit(limits=2)
    try:
        yield
    finally:
        limiter.restore_original_limits()


def test_block_uses_one_thread_and_restores(two_blas_threads) -> None:
    assert blas.blas_threads() == 2
    with blas.one_blas_thread():
        assert blas.blas_threads() == 1
        with blas.one_blas_thread():  # nested: shares the limit
            assert blas.blas_threads() == 1
        assert blas.blas_threads() == 1  # the inner exit does not restore early
    assert blas.blas_threads() == 2


def test_restored_after_an_error(two_blas_threads) -> None:
    with pytest.raises(RuntimeError), blas.one_blas_thread():
        raise RuntimeError("boom")
    assert blas.blas_threads() == 2


def test_concurrent_blocks_share_one_limit(two_blas_threads) -> None:
    """A block that ends while another thread's block runs must not restore the default under it."""
    inside, leave, seen = threading.Event(), threading.Event(), []

    def other() -> None:
        with blas.one_blas_thread():
            inside.set()
            leave.wait(10)
            seen.append(blas.blas_threads())

    thread = threading.Thread(target=other)
    thread.start()
    assert inside.wait(10)
    with blas.one_blas_thread():
        pass  # this block ends first
    assert blas.blas_threads() == 1
    leave.set()
    thread.join(10)
    assert seen == [1] and blas.blas_threads() == 2


def test_near_duplicate_products_run_on_one_thread(memory, citizen, two_blas_threads) -> None:
    """The filter's per-level work (where its matrix products are) runs inside the limit."""
    seen: list[int | None] = []

    class Spy(NearDuplicateFilter):
        def _check_level(self, *args, **kwargs):
            seen.append(blas.blas_threads())
            return super()._check_level(*args, **kwargs)

    pipeline = build_pipeline(memory, IngestOptions(pii=False, injection="off", entities=False, concepts=False))
    steps = pipeline.transformations
    position = next(i for i, step in enumerate(steps) if isinstance(step, NearDuplicateFilter))
    original = steps[position]
    steps[position] = Spy(memory=memory, action=original.action, threshold=original.threshold)
    from llama_consciousness.nodes import memory_to_text_node
    from llama_consciousness.schema import MemoryNode

    text = "The canary for the payments service failed its latency check twice."
    nodes = [memory_to_text_node(MemoryNode(node_id=f"blas_{i}", level="N1", citizen_id=citizen, node_type="Observation",
                                            name="Canary", description=text, energy=0.5, confidence=0.8)) for i in range(2)]
    out = pipeline.run(nodes=nodes)
    assert seen == [1]
    assert blas.blas_threads() == 2
    # and the filter still judged: the second memory is the first one again
    assert sum(1 for n in out if n.metadata.get("lc_duplicate_of") == "blas_0") == 1
