"""A chatbot's real load: many people talking at once, long messages, citizens who come back.

One command, offline (WordLlama embedding, embedded FalkorDB)::

    .venv/bin/python benchmarks/chat_load.py                       # 1, 16 and 64 conversations at once

What it does
------------
1. **History.**  Each conversation of BEAM 500K (``--data``, read in place, never copied; conversations
   ``--conversations``, reused round robin when more citizens are asked for) gives one citizen its first
   ``--history`` messages, ingested in bulk through ``memory.ingest`` (one memory per message, FOLLOWS
   links), then the memory is closed.
2. **A fresh process** (this script again, ``--phase turns``) reopens the data directory, so every citizen
   is cold: its first turn is the first thing the process asks of it.
3. **Turns.**  For each concurrency of ``--concurrency`` (1, 16, 64), that many citizens talk at once, each
   in its own asyncio task on one event loop, ``--turns`` turns each.  A turn is what a chatbot does between
   a person's message and its answer: the person's message and the previous answer are stored through
   ``ConsciousnessMemoryBlock.aput_messages`` (the default ingestion: validation, PII, entities, updates,
   FOLLOWS), then the block's ``aget`` recalls for the message (complete stream, rendered within 1,000
   tokens).  The messages are the conversation's next ones, long user and assistant messages (2 KB
   on average).  Between two turns of a conversation ``--think-s`` pass on average (the LLM answering,
   the person reading and typing; 0 makes it a saturation test).  Each concurrency has its own citizens,
   so the first turn of each is cold.
4. **Printed:** turn latency p50 / p95 / p99 for cold turns (a citizen's first in the process) and warm
   ones, errors, the garbage collector's pauses during the turns (``gc.callbacks``: count and longest, by
   generation), the client's peak RSS and the server's RSS.
5. **More processes** (``--processes N``): a chatbot on several cores serves from several processes that
   open the same data directory (one server, shared).  Each concurrency's conversations are then dealt to N
   fresh processes at once (conversation i to process i mod N, each with the same pauses as in one
   process), and their turns are counted together; the client RSS is their sum.

Targets (issue 40): at 16 conversations, turn p95 <= 50 ms warm and <= 100 ms cold; 0 errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from beam_data import DATA_HELP, DEFAULT_DATA, Conversation, json_from, load, memories, unpacked  # noqa: E402
import ingest_json  # noqa: E402
from gc_pauses import GcPauses, describe  # noqa: E402
from machine import footer  # noqa: E402

BUDGET = 1000


def pct(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss_mb(pid: int | None = None) -> float:
    try:
        for line in Path(f"/proc/{pid or 'self'}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def citizen_name(concurrency: int, i: int) -> str:
    return f"chat{concurrency}-{i}"


def plan(convs: Sequence[Conversation], concurrencies: Sequence[int]) -> list[tuple[str, Conversation]]:
    """Every citizen of every concurrency with the conversation it talks through (round robin)."""
    return [(citizen_name(c, i), convs[i % len(convs)]) for c in concurrencies for i in range(c)]


def load_history(args: argparse.Namespace, convs: Sequence[Conversation]) -> None:
    from llama_consciousness import ConsciousnessMemory

    started = time.perf_counter()
    with ConsciousnessMemory(data_dir=args.data_dir) as memory:
        for citizen, conv in plan(convs, args.concurrency):
            records = memories(Conversation(conv.conv, conv.messages[: args.history]), citizen)
            memory.ingest(records, **args.ingest_options)
    print(f"history: {args.history} messages for each of {sum(args.concurrency)} citizens in "
          f"{time.perf_counter() - started:.1f} s", file=sys.stderr)


async def talk(block: Any, conv: Conversation, start: int, turns: int, out: dict[str, list[float]],
               errors: list[str], think_s: float, rng: random.Random) -> None:
    from llama_index.core.base.llms.types import ChatMessage

    messages = conv.messages[start:]
    previous: Any = None
    await asyncio.sleep(rng.uniform(0, think_s))  # people do not all start at the same moment
    for turn in range(turns):
        if turn:
            await asyncio.sleep(rng.uniform(0.5 * think_s, 1.5 * think_s))  # the LLM answers, the person reads
        if len(messages) < 2 * turn + 1:
            break
        said = messages[2 * turn]
        asked = ChatMessage(role=said.role, content=said.content)
        stored = [asked] if previous is None else [previous, asked]
        t0 = time.perf_counter()
        try:
            await block.aput_messages(stored)
            await block.aget([asked])
        except Exception as exc:  # counted, the conversation goes on
            errors.append(f"{type(exc).__name__}: {exc}")
            continue
        out["cold" if turn == 0 else "warm"].append((time.perf_counter() - t0) * 1000)
        if 2 * turn + 1 < len(messages):
            answer = messages[2 * turn + 1]
            previous = ChatMessage(role=answer.role, content=answer.content)


async def run_turns(args: argparse.Namespace, convs: Sequence[Conversation]) -> list[dict[str, Any]]:
    from llama_consciousness import ConsciousnessMemory, ConsciousnessMemoryBlock

    rows = []
    with ConsciousnessMemory(data_dir=args.data_dir) as memory:
        server_pid = getattr(getattr(memory, "_falkordb_server", None), "pid", None)
        for concurrency in args.concurrency:
            rng = random.Random(f"{args.seed}:{concurrency}")
            # every conversation's pauses drawn as in one process, whichever process it is dealt to
            people = [(citizen, conv, random.Random(rng.random())) for citizen, conv in plan(convs, [concurrency])]
            people = people[args.part::args.processes]
            blocks = [ConsciousnessMemoryBlock(memory=memory, citizen_id=citizen, token_budget=BUDGET,
                                               ingest_options=args.ingest_options) for citizen, _, _ in people]
            out: dict[str, list[float]] = {"cold": [], "warm": []}
            errors: list[str] = []
            with GcPauses() as pauses:
                t0 = time.perf_counter()
                await asyncio.gather(*(talk(block, conv, args.history, args.turns, out, errors, args.think_s, pace)
                                       for block, (_, conv, pace) in zip(blocks, people)))
                wall = time.perf_counter() - t0
            rows.append({"concurrency": concurrency, "cold": out["cold"], "warm": out["warm"], "errors": errors,
                         "gc": pauses.summary(), "gc_max": pauses.longest,
                         "gc_gens": pauses.counts(),
                         "wall_s": wall, "client_mb": rss_mb(), "server_mb": rss_mb(server_pid) if server_pid else
                         float("nan")})
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| conversations at once | turns | cold p50 / p95 / p99 ms | warm p50 / p95 / p99 ms | errors | "
             "turns/s | GC pauses during the turns | client RSS MB | server RSS MB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cold, warm = r["cold"], r["warm"]
        n = len(cold) + len(warm)
        lines.append(
            f"| {r['concurrency']} | {n} | {pct(cold, .5):.1f} / {pct(cold, .95):.1f} / {pct(cold, .99):.1f} | "
            f"{pct(warm, .5):.1f} / {pct(warm, .95):.1f} / {pct(warm, .99):.1f} | {len(r['errors'])} | "
            f"{n / r['wall_s']:.0f} | {r['gc']} | {r['client_mb']:.0f} | {r['server_mb']:.0f} |")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help=DATA_HELP)
    parser.add_argument("--conversations", default="1-8", help="BEAM conversations the citizens talk through "
                        "(a range or a comma list; default 1-8)")
    parser.add_argument("--concurrency", default="1,16,64", help="conversations at once, comma-separated")
    parser.add_argument("--history", type=int, default=300, help="messages each citizen holds before the turns")
    parser.add_argument("--turns", type=int, default=10, help="turns per citizen")
    parser.add_argument("--think-s", type=float, default=1.0,
                        help="mean pause between a conversation's turns (uniform 0.5x-1.5x): the LLM answering and "
                             "the person reading and typing; 0 for turns back to back (a saturation test)")
    parser.add_argument("--seed", type=int, default=7)
    ingest_json.add_argument(parser, "IngestOptions of the history and of every turn's store, as JSON "
                                     "(e.g. '{\"max_entities\": 5}'); the defaults by default")
    parser.add_argument("--processes", type=int, default=1,
                        help="processes serving the conversations, sharing the data directory (default 1)")
    parser.add_argument("--data-dir", help="(internal) the data directory of the turns phase")
    parser.add_argument("--phase", choices=["all", "turns"], default="all", help=argparse.SUPPRESS)
    parser.add_argument("--part", type=int, default=0, help=argparse.SUPPRESS)  # this process's share
    args = parser.parse_args(argv)
    args.concurrency = [int(c) for c in str(args.concurrency).split(",") if c.strip()]
    if args.processes < 1:
        parser.error("--processes must be at least 1")
    if not 0 <= args.part < args.processes:
        parser.error(f"--part must be below --processes ({args.processes})")
    args.ingest_options = ingest_json.ingest_options(parser, args.ingest_json)
    return args


def merged(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One concurrency's rows from its processes as one row: turns and errors together, the longest wall,
    the clients' RSS summed, the (shared) server's once."""
    gens: dict[int, tuple[int, float]] = {}
    for part in parts:
        for g, (count, longest) in part["gc_gens"].items():  # JSON made the generations text
            before = gens.get(int(g), (0, 0.0))
            gens[int(g)] = (before[0] + count, max(before[1], longest))
    servers = [p["server_mb"] for p in parts if p["server_mb"] == p["server_mb"]]  # NaN: not this one's server
    return {"concurrency": parts[0]["concurrency"], "cold": [t for p in parts for t in p["cold"]],
            "warm": [t for p in parts for t in p["warm"]], "errors": [e for p in parts for e in p["errors"]],
            "gc": describe(gens),
            "gc_max": max(p["gc_max"] for p in parts),
            "wall_s": max(p["wall_s"] for p in parts), "client_mb": sum(p["client_mb"] for p in parts),
            "server_mb": max(servers) if servers else float("nan"), "processes": len(parts)}


def turns_in_processes(command: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each concurrency in ``args.processes`` fresh processes at once (``--part``), their rows merged; the
    data directory is held open here meanwhile, so that they all adopt one running server."""
    import subprocess

    from llama_consciousness import ConsciousnessMemory

    rows = []
    with ConsciousnessMemory(data_dir=args.data_dir):
        for concurrency in args.concurrency:
            base = [*command, "--concurrency", str(concurrency), "--processes", str(args.processes)]
            children = [subprocess.Popen([*base, "--part", str(part)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True) for part in range(args.processes)]
            parts = []
            for child in children:
                out, err = child.communicate()
                if child.returncode != 0:
                    print(err, file=sys.stderr)
                    raise SystemExit(child.returncode)
                parts += json.loads(out.strip().splitlines()[-1])
            rows.append(merged(parts))
    return rows


def conversations_of(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    folder, temporary = unpacked(args.data)
    try:
        convs, _ = load(folder, conversations_of(args.conversations))
        if args.phase == "turns":
            rows = asyncio.run(run_turns(args, convs))
            print(json.dumps(rows))
            return 0
        data_dir = tempfile.mkdtemp(prefix="lc-chat-")
        try:
            args.data_dir = data_dir
            load_history(args, convs)
            command = [sys.executable, __file__, "--phase", "turns", "--data", str(folder), "--data-dir", data_dir,
                       "--conversations", args.conversations, "--history", str(args.history),
                       "--turns", str(args.turns), "--think-s", str(args.think_s), "--seed", str(args.seed),
                       "--ingest-json", args.ingest_json]
            if args.processes == 1:
                rows = json_from([*command, "--concurrency", ",".join(map(str, args.concurrency))])
            else:
                rows = turns_in_processes(command, args)
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
    served = "one process" if args.processes == 1 else f"{args.processes} processes sharing the data directory"
    print(f"Chatbot turns on BEAM 500K conversations {args.conversations} ({args.history} messages of history "
          f"per citizen, {args.turns} turns each, {args.think_s:g} s between turns on average; a turn = "
          f"aput_messages of the previous answer and the new message, then aget; the memory's defaults, "
          f"freeze_heap included; ingestion options {args.ingest_json}; served by {served}):\n")
    print(table(rows))
    for r in rows:
        if r["errors"]:
            print(f"\nerrors at {r['concurrency']}: {statistics.mode(r['errors'])[:300]}")
    print()
    print(footer("chat_load.py", argv if argv is not None else sys.argv[1:], ["llama-index-core"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
