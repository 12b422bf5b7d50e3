"""A fresh level graph knows every property name the writes set before the first write (see
``level_store._WRITTEN_PROPERTIES``), and registering them leaves no memory or link behind."""

from __future__ import annotations

from llama_consciousness.storage import level_store


def test_a_fresh_graph_knows_every_written_property_and_holds_nothing(memory, citizen) -> None:
    store = memory.level("N1", citizen)
    store.ensure_schema()
    keys = {row[0] for row in store.run(_keys())}
    assert level_store._WRITTEN_PROPERTIES <= keys
    assert memory.counts("N1", citizen) == (0, 0)
    store.ensure_schema()  # nothing missing the second time: no second registration
    assert memory.counts("N1", citizen) == (0, 0)


def _keys():
    rows = yield level_store.Query("CALL db.propertyKeys() YIELD propertyKey RETURN propertyKey", read_only=True)
    return rows
