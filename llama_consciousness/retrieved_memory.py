"""The memory a retrieved node carries, read from its metadata once per node.

A retrieved ``NodeWithScore`` carries its memory as plain metadata, so that
any LlamaIndex component downstream can read it.  Postprocessors that need
the memory as a model (traversal graph, tiers, dissonances) would validate
that metadata again at every step; validation was a tenth of a complete
stream's time.  So the model is remembered per node object, and reused
only while the node's memory fields (and text and id) are unchanged: code
that edits a node's metadata between two steps gets a fresh model.

Whoever builds a node from a model it already has (the retrievers) or
changes a memory field knowing the new value (the quality grader writes
``metadata_completeness``) registers the model with :func:`remember`, so
that no step validates what is already known to be valid.
"""

from __future__ import annotations

import weakref
from itertools import compress, repeat
from operator import is_not
from typing import Any

from llama_index.core.schema import BaseNode, NodeWithScore

from llama_consciousness.schema import MemoryNode
from llama_consciousness.schema.trusted import trusted_model

_FIELD_ORDER = tuple(sorted(set(MemoryNode.model_fields) - {"embedding"}))
_FIELD_INDEX = {name: i for i, name in enumerate(_FIELD_ORDER)}

# An entry leaves with its node (a weak reference's callback): entries kept
# after their retrieval made every full garbage collection walk thousands
# of dead memories (a 100-query run's full passes took 20-50 ms each).
_PARSED: dict[int, tuple[Any, tuple[Any, ...], MemoryNode]] = {}
_PARSED_MAX = 4096


def _forget(ref: Any, key: int) -> None:
    """A remembered node died: drop its entry, unless the id was reused by a newer node."""
    entry = _PARSED.get(key)
    if entry is not None and entry[0] is ref:
        del _PARSED[key]


def _seen(text_node: BaseNode) -> tuple[Any, ...]:
    """What a remembered model stands for: the memory fields (read at C speed), the id and the text."""
    return (tuple(map(text_node.metadata.get, _FIELD_ORDER)), text_node.node_id, getattr(text_node, "text", None))


def _text_node(node: NodeWithScore | BaseNode) -> BaseNode:
    return node.node if isinstance(node, NodeWithScore) else node


def _fresh(text_node: BaseNode, seen: tuple[Any, ...]) -> MemoryNode | None:
    """The model remembered for ``text_node`` if it was made from what ``seen`` holds now."""
    known = _PARSED.get(id(text_node))
    if known is not None and known[0]() is text_node and known[1] == seen:
        return known[2]
    return None


def remembered(node: NodeWithScore | BaseNode) -> MemoryNode | None:
    """The model remembered for ``node`` if its memory fields are still the ones it was made from."""
    text_node = _text_node(node)
    return _fresh(text_node, _seen(text_node))


def remember(node: NodeWithScore | BaseNode, memory: MemoryNode) -> None:
    """Register ``memory`` as what ``node`` carries now (the caller vouches that they agree).

    ``memory`` must hold the values :func:`memory_of` would validate from the
    node's metadata as it is at this moment (which fields count as given is
    taken from the metadata); later edits of a memory field make the entry
    stale, and the next :func:`memory_of` validates afresh.  Two kinds of
    model are not registered, since validation would not give them back: a
    subclass (``memory_of`` makes a plain ``MemoryNode``), and one without a
    description (``memory_of`` takes the node's text for it).
    """
    if type(memory) is not MemoryNode or memory.description is None:
        return
    text_node = _text_node(node)
    seen = _seen(text_node)
    # what validation would count as given: the fields present in the metadata
    given = set(compress(_FIELD_ORDER, map(is_not, seen[0], repeat(None))))
    given.update(("node_id", "description"))
    if memory.model_fields_set != given:
        memory = memory.model_copy()
        object.__setattr__(memory, "__pydantic_fields_set__", given)
    _store(text_node, seen, memory)


def write_field(node: NodeWithScore | BaseNode, name: str, value: Any) -> None:
    """Set the memory field ``name`` in the node's metadata, keeping a remembered model in step.

    ``value`` must be what validation keeps for that field (a valid value of
    its type); the quality grader writes ``metadata_completeness`` this way
    for every node of a stream, and the steps after it need not validate
    the nodes again.  A node with nothing remembered just gets the value.
    """
    text_node = _text_node(node)
    seen = _seen(text_node)
    memory = _fresh(text_node, seen)
    text_node.metadata[name] = value
    if value is None or memory is None:
        return
    values = list(seen[0])
    values[_FIELD_INDEX[name]] = value
    fields = dict(memory.__dict__)
    fields[name] = value
    updated = trusted_model(type(memory), fields, memory.model_fields_set | {name})
    _store(text_node, (tuple(values), seen[1], seen[2]), updated)


def _store(text_node: BaseNode, seen: tuple[Any, ...], memory: MemoryNode) -> None:
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    key = id(text_node)
    try:
        _PARSED[key] = (weakref.ref(text_node, lambda ref, key=key: _forget(ref, key)), seen, memory)
    except TypeError:  # a node class without weak references is simply not remembered
        pass


def memory_of(node: NodeWithScore, *, copy: bool = True) -> MemoryNode:
    """The memory a retrieved node carries (from its metadata).

    ``copy=False`` returns the remembered model itself, for callers that only
    read it (a copy per call was a tenth of a complete stream's time).  The
    default copy is deep: a registered model shares its dicts and lists with
    the retriever's stream.
    """
    text_node = node.node
    seen = _seen(text_node)
    memory = _fresh(text_node, seen)
    if memory is None:
        meta = text_node.metadata
        data = {k: v for k, v in zip(_FIELD_ORDER, seen[0]) if v is not None}
        data.setdefault("node_id", meta.get("node_id", text_node.node_id))
        data.setdefault("description", text_node.get_content(metadata_mode="none"))
        memory = MemoryNode.model_validate(data)
        _store(text_node, seen, memory)
    return memory.model_copy(deep=True) if copy else memory
