"""The fast parameter header: the server must read back exactly what was sent."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llama_consciousness.storage.params import Ids, Rows, header, literal

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    # the server's number parser overflows near the double maximum (so does the
    # official client's header); NUL ends the query text: both refused or avoided
    | st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)
    # Lone surrogates are not text any client can send (there is no UTF-8 for them).
    | st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=40)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5)
    | st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_ @-]{0,8}", fullmatch=True), inner, max_size=4),
    max_leaves=12,
)


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


@settings(max_examples=60, deadline=None)
@given(value=values)
def test_server_reads_back_what_was_sent(memory, value) -> None:
    graph = memory.db.select_graph("params_roundtrip")
    (got,), = graph.query(header({"v": value}) + "RETURN $v").result_set
    assert _same(got, value), (value, got)


def test_hostile_strings_stay_data(memory) -> None:
    graph = memory.db.select_graph("params_roundtrip")
    hostile = ['"}) DETACH DELETE n //', "\\\" RETURN 1 //", "`x`", "CYPHER v=1 RETURN 2", "line\nbreak"]
    for text in hostile:
        assert graph.query(header({"v": text}) + "RETURN $v").result_set == [[text]]


def test_vectors_take_the_fast_path_and_bad_input_is_refused() -> None:
    assert literal([0.5, 1, 2.25]) == "[0.5,1,2.25]"
    assert literal(True) == "true" and literal(None) == "null"
    with pytest.raises(ValueError, match="non-finite"):
        literal(float("nan"))
    with pytest.raises(ValueError):
        literal([1.0, float("inf")])
    with pytest.raises(ValueError, match="map key"):
        literal({"a`b": 1})
    with pytest.raises(ValueError, match="parameter name"):
        header({"bad name": 1})
    with pytest.raises(TypeError, match="cannot send"):
        literal(object())
    with pytest.raises(ValueError, match="NUL"):
        literal("a\x00b")


row_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5), max_leaves=10)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(row_values, max_size=6), max_size=4))
def test_bulk_rows_are_read_back_exactly(memory, rows) -> None:
    """``Rows`` go through the JSON encoder: its escapes must mean to the server what they mean in JSON."""
    graph = memory.db.select_graph("params_roundtrip")
    (got,), = graph.query(header({"v": Rows(rows)}) + "RETURN $v").result_set
    assert _same(got, rows), (rows, got)


def test_bulk_rows_fall_back_where_json_escapes_differ(memory) -> None:
    graph = memory.db.select_graph("params_roundtrip")
    tricky = [["bell\x07and\x01tab\t", 'quote " and \\ backslash', "C:\\users\\u00e9", "é ✓ \u2028", 1e-07]]
    assert "\\u" not in literal(Rows(tricky)).replace("\\\\u", "")  # no JSON \u escape reaches the server
    (got,), = graph.query(header({"v": Rows(tricky)}) + "RETURN $v").result_set
    assert got == tricky
    with pytest.raises(ValueError, match="NUL"):
        literal(Rows([["nul\x00here"]]))
    with pytest.raises(ValueError, match="non-finite"):
        literal(Rows([[float("inf")]]))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("where", ["field", "list", "deep"])
def test_bulk_rows_refuse_non_finite_numbers_wherever_they_are(bad, where) -> None:
    """orjson would write them as null: the null count gives them away, also among Nones and the word null."""
    row = [None, "null and void", ["null", None], 0.5]
    if where == "field":
        rows = [row, [None, bad]]
    elif where == "list":
        rows = [row, [None, [0.5, bad]]]
    else:
        rows = [row, [None, [1.0, [None, bad]]]]
    with pytest.raises(ValueError, match="non-finite"):
        literal(Rows(rows))


def test_bulk_rows_with_nones_and_the_word_null_read_back_exactly(memory) -> None:
    graph = memory.db.select_graph("params_roundtrip")
    rows = [[None, "null", "a null here", [None, "null"], [[None]], 0.25], [None, None]]
    text = literal(Rows(rows))
    assert text.startswith("[[null,") and "\\u" not in text  # the fast path, nulls and all
    (got,), = graph.query(header({"v": Rows(rows)}) + "RETURN $v").result_set
    assert got == rows


@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=20),
                    max_size=8))
def test_id_lists_are_read_back_exactly(memory, ids) -> None:
    """``Ids`` go through the JSON encoder like ``Rows``; control characters fall back to per-item quoting."""
    graph = memory.db.select_graph("params_roundtrip")
    (got,), = graph.query(header({"v": Ids(ids)}) + "RETURN $v").result_set
    assert got == ids


def test_id_lists_fall_back_and_refuse_like_plain_lists() -> None:
    tricky = ["bell\x07", 'q"uote', "back\\slash", "C:\\u00e9", "é ✓"]
    assert literal(Ids(tricky)) == literal(list(tricky))
    assert literal(Ids(["a", 1, None])) == literal(["a", 1, None])
    with pytest.raises(ValueError, match="NUL"):
        literal(Ids(["nul\x00here"]))


def test_a_memory_row_hash_is_stable_across_releases() -> None:
    """A changed hash makes every stored row look updated on the next rerun: change it only on purpose."""
    from datetime import datetime, timezone

    from llama_consciousness.schema import MemoryNode
    from llama_consciousness.storage import records

    node = MemoryNode(node_id="pin_1", level="N2", node_type="Decision", name="Pin",
                      description="A memory whose hash is pinned.",
                      created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc), energy=0.7, confidence=0.8,
                      emotion_vector={"calm": 0.4}, goal="g", resolution_state="resolved",
                      embedding=[math.sin(i) / 3 for i in range(16)])
    row = records.node_row(node)
    assert row["hash"] == "6b5f601554a77765f5ab1799614940bfcb9a0e10888cdca5257bfab8e363a469"
    assert row["embedding"] == records.wire_vector([math.sin(i) / 3 for i in range(16)])
