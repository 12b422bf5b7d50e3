"""A citizen's first question in a fresh process, against the questions after it, on long real messages.

One command, offline (WordLlama embedding, embedded FalkorDB)::

    .venv/bin/python benchmarks/first_question.py                          # 100 x 1,000 and 5 x 10,000
    .venv/bin/python benchmarks/first_question.py --shapes 20x1000         # quicker

What it does
------------
1. For each shape ``CxM`` of ``--shapes``, C citizens each get M messages of BEAM 500K (``--data``, read in
   place, never copied): the conversations one after another, round robin from a different one per
   citizen, one memory per message (``"<role>: <content>"``, 2.3 KB on average) with FOLLOWS links,
   ingested through ``memory.ingest`` with the default options.  The memory is then closed.
2. A fresh process (this script again, ``--phase ask``) opens the data directory and, for every citizen
   once in a shuffled order, asks three of its conversation's probing questions through the package default
   retriever (``memory.retriever(citizen).retrieve``): the first is the citizen's cold question, the next
   two warm ones.  The process's very first question (the embedding model and every module already loaded,
   the server's connections not yet made) is shown apart.
3. Prints p50 / p95 / p99 per shape, cold and warm, and the memories per citizen (messages and entity
   nodes).

Target (issue 40): the cold question within 30 ms at p95, at 1,000 and at 10,000 messages per citizen.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from beam_data import DATA_HELP, DEFAULT_DATA, Conversation, json_from, load, memories, unpacked  # noqa: E402
from gc_pauses import GcPauses  # noqa: E402
from machine import footer  # noqa: E402

CONVERSATIONS = range(1, 36)


def parse_shapes(text: str) -> list[tuple[int, int]]:
    shapes = []
    for part in text.split(","):
        citizens, _, messages = part.strip().partition("x")
        shapes.append((int(citizens), int(messages)))
    return shapes


def citizen_of(shape: tuple[int, int], i: int) -> str:
    return f"fq{shape[1]}-{i}"


def records_for(convs: Sequence[Conversation], first: int, count: int, citizen: str) -> list[Any]:
    """``count`` messages from conversation ``first`` on (the next ones after it, round robin)."""
    out: list[Any] = []
    i = first
    while len(out) < count:
        conv = convs[i % len(convs)]
        out += memories(Conversation(conv.conv, conv.messages[: count - len(out)]), citizen)
        i += 1
    return out


def load_shapes(data_dir: str, convs: Sequence[Conversation], shapes: Sequence[tuple[int, int]]) -> None:
    from llama_consciousness import ConsciousnessMemory

    with ConsciousnessMemory(data_dir=data_dir) as memory:
        for shape in shapes:
            started = time.perf_counter()
            citizens, messages = shape
            for i in range(citizens):
                records = records_for(convs, i, messages, citizen_of(shape, i))
                memory.ingest(records)
            print(f"loaded {citizens} x {messages} in {time.perf_counter() - started:.0f} s", file=sys.stderr)


def ask(data_dir: str, convs: Sequence[Conversation], shapes: Sequence[tuple[int, int]], seed: int
        ) -> dict[str, Any]:
    from llama_consciousness import ConsciousnessMemory

    rng = random.Random(seed)
    out: dict[str, Any] = {"shapes": []}
    with ConsciousnessMemory(data_dir=data_dir) as memory:
        memory.embed_query("warm the embedding model")  # loaded before the clock: the model is not the question
        first_of_process = None
        for shape in shapes:
            citizens, _ = shape
            order = list(range(citizens))
            rng.shuffle(order)
            cold, warm, sizes = [], [], []
            pauses = GcPauses().__enter__()
            for i in order:
                citizen = citizen_of(shape, i)
                questions = [q.question for q in convs[i % len(convs)].questions]
                rng.shuffle(questions)
                retriever = memory.retriever(citizen)
                for n, question in enumerate(questions[:3]):
                    t0 = time.perf_counter()
                    retriever.retrieve(question)
                    ms = (time.perf_counter() - t0) * 1000
                    if first_of_process is None:
                        first_of_process = ms
                    (cold if n == 0 else warm).append(ms)
                if len(sizes) < 3:
                    sizes.append(memory.counts("N1", citizen)[0])
            pauses.__exit__()
            out["shapes"].append({"shape": shape, "cold": cold, "warm": warm, "sizes": sizes, "gc": pauses.summary()})
        out["first_of_process"] = first_of_process
    return out


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def table(result: dict[str, Any]) -> str:
    lines = ["| citizens x messages | memories per citizen (with entity nodes) | cold p50 / p95 / p99 ms | "
             "warm p50 / p95 / p99 ms | GC pauses while asking | cold <= 30 ms at p95 |", "|---|---|---|---|---|---|"]
    for row in result["shapes"]:
        citizens, messages = row["shape"]
        cold, warm = row["cold"], row["warm"]
        lines.append(f"| {citizens} x {messages:,} | {', '.join(f'{s:,}' for s in row['sizes'])} | "
                     f"{pct(cold, .5):.1f} / {pct(cold, .95):.1f} / {pct(cold, .99):.1f} | "
                     f"{pct(warm, .5):.1f} / {pct(warm, .95):.1f} / {pct(warm, .99):.1f} | {row['gc']} | "
                     f"{'pass' if pct(cold, .95) <= 30 else 'FAIL'} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help=DATA_HELP)
    parser.add_argument("--shapes", default="100x1000,5x10000", help="citizens x messages, comma-separated")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--phase", choices=["all", "ask"], default="all", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    shapes = parse_shapes(args.shapes)
    folder, temporary = unpacked(args.data)
    try:
        convs, _ = load(folder, CONVERSATIONS)
        if args.phase == "ask":
            print(json.dumps(ask(args.data_dir, convs, shapes, args.seed)))
            return 0
        data_dir = tempfile.mkdtemp(prefix="lc-fq-")
        try:
            load_shapes(data_dir, convs, shapes)
            result = json_from([sys.executable, __file__, "--phase", "ask", "--data", str(folder),
                                "--data-dir", data_dir, "--shapes", args.shapes, "--seed", str(args.seed)])
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
    print("A citizen's first question in a fresh process (cold) and its next two (warm), package default "
          "retriever, BEAM 500K messages, after the memory that wrote them was closed:\n")
    print(table(result))
    print(f"\nThe process's very first question: {result['first_of_process']:.1f} ms (embedding model loaded "
          "before).\n")
    print(footer("first_question.py", argv if argv is not None else sys.argv[1:], ["llama-index-core"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
