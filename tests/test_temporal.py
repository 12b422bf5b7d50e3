"""The four temporal modes, checked on real FalkorDB data.

Every case is asked twice: of FalkorDB, through the Cypher predicate on
stored memories, and of :func:`is_visible` in Python on the models that were
written.  The two must agree, at the boundaries of the half-open intervals
``[valid_at, invalid_at)`` and ``[created_at, expired_at)`` in particular.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import pytest

from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode
from llama_consciousness.temporal import (
    TEMPORAL_MODES,
    TemporalWindow,
    cypher_predicate,
    cypher_time,
    is_visible,
    sql_predicate,
)

T0 = datetime(2024, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
FAR = 10**6  # seconds after T0, far beyond every bound of the scenario


def at(offset: float | None) -> datetime | None:
    """T0 plus ``offset`` seconds (microseconds kept, as a caller might send them)."""
    return None if offset is None else T0 + timedelta(seconds=offset)


# node_id -> (valid_at, invalid_at, created_at, expired_at) in seconds after T0
SCENARIO: dict[str, tuple[float | None, float | None, float | None, float | None]] = {
    "open": (0, None, 0, None),                   # both intervals open-ended
    "closed_valid": (10, 20, 10, None),           # valid [10, 20), believed since 10
    "superseded_v1": (0, None, 0, 30),            # belief expired at 30 ...
    "superseding_v2": (0, None, 30, None),        # ... replaced by this version at 30
    "late_recorded": (5, None, 25, None),         # true since 5, recorded only at 25
    "future_valid": (100, None, 0, None),         # recorded now, true from 100 on
    "fully_closed": (12, 18, 14, 16),             # both intervals closed
    "micro": (40.7, 45.2, 40.3, 48.9),            # sub-second inputs: stored 40, 45, 40, 48
    "zero_length": (15, 15, 15, 15),              # empty intervals: never visible at an instant
}


def scenario_nodes(level: str = "N2", citizen_id: str | None = None) -> list[MemoryNode]:
    nodes = []
    for node_id, (valid, invalid, created, expired) in SCENARIO.items():
        nodes.append(MemoryNode(
            node_id=node_id, level=level, citizen_id=citizen_id, name=f"memory {node_id}",
            energy=0.5, confidence=0.5,
            valid_at=at(valid), invalid_at=at(invalid), created_at=at(created), expired_at=at(expired),
        ))
    return nodes


@pytest.fixture
def scenario(fresh_graph):
    store = fresh_graph("N2")
    nodes = scenario_nodes()
    result = store.upsert(nodes)
    assert result.nodes_created == len(nodes)
    return store, {n.node_id: n for n in nodes}


def cypher_ids(store, window: TemporalWindow, var: str = "n") -> set[str]:
    predicate = cypher_predicate(window, var)
    rows = store.graph.query(
        f"MATCH ({var}:Memory) WHERE {predicate.text} RETURN {var}.node_id", predicate.params
    ).result_set
    return {r[0] for r in rows}


def python_ids(nodes: dict[str, MemoryNode], window: TemporalWindow) -> set[str]:
    return {node_id for node_id, node in nodes.items() if is_visible(window, node)}


def current(offset: float) -> TemporalWindow:
    return TemporalWindow("current", now=at(offset))


def pit(offset: float) -> TemporalWindow:
    return TemporalWindow("point_in_time", as_of_time=at(offset))


def ranged(mode: str, start: float | None, end: float | None) -> TemporalWindow:
    return TemporalWindow(mode, time_range_start=at(start), time_range_end=at(end))


# -- boundaries on real data ------------------------------------------------------


def test_stored_times_are_whole_seconds(scenario):
    store, _ = scenario
    stored = store.get_node("micro")
    assert stored.valid_at == at(40)
    assert stored.invalid_at == at(45)
    assert stored.created_at == at(40)
    assert stored.expired_at == at(48)
    assert stored.valid_at.tzinfo is not None and stored.valid_at.utcoffset() == timedelta(0)


def test_valid_at_is_inclusive_and_invalid_at_exclusive(scenario):
    store, nodes = scenario
    assert "closed_valid" not in cypher_ids(store, pit(9))
    assert "closed_valid" in cypher_ids(store, pit(10))    # as_of == valid_at (== created_at): visible
    assert "closed_valid" in cypher_ids(store, pit(19))
    assert "closed_valid" not in cypher_ids(store, pit(20))  # as_of == invalid_at: not visible
    for offset in (9, 10, 19, 20):
        assert ("closed_valid" in cypher_ids(store, pit(offset))) == is_visible(pit(offset), nodes["closed_valid"])


def test_created_at_is_inclusive_and_expired_at_exclusive(scenario):
    store, nodes = scenario
    assert "fully_closed" not in cypher_ids(store, pit(13))
    assert "fully_closed" in cypher_ids(store, pit(14))      # as_of == created_at: visible
    assert "fully_closed" in cypher_ids(store, pit(15))
    assert "fully_closed" not in cypher_ids(store, pit(16))  # as_of == expired_at: not visible
    assert is_visible(pit(14), nodes["fully_closed"]) and not is_visible(pit(16), nodes["fully_closed"])
    # the superseded version: believed in [0, 30)
    assert "superseded_v1" in cypher_ids(store, pit(29))
    assert "superseded_v1" not in cypher_ids(store, pit(30))


def test_zero_length_intervals_are_never_visible_at_an_instant(scenario):
    store, _ = scenario
    for offset in (14, 15, 16):
        assert "zero_length" not in cypher_ids(store, pit(offset))
        assert "zero_length" not in cypher_ids(store, current(offset))


def test_open_intervals_stay_visible(scenario):
    store, _ = scenario
    far_current = cypher_ids(store, current(FAR))
    assert {"open", "superseding_v2", "late_recorded", "future_valid"} <= far_current
    assert far_current.isdisjoint({"closed_valid", "superseded_v1", "fully_closed", "micro", "zero_length"})
    assert "open" in cypher_ids(store, pit(FAR))


def test_superseded_version_only_in_evolution(scenario):
    store, _ = scenario
    now = cypher_ids(store, current(50))
    assert "superseding_v2" in now and "superseded_v1" not in now
    everything = cypher_ids(store, TemporalWindow("evolution"))
    assert {"superseded_v1", "superseding_v2"} <= everything
    assert everything == set(SCENARIO)   # no range: every version
    # both versions were believed at some point of [20, 40]: that is the dissonance evolution shows
    assert {"superseded_v1", "superseding_v2"} <= cypher_ids(store, ranged("evolution", 20, 40))
    # a range starting exactly when v1 expired no longer sees it (half-open belief interval)
    assert "superseded_v1" not in cypher_ids(store, ranged("evolution", 30, 40))
    assert "superseded_v1" in cypher_ids(store, ranged("evolution", 29, 40))


def test_point_in_time_excludes_what_was_recorded_later(scenario):
    store, nodes = scenario
    # true in reality since 5, but we only learned it at 25
    assert "late_recorded" not in cypher_ids(store, pit(10))
    assert not is_visible(pit(10), nodes["late_recorded"])
    assert "late_recorded" not in cypher_ids(store, pit(24))
    assert "late_recorded" in cypher_ids(store, pit(25))
    # ... yet full_history (valid time) places it at 10
    assert "late_recorded" in cypher_ids(store, ranged("full_history", 6, 10))
    # and evolution (belief time) does not
    assert "late_recorded" not in cypher_ids(store, ranged("evolution", 6, 10))


def test_future_valid_at_is_not_current(scenario):
    store, _ = scenario
    assert "future_valid" not in cypher_ids(store, current(50))
    assert "future_valid" not in cypher_ids(store, current(99))
    assert "future_valid" in cypher_ids(store, current(100))
    # the real clock: the scenario lies in 2024, so only open intervals are current now
    real_now = cypher_ids(store, TemporalWindow("current"))
    assert real_now == {"open", "superseding_v2", "late_recorded", "future_valid"}


def test_future_valid_at_relative_to_the_real_clock(fresh_graph):
    store = fresh_graph("N2")
    now = datetime.now(timezone.utc)
    nodes = [
        MemoryNode(node_id="tomorrow", level="N2", name="tomorrow", energy=0.5, confidence=0.5,
                   valid_at=now + timedelta(days=1)),
        MemoryNode(node_id="today", level="N2", name="today", energy=0.5, confidence=0.5,
                   valid_at=now - timedelta(seconds=5), created_at=now - timedelta(seconds=5)),
    ]
    store.upsert(nodes)
    window = TemporalWindow("current")
    assert cypher_ids(store, window) == {"today"}
    assert python_ids({n.node_id: n for n in nodes}, window) == {"today"}


def test_microseconds_truncate_consistently(scenario):
    store, nodes = scenario
    # stored micro: valid [40, 45), believed [40, 48)
    cases = {39.999999: False, 40.0: True, 40.5: True, 44.999999: True, 45.0: False, 45.2: False}
    for offset, expected in cases.items():
        window = pit(offset)
        assert ("micro" in cypher_ids(store, window)) is expected, offset
        assert is_visible(window, nodes["micro"]) is expected, offset
        assert is_visible(window, store.get_node("micro")) is expected, offset
    # a range start inside the second of invalid_at counts as that second
    assert "micro" not in cypher_ids(store, ranged("full_history", 45.9, None))
    assert "micro" in cypher_ids(store, ranged("full_history", 44.9, None))
    # a range end inside the second of created_at counts as that second
    assert "micro" in cypher_ids(store, ranged("evolution", None, 40.1))
    assert "micro" not in cypher_ids(store, ranged("evolution", None, 39.9))
    assert cypher_time(at(40.999999)) == cypher_time(at(40)) == 1709294440  # 2024-03-01T12:00:40Z


def test_evolution_ranges_overlap_transaction_time(scenario):
    store, _ = scenario
    # created_at <= end AND (expired_at IS NULL OR expired_at > start)
    assert cypher_ids(store, ranged("evolution", None, 20)) == {
        "open", "closed_valid", "superseded_v1", "future_valid", "fully_closed", "zero_length",
    }
    assert cypher_ids(store, ranged("evolution", 31, None)) == {
        "open", "closed_valid", "superseding_v2", "late_recorded", "future_valid", "micro",
    }
    # the range end is inclusive: recorded exactly at 25
    assert "late_recorded" in cypher_ids(store, ranged("evolution", 25, 25))
    assert "late_recorded" not in cypher_ids(store, ranged("evolution", 24, 24))
    # expired exactly at the range start: out; one second earlier start: in
    assert "fully_closed" not in cypher_ids(store, ranged("evolution", 16, 16))
    assert "fully_closed" in cypher_ids(store, ranged("evolution", 15, 16))
    # the empty belief interval [15, 15) overlaps [14, 15] but not [15, 15]
    assert "zero_length" in cypher_ids(store, ranged("evolution", 14, 15))
    assert "zero_length" not in cypher_ids(store, ranged("evolution", 15, 15))


def test_full_history_ranges_overlap_valid_time(scenario):
    store, _ = scenario
    assert cypher_ids(store, TemporalWindow("full_history")) == set(SCENARIO)
    assert cypher_ids(store, ranged("full_history", 0, 4)) == {"open", "superseded_v1", "superseding_v2"}
    # invalid_at == range start: out
    assert "closed_valid" not in cypher_ids(store, ranged("full_history", 20, None))
    assert "closed_valid" in cypher_ids(store, ranged("full_history", 19, None))
    # valid_at == range end: in
    assert "future_valid" not in cypher_ids(store, ranged("full_history", None, 99))
    assert "future_valid" in cypher_ids(store, ranged("full_history", None, 100))
    # expired beliefs are still history
    assert "superseded_v1" in cypher_ids(store, ranged("full_history", 500, None))
    assert "fully_closed" in cypher_ids(store, ranged("full_history", 12, 12))


INSTANTS = [-1, 0, 0.5, 4, 5, 9.999, 10, 12, 13, 14, 15, 15.5, 16, 17, 18, 19, 20, 24, 25, 29, 30,
            30.999999, 31, 40, 40.3, 40.7, 44.999999, 45, 45.2, 48, 48.9, 49, 99, 100, 101, FAR]
RANGE_POINTS = [None, -1, 0, 5, 10, 14, 15, 15.5, 16, 20, 25, 30, 30.5, 40.7, 45, 48.9, 100, 200]


def windows_grid() -> list[TemporalWindow]:
    windows = [current(x) for x in INSTANTS] + [pit(x) for x in INSTANTS]
    for start, end in itertools.product(RANGE_POINTS, repeat=2):
        if start is not None and end is not None and start > end:
            continue
        windows += [ranged("evolution", start, end), ranged("full_history", start, end)]
    return windows


def test_cypher_agrees_with_is_visible_on_a_grid(scenario):
    store, nodes = scenario
    stored = {n.node_id: n for n in store.get_nodes(list(nodes))}
    assert set(stored) == set(nodes)
    windows = windows_grid()
    assert len(windows) > 300
    seen_results = set()
    for window in windows:
        in_graph = cypher_ids(store, window)
        assert in_graph == python_ids(nodes, window), window
        assert in_graph == python_ids(stored, window), window
        seen_results.add(frozenset(in_graph))
    # the grid is not degenerate: it produces many different answers
    assert len(seen_results) > 20


def test_relationships_use_the_same_predicate(fresh_graph):
    store = fresh_graph("N2")
    a = MemoryNode(node_id="a", level="N2", name="a", energy=0.5, confidence=0.5, created_at=at(0))
    b = MemoryNode(node_id="b", level="N2", name="b", energy=0.5, confidence=0.5, created_at=at(0))
    edges = [
        ConsciousnessRelationship(
            edge_id=f"e{i}", source_id="a", target_id="b", relation_type="RELATES_TO", goal="g",
            mindstate="m", energy=0.5, confidence=0.5, valid_at=at(v), invalid_at=at(inv),
            created_at=at(c), expired_at=at(exp),
        )
        for i, (v, inv, c, exp) in enumerate([(0, None, 0, None), (10, 20, 10, None), (0, None, 0, 30),
                                              (5, None, 25, None), (40.7, 45.2, 40.3, 48.9)])
    ]
    store.upsert([a, b], edges)
    by_id = {e.edge_id: e for e in edges}
    for window in [current(x) for x in INSTANTS] + [pit(x) for x in INSTANTS] + [
        ranged(mode, s, e) for mode in ("evolution", "full_history")
        for s, e in [(None, None), (None, 10), (20, None), (10, 30), (30, 30), (45, 48.9)]
    ]:
        predicate = cypher_predicate(window, "r", prefix="rel_")
        rows = store.graph.query(
            f"MATCH (:Memory)-[r:LINK]->(:Memory) WHERE {predicate.text} RETURN r.edge_id", predicate.params
        ).result_set
        assert {r[0] for r in rows} == {i for i, e in by_id.items() if is_visible(window, e)}, window


def test_two_predicates_share_one_query(scenario):
    store, nodes = scenario
    store.graph.query("MATCH (a:Memory {node_id: 'open'}), (b:Memory) WHERE b.node_id <> 'open' "
                      "CREATE (a)-[:PROBE]->(b)")
    start = cypher_predicate(current(50), "a", prefix="s_")
    other = cypher_predicate(pit(10), "b", prefix="c_")
    assert set(start.params).isdisjoint(other.params)
    rows = store.graph.query(
        f"MATCH (a:Memory)-[:PROBE]->(b:Memory) WHERE {start.text} AND {other.text} RETURN b.node_id",
        {**start.params, **other.params},
    ).result_set
    expected = {i for i, n in nodes.items() if i != "open" and is_visible(pit(10), n)}
    assert {r[0] for r in rows} == expected and expected


# -- the window itself ------------------------------------------------------------


def test_modes_are_the_schema_literals():
    assert TEMPORAL_MODES == ("current", "point_in_time", "evolution", "full_history")


def test_unknown_mode_lists_the_modes():
    with pytest.raises(ValueError) as info:
        TemporalWindow("yesterday")
    message = str(info.value)
    assert "yesterday" in message
    for mode in TEMPORAL_MODES:
        assert mode in message


def test_point_in_time_requires_as_of_time():
    with pytest.raises(ValueError, match="as_of_time"):
        TemporalWindow("point_in_time")


def test_as_of_time_only_with_point_in_time():
    for mode in ("current", "evolution", "full_history"):
        with pytest.raises(ValueError, match="as_of_time"):
            TemporalWindow(mode, as_of_time=T0)


def test_time_range_only_with_evolution_and_full_history():
    for kwargs in ({"time_range_start": T0}, {"time_range_end": T0}):
        with pytest.raises(ValueError, match="time_range"):
            TemporalWindow("point_in_time", as_of_time=T0, **kwargs)
        with pytest.raises(ValueError, match="time_range"):
            TemporalWindow("current", **kwargs)
        TemporalWindow("evolution", **kwargs)
        TemporalWindow("full_history", **kwargs)


def test_range_start_after_end_is_rejected():
    for mode in ("evolution", "full_history"):
        with pytest.raises(ValueError, match="after"):
            TemporalWindow(mode, time_range_start=at(10), time_range_end=at(9))
        TemporalWindow(mode, time_range_start=at(10), time_range_end=at(10))  # a single instant is fine


def test_times_are_normalised_to_utc():
    naive = TemporalWindow("point_in_time", as_of_time=datetime(2024, 3, 1, 12, 0, 0))
    paris = TemporalWindow("point_in_time",
                           as_of_time=datetime(2024, 3, 1, 13, 0, 0, tzinfo=timezone(timedelta(hours=1))))
    assert naive.as_of_time == paris.as_of_time == T0
    assert naive.instant.tzinfo is not None
    assert cypher_predicate(naive).params == cypher_predicate(paris).params == {"t_at": 1709294400}  # 2024-03-01T12:00:00Z
    assert TemporalWindow("current", now=T0).instant == T0
    assert TemporalWindow("evolution").instant is None


def test_from_intention_reads_the_fields():
    class Intention:
        temporal_mode = "evolution"
        time_range_start = at(0)
        time_range_end = at(10)

    window = TemporalWindow.from_intention(Intention(), now=T0)
    assert (window.mode, window.time_range_start, window.time_range_end, window.now) == ("evolution", at(0), at(10), T0)


@pytest.mark.parametrize("bad", ["n) DETACH DELETE (m", "n.x", "1n", "", "n m", "n`", "n;", "a" * 64])
def test_cypher_predicate_rejects_non_identifiers(bad):
    window = TemporalWindow("current")
    with pytest.raises(ValueError, match="identifier"):
        cypher_predicate(window, bad)
    with pytest.raises(ValueError, match="identifier"):
        cypher_predicate(window, "n", prefix=bad or "-")
    with pytest.raises(ValueError, match="identifier"):
        sql_predicate(window, alias=bad or "-")


def test_no_time_value_in_predicate_text():
    instant = datetime(2031, 7, 9, 8, 7, 6, 543210, tzinfo=timezone.utc)
    windows = [
        TemporalWindow("current", now=instant),
        TemporalWindow("point_in_time", as_of_time=instant),
        TemporalWindow("evolution", time_range_start=instant, time_range_end=instant + timedelta(days=400)),
        TemporalWindow("full_history", time_range_start=instant, time_range_end=instant + timedelta(days=400)),
        TemporalWindow("evolution", time_range_end=instant),
        TemporalWindow("full_history", time_range_start=instant),
    ]
    for window in windows:
        for predicate in (cypher_predicate(window), sql_predicate(window), cypher_predicate(window, "x", "p_")):
            assert predicate.params, window
            assert not any(ch.isdigit() for ch in predicate.text), (window, predicate.text)
            for name in predicate.params:
                assert name in predicate.text
    cypher = cypher_predicate(windows[1])
    assert cypher.params == {"t_at": 1941350826}  # 2031-07-09T08:07:06Z in whole seconds
    sql = sql_predicate(windows[1])
    assert sql.params == {"t_at": instant.replace(microsecond=0)} and sql.params["t_at"].tzinfo is not None
    assert "%(t_at)s" in sql.text
    assert sql_predicate(windows[1], alias="v").text.count("v.") == 6
    # unbounded modes need no parameters at all
    assert cypher_predicate(TemporalWindow("evolution")).params == {}
    assert sql_predicate(TemporalWindow("full_history")).text == "TRUE"
