"""A consciousness stream as LLM context, within a token budget spent in order of attention.

Each memory is one compact line with its felt metadata, because that texture is the point.  A memory the
injection guard flagged is rendered between :data:`UNTRUSTED_MARK` and :data:`UNTRUSTED_END`, so the LLM is
told it is data, not an instruction.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from pathlib import Path

from llama_consciousness.schema import ConsciousnessNode, ConsciousnessStream, TemporalDissonance
from llama_consciousness.schema.stream import ACTIVATION_TIERS as TIERS
from llama_consciousness.scoring.recency import excerpt, excerpt_head, excerpter

UNTRUSTED_MARK = "[untrusted text, flagged as a possible prompt injection]"
UNTRUSTED_END = "[end of untrusted text]"
_LOCK = threading.Lock()
CUT_SLACK = 2
"""Tokens a line may cost fewer than the line holding only its excerpt's beginning: the word cut at the end of
that beginning may take fewer tokens whole (the rest of an excerpt is added between whole words)."""


@lru_cache(maxsize=1)
def token_counter() -> Callable[[str], int]:
    """Count tokens with ``cl100k_base`` without the network: tiktoken is pointed at llama-index-core's copy
    unless the user chose a cache."""
    import llama_index.core
    import tiktoken

    with _LOCK:
        if "TIKTOKEN_CACHE_DIR" not in os.environ:
            os.environ["TIKTOKEN_CACHE_DIR"] = str(Path(llama_index.core.__file__).parent / "_static" / "tiktoken_cache")
        encoding = tiktoken.get_encoding("cl100k_base")
    return lambda text: len(encoding.encode(text, disallowed_special=()))


@dataclass
class RenderedContext:
    """The text handed to the LLM and what it holds."""

    text: str
    tokens: int
    budget: int
    included: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)


def _emotions(node: ConsciousnessNode, top: int = 3) -> str:
    items = sorted((node.emotion_vector or {}).items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return ", ".join(f"{name} {value:.1f}" for name, value in items)


def _span(node: ConsciousnessNode, precise: bool = False) -> str:
    day = "%Y-%m-%d %H:%M:%S" if precise else "%Y-%m-%d"
    valid = node.valid_at.strftime(day) + "→" + (node.invalid_at.strftime(day) if node.invalid_at else "")
    if node.expired_at:
        valid += f", believed until {node.expired_at.strftime(day)}"
    return valid


def untrusted_text(text: str) -> str:
    """``text`` marked as untrusted; an end mark inside it is defused, so it cannot close its own quotation."""
    return f"{UNTRUSTED_MARK} {text.replace(UNTRUSTED_END, '(end mark removed)')} {UNTRUSTED_END}"


PAST_MARK = "[past: replaced by a later memory]"
POSSIBLY_OUTDATED_MARK = "[possibly outdated: a later memory may replace it]"
CURRENT_MARK = "[current]"


def outdated_mark(later: Any) -> str:
    """The read-time mark: a memory retrieved with this one, of ``later``'s date, gives the same thing another
    value (``retrievers.base.later_versions_first``)."""
    return f"[possibly outdated: a later memory ({later.strftime('%Y-%m-%d')}) gives it another value]"


def memory_line(node: ConsciousnessNode, replaces_another: bool = False, shared: frozenset[str] = frozenset(),
                precise: bool = False, question: str = "", memory_chars: int | None = None) -> str:
    """One memory, compact: what it is (marked untrusted when flagged), then how it felt and when it held.
    A replaced version is marked past, one a later memory may replace possibly outdated, and the one
    that replaces another memory of the context (``replaces_another``) current."""
    text = _text(node)
    if memory_chars is not None and len(text) > memory_chars:
        text = excerpt(text, question, memory_chars)
    return _line(node, text, replaces_another, shared, precise)


def _text(node: ConsciousnessNode) -> str:
    return node.description.strip() or node.name


def _line(node: ConsciousnessNode, text: str, replaces_another: bool, shared: frozenset[str], precise: bool) -> str:
    """``memory_line`` with its text given."""
    level = node.level or node.retrieval_source.split("_", 1)[0]
    body = node.name
    if text and text != node.name:
        # a name that is the text's beginning ("Ada: I moved to…") is not said twice
        body = text if node.name.endswith("…") and text.startswith(node.name[:-1]) else f"{body}: {text}"
    if node.injection_suspected:
        body = untrusted_text(body)
    replaced = _replaced(node)
    if node.forgotten_at is not None:  # full history: what was taken back, and why
        reason = node.forgotten_reason.value if node.forgotten_reason else "no reason"
        body = f"[forgotten {node.forgotten_at:%Y-%m-%d}: {reason.replace('_', ' ')}] {body}"
    elif replaced == 2:
        body = f"{PAST_MARK} {body}"
    elif replaced == 1 and node.possibly_superseded_by is None and node.possibly_outdated_since is not None:
        body = f"{outdated_mark(node.possibly_outdated_since)} {body}"
    elif replaced == 1:
        body = f"{POSSIBLY_OUTDATED_MARK} {body}"
    elif replaces_another and node.expired_at is None:
        body = f"{CURRENT_MARK} {body}"
    head = f"- [{level} {node.node_type}] {body}"
    meta = [m for m in memory_meta(node, precise) if m not in shared]
    return f"{head} ({'; '.join(meta)})" if meta else head


def memory_meta(node: ConsciousnessNode, precise: bool = False) -> list[str]:
    """A memory's felt metadata as the parts of its line: energy, confidence, state, feelings, goal, validity
    (to the second with ``precise``: two memories of one day are then still told apart in time)."""
    meta = [f"energy {node.energy:.2f}", f"confidence {node.confidence:.2f}", node.resolution_state]
    feelings = _emotions(node)
    if feelings:
        meta.append(f"feels {feelings}")
    if node.goal:
        meta.append(f"goal {node.goal}")
    meta.append(f"valid {_span(node, precise)}")
    return meta


def dissonance_line(d: TemporalDissonance) -> str:
    kind = "reality changed" if d.dissonance_type == "reality_changed" else "I was wrong"
    now = "now" if d.confirmed else "possibly now"
    return (f"- {d.node_name} ({kind}, discovery energy {d.discovery_energy:.2f}, "
            f"{d.corrected_at.strftime('%Y-%m-%d')}): was \"{d.original_belief}\"; {now} \"{d.corrected_belief}\"")


def _replaced(node: ConsciousnessNode) -> int:
    """0: believed now; 1: a later memory may replace it; 2: a later memory replaced it."""
    if node.expired_at is not None and node.superseded_by:
        return 2
    return 1 if node.possibly_superseded_by or node.possibly_outdated_by else 0


def _tiers(stream: ConsciousnessStream) -> list[tuple[str, list[ConsciousnessNode]]]:
    """The stream's tiers, or its levels in concatenation order when it has none."""
    if any(stream.activation_tiers.get(t) for t in TIERS):
        return [(t, list(stream.activation_tiers.get(t, []))) for t in TIERS]
    seen: set[tuple[str | None, str]] = set()
    ordered: list[ConsciousnessNode] = []
    for part in ("vector_results", "graph_results", "keyword_results"):
        for results in stream.levels.values():
            for node in getattr(results, part):
                key = (node.level, node.node_id)
                if key not in seen:
                    seen.add(key)
                    ordered.append(node)
    return [("retrieved", ordered)]


def render_stream(stream: ConsciousnessStream, token_budget: int = 4000, *,
                  count: Callable[[str], int] | None = None, current_first: bool = False,
                  shared_once: bool = False, question: str = "", memory_chars: int | None = None) -> RenderedContext:
    """The stream as context text of at most ``token_budget`` tokens, in whole lines (a memory that does not
    fit is left out and listed); lower tiers are dropped before higher ones.  With ``current_first``, within
    each tier what is believed now comes before what a later memory replaced (or may replace), so a tight
    budget drops the past first.  With ``shared_once``, metadata every memory of the stream has alike
    (chat turns stored with the same energy, goal and feelings) is said once under the heading instead of
    on every line, leaving the budget to the memories themselves.  With ``memory_chars``, a memory longer than
    that is given as an excerpt: its beginning and the passage that speaks of ``question``
    (``scoring.recency.excerpt``), so one long message does not spend the budget of several."""
    if token_budget <= 0:
        raise ValueError(f"token_budget must be positive, got {token_budget}")
    if memory_chars is not None and memory_chars < 1:
        raise ValueError(f"memory_chars must be positive (or None for whole memories), got {memory_chars}")
    count = count or token_counter()
    cut = excerpter(question) if memory_chars is not None else None
    lines: list[str] = []
    included: list[str] = []
    left_out: list[str] = []
    used = 0

    def add(line: str) -> bool:
        nonlocal used
        cost = count(line + "\n")
        if used + cost > token_budget:
            return False
        lines.append(line)
        used += cost
        return True

    summary = stream.consciousness_summary
    add(f"# Memory context ({summary.total_results} memories; energy {summary.dominant_energy:.2f}; "
        f"themes: {', '.join(summary.emotional_themes) or 'none'})")
    tiers = _tiers(stream)
    if current_first:
        tiers = [(tier, sorted(nodes, key=_replaced)) for tier, nodes in tiers]  # stable: rank order kept
    shared: frozenset[str] = frozenset()
    everyone = [n for _, nodes in tiers for n in nodes]
    days: dict[Any, set[Any]] = {}  # a day two memories of other times share: their times are said
    for n in everyone:
        days.setdefault(n.valid_at.date(), set()).add(n.valid_at)

    def precise(n: ConsciousnessNode) -> bool:
        return len(days[n.valid_at.date()]) > 1

    if shared_once and len(everyone) > 1:
        shared = frozenset.intersection(*(frozenset(memory_meta(n, precise(n))) for n in everyone))
        if shared and not add(f"(every memory below: "
                              f"{'; '.join(m for m in memory_meta(everyone[0], precise(everyone[0])) if m in shared)})"):
            shared = frozenset()  # said on each line, then, or not at all
    successors = {later for _, nodes in tiers for n in nodes
                  for later in (n.superseded_by, n.possibly_superseded_by, n.possibly_outdated_by) if later}
    for tier, nodes in tiers:
        if not nodes:
            continue
        if not add(f"## {tier.capitalize()}"):
            left_out += [n.node_id for n in nodes]
            continue
        for node in nodes:
            replaces = node.node_id in successors
            text = _text(node)
            if memory_chars is not None and len(text) > memory_chars:
                # An excerpt begins with the text's first half-limit: when the line with that alone cannot
                # fit, the passage is not looked for (most lines of a chat turn's context are left out, and
                # looking for their passages was two thirds of the rendering).  Not when a name cut with "…"
                # is longer than that beginning: the line then says the name, not the text, and may be longer.
                start = excerpt_head(text, memory_chars)
                floor = _line(node, start, replaces, shared, precise(node))
                if (not node.name.endswith("…") or start.startswith(node.name[:-1])) \
                        and used + count(floor + "\n") - CUT_SLACK > token_budget:
                    left_out.append(node.node_id)
                    continue
                text = cut(text, memory_chars)
            line = _line(node, text, replaces, shared, precise(node))
            (included if add(line) else left_out).append(node.node_id)
    moments = [dissonance_line(d) for d in stream.temporal_dissonances]
    if moments and used + count("## Learning moments\n" + moments[0] + "\n") <= token_budget:
        add("## Learning moments")  # only with at least one moment under it
        for line in moments:
            add(line)
    text = "\n".join(lines)
    return RenderedContext(text=text, tokens=count(text), budget=token_budget, included=included, left_out=left_out)
