"""What a memory block's text holds: the evidence of a question in ``ConsciousnessMemoryBlock``'s text, by
how many results per level its recall asks for.

One command, offline (WordLlama, embedded FalkorDB; the data read in place, never copied)::

    .venv/bin/python benchmarks/block_recall.py --split test      # BEAM 500K and LoCoMo, the test halves

Each conversation of the split is ingested as one citizen (one memory per message or turn, FOLLOWS links),
then every question with evidence is asked through a block (``get_text``, ``--budget`` tokens, the block's
other defaults), its conversation's questions in order: ``auto`` is the block's default
(``max_results_per_level=None``: ``recall_depth`` sizes each recall to what the budget held so far),
``auto:M`` the same with ``DEPTH_MARGIN`` M, a number is that many results per level.  Printed per dataset and depth: the share of questions with
evidence in the text (any of their evidence messages, found by its first 80 characters), the mean share of
their evidence in it, the CPU a recall took (this process, ``time.process_time``) and the mean depth asked.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from beam_data import DEFAULT_DATA as BEAM_DATA  # noqa: E402
from locomo_data import DEFAULT_DATA as LOCOMO_DATA  # noqa: E402
from machine import footer  # noqa: E402


def _found(text: str, node: Any) -> bool:
    from beam_quality import _segment, _snippet

    return node is not None and _segment(text, _snippet(node)) is not None


def beam_cases(memory: Any, split: str, fresh: bool) -> list[tuple[str, list[tuple[str, list[Any]]]]]:
    """(citizen, [(question, evidence memories)]) per BEAM conversation of ``split``."""
    from beam_data import citizen_for, load, memories, message_of_node_id, parse_conversations

    convs, temporary = load(str(DATA["beam"]), parse_conversations("", split))
    if temporary is not None:  # the archive's folder: everything needed is read
        shutil.rmtree(temporary, ignore_errors=True)
    out = []
    for conv in convs:
        citizen = citizen_for(conv.conv, "block")
        records = memories(conv, citizen)
        if fresh:
            memory.ingest(records)
        by_message = {message_of_node_id(r.node_id): r for r in records if hasattr(r, "node_type")}
        out.append((citizen, [(q.question, [by_message.get(m) for m in q.gold]) for q in conv.questions if q.gold]))
    return out


def locomo_cases(memory: Any, split: str, fresh: bool) -> list[tuple[str, list[tuple[str, list[Any]]]]]:
    """(citizen, [(question, evidence memories)]) per LoCoMo conversation of ``split``."""
    from locomo_data import conversation_memories, load_conversations, turn_node_id
    from locomo_quality import citizen_of, ingest_conversation

    out = []
    for conv in load_conversations(str(DATA["locomo"]), None, split):
        if fresh:
            ctx = ingest_conversation(memory, conv, "block")
            citizen, nodes = ctx.citizen, ctx.nodes
        else:
            citizen = citizen_of(conv.sample_id, "block")
            nodes = [r for r in conversation_memories(conv, citizen, "turns") if hasattr(r, "node_type")]
        by_id = {n.node_id: n for n in nodes}
        out.append((citizen, [(q.question, [by_id.get(turn_node_id(conv.sample_id, g)) for g in q.gold])
                              for q in conv.questions if q.gold]))
    return out


def measure(memory: Any, cases: Sequence[tuple[str, list[tuple[str, list[Any]]]]], depth: str,
            budget: int) -> dict[str, float]:
    from llama_consciousness import memory_block

    margin = memory_block.DEPTH_MARGIN
    if depth.startswith("auto:"):
        memory_block.DEPTH_MARGIN = float(depth.split(":", 1)[1])
    try:
        return _measure(memory, cases, None if depth.startswith("auto") else int(depth), budget)
    finally:
        memory_block.DEPTH_MARGIN = margin


def _measure(memory: Any, cases: Sequence[tuple[str, list[tuple[str, list[Any]]]]], depth: int | None,
             budget: int) -> dict[str, float]:
    from llama_consciousness import ConsciousnessMemoryBlock

    hit = share = cpu = asked = 0.0
    n = 0
    for citizen, questions in cases:
        block = ConsciousnessMemoryBlock(memory=memory, citizen_id=citizen, token_budget=budget,
                                         max_results_per_level=depth)
        for question, evidence in questions:
            asked += block.intention(question).max_results_per_level
            started = time.process_time()
            text = block.get_text(question)
            cpu += time.process_time() - started
            found = sum(_found(text, node) for node in evidence)
            hit += found > 0
            share += found / len(evidence)
            n += 1
    return {"questions": n, "any": hit / n, "share": share / n, "cpu_ms": 1000 * cpu / n, "depth": asked / n}


DATA = {"beam": Path(BEAM_DATA), "locomo": Path(LOCOMO_DATA)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="beam,locomo", help="beam, locomo or both (comma list)")
    parser.add_argument("--split", choices=["tune", "test"], default="test")
    parser.add_argument("--depths", default="auto,20,10", help="'auto' (the block's default) and/or numbers")
    parser.add_argument("--budget", type=int, default=1000, help="the block's token_budget (default 1000)")
    parser.add_argument("--beam-data", default=str(DATA["beam"]), help="BEAM 500K (.tar.xz or unpacked folder)")
    parser.add_argument("--locomo-data", default=str(DATA["locomo"]), help="LoCoMo's locomo10.json")
    parser.add_argument("--data-dir", help="keep the ingested conversations here (reused when it exists)")
    args = parser.parse_args(argv)
    DATA["beam"], DATA["locomo"] = Path(args.beam_data), Path(args.locomo_data)
    depths = [d.strip() for d in args.depths.split(",") if d.strip()]
    for depth in depths:
        if not (depth == "auto" or depth.startswith("auto:") or depth.isdigit()):
            parser.error(f"--depths: 'auto', 'auto:MARGIN' or a number, not {depth!r}")
    makers: dict[str, Callable[..., Any]] = {"beam": beam_cases, "locomo": locomo_cases}

    from llama_consciousness import ConsciousnessMemory

    rows = []
    for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        folder = Path(args.data_dir) / f"{name}-{args.split}" if args.data_dir else \
            Path(tempfile.mkdtemp(prefix=f"block-{name}-"))
        fresh = not (folder / "falkordb").exists()
        try:
            with ConsciousnessMemory(data_dir=folder) as memory:
                cases = makers[name](memory, args.split, fresh)
                for depth in depths:
                    rows.append((name, depth, measure(memory, cases, depth, args.budget)))
        finally:
            if not args.data_dir:
                shutil.rmtree(folder, ignore_errors=True)
    print(f"What a ConsciousnessMemoryBlock's text holds ({args.budget} tokens), {args.split} half:\n")
    print("| dataset | results per level | questions | evidence in the text | share of the evidence | "
          "CPU per recall ms | depth asked (mean) |")
    print("|---|---|---|---|---|---|---|")
    for name, depth, r in rows:
        print(f"| {name} | {'auto (default)' if depth == 'auto' else depth} | {r['questions']} | {r['any']:.3f} | "
              f"{r['share']:.3f} | {r['cpu_ms']:.1f} | {r['depth']:.1f} |")
    print()
    print(footer("block_recall.py", argv if argv is not None else sys.argv[1:], ["llama-index-core"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
