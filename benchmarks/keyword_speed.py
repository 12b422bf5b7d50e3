"""The keyword channel per level: BM25 from the tantivy index vs the full-text channel it replaced, one run.

    python benchmarks/keyword_speed.py --sizes 50000,500000 --queries 200

For each size, one level graph (N2, no vectors: only the keyword channel is
timed) is filled with ``synthetic.make_nodes`` memories (templated sentences
over 40 people, 40 tools and a few projects, so common words match a sixth
of the level: a hard case for top-k pruning), written through
``LevelGraphStore.upsert`` in batches of 5,000.  Then, alternating query by
query on the same questions (``synthetic.make_queries``), k = 20, current
mode:

* ``full-text (before)``: the channel as it was until issue 26, one query
  per question: ``db.idx.fulltext.queryNodes`` per word, idf summed in
  Cypher (binary tf, no length normalisation), every matching memory read
  by the server;
* ``BM25 (tantivy)``: ``channels.keyword_search``, the package's channel:
  the change-log check, the index's top candidates, the graph's filter.

Also: the first search's catch-up (building the index from the graph), and
"write one, then search": ``upsert`` of one memory followed by a search
that must find it (the pending path), against searching alone.  Prints one
table.  Needs about 3 GB of memory at 500K (the FalkorDB server); the
level is written in ~6 minutes at 500K on 2 cores.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import machine  # noqa: E402
from synthetic import log, make_nodes, make_queries  # noqa: E402

from llama_consciousness import ConsciousnessMemory  # noqa: E402
from llama_consciousness.schema import MemoryNode  # noqa: E402
from llama_consciousness.storage import channels as ch  # noqa: E402
from llama_consciousness.storage.filters import MemoryFilter  # noqa: E402
from llama_consciousness.storage.level_store import NODE_LABEL, LevelGraphStore, LevelPlans, Query  # noqa: E402
from llama_consciousness.temporal import TemporalWindow  # noqa: E402

K = 20
_STOP = frozenset("""a about after all also am an and any are as at be been before being but by can could did do
does doing done during for from had has have having he her hers him his how i if in into is it its just like
many may me might more most much my no not now of on once only or other our out over own said say says she
should so some such than that the their them then there these they this those through to too under until up us
very was we were what when where which while who whom why will with would you your""".split())


def fulltext_terms(text: str) -> list[str]:
    """The words the replaced channel looked up (lower case, apostrophes dropped, no stop words)."""
    out: list[str] = []
    for word in re.findall(r"[^\W_]+(?:['’][^\W_]+)?", text.lower()):
        word = word.replace("'", "").replace("’", "")
        if len(word) > 1 and word not in _STOP and word not in out:
            out.append(word)
    return out[:24]


def fulltext_search(plans: LevelPlans, text: str, k: int, memory_filter: MemoryFilter):
    """The replaced channel's query (llama_consciousness/storage/channels.py before issue 26)."""
    pred = memory_filter.cypher("c", "fk_")
    rows = yield Query(
        f"MATCH (m:{NODE_LABEL}) WITH count(m) AS total "
        "UNWIND $terms AS t "
        f"CALL db.idx.fulltext.queryNodes('{NODE_LABEL}', t) YIELD node "
        "WITH total, t, collect(node) AS hits "
        "WITH hits, log(1.0 + (toFloat(total) - size(hits) + 0.5) / (size(hits) + 0.5)) AS idf "
        "UNWIND hits AS c "
        f"WITH c, sum(idf) AS score WHERE {pred.text} "
        "WITH c, score ORDER BY score DESC, c.node_id ASC LIMIT $k "
        "RETURN c.node_id, score",
        {**pred.params, "terms": fulltext_terms(text), "k": int(k)}, read_only=True)
    return rows


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run_size(memory: ConsciousnessMemory, n: int, queries: list[str], rows: list[str]) -> None:
    plans = LevelPlans(f"kwbench_{n}", "N2", dimension=None, store_vectors=False)
    store = LevelGraphStore(memory.db, plans)
    store.delete()
    memory.keyword_indexes.remove(plans.graph)
    store.ensure_schema()
    store.graph.query(f"CALL db.idx.fulltext.createNodeIndex('{NODE_LABEL}', 'name', 'description')")
    store.run(plans.wait_operational())
    rng = random.Random(f"keyword:{n}")
    t0 = time.perf_counter()
    for start in range(0, n, 5000):
        nodes = make_nodes("N2", min(5000, n - start), rng)
        nodes = [x.model_copy(update={"node_id": f"k{start + i:07d}"}) for i, x in enumerate(nodes)]
        store.upsert(nodes, check_stored=False)
    log(f"  {n:,} memories written in {time.perf_counter() - t0:.0f} s")
    memory_filter = MemoryFilter(TemporalWindow())
    index = memory.keyword_indexes.get(plans.graph)
    t0 = time.perf_counter()
    store.run(ch.catch_up(index))
    build = time.perf_counter() - t0
    for text in queries[:10]:  # warm both
        store.run(fulltext_search(plans, text, K, memory_filter))
        store.run(ch.keyword_search(plans, index, text, K, memory_filter))
    before, after, alone, written = [], [], [], []
    for i, text in enumerate(queries):
        t0 = time.perf_counter()
        store.run(fulltext_search(plans, text, K, memory_filter))
        t1 = time.perf_counter()
        store.run(ch.keyword_search(plans, index, text, K, memory_filter))
        t2 = time.perf_counter()
        before.append((t1 - t0) * 1e3)
        after.append((t2 - t1) * 1e3)
    for i, text in enumerate(queries):
        fresh = MemoryNode(node_id=f"fresh{i}", level="N2", name=f"zebra{i}", description=f"{text} zebra{i}",
                           energy=0.5, confidence=0.7)
        t0 = time.perf_counter()
        store.run(ch.keyword_search(plans, index, text, K, memory_filter))
        t1 = time.perf_counter()
        store.upsert([fresh])
        t2 = time.perf_counter()
        now = MemoryFilter(TemporalWindow())  # "now" moved past the write (a retrieval takes its window then)
        found = store.run(ch.keyword_search(plans, index, f"{text} zebra{i}", K, now))
        t3 = time.perf_counter()
        if found[0].node.node_id != fresh.node_id:
            raise RuntimeError(f"the memory just written was not found first: {found[0].node.node_id}")
        alone.append((t1 - t0) * 1e3)
        written.append((t3 - t2) * 1e3)
    size = f"{n:,}"
    rows.append(f"| {size} | full-text (before) | {pct(before, .5):.2f} | {pct(before, .95):.2f} | |")
    rows.append(f"| {size} | BM25 (tantivy) | {pct(after, .5):.2f} | {pct(after, .95):.2f} | "
                f"index built from the graph in {build:.1f} s |")
    rows.append(f"| {size} | BM25, search right after writing one memory | {pct(written, .5):.2f} | "
                f"{pct(written, .95):.2f} | alone, same loop: {pct(alone, .5):.2f} / {pct(alone, .95):.2f}; "
                f"difference of medians {statistics.median(written) - statistics.median(alone):+.2f} ms |")
    store.delete()
    memory.keyword_indexes.remove(plans.graph)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="50000,500000", help="memories per level, comma-separated")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    queries = make_queries(args.queries, random.Random(7))
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="lckw", dir="/tmp") as home, \
            ConsciousnessMemory(data_dir=Path(home)) as memory:
        for n in (int(s) for s in args.sizes.split(",")):
            log(f"size {n:,}")
            run_size(memory, n, queries, rows)
    print(f"Keyword channel per level, k = {K}, {args.queries} questions, ms; {machine(['tantivy', 'falkordb'])}")
    print()
    print("| memories | channel | p50 | p95 | notes |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
