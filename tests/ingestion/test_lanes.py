"""``GraphLanes``: in order within a key, side by side across keys, stopped lanes stay stopped."""

from __future__ import annotations

import threading
import time

import pytest

from llama_consciousness.ingestion.lanes import GraphLanes, LaneStopped


def test_tasks_of_one_key_run_in_order_and_one_at_a_time() -> None:
    lanes = GraphLanes(4)
    seen: list[int] = []
    running = []

    def task(i: int) -> int:
        running.append(i)
        assert len(running) == 1  # never two tasks of the lane at once
        time.sleep(0.002)
        seen.append(i)
        running.remove(i)
        return i * 10

    futures = [lanes.submit("g", task, i) for i in range(20)]
    assert [f.result(5) for f in futures] == [i * 10 for i in range(20)]
    lanes.close()
    assert seen == list(range(20))


def test_different_keys_run_side_by_side() -> None:
    lanes = GraphLanes(2)
    both = threading.Barrier(2, timeout=5)  # breaks unless the two tasks overlap
    futures = [lanes.submit(key, both.wait) for key in ("a", "b")]
    assert sorted(f.result(5) for f in futures) == [0, 1]
    lanes.close()


@pytest.mark.parametrize("threads", [2, 0])
def test_a_failure_stops_its_lane_but_not_the_others(threads: int) -> None:
    lanes = GraphLanes(threads)

    def boom() -> None:
        raise ValueError("server gone")

    first = lanes.submit("a", boom)
    after = lanes.submit("a", lambda: "should not run")
    other = lanes.submit("b", lambda: "fine")
    with pytest.raises(ValueError, match="server gone"):
        first.result(5)
    with pytest.raises(LaneStopped):
        after.result(5)
    assert other.result(5) == "fine"
    lanes.close()


def test_more_lanes_than_threads_never_deadlock() -> None:
    lanes = GraphLanes(1)
    futures = [lanes.submit(key, lambda k=key, i=i: (k, i)) for i in range(5) for key in "abcdef"]
    assert len({f.result(5) for f in futures}) == 30
    lanes.close()


def test_no_threads_runs_each_task_in_the_caller_before_submit_returns() -> None:
    lanes = GraphLanes(0)
    seen: list[tuple[str, threading.Thread]] = []

    def task(name: str) -> str:
        seen.append((name, threading.current_thread()))
        return name

    futures = [lanes.submit(key, task, key + str(i)) for i in range(3) for key in "ab"]
    assert all(f.done() for f in futures)
    lanes.close()
    assert seen == [(key + str(i), threading.current_thread()) for i in range(3) for key in "ab"]


def test_a_lane_pool_needs_a_count_of_threads() -> None:
    with pytest.raises(ValueError, match="zero threads"):
        GraphLanes(-1)
