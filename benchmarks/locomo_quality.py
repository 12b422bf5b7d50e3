"""Retrieval quality on LoCoMo: the six-way retriever vs. stock LlamaIndex vector retrieval and BM25.

One command, offline (WordLlama embedding, embedded FalkorDB)::

    /work/venv/bin/python benchmarks/locomo_quality.py

What it does
------------
1. Reads LoCoMo (``--data PATH``, default ``<repo>/../shared/benchmarks/
   locomo/locomo10.json``; CC BY-NC, not part of this repository: get
   ``data/locomo10.json`` from https://github.com/snap-research/locomo; it
   is read in place, never copied) and turns each conversation
   into memories, one per dialog turn, for one citizen per conversation at
   level N1 (see ``locomo_data.py`` for the exact mapping: node ids
   ``<sample_id>:<dia_id>``, ``"<speaker>: <text>"`` (+ image caption),
   valid_at = created_at = the session date, FOLLOWS links between
   consecutive turns of a session).  They go through the project's own
   pipeline: ``ConsciousnessMemory(data_dir=...).ingest(records)`` with the
   default ``IngestOptions`` (validation, PII, injection guard, concepts,
   entities + MENTIONS, near-duplicates, writer).
2. Asks every question with evidence (categories 1-4 make "overall";
   category 5, adversarial, is reported on its own) through each system,
   restricted to its own conversation's citizen (``query_levels=["N1"]``,
   20 results per level):

   (a) ``six-way default``: ``memory.retriever(citizen)`` with the default
       ``RetrievalConfig`` (vector + graph, concatenated);
   (b) ``six-way best``: the best configuration found here (see the report
       and ``VARIANTS``);
   (c) ``stock vector``: LlamaIndex ``VectorStoreIndex`` (in-memory
       ``SimpleVectorStore``) over the same turns, same texts
       (``memory_text``), same ``WordLlamaEmbedding``, top 20;
   (d) ``BM25``: ``llama-index-retrievers-bm25`` (``BM25Retriever``,
       bm25s + English PyStemmer, English stop words) over the turn texts;
   plus the variants (``--variants``) that take the six-way retriever
   apart: each channel alone, the named recipes, fusion settings, a keyword
   query builder closer to BM25, and adjacent-turn expansion.
3. Metrics per question: recall@5/10/20 (|gold ∩ top-k| / |gold|), hit@10,
   session-level recall@10; means overall (cats 1-4), per category, temporal
   (category 2) on its own row; and the point-in-time check: for every
   question, an as-of query (``temporal_mode="point_in_time"``,
   ``as_of_time`` = one second before the earliest evidence session) must
   return none of the gold turns.

Prints one markdown table (plus the point-in-time line and timings).
``--conversations conv-26,conv-30`` / ``--limit-questions N`` make it quick;
``--data-dir DIR`` keeps the FalkorDB data (re-ingesting is idempotent).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo_data import (  # noqa: E402
    CATEGORY_NAMES,
    DATA_EPILOG,
    DATA_HELP,
    DEFAULT_DATA,
    METRICS,
    Conversation,
    Question,
    citizen_for,
    dia_of_node_id,
    load_conversations,
    question_metrics,
    require_data,
    summarise,
    turn_memories,
)

from llama_consciousness.storage.channels import QUERY_STOP, keyword_terms  # noqa: E402

# The short stop list of the package's first full-text channel, kept as a variant to compare against QUERY_STOP.
SHORT_STOP = frozenset("a an and are as at be by for from has have how i in is it of on or that the to was were what "
                       "when where which who why with you".split())

TOP_K = 20
LEVELS = ["N1"]


# -- per-conversation context ---------------------------------------------------------


@dataclass
class Context:
    """One conversation, ingested, with the baselines' indexes."""

    conv: Conversation
    citizen: str
    memory: Any
    nodes: list[Any] = field(default_factory=list)  # MemoryNodes as ingested (for baselines)
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def neighbours(self) -> dict[str, list[str]]:
        """dia id -> the previous and next turn of the same session."""
        if "neighbours" not in self.cache:
            out: dict[str, list[str]] = {}
            turns = self.conv.turns
            for i, t in enumerate(turns):
                near = []
                if i > 0 and turns[i - 1].session == t.session:
                    near.append(turns[i - 1].dia_id)
                if i + 1 < len(turns) and turns[i + 1].session == t.session:
                    near.append(turns[i + 1].dia_id)
                out[t.dia_id] = near
            self.cache["neighbours"] = out
        return self.cache["neighbours"]


def ingest_conversation(memory: Any, conv: Conversation, prefix: str) -> Context:
    citizen = citizen_for(conv.sample_id, prefix)
    records = turn_memories(conv.turns, citizen)
    report = memory.ingest(records)
    if report.rejected:
        raise RuntimeError(f"{conv.sample_id}: {len(report.rejected)} records rejected: {report.summary()}")
    nodes = [r for r in records if hasattr(r, "node_type")]
    return Context(conv, citizen, memory, nodes)


# -- systems ------------------------------------------------------------------------

Ranker = Callable[[Context, Question], list[str]]  # -> dia ids, best first


def _intention(ctx: Context, text: str, **extra: Any) -> Any:
    from llama_consciousness.schema import RetrievalIntention

    return RetrievalIntention(query_text=text, citizen_id=ctx.citizen, query_levels=LEVELS,
                              max_results_per_level=TOP_K, **extra)


def six_way(config: Any = None, *, patch: Callable[[], contextlib.AbstractContextManager] | None = None,
            post: Callable[[Context, list[str]], list[str]] | None = None) -> Ranker:
    """The project's retriever with ``config``; ``patch``: a context manager around each query
    (prototype of a package change); ``post``: a post-step over the ranked dia ids."""

    def rank(ctx: Context, q: Question) -> list[str]:
        key = ("six", id(config))
        retriever = ctx.cache.get(key)
        if retriever is None:
            retriever = ctx.cache[key] = ctx.memory.retriever(ctx.citizen, config=config)
        with (patch() if patch else contextlib.nullcontext()):
            nodes = retriever.retrieve_intention(_intention(ctx, q.question))
        ids = [dia_of_node_id(n.node.metadata["node_id"]) for n in nodes]
        return post(ctx, ids) if post else ids

    return rank


def stock_vector() -> Ranker:
    """LlamaIndex's VectorStoreIndex retriever (SimpleVectorStore), same texts and embedding."""

    def rank(ctx: Context, q: Question) -> list[str]:
        retriever = ctx.cache.get("stock_vector")
        if retriever is None:
            from llama_index.core import VectorStoreIndex
            from llama_index.core.schema import TextNode

            from llama_consciousness.nodes import memory_text

            nodes = [TextNode(id_=n.node_id, text=memory_text(n)) for n in ctx.nodes]
            index = VectorStoreIndex(nodes, embed_model=ctx.memory.embed_model, show_progress=False)
            retriever = ctx.cache["stock_vector"] = index.as_retriever(similarity_top_k=TOP_K)
        return [dia_of_node_id(n.node.node_id) for n in retriever.retrieve(q.question)]

    return rank


def bm25() -> Ranker:
    """llama-index-retrievers-bm25 over the turn texts (English stemmer and stop words)."""

    def rank(ctx: Context, q: Question) -> list[str]:
        retriever = ctx.cache.get("bm25")
        if retriever is None:
            import Stemmer
            from llama_index.core.schema import TextNode
            from llama_index.retrievers.bm25 import BM25Retriever

            nodes = [TextNode(id_=n.node_id, text=n.description) for n in ctx.nodes]
            retriever = ctx.cache["bm25"] = BM25Retriever.from_defaults(
                nodes=nodes, similarity_top_k=TOP_K, stemmer=Stemmer.Stemmer("english"), language="english")
        return [dia_of_node_id(n.node.node_id) for n in retriever.retrieve(q.question)]

    return rank


# -- prototypes of package changes (measured here, integrated in the package by its owner) --


def expand_neighbours(top: int = 10, keep: int = 5) -> Callable[[Context, list[str]], list[str]]:
    """Post-step: after the first ``keep`` hits, interleave the session neighbours of the top ``top``."""

    def post(ctx: Context, ids: list[str]) -> list[str]:
        head = list(dict.fromkeys(ids))
        out = head[:keep]
        for d in head[:top]:
            for n in ctx.neighbours.get(d, []):
                if n not in out:
                    out.append(n)
        for d in head[keep:]:
            if d not in out:
                out.append(d)
        return out

    return post



def idf_terms(text: str, stop: frozenset[str] = QUERY_STOP, max_terms: int = 24) -> list[str]:
    """Query words for the per-term full-text lookups: the package's own ``keyword_terms``."""
    return keyword_terms(text, max_terms, stop)


def bm25_keyword_search(k1: float = 1.2, b: float = 0.75, avgdl: float | None = 20.0,
                        stop: frozenset[str] = QUERY_STOP) -> Callable[..., Any]:
    """A drop-in for ``channels.keyword_search``: BM25 (binary tf) computed in ONE Cypher query.

    FalkorDB's full-text score of an OR query is not additive over terms (a
    turn matching "lgbtq", "support", "group" and "caroline" scores 1.86
    while one matching only "did" scores 4.0), so ranking by it is close to
    random.  Here each query word is looked up on its own
    (``db.idx.fulltext.queryNodes`` per term: RediSearch still stems), its
    document frequency is the size of its posting list, and a memory's score
    is the sum over matched words of BM25's idf times the length-normalised
    saturation term for tf = 1.  ``avgdl`` None disables length
    normalisation.
    """
    from llama_consciousness.storage import records
    from llama_consciousness.storage.channels import KeywordHit
    from llama_consciousness.storage.level_store import NODE_LABEL, Query

    node_proj = records.node_projection("c")

    def keyword_search(plans: Any, text: str, k: int, memory_filter: Any) -> Any:
        terms = idf_terms(text, stop)
        if not terms or k <= 0:
            return []
        pred = memory_filter.cypher("c", "fk_")
        if avgdl:
            norm = (f"($k1 + 1.0) / (1.0 + $k1 * (1.0 - $b + $b * "
                    f"toFloat(size(split(coalesce(c.description, ''), ' '))) / $avgdl))")
        else:
            norm = "1.0"
        rows = yield Query(
            f"MATCH (m:{NODE_LABEL}) WITH count(m) AS total "
            f"UNWIND $terms AS t "
            f"CALL db.idx.fulltext.queryNodes('{NODE_LABEL}', t) YIELD node "
            f"WITH total, t, collect(node) AS hits "
            f"WITH hits, log(1.0 + (toFloat(total) - size(hits) + 0.5) / (size(hits) + 0.5)) AS idf "
            f"UNWIND hits AS c "
            f"WITH c, sum(idf) AS s WHERE {pred.text} "
            f"WITH c, s * {norm} AS score "
            f"RETURN {node_proj}, score ORDER BY score DESC, c.node_id ASC LIMIT $k",
            {**pred.params, "terms": terms, "k": int(k), "k1": float(k1), "b": float(b),
             "avgdl": float(avgdl or 1.0)},
            read_only=True,
        )
        return [KeywordHit(records.node_from_props(props), rank, float(score))
                for rank, (props, score) in enumerate(rows, start=1)]

    return keyword_search


def patch_keyword(**kwargs: Any) -> Callable[[], contextlib.AbstractContextManager]:
    """Context manager factory: ``channels.keyword_search`` replaced by :func:`bm25_keyword_search`."""
    search = bm25_keyword_search(**kwargs)

    @contextlib.contextmanager
    def patched() -> Iterator[None]:
        from llama_consciousness.storage import channels

        original = channels.keyword_search
        channels.keyword_search = search
        try:
            yield
        finally:
            channels.keyword_search = original

    return patched


def score_fusion(alpha: float = 0.3, fetch: int = 50, neighbours: tuple[int, int] | None = None, **kw: Any) -> Ranker:
    """Prototype of a score-based fusion mode for ``SixWayHybridRetriever._fuse``.

    Both channels are run as the retriever runs them (same plans, same
    filter, ``fetch`` candidates each); each list's scores are min-max
    normalised to [0, 1] and a memory's score is ``keyword + alpha * vector``
    (RRF throws the score gaps away, and with a vector channel this weak,
    rank positions of the two lists are not worth the same).
    """
    from llama_consciousness.storage.filters import MemoryFilter
    from llama_consciousness.temporal import TemporalWindow

    search = bm25_keyword_search(**kw)

    def rank(ctx: Context, q: Question) -> list[str]:
        intention = _intention(ctx, q.question)
        memory_filter = MemoryFilter.from_intention(intention, TemporalWindow.from_intention(intention))
        store = ctx.memory.level("N1", ctx.citizen)
        if not ctx.cache.get("fulltext"):
            from llama_consciousness.storage import channels

            store.run(channels.ensure_fulltext(store.plans))
            ctx.cache["fulltext"] = True
        vec = store.run(store.plans.vector_search(ctx.memory.embed_query(q.question), fetch, memory_filter))
        key = store.run(search(store.plans, q.question, fetch, memory_filter))
        scores: dict[str, float] = {}
        for hits, weight, get in ((key, 1.0, lambda h: h.score), (vec, alpha, lambda h: h.similarity)):
            if not hits:
                continue
            values = [get(h) for h in hits]
            lo, hi = min(values), max(values)
            for h, v in zip(hits, values):
                norm = (v - lo) / (hi - lo) if hi > lo else 1.0
                scores[h.node.node_id] = scores.get(h.node.node_id, 0.0) + weight * norm
        ids = [dia_of_node_id(i) for i, _ in sorted(scores.items(), key=lambda kv: -kv[1])]
        return expand_neighbours(*neighbours)(ctx, ids) if neighbours else ids

    return rank


def best_prototype() -> Ranker:
    """(b') the best six-way variant measured here (package changes prototyped in this file):
    keyword channel = BM25 in Cypher without length normalisation, score fusion keyword + 0.1 x vector,
    then the session neighbours of the top 10 from rank 8 on."""
    return score_fusion(0.1, avgdl=None, neighbours=(10, 7))


# -- evaluation -------------------------------------------------------------------------


@dataclass
class Outcome:
    name: str
    per_question: list[tuple[int, dict[str, float]]]
    seconds: float
    queries: int

    @property
    def summary(self) -> dict[str, dict[str, float]]:
        return summarise(self.per_question)


def evaluate(name: str, ranker: Ranker, contexts: Sequence[Context], limit: int | None) -> Outcome:
    rows: list[tuple[int, dict[str, float]]] = []
    started = time.perf_counter()
    n = 0
    for ctx in contexts:
        for q in questions_of(ctx, limit):
            ranked = ranker(ctx, q)
            rows.append((q.category, question_metrics(ranked, q.gold)))
            n += 1
    return Outcome(name, rows, time.perf_counter() - started, n)


def questions_of(ctx: Context, limit: int | None) -> list[Question]:
    qs = [q for q in ctx.conv.questions if q.gold]
    return qs[:limit] if limit else qs


def point_in_time_check(config: Any, contexts: Sequence[Context], limit: int | None) -> dict[str, Any]:
    """As of one second before the earliest evidence session: no gold turn may come back."""
    from llama_consciousness.schema import RetrievalIntention

    checked = leaked = answered = late = 0
    for ctx in contexts:
        retriever = ctx.memory.retriever(ctx.citizen, config=config)
        dates = ctx.conv.session_dates
        for q in questions_of(ctx, limit):
            first = min(dates[int(g[1:].split(":")[0])] for g in q.gold if int(g[1:].split(":")[0]) in dates)
            as_of = first - timedelta(seconds=1)
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


def variants() -> dict[str, tuple[str, Callable[[], Ranker]]]:
    """name -> (what it is, ranker factory).  (a)-(d) first."""
    from llama_consciousness.retrievers.config import (
        HYBRID_RRF,
        HYBRID_RRF_70_30,
        SEVEN_WAY_CONCATENATION,
        SIX_WAY_CONCATENATION,
        RetrievalConfig,
    )

    out: dict[str, tuple[str, Callable[[], Ranker]]] = {
        "six-way default": ("(a) RetrievalConfig(): vector + graph + keyword (BM25) per level, score fusion "
                            "(keyword 1, vector 0.1, graph 0.05), neighbours of the top 10 after rank 7",
                            lambda: six_way(None)),
        "SIX_WAY_CONCATENATION": ("the core document's six ways: vector + graph, concatenated",
                                  lambda: six_way(SIX_WAY_CONCATENATION)),
        "default graph-weight-0": ("(b) best measured: score fusion keyword 1, vector 0.1, graph 0; neighbours as default",
                                    lambda: six_way(RetrievalConfig(score_weights={"keyword": 1.0, "vector": 0.1,
                                                                                   "graph": 0.0}))),
        "default vector-0.2": ("score fusion keyword 1, vector 0.2, graph 0.05; neighbours as default",
                                lambda: six_way(RetrievalConfig(score_weights={"keyword": 1.0, "vector": 0.2,
                                                                               "graph": 0.05}))),
        "default neighbours-after-5": ("the default with the neighbours after rank 5",
                                        lambda: six_way(RetrievalConfig(neighbours_after=5))),
        "default no-neighbours": ("the default without neighbour expansion",
                                   lambda: six_way(RetrievalConfig(neighbour_expansion=0))),
        "six-way best (prototype)": ("(b') " + (best_prototype.__doc__ or "").split(":", 1)[1].strip().replace("\n    ", " "),
                                     best_prototype),
        "stock vector": ("(c) VectorStoreIndex, WordLlama", stock_vector),
        "BM25": ("(d) llama-index-retrievers-bm25", bm25),
        "vector only": ("six-way, channels=(vector,)", lambda: six_way(RetrievalConfig(channels=("vector",)))),
        "graph only": ("six-way, channels=(graph,)", lambda: six_way(RetrievalConfig(channels=("graph",)))),
        "keyword only": ("six-way, channels=(keyword,)", lambda: six_way(RetrievalConfig(channels=("keyword",)))),
        "SEVEN_WAY_CONCATENATION": ("recipe: the six ways plus keyword, concatenated",
                                    lambda: six_way(SEVEN_WAY_CONCATENATION)),
        "HYBRID_RRF": ("recipe", lambda: six_way(HYBRID_RRF)),
        "HYBRID_RRF_70_30": ("recipe", lambda: six_way(HYBRID_RRF_70_30)),
        "RRF vector+keyword": ("rrf, channels=(vector,keyword)",
                               lambda: six_way(RetrievalConfig(channels=("vector", "keyword"), fusion="rrf"))),
        "keyword-bm25 only": ("keyword channel = BM25 in Cypher (patched), alone",
                              lambda: six_way(RetrievalConfig(channels=("keyword",)), patch=patch_keyword())),
        "keyword-bm25 nonorm": ("same, no length normalisation",
                                lambda: six_way(RetrievalConfig(channels=("keyword",)), patch=patch_keyword(avgdl=None))),
    }
    out["keyword-bm25 nonorm ft-stop"] = ("patched keyword, no length norm, a short full-text stop list",
                                          lambda: six_way(RetrievalConfig(channels=("keyword",)),
                                                          patch=patch_keyword(avgdl=None, stop=SHORT_STOP)))
    for b in (0.3, 0.5):
        out[f"keyword-bm25 b{b}"] = (f"patched keyword channel alone, b={b}",
                                     lambda b=b: six_way(RetrievalConfig(channels=("keyword",)), patch=patch_keyword(b=b)))
    out["keyword-bm25 nonorm +nbrs"] = ("patched keyword (no length norm) + session neighbours of the top 10 after rank 5",
                                        lambda: six_way(RetrievalConfig(channels=("keyword",)), patch=patch_keyword(avgdl=None),
                                                        post=expand_neighbours()))
    for alpha in (0.1, 0.2, 0.3, 0.5):
        for norm in (None, 20.0):
            out[f"score-fusion a{alpha}{'' if norm else ' nonorm'}"] = (
                f"keyword (BM25, patched) + {alpha} x vector, min-max normalised scores",
                lambda alpha=alpha, norm=norm: score_fusion(alpha, avgdl=norm))
    for top, keep in ((10, 5), (5, 5), (10, 3), (10, 7), (20, 10), (5, 3)):
        out[f"kw nonorm +nbrs{top}/{keep}"] = (
            f"patched keyword (no length norm) + session neighbours of the top {top} after rank {keep}",
            lambda top=top, keep=keep: six_way(RetrievalConfig(channels=("keyword",)), patch=patch_keyword(avgdl=None),
                                               post=expand_neighbours(top, keep)))
        out[f"score-fusion a0.1 nonorm +nbrs{top}/{keep}"] = (
            f"score fusion (keyword + 0.1 x vector) + session neighbours of the top {top} after rank {keep}",
            lambda top=top, keep=keep: score_fusion(0.1, avgdl=None, neighbours=(top, keep)))
    for wv, wk, rk in [(1.0, 1.0, 60), (0.5, 1.0, 60), (0.3, 1.0, 60), (0.5, 1.0, 10), (0.3, 1.0, 10), (0.7, 1.0, 20)]:
        cfg = RetrievalConfig(channels=("vector", "keyword"), fusion="rrf", rrf_k=rk,
                              channel_weights={"vector": wv, "keyword": wk, "graph": 0.0})
        out[f"RRF vec{wv}+bm25kw{wk} k{rk}"] = (
            "rrf of vector and the patched keyword channel",
            lambda cfg=cfg: six_way(cfg, patch=patch_keyword()))
    return out


# (a) the default, (b) the best configuration measured (graph weight 0: within noise of the default),
# (c), (d), the core document's six ways as they are, and each channel of the default alone.
DEFAULT_SET = ["six-way default", "default graph-weight-0", "stock vector", "BM25", "SIX_WAY_CONCATENATION",
               "vector only", "graph only", "keyword only", "default no-neighbours"]


# -- output -------------------------------------------------------------------------------


def _fmt(value: float) -> str:
    return "-" if isinstance(value, float) and math.isnan(value) else f"{value:.3f}"


def table(outcomes: Sequence[Outcome], descriptions: dict[str, str]) -> str:
    head = "| system | questions | n | " + " | ".join(METRICS) + " | ms/query |"
    lines = [head, "|" + "---|" * (len(METRICS) + 4)]
    slices = [("overall", "overall (1-4)"), ("cat2", "temporal (2)"), ("cat1", "multi-hop (1)"),
              ("cat3", "open-domain (3)"), ("cat4", "single-hop (4)"), ("cat5", "adversarial (5)")]
    for o in outcomes:
        s = o.summary
        ms = 1000 * o.seconds / max(o.queries, 1)
        for i, (key, label) in enumerate(slices):
            row = s[key]
            name = f"**{o.name}**" if i == 0 else ""
            lines.append(f"| {name} | {label} | {row['n']} | " + " | ".join(_fmt(row[m]) for m in METRICS)
                         + f" | {ms:.1f} |" if i == 0 else
                         f"| {name} | {label} | {row['n']} | " + " | ".join(_fmt(row[m]) for m in METRICS) + " | |")
    return "\n".join(lines)


# -- main -----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=DATA_EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, metavar="PATH", help=DATA_HELP)
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="FalkorDB data directory (default: a temporary one, removed afterwards)")
    parser.add_argument("--conversations", default="", help="comma-separated sample ids or indexes (default: all)")
    parser.add_argument("--limit-questions", type=int, default=None, help="first N questions per conversation")
    parser.add_argument("--variants", default="default",
                        help="comma-separated system names, 'default' ((a)-(d)), or 'all'")
    parser.add_argument("--no-pit", action="store_true", help="skip the point-in-time check")
    parser.add_argument("--citizen-prefix", default="locomo")
    args = parser.parse_args(argv)
    require_data(args.data)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    known = variants()
    if args.variants == "all":
        names = list(known)
    elif args.variants == "default":
        names = list(DEFAULT_SET)
    else:
        names = []
        for part in args.variants.split(","):
            part = part.strip()
            if part == "default":
                names += DEFAULT_SET
            elif part:
                names.append(part)
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {list(known)}")

    from llama_consciousness import ConsciousnessMemory

    only = [c.strip() for c in args.conversations.split(",") if c.strip()] or None
    convs = load_conversations(args.data, only)
    temp = None
    data_dir = args.data_dir
    if data_dir is None:
        temp = data_dir = Path(tempfile.mkdtemp(prefix="locomo", dir="/tmp"))
    started = time.perf_counter()
    try:
        with ConsciousnessMemory(data_dir=data_dir) as memory:
            t0 = time.perf_counter()
            contexts = [ingest_conversation(memory, c, args.citizen_prefix) for c in convs]
            ingest_s = time.perf_counter() - t0
            outcomes = []
            descriptions = {}
            for name in names:
                what, factory = known[name]
                descriptions[name] = what
                outcomes.append(evaluate(name, factory(), contexts, args.limit_questions))
                print(f"  {name}: {outcomes[-1].summary['overall']['R@10']:.3f} R@10 overall, "
                      f"{outcomes[-1].summary['cat2']['R@10']:.3f} temporal, {outcomes[-1].seconds:.1f} s",
                      file=sys.stderr)
            pit = None
            if not args.no_pit:
                from llama_consciousness.retrievers.config import SEVEN_WAY_CONCATENATION

                with patch_keyword(avgdl=None)():
                    pit = point_in_time_check(SEVEN_WAY_CONCATENATION, contexts, args.limit_questions)
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    total = time.perf_counter() - started
    n_turns = sum(len(c.turns) for c in convs)
    print(f"LoCoMo retrieval quality: {len(convs)} conversations, {n_turns} turns "
          f"(ingested through memory.ingest in {ingest_s:.1f} s), top {TOP_K} per question, N1 only, "
          "WordLlama embedding.\n")
    print(table(outcomes, descriptions))
    print()
    for name in names:
        print(f"- {name}: {descriptions[name]}")
    if pit is not None:
        ok = pit["leaked"] == 0 and pit["late"] == 0
        print(f"\nPoint-in-time check (vector + graph + BM25 keyword channels, as of 1 s before the first evidence session): "
              f"{pit['checked']} questions, {pit['leaked']} returned a gold turn, {pit['late']} turns later than the as-of time "
              f"({'PASS' if ok else 'FAIL'}); {pit['non_empty']} as-of queries returned earlier turns.")
    print(f"\nTotal {total:.1f} s.")
    return 0 if pit is None or (pit["leaked"] == 0 and pit["late"] == 0) else 1


if __name__ == "__main__":
    raise SystemExit(main())
