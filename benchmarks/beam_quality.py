"""Retrieval quality on BEAM 500K (long real conversations): the package against each channel, stock vector
search and BM25, with the knowledge-update and contradiction measures.

One command, offline (WordLlama embedding, embedded FalkorDB)::

    .venv/bin/python benchmarks/beam_quality.py --split tune

What it does
------------
1. Reads BEAM 500K (``--data``, default ``<repo>/../shared/benchmarks/beam/beam500k.tar.xz``; never copied)
   and keeps the conversations of ``--split`` (tune = 1-17, test = 18-35) or ``--conversations``.
2. Ingests each conversation as one citizen's N1 memories (``beam_data.memories``: a memory per message,
   FOLLOWS links) through ``memory.ingest`` with the default ``IngestOptions`` (``--ingest-json`` changes
   them), timed.
3. Asks every question with evidence ids through each system of ``--variants`` (top 20, N1):
   the package default (``memory.retriever(citizen)``), the default without neighbour expansion, each
   channel alone, stock LlamaIndex ``VectorStoreIndex`` (same texts and WordLlama embedding) and
   ``llama-index-retrievers-bm25``; ms per question, the first question of each citizen apart (the package
   default runs first, so its first questions carry the per-citizen warm-up).
4. Per category: recall@5/10/20, hit@10 and all-evidence@10.  Knowledge updates: the updated message in the
   top 10; updated ranked above the original when both are in the top 20 (these measures, and those of
   contradictions, leave out the few questions that name one message as both statements).  Contradictions: both statements
   in the top 10.  Temporal: all evidence in the top 10.
5. What an LLM is given (``--llm-text``, package only): the complete stream (``memory.retrieve_stream``,
   current mode) rendered by ``render_stream(budget 4000, current_first)`` and the text of a
   ``ConsciousnessMemoryBlock`` (token_budget 4000), long memories as excerpts of the block's
   ``memory_chars`` (``--memory-chars``): for knowledge updates, the original absent or marked
   past / possibly outdated; for contradictions, both statements in the text and the later one told apart
   (a later day, or the earlier marked).
6. Marks: how many stored messages the ingestion marked superseded or possibly superseded, and how many of
   those are a knowledge update's original (``--marks``).
7. ``--ingest-steps``: ingestion time of the first ``--ingest-conversations`` conversations with the
   default options and with each optional step off (updates, duplicates, entities, concepts, pii).

Prints markdown tables.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ingest_json  # noqa: E402
from beam_data import (  # noqa: E402
    CATEGORIES, DATA_HELP, DEFAULT_DATA, METRICS, SHORT, SPLITS, Conversation, Question, citizen_for, hit_at_k,
    load, memories, message_of_node_id, parse_conversations, question_metrics, rank_of,
)

TOP_K = 20
LEVELS = ["N1"]
LLM_BUDGET = 4000


@dataclass
class Context:
    conv: Conversation
    citizen: str
    memory: Any
    nodes: list[Any]
    cache: dict[str, Any] = field(default_factory=dict)


Ranker = Callable[[Context, Question], list[int]]


def _intention(ctx: Context, text: str, **extra: Any) -> Any:
    from llama_consciousness.schema import RetrievalIntention

    return RetrievalIntention(query_text=text, citizen_id=ctx.citizen, query_levels=LEVELS,
                              max_results_per_level=TOP_K, **extra)


def _ids(node_ids: Sequence[str]) -> list[int]:
    return [i for i in (message_of_node_id(n) for n in node_ids) if i is not None]


def six_way(config: Any = None) -> Ranker:
    def rank(ctx: Context, q: Question) -> list[int]:
        key = ("six", id(config))
        retriever = ctx.cache.get(key)
        if retriever is None:
            retriever = ctx.cache[key] = ctx.memory.retriever(ctx.citizen, config=config)
        return _ids([n.node.metadata["node_id"] for n in retriever.retrieve_intention(_intention(ctx, q.question))])

    return rank


def stock_vector() -> Ranker:
    def rank(ctx: Context, q: Question) -> list[int]:
        retriever = ctx.cache.get("stock_vector")
        if retriever is None:
            from llama_index.core import VectorStoreIndex
            from llama_index.core.schema import TextNode

            from llama_consciousness.nodes import memory_text

            nodes = [TextNode(id_=n.node_id, text=memory_text(n)) for n in ctx.nodes]
            index = VectorStoreIndex(nodes, embed_model=ctx.memory.embed_model, show_progress=False)
            retriever = ctx.cache["stock_vector"] = index.as_retriever(similarity_top_k=TOP_K)
        return _ids([n.node.node_id for n in retriever.retrieve(q.question)])

    return rank


def stock_bm25() -> Ranker:
    def rank(ctx: Context, q: Question) -> list[int]:
        retriever = ctx.cache.get("bm25")
        if retriever is None:
            import Stemmer
            from llama_index.core.schema import TextNode
            from llama_index.retrievers.bm25 import BM25Retriever

            logging.getLogger("bm25s").setLevel(logging.WARNING)
            nodes = [TextNode(id_=n.node_id, text=n.description) for n in ctx.nodes]
            retriever = ctx.cache["bm25"] = BM25Retriever.from_defaults(
                nodes=nodes, similarity_top_k=TOP_K, stemmer=Stemmer.Stemmer("english"), language="english")
        return _ids([n.node.node_id for n in retriever.retrieve(q.question)])

    return rank


def _config(**changes: Any) -> Any:
    from llama_consciousness.retrievers.config import RetrievalConfig

    return RetrievalConfig.model_validate({**RetrievalConfig().model_dump(), **changes})


def _only(channel: str) -> Any:
    from llama_consciousness.retrievers.config import RetrievalConfig

    return RetrievalConfig(channels=(channel,))


def variants() -> dict[str, tuple[str, Callable[[], Ranker]]]:
    return {
        "package default": ("RetrievalConfig(): the package default", lambda: six_way(None)),
        "default no-neighbours": ("the default with neighbour_expansion=0", lambda: six_way(_config(neighbour_expansion=0))),
        "default short": ("the default as if every memory were short (long_memory_chars=None: neighbours "
                          "between any, score_weights always)",
                               lambda: six_way(_config(long_memory_chars=None))),
        "keyword only": ("RetrievalConfig(channels=('keyword',))", lambda: six_way(_only("keyword"))),
        "vector only": ("RetrievalConfig(channels=('vector',))", lambda: six_way(_only("vector"))),
        "graph only": ("RetrievalConfig(channels=('graph',))", lambda: six_way(_only("graph"))),
        "stock BM25": ("llama-index-retrievers-bm25 over the same messages", stock_bm25),
        "stock vector": ("LlamaIndex VectorStoreIndex over the same messages, WordLlama", stock_vector),
    }


DEFAULT_SET = ["package default", "default no-neighbours", "keyword only", "vector only", "graph only",
               "stock BM25", "stock vector"]


# -- evaluation ------------------------------------------------------------------------------


@dataclass
class Outcome:
    name: str
    rows: list[tuple[Question, list[int]]] = field(default_factory=list)
    first_ms: list[float] = field(default_factory=list)
    warm_ms: list[float] = field(default_factory=list)


def retrieval_questions(ctx: Context, limit: int | None) -> list[Question]:
    qs = [q for q in ctx.conv.questions if q.gold]
    if limit:
        per: dict[str, int] = {}
        kept = []
        for q in qs:
            per[q.category] = per.get(q.category, 0) + 1
            if per[q.category] <= limit:
                kept.append(q)
        qs = kept
    return qs


def evaluate(name: str, ranker: Ranker, contexts: Sequence[Context], limit: int | None) -> Outcome:
    out = Outcome(name)
    for ctx in contexts:
        for i, q in enumerate(retrieval_questions(ctx, limit)):
            t0 = time.perf_counter()
            ranked = ranker(ctx, q)
            (out.first_ms if i == 0 else out.warm_ms).append(1000 * (time.perf_counter() - t0))
            out.rows.append((q, ranked))
    return out


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _pct(values: Sequence[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p * (len(ordered) - 1))))]


def paired(q: Question) -> bool:
    """Whether a question names two statements apart (an original and its update, or the two sides of a
    contradiction); a few name one message as both, and count for recall only."""
    return bool(q.first and q.second and not set(q.first) & set(q.second))


def summary(o: Outcome) -> dict[str, dict[str, float]]:
    """Per category (and 'all'): the mean of each metric, plus the update / contradiction measures."""
    out: dict[str, dict[str, float]] = {}
    for category in ("all", *CATEGORIES):
        rows = [(q, r) for q, r in o.rows if category in ("all", q.category)]
        if not rows:
            continue
        metrics = [question_metrics(r, q.gold) for q, r in rows]
        out[category] = {m: _mean([x[m] for x in metrics]) for m in METRICS} | {"n": len(rows)}
    ku = [(q, r) for q, r in o.rows if q.category == "knowledge_update" and paired(q)]
    if ku:
        out["knowledge_update"]["updated@10"] = _mean([hit_at_k(r, q.second, 10) for q, r in ku])
        both = [(q, r) for q, r in ku if rank_of(r[:TOP_K], q.first) is not None
                and rank_of(r[:TOP_K], q.second) is not None]
        out["knowledge_update"]["updated above"] = _mean(
            [float(rank_of(r, q.second) < rank_of(r, q.first)) for q, r in both])
        out["knowledge_update"]["both n"] = len(both)
    cr = [(q, r) for q, r in o.rows if q.category == "contradiction_resolution" and paired(q)]
    if cr:
        out["contradiction_resolution"]["both@10"] = _mean(
            [hit_at_k(r, q.first, 10) * hit_at_k(r, q.second, 10) for q, r in cr])
    return out


# -- what an LLM is given --------------------------------------------------------------------


def _segment(text: str, snippet: str) -> str | None:
    """The rendered memory (from its '- [' to the next memory or heading) holding ``snippet``; None when absent."""
    at = text.find(snippet)
    if at < 0:
        return None
    start = text.rfind("\n- [", 0, at)
    ends = [e for e in (text.find("\n- [", at), text.find("\n## ", at)) if e >= 0]
    return text[start + 1 if start >= 0 else 0:min(ends) if ends else len(text)]


_VALID = re.compile(r"valid (\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2}:\d{2})?)→")


def _valid_from(segment: str) -> str | None:
    """The validity start the rendered memory states (the last 'valid ...→' of its block)."""
    found = _VALID.findall(segment)
    return found[-1] if found else None


def _marked(segment: str) -> bool:
    """A mark before the memory's text: past, or possibly outdated (stored or read-time)."""
    from llama_consciousness.render import PAST_MARK

    head = segment[:200]
    return PAST_MARK in head or "[possibly outdated" in head


def _snippet(node: Any) -> str:
    body = (node.description or node.name).strip()
    return body[:80]




def llm_text_checks(contexts: Sequence[Context], limit: int | None, memory_chars: Any = "default"
                    ) -> dict[str, dict[str, float]]:
    """For knowledge updates and contradictions, what the rendered stream and the memory block say (a long
    memory as an excerpt of at most ``memory_chars``: the block's default unless given)."""
    from llama_consciousness.memory_block import MEMORY_CHARS, ConsciousnessMemoryBlock
    from llama_consciousness.render import render_stream

    memory_chars = MEMORY_CHARS if memory_chars == "default" else memory_chars

    rows: dict[str, list[float]] = {k: [] for k in (
        "stream: original absent or marked", "block: original absent or marked", "stream: updated in text",
        "block: updated in text", "stream: both statements in text", "stream: later told apart",
        "block: both statements in text", "block: later told apart", "stream: marks on other questions' gold")}
    for ctx in contexts:
        block = ConsciousnessMemoryBlock(memory=ctx.memory, citizen_id=ctx.citizen, token_budget=LLM_BUDGET,
                                         max_results_per_level=TOP_K, memory_chars=memory_chars)
        for q in retrieval_questions(ctx, limit):
            stream = ctx.memory.retrieve_stream(_intention(ctx, q.question))
            texts = {"stream": render_stream(stream, LLM_BUDGET, current_first=True, shared_once=True,
                                             question=q.question, memory_chars=memory_chars).text,
                     "block": block.get_text(q.question)}
            nodes = {message_of_node_id(n.node_id): n for tier in stream.activation_tiers.values() for n in tier}
            for n in (n for r in stream.levels.values() for part in (r.vector_results, r.graph_results,
                                                                        r.keyword_results) for n in part):
                nodes.setdefault(message_of_node_id(n.node_id), n)
            if q.category == "knowledge_update" and paired(q):
                for where, text in texts.items():
                    ok = True
                    for mid in q.first:
                        node = nodes.get(mid)
                        seg = _segment(text, _snippet(node)) if node is not None else None
                        ok = ok and (seg is None or _marked(seg))
                    rows[f"{where}: original absent or marked"].append(float(ok))
                    rows[f"{where}: updated in text"].append(float(any(
                        nodes.get(m) is not None and _segment(text, _snippet(nodes[m])) is not None
                        for m in q.second)))
            elif q.category == "contradiction_resolution" and paired(q):
                times = {m: ctx.conv.time_of(m) for m in (*q.first, *q.second)}
                a, b = max(q.first, key=lambda m: times[m]), max(q.second, key=lambda m: times[m])
                earlier, later = (a, b) if times[a] <= times[b] else (b, a)
                for where, text in texts.items():
                    segs = {}
                    for mid in (earlier, later):
                        node = nodes.get(mid)
                        segs[mid] = _segment(text, _snippet(node)) if node is not None else None
                    both = all(s is not None for s in segs.values())
                    rows[f"{where}: both statements in text"].append(float(both))
                    apart = both and (_marked(segs[earlier]) or (
                        (a_at := _valid_from(segs[earlier])) is not None and (b_at := _valid_from(segs[later]))
                        is not None and a_at < b_at))
                    rows[f"{where}: later told apart"].append(float(apart))
            else:
                # a gold message of any other question marked possibly outdated or past: a false mark
                text = texts["stream"]
                for mid in q.gold:
                    node = nodes.get(mid)
                    seg = _segment(text, _snippet(node)) if node is not None else None
                    if seg is not None:
                        rows["stream: marks on other questions' gold"].append(float(_marked(seg)))
    return {k: {"value": _mean(v), "n": len(v)} for k, v in rows.items()}


def stored_marks(contexts: Sequence[Context]) -> dict[str, float]:
    """Messages the ingestion marked superseded or possibly superseded, against the update questions' originals."""
    marked = total = originals_marked = originals = 0
    for ctx in contexts:
        store = ctx.memory.level("N1", ctx.citizen)
        rows = store.graph.ro_query("MATCH (m) WHERE m.possibly_superseded_by IS NOT NULL OR "
                                    "m.superseded_by IS NOT NULL RETURN m.node_id").result_set
        ids = {message_of_node_id(r[0]) for r in rows} - {None}
        marked += len(ids)
        total += len(ctx.conv.messages)
        for q in ctx.conv.questions:
            if q.category == "knowledge_update" and q.first:
                originals += 1
                originals_marked += bool(set(q.first) & ids)
    return {"messages": total, "marked": marked, "share": marked / total if total else float("nan"),
            "originals": originals, "originals marked": originals_marked}


# -- output ----------------------------------------------------------------------------------


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:.3f}"
    return str(v)


def category_table(outcomes: Sequence[Outcome]) -> str:
    sums = {o.name: summary(o) for o in outcomes}
    head = "| category | n | " + " | ".join(f"{o.name} R@10" for o in outcomes) + " |"
    lines = [head, "|" + "---|" * (len(outcomes) + 2)]
    for category in ("all", *CATEGORIES):
        first = sums[outcomes[0].name].get(category)
        if first is None:
            continue
        cells = [_fmt(sums[o.name].get(category, {}).get("R@10", float("nan"))) for o in outcomes]
        lines.append(f"| {SHORT.get(category, category)} | {first['n']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def detail_table(outcomes: Sequence[Outcome]) -> str:
    cols = ["R@5", "R@10", "R@20", "Hit@10", "temporal All@10", "update@10", "updated above", "contra both@10",
            "ms warm p50/p95", "ms first p50"]
    lines = ["| system | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 1)]
    for o in outcomes:
        s = summary(o)
        a = s["all"]
        ku = s.get("knowledge_update", {})
        cells = [_fmt(a["R@5"]), _fmt(a["R@10"]), _fmt(a["R@20"]), _fmt(a["Hit@10"]),
                 _fmt(s.get("temporal_reasoning", {}).get("All@10", float("nan"))),
                 _fmt(ku.get("updated@10", float("nan"))),
                 f"{_fmt(ku.get('updated above', float('nan')))} (n={ku.get('both n', 0)})",
                 _fmt(s.get("contradiction_resolution", {}).get("both@10", float("nan"))),
                 f"{_pct(o.warm_ms, 0.5):.1f} / {_pct(o.warm_ms, 0.95):.1f}", f"{_pct(o.first_ms, 0.5):.1f}"]
        lines.append(f"| {o.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- ingestion steps ---------------------------------------------------------------------------

STEP_VARIANTS = {"default": {}, "updates off": {"updates": "off"}, "duplicates off": {"duplicates": "off"},
                 "entities off": {"entities": False}, "concepts off": {"concepts": False}, "pii off": {"pii": False}}


def ingest_steps(memory: Any, convs: Sequence[Conversation], prefix: str) -> str:
    lines = ["| ingestion | messages | s | messages/s | x default |", "|---|---|---|---|---|"]
    base = None
    for name, options in STEP_VARIANTS.items():
        seconds = 0.0
        n = 0
        for conv in convs:
            citizen = citizen_for(conv.conv, f"{prefix}-steps-{name.replace(' ', '-')}")
            memory.delete_level("N1", citizen)
            records = memories(conv, citizen)
            t0 = time.perf_counter()
            memory.ingest(records, **options)
            seconds += time.perf_counter() - t0
            n += len(conv.messages)
            memory.delete_level("N1", citizen)
        base = seconds if base is None else base
        lines.append(f"| {name} | {n} | {seconds:.1f} | {n / seconds:.0f} | {seconds / base:.2f} |")
    return "\n".join(lines)


# -- main ---------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help=DATA_HELP)
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="FalkorDB data directory kept between runs (default: a temporary one)")
    parser.add_argument("--split", choices=list(SPLITS), default="tune")
    parser.add_argument("--conversations", default="", help="e.g. '1,2,5-7' (overrides --split)")
    parser.add_argument("--limit-questions", type=int, default=None, help="per category and conversation")
    parser.add_argument("--variants", default="default",
                        help="comma-separated system names or 'default' / 'all' / 'none'")
    parser.add_argument("--config-json", action="append", default=[],
                        help="a RetrievalConfig as JSON, run as json1, json2, ...")
    ingest_json.add_argument(parser)
    parser.add_argument("--no-follows", action="store_true", help="store no FOLLOWS links")
    parser.add_argument("--llm-text", action="store_true", help="check what the stream and memory block give an LLM")
    parser.add_argument("--memory-chars", default="default",
                        help="with --llm-text: excerpt memories longer than this, a comma list to compare ('none': "
                             "whole; default: the memory block's MEMORY_CHARS)")
    parser.add_argument("--marks", action="store_true", help="count stored messages marked (possibly) superseded")
    parser.add_argument("--ingest-steps", action="store_true", help="time ingestion with each optional step off")
    parser.add_argument("--ingest-conversations", type=int, default=3)
    parser.add_argument("--citizen-prefix", default="beam")
    parser.add_argument("--json-out", type=Path, default=None, help="write per-question ranks here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    known = variants()
    for i, text in enumerate(args.config_json, start=1):
        from llama_consciousness.retrievers.config import RetrievalConfig

        config = RetrievalConfig.model_validate_json(text)
        known[f"json{i}"] = (f"RetrievalConfig(**{text})", lambda config=config: six_way(config))
    names: list[str] = []
    for part in (p.strip() for p in args.variants.split(",")):
        if part == "default":
            names += DEFAULT_SET
        elif part == "all":
            names += [n for n in known if not n.startswith("json")]
        elif part and part != "none":
            names.append(part)
    names = list(dict.fromkeys([*names, *(f"json{i}" for i in range(1, len(args.config_json) + 1))]))
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {list(known)}")
    ingest_options = ingest_json.ingest_options(parser, args.ingest_json)

    from llama_consciousness import ConsciousnessMemory

    convs, unpack_dir = load(args.data, parse_conversations(args.conversations, args.split))
    temp = None
    data_dir = args.data_dir
    if data_dir is None:
        temp = data_dir = Path(tempfile.mkdtemp(prefix="beamq", dir="/tmp"))
    started = time.perf_counter()
    try:
        with ConsciousnessMemory(data_dir=data_dir) as memory:
            contexts = []
            t0 = time.perf_counter()
            for conv in convs:
                citizen = citizen_for(conv.conv, args.citizen_prefix)
                records = memories(conv, citizen, follows=not args.no_follows)
                report = memory.ingest(records, **ingest_options)
                if report.rejected:
                    raise RuntimeError(f"conversation {conv.conv}: {len(report.rejected)} rejected: {report.summary()}")
                contexts.append(Context(conv, citizen, memory, [r for r in records if hasattr(r, "node_type")]))
            ingest_s = time.perf_counter() - t0
            outcomes = []
            for name in names:
                outcomes.append(evaluate(name, known[name][1](), contexts, args.limit_questions))
                s = summary(outcomes[-1])
                print(f"  {name}: R@10 {s['all']['R@10']:.3f}", file=sys.stderr)
            llm = {}
            for part in args.memory_chars.split(",") if args.llm_text else ():
                chars = part if part == "default" else None if part == "none" else int(part)
                llm[part] = llm_text_checks(contexts, args.limit_questions, chars)
            marks = stored_marks(contexts) if args.marks else None
            steps = ingest_steps(memory, convs[:args.ingest_conversations], args.citizen_prefix) \
                if args.ingest_steps else None
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
        if unpack_dir is not None:
            shutil.rmtree(unpack_dir, ignore_errors=True)
    n_messages = sum(len(c.messages) for c in convs)
    which = f"conversations {args.conversations}" if args.conversations else f"split {args.split}"
    print(f"BEAM 500K retrieval quality: {len(convs)} conversations ({which}), {n_messages} messages ingested "
          f"through memory.ingest({ingest_options or ''}) in {ingest_s:.1f} s ({n_messages / ingest_s:.0f} "
          f"messages/s), top {TOP_K}, N1, WordLlama embedding.\n")
    if outcomes:  # --variants none: only the LLM-text checks, marks or ingestion steps
        print("Recall@10 per category:\n")
        print(category_table(outcomes))
        print("\nEvery question with evidence, and the update / contradiction / temporal measures:\n")
        print(detail_table(outcomes))
        print()
    for name in names:
        print(f"- {name}: {known[name][0]}")
    for chars, checks in llm.items():
        print(f"\nWhat an LLM is given (complete stream, current mode; render_stream and ConsciousnessMemoryBlock, "
              f"{LLM_BUDGET} tokens; memory_chars {chars}):\n")
        print("| measure | value | n |\n|---|---|---|")
        for k, v in checks.items():
            print(f"| {k} | {_fmt(v['value'])} | {v['n']} |")
    if marks is not None:
        print(f"\nStored marks: {marks['marked']} of {marks['messages']} messages marked superseded or possibly "
              f"superseded ({marks['share']:.2%}); update originals marked: {marks['originals marked']} of "
              f"{marks['originals']}.")
    if steps is not None:
        print(f"\nIngestion with each optional step off (first {args.ingest_conversations} conversations):\n")
        print(steps)
    if args.json_out is not None:
        args.json_out.write_text(json.dumps({o.name: [{"conv": q.conv, "category": q.category, "question": q.question,
                                                          "gold": q.gold,
                                                         "first": q.first, "second": q.second, "ranked": r}
                                                        for q, r in o.rows] for o in outcomes}))
    print(f"\nTotal {time.perf_counter() - started:.1f} s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
