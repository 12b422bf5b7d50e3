"""Retrieval quality on LoCoMo: the package's retriever (and each of its channels) vs. stock vector search and BM25.

One command, offline (WordLlama embedding, embedded FalkorDB)::

    /work/main/.venv/bin/python benchmarks/locomo_quality.py --data-dir /tmp/locomo-data

What it does
------------
1. Reads LoCoMo (``--data PATH``, default ``<repo>/../shared/benchmarks/
   locomo/locomo10.json``; CC BY-NC, not part of this repository: get
   ``data/locomo10.json`` from https://github.com/snap-research/locomo; it
   is read in place, never copied) and keeps the conversations of one part
   of a fixed split by conversation (``--split``, default ``test``): in file
   order, tune = the first ceil(n/2), test = the rest; for locomo10.json

   * tune: conv-26, conv-30, conv-41, conv-42, conv-43 (the first 5)
   * test: conv-44, conv-47, conv-48, conv-49, conv-50 (the last 5)

   Every default chosen from data is chosen on ``--split tune``; reported
   numbers are ``--split test`` (``--split all`` for both, ``--conversations``
   for any list, overriding the split).
2. Turns each conversation into memories for one citizen per conversation
   at level N1 (``locomo_data.py`` has the exact mapping), through the
   project's own pipeline (``ConsciousnessMemory(data_dir=...).ingest``,
   default ``IngestOptions``).  ``--memories`` picks the evaluation:

   * ``turns`` (the standard one): one memory per dialog turn, node ids
     ``<sample_id>:<dia_id>``, FOLLOWS links between consecutive turns;
   * ``turns+windows`` (short and long memories compete): the same turns
     AND, for every session, windows of consecutive turns stored as
     memories of the same citizen: 12 turns each (``--window-size``), a new
     window every 6 turns (``--window-stride``), the last window of a
     session aligned to its end, so each turn is in one or two windows
     (sessions under 12 turns are one window); ~315 words per window on
     the test split (139-567), against ~27 per turn.  Node ids
     ``<sample_id>:W<session>:<first>-<last>``, name = the window's first
     ten words, description = its turns' texts joined by newlines,
     valid_at = the session's date.  A question's gold stays its turns: a
     window in the top k takes a slot and is a miss.  The windows'
     citizens are separate (``<prefix>-w12s6-<sample_id>``), so one
     ``--data-dir`` serves both evaluations.

   Stock vector search and stock BM25 index exactly the memories the store
   holds for that evaluation (turns, or turns + windows).
3. Asks every question with evidence (categories 1-4 make "overall";
   category 5, adversarial, is reported on its own) through each system of
   ``--variants``, restricted to its conversation's citizen
   (``query_levels=["N1"]``, ``max_results_per_level=20``):

   * ``package default``: ``memory.retriever(citizen)`` with ``RetrievalConfig()``;
   * ``default no-graph`` / ``default no-neighbours``: the default without
     the graph channel / without neighbour expansion;
   * ``keyword only``, ``vector only``, ``graph only``:
     ``RetrievalConfig(channels=(<one>,))``;
   * ``HYBRID_RRF``, ``SIX_WAY_CONCATENATION``, ...: the package's recipes;
   * ``stock vector``: LlamaIndex ``VectorStoreIndex`` (in-memory) over the
     same memories, same texts (``memory_text``), same WordLlama embedding;
   * ``stock BM25``: ``llama-index-retrievers-bm25`` (bm25s, English
     PyStemmer, English stop words) over the memories' descriptions;
   * ``--config-json '{"fusion": "rrf", ...}'`` (repeatable): any
     ``RetrievalConfig``, validated by it, run as ``json1``, ``json2``, ...
4. Metrics per question: recall@5/10/20 (|gold ∩ top-k| / |gold|), hit@10,
   session-level recall@10, and for the long-memory evaluation Win@10 (share
   of the top 10 that are windows) and WinGold@10 (a window covering a gold
   turn is in the top 10); means overall (cats 1-4) and per category; the
   results each system returned per level (mean / max over queries: the
   package must return at most ``max_results_per_level``); and the
   point-in-time check: for every question, an as-of query with the default
   configuration (``temporal_mode="point_in_time"``, ``as_of_time`` = one
   second before the earliest evidence session) must return none of the
   gold turns and nothing valid after the as-of time.

Prints one markdown table (plus the point-in-time line and timings).
``--limit-questions N`` keeps the first N questions with evidence of every
conversation of the split; ``--data-dir DIR`` keeps the FalkorDB data
between runs (re-ingesting is idempotent, so a second run only re-checks).
Cost on a 2-core machine, default variants, test split (985 questions):
about 2.2 min for ``--memories turns`` and 2.9 min for ``turns+windows``
(ingestion 3-7 s of it; the package's fused retrievals take 6-30 ms a
query, the point-in-time check as much as one more system).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ingest_json  # noqa: E402
from locomo_data import (  # noqa: E402
    DATA_EPILOG,
    DATA_HELP,
    DEFAULT_DATA,
    MEMORIES,
    METRICS,
    SPLIT_HELP,
    SPLITS,
    WINDOW_SIZE,
    WINDOW_STRIDE,
    Conversation,
    Question,
    citizen_for,
    conversation_memories,
    dia_of_node_id,
    load_conversations,
    question_metrics,
    require_data,
    session_of,
    summarise,
)

TOP_K = 20
LEVELS = ["N1"]


# -- per-conversation context ---------------------------------------------------------


@dataclass
class Context:
    """One conversation, ingested, with the baselines' indexes."""

    conv: Conversation
    citizen: str
    memory: Any
    nodes: list[Any] = field(default_factory=list)  # MemoryNodes as ingested (turns, and windows if any)
    cache: dict[str, Any] = field(default_factory=dict)


def citizen_of(sample_id: str, prefix: str, memories: str = "turns", size: int = WINDOW_SIZE,
               stride: int = WINDOW_STRIDE) -> str:
    """The citizen of a conversation in one evaluation (windows of each sizing get their own)."""
    if memories == "turns":
        return citizen_for(sample_id, prefix)
    return citizen_for(sample_id, f"{prefix}-w{size}s{stride}")


def ingest_conversation(memory: Any, conv: Conversation, prefix: str, memories: str = "turns",
                        size: int = WINDOW_SIZE, stride: int = WINDOW_STRIDE, **options: Any) -> Context:
    """Ingest one conversation (``options``: ``IngestOptions`` fields, e.g. ``updates="off"``)."""
    citizen = citizen_of(conv.sample_id, prefix, memories, size, stride)
    records = conversation_memories(conv, citizen, memories, size=size, stride=stride)
    report = memory.ingest(records, **options)
    if report.rejected:
        raise RuntimeError(f"{conv.sample_id}: {len(report.rejected)} records rejected: {report.summary()}")
    nodes = [r for r in records if hasattr(r, "node_type")]
    return Context(conv, citizen, memory, nodes)


# -- systems ------------------------------------------------------------------------

# -> (dia ids and window keys, best first; results per queried level)
Ranked = tuple[list[str], dict[str, int]]
Ranker = Callable[[Context, Question], Ranked]


def _intention(ctx: Context, text: str, **extra: Any) -> Any:
    from llama_consciousness.schema import RetrievalIntention

    return RetrievalIntention(query_text=text, citizen_id=ctx.citizen, query_levels=LEVELS,
                              max_results_per_level=TOP_K, **extra)


def six_way(config: Any = None) -> Ranker:
    """The package's retriever with ``config`` (None: the package default)."""

    def rank(ctx: Context, q: Question) -> Ranked:
        key = ("six", id(config))
        retriever = ctx.cache.get(key)
        if retriever is None:
            retriever = ctx.cache[key] = ctx.memory.retriever(ctx.citizen, config=config)
        nodes = retriever.retrieve_intention(_intention(ctx, q.question))
        per_level = dict.fromkeys(LEVELS, 0)
        for n in nodes:
            level = n.node.metadata.get("level")
            per_level[level] = per_level.get(level, 0) + 1
        return [dia_of_node_id(n.node.metadata["node_id"]) for n in nodes], per_level

    return rank


def stock_vector() -> Ranker:
    """LlamaIndex's VectorStoreIndex retriever (SimpleVectorStore), same memories, texts and embedding."""

    def rank(ctx: Context, q: Question) -> Ranked:
        retriever = ctx.cache.get("stock_vector")
        if retriever is None:
            from llama_index.core import VectorStoreIndex
            from llama_index.core.schema import TextNode

            from llama_consciousness.nodes import memory_text

            nodes = [TextNode(id_=n.node_id, text=memory_text(n)) for n in ctx.nodes]
            index = VectorStoreIndex(nodes, embed_model=ctx.memory.embed_model, show_progress=False)
            retriever = ctx.cache["stock_vector"] = index.as_retriever(similarity_top_k=TOP_K)
        ids = [dia_of_node_id(n.node.node_id) for n in retriever.retrieve(q.question)]
        return ids, {LEVELS[0]: len(ids)}

    return rank


def stock_bm25() -> Ranker:
    """llama-index-retrievers-bm25 over the memories' descriptions (English stemmer and stop words)."""

    def rank(ctx: Context, q: Question) -> Ranked:
        retriever = ctx.cache.get("bm25")
        if retriever is None:
            import Stemmer
            from llama_index.core.schema import TextNode
            from llama_index.retrievers.bm25 import BM25Retriever

            logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG
            nodes = [TextNode(id_=n.node_id, text=n.description) for n in ctx.nodes]
            retriever = ctx.cache["bm25"] = BM25Retriever.from_defaults(
                nodes=nodes, similarity_top_k=TOP_K, stemmer=Stemmer.Stemmer("english"), language="english")
        ids = [dia_of_node_id(n.node.node_id) for n in retriever.retrieve(q.question)]
        return ids, {LEVELS[0]: len(ids)}

    return rank


# -- evaluation -------------------------------------------------------------------------


@dataclass
class Outcome:
    name: str
    per_question: list[tuple[int, dict[str, float]]]
    seconds: float
    queries: int
    per_level: list[int] = field(default_factory=list)  # results returned, one entry per query and level

    @property
    def summary(self) -> dict[str, dict[str, float]]:
        return summarise(self.per_question)

    @property
    def per_level_mean(self) -> float:
        return sum(self.per_level) / len(self.per_level) if self.per_level else float("nan")

    @property
    def per_level_max(self) -> int:
        return max(self.per_level, default=0)


def questions_of(ctx: Context, limit: int | None) -> list[Question]:
    """The questions with evidence, the first ``limit`` of them (per conversation) when given."""
    qs = [q for q in ctx.conv.questions if q.gold]
    return qs[:limit] if limit else qs


def evaluate(name: str, ranker: Ranker, contexts: Sequence[Context], limit: int | None) -> Outcome:
    rows: list[tuple[int, dict[str, float]]] = []
    per_level: list[int] = []
    started = time.perf_counter()
    n = 0
    for ctx in contexts:
        for q in questions_of(ctx, limit):
            ranked, counts = ranker(ctx, q)
            rows.append((q.category, question_metrics(ranked, q.gold)))
            per_level.extend(counts.values())
            n += 1
    return Outcome(name, rows, time.perf_counter() - started, n, per_level)


def point_in_time_check(config: Any, contexts: Sequence[Context], limit: int | None) -> dict[str, Any]:
    """As of one second before the earliest evidence session: no gold turn may come back."""
    from llama_consciousness.schema import RetrievalIntention

    checked = leaked = answered = late = 0
    for ctx in contexts:
        retriever = ctx.memory.retriever(ctx.citizen, config=config)
        dates = ctx.conv.session_dates
        for q in questions_of(ctx, limit):
            sessions = [session_of(g) for g in q.gold if session_of(g) in dates]
            if not sessions:
                continue
            as_of = min(dates[s] for s in sessions) - timedelta(seconds=1)
            intention = RetrievalIntention(query_text=q.question, citizen_id=ctx.citizen, query_levels=LEVELS,
                                           max_results_per_level=TOP_K, temporal_mode="point_in_time",
                                           as_of_time=as_of)
            nodes = retriever.retrieve_intention(intention)
            got = {dia_of_node_id(n.node.metadata["node_id"]) for n in nodes}
            checked += 1
            leaked += bool(got & set(q.gold))
            answered += bool(got)
            # and nothing valid after the as-of time at all
            late += sum(1 for n in nodes if _after(n.node.metadata.get("valid_at"), as_of))
    return {"checked": checked, "leaked": leaked, "non_empty": answered, "late": late}


def _after(value: Any, when: Any) -> bool:
    from datetime import datetime as _dt

    from llama_consciousness.schema._time import to_utc

    if value is None:
        return False
    moment = _dt.fromisoformat(str(value).replace("Z", "+00:00")) if not isinstance(value, _dt) else value
    return to_utc(moment) > when


# -- variants ----------------------------------------------------------------------------

Variant = tuple[str, Callable[[], Ranker]]  # (what it is, ranker factory)


def _default_with(**changes: Any) -> Any:
    """The package default with some fields changed (validated again)."""
    from llama_consciousness.retrievers.config import RetrievalConfig

    return RetrievalConfig.model_validate({**RetrievalConfig().model_dump(), **changes})


def _without_graph() -> Any:
    from llama_consciousness.retrievers.config import RetrievalConfig

    return _default_with(channels=tuple(c for c in RetrievalConfig().channels if c != "graph"))


def _recipe(name: str) -> Any:
    from llama_consciousness.retrievers import config

    return getattr(config, name)


def _only(channel: str) -> Any:
    from llama_consciousness.retrievers.config import RetrievalConfig

    return RetrievalConfig(channels=(channel,))


def variants() -> dict[str, Variant]:
    """name -> (what it is, ranker factory); configurations are built only when a variant runs."""
    out: dict[str, Variant] = {
        "package default": ("RetrievalConfig(): the package default", lambda: six_way(None)),
        "default no-graph": ("the default without the graph channel", lambda: six_way(_without_graph())),
        "default no-neighbours": ("the default without neighbour expansion (neighbour_expansion=0)",
                                  lambda: six_way(_default_with(neighbour_expansion=0))),
        "keyword only": ("RetrievalConfig(channels=('keyword',))", lambda: six_way(_only("keyword"))),
        "vector only": ("RetrievalConfig(channels=('vector',))", lambda: six_way(_only("vector"))),
        "graph only": ("RetrievalConfig(channels=('graph',))", lambda: six_way(_only("graph"))),
        "stock BM25": ("llama-index-retrievers-bm25 over the same memories", stock_bm25),
        "stock vector": ("LlamaIndex VectorStoreIndex over the same memories, WordLlama", stock_vector),
    }
    for recipe, what in (("HYBRID_RRF", "recipe: all channels, reciprocal rank fusion, equal weights"),
                         ("HYBRID_RRF_70_30", "recipe: rrf, vector 0.7, keyword 0.3, graph 0.3"),
                         ("SIX_WAY_CONCATENATION", "recipe: the core document's six ways (vector + graph), "
                                                   "concatenated"),
                         ("SEVEN_WAY_CONCATENATION", "recipe: the six ways plus keyword, concatenated")):
        out[recipe] = (what, lambda recipe=recipe: six_way(_recipe(recipe)))
    return out


# The systems must-have 4 of issue 26 compares: the default, each channel alone, the default without graph
# and without neighbour expansion, rank fusion, and the two stock baselines.
DEFAULT_SET = ["package default", "default no-graph", "default no-neighbours", "keyword only", "vector only",
               "graph only", "HYBRID_RRF", "stock BM25", "stock vector"]


def json_variants(texts: Sequence[str]) -> dict[str, Variant]:
    """``--config-json`` values as variants ``json1``, ``json2``, ... (ValueError when one is not a valid
    RetrievalConfig)."""
    from pydantic import ValidationError

    from llama_consciousness.retrievers.config import RetrievalConfig

    out: dict[str, Variant] = {}
    for i, text in enumerate(texts, start=1):
        try:
            config = RetrievalConfig.model_validate_json(text)
        except ValidationError as exc:
            raise ValueError(f"--config-json {text!r} is not a RetrievalConfig: {exc}") from exc
        what = "RetrievalConfig(**" + json.dumps(config.model_dump(mode="json", exclude_defaults=True)) + ")"
        out[f"json{i}"] = (what, lambda config=config: six_way(config))
    return out


def select(spec: str, known: dict[str, Variant], extra: Sequence[str] = ()) -> list[str]:
    """``--variants`` as names: 'default' (DEFAULT_SET), 'all', 'none', or a comma list mixing them;
    the ``extra`` names (``--config-json``) follow.  ValueError names the unknown ones."""
    names: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if part == "default":
            names += DEFAULT_SET
        elif part == "all":
            names += [n for n in known if not n.startswith("json")]
        elif part and part != "none":
            names.append(part)
    names = list(dict.fromkeys([*names, *extra]))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; known: {list(known)}")
    return names


# -- output -------------------------------------------------------------------------------


def _fmt(value: float) -> str:
    return "-" if isinstance(value, float) and math.isnan(value) else f"{value:.3f}"


SLICES = [("overall", "overall (1-4)"), ("cat2", "temporal (2)"), ("cat1", "multi-hop (1)"),
          ("cat3", "open-domain (3)"), ("cat4", "single-hop (4)"), ("cat5", "adversarial (5)")]


def table(outcomes: Sequence[Outcome], metrics: Sequence[str] = METRICS) -> str:
    """One markdown table: a block of rows per system, results per level and ms/query on its first row."""
    head = "| system | questions | n | " + " | ".join(metrics) + " | per level mean/max | ms/query |"
    lines = [head, "|" + "---|" * (len(metrics) + 5)]
    for o in outcomes:
        s = o.summary
        for i, (key, label) in enumerate(SLICES):
            row = s[key]
            cells = f"| {f'**{o.name}**' if i == 0 else ''} | {label} | {row['n']} | " \
                + " | ".join(_fmt(row[m]) for m in metrics)
            if i == 0:
                ms = 1000 * o.seconds / max(o.queries, 1)
                cells += f" | {o.per_level_mean:.1f}/{o.per_level_max} | {ms:.1f} |"
            else:
                cells += " | | |"
            lines.append(cells)
    return "\n".join(lines)


# -- main -----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2]
                                     + "\n\n" + DATA_EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, metavar="PATH", help=DATA_HELP)
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="FalkorDB data directory kept between runs (default: a temporary one, removed afterwards)")
    parser.add_argument("--split", choices=SPLITS, default="test", help=SPLIT_HELP)
    parser.add_argument("--conversations", default="",
                        help="comma-separated sample ids or 0-based indexes (overrides --split)")
    parser.add_argument("--memories", choices=MEMORIES, default="turns",
                        help="turns: one memory per turn (standard); turns+windows: each session also stored as "
                             "windows of consecutive turns, gold stays the turns (default: %(default)s)")
    parser.add_argument("--window-size", type=int, default=WINDOW_SIZE,
                        help="turns per window (turns+windows; default: %(default)s)")
    parser.add_argument("--window-stride", type=int, default=WINDOW_STRIDE,
                        help="turns between window starts (turns+windows; default: %(default)s)")
    parser.add_argument("--limit-questions", type=int, default=None,
                        help="the first N questions with evidence of each conversation of the split")
    parser.add_argument("--variants", default="default",
                        help="comma-separated system names, 'default', 'all', or 'none' (only --config-json)")
    parser.add_argument("--config-json", action="append", default=[], metavar="JSON",
                        help="a RetrievalConfig as JSON, e.g. '{\"fusion\": \"rrf\", \"rrf_k\": 20}' (validated; "
                             "repeatable; run as json1, json2, ... after --variants)")
    parser.add_argument("--no-pit", action="store_true", help="skip the point-in-time check")
    ingest_json.add_argument(parser)
    parser.add_argument("--citizen-prefix", default="locomo")
    args = parser.parse_args(argv)
    require_data(args.data)
    if args.window_size < 1 or args.window_stride < 1:
        parser.error("--window-size and --window-stride must be >= 1")
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    known = variants()
    try:
        configs = json_variants(args.config_json)
        known.update(configs)
        names = select(args.variants, known, list(configs))
    except ValueError as exc:
        parser.error(str(exc))
    if not names:
        parser.error("no variants to run")

    from llama_consciousness import ConsciousnessMemory

    only = [c.strip() for c in args.conversations.split(",") if c.strip()] or None
    convs = load_conversations(args.data, only, args.split)
    ingest_options = ingest_json.ingest_options(parser, args.ingest_json)
    temp = None
    data_dir = args.data_dir
    if data_dir is None:
        temp = data_dir = Path(tempfile.mkdtemp(prefix="locomo", dir="/tmp"))
    started = time.perf_counter()
    try:
        with ConsciousnessMemory(data_dir=data_dir) as memory:
            t0 = time.perf_counter()
            contexts = [ingest_conversation(memory, c, args.citizen_prefix, args.memories,
                                            args.window_size, args.window_stride, **ingest_options) for c in convs]
            ingest_s = time.perf_counter() - t0
            outcomes = []
            for name in names:
                outcomes.append(evaluate(name, known[name][1](), contexts, args.limit_questions))
                o = outcomes[-1]
                print(f"  {name}: {o.summary['overall']['R@10']:.3f} R@10 overall, "
                      f"{o.summary['cat2']['R@10']:.3f} temporal, {o.seconds:.1f} s", file=sys.stderr)
            pit = None
            if not args.no_pit:
                pit = point_in_time_check(None, contexts, args.limit_questions)
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    total = time.perf_counter() - started
    n_turns = sum(len(c.turns) for c in convs)
    n_memories = sum(len(c.nodes) for c in contexts)
    part = f"conversations {', '.join(c.sample_id for c in convs)}" if only else \
        f"split {args.split}: {', '.join(c.sample_id for c in convs)}"
    stored = f"{n_turns} turns" if args.memories == "turns" else \
        (f"{n_turns} turns + {n_memories - n_turns} windows of {args.window_size} turns "
         f"(stride {args.window_stride})")
    limit = f", first {args.limit_questions} questions each" if args.limit_questions else ""
    print(f"LoCoMo retrieval quality: {len(convs)} conversations ({part}{limit}), {stored} "
          f"(ingested through memory.ingest({ingest_options or ''}) in {ingest_s:.1f} s), top {TOP_K} per level, "
          "N1 only, "
          "WordLlama embedding.\n")
    metrics = METRICS if args.memories != "turns" else [m for m in METRICS if not m.startswith("Win")]
    print(table(outcomes, metrics))
    print()
    for name in names:
        print(f"- {name}: {known[name][0]}")
    if pit is not None:
        ok = pit["leaked"] == 0 and pit["late"] == 0
        print(f"\nPoint-in-time check (package default, as of 1 s before the first evidence session): "
              f"{pit['checked']} questions, {pit['leaked']} returned a gold turn, {pit['late']} memories later "
              f"than the as-of time ({'PASS' if ok else 'FAIL'}); {pit['non_empty']} as-of queries returned "
              "earlier memories.")
    print(f"\nTotal {total:.1f} s.")
    return 0 if pit is None or (pit["leaked"] == 0 and pit["late"] == 0) else 1


if __name__ == "__main__":
    raise SystemExit(main())
