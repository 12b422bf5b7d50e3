"""The offline update judge on pairs of chat messages that people wrote, not templates.

One command, offline, no server (the judge is a pure function)::

    /work/main/.venv/bin/python benchmarks/updates_pairs.py            # both sets
    /work/main/.venv/bin/python benchmarks/updates_pairs.py --set heldout --by topic

Two sets of pairs, each written by a separate session that saw neither the
judge nor the generated conversations of ``updates_data.py`` nor the other set
(``updates_pairs_<set>.jsonl``, one JSON object per line: ``speaker``,
``older``, ``newer``, ``label`` "update" or "none", ``type``
``reality_changed`` / ``discovered_false``, ``topic``, ``note``):

* ``dev`` (320 pairs): the judge was tuned on it (with the ``tune`` half of
  ``updates_data.py``), so its figures are optimistic;
* ``heldout`` (300 pairs): read once, for the report, never for a choice.

The "none" pairs are hard negatives: the same topic, but another person, a
second compatible fact, a hypothetical, the remembered past, a question,
reported speech, a restatement, a related but different thing, a temporary
state, or another change in the same topic.

Measures, per set: of the updates, the share the judge finds (``update`` or
``possible``), the share it confirms (``update``: the older memory expires),
and the type it gives when it finds one; of the "none" pairs, the share it
marks (false updates). The older message is dated a month before the newer.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import commit, machine  # noqa: E402

HERE = Path(__file__).resolve().parent
SETS = ("dev", "heldout")
T0 = datetime(2025, 3, 1, tzinfo=timezone.utc)


def load(name: str) -> list[dict[str, Any]]:
    with open(HERE / f"updates_pairs_{name}.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


LLM_JUDGE: list[Any] = []
"""With ``--llm-judge``: the ``LLMUpdateJudge`` asked about every pair instead of the offline judge."""


def judge(row: dict[str, Any]) -> Any:
    from llama_consciousness.scoring.updates import Statement, judge_update

    later = T0 + timedelta(days=30)
    speaker = str(row["speaker"]).lower()
    older = Statement("older", row["older"], speaker, T0, T0)
    newer = Statement("newer", row["newer"], speaker, later, later)
    if LLM_JUDGE:
        answer = LLM_JUDGE[0].judge(older, newer)
        verdict = {"update": "update", "unsure": "possible"}.get(answer.verdict, "none")
        return SimpleNamespace(verdict=verdict, reason=answer.type)
    return judge_update(older, newer)


def pct(n: int, d: int) -> str:
    return f"{100 * n / d:.1f}% ({n}/{d})" if d else "-"


def score(rows: list[dict[str, Any]], by: str | None) -> list[tuple[str, str, str, str, str]]:
    """(group, found, confirmed, type right, false) rows: overall first, then per ``by`` value."""
    counts: dict[str, Counter] = {}
    for row in rows:
        j = judge(row)
        keys = ["all"] + ([f"{by}: {row.get(by) or '-'}"] if by else [])
        for key in keys:
            c = counts.setdefault(key, Counter())
            if row["label"] == "update":
                c["updates"] += 1
                c["found"] += j.verdict != "none"
                c["confirmed"] += j.verdict == "update"
                c["type_right"] += j.verdict != "none" and j.reason == row["type"]
            else:
                c["none"] += 1
                c["false"] += j.verdict != "none"
    return [(key, pct(c["found"], c["updates"]), pct(c["confirmed"], c["updates"]),
             pct(c["type_right"], c["found"]), pct(c["false"], c["none"])) for key, c in counts.items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=(*SETS, "both"), default="both")
    parser.add_argument("--by", choices=("topic", "kind"), default=None,
                        help="also per topic, or per kind of hard negative (the note's prefix)")
    parser.add_argument("--llm-judge", action="store_true", help=(
        "ask the LLM judge (LLMUpdateJudge: OpenAI with OPENAI_API_KEY and the openai extra) instead of the "
        "offline one; needs the network"))
    args = parser.parse_args(argv)
    if args.llm_judge:
        from llama_consciousness.ingestion.llm_judge import LLMUpdateJudge

        LLM_JUDGE.append(LLMUpdateJudge())
    started = time.perf_counter()
    print("## The update judge on written pairs (`benchmarks/updates_pairs.py`)\n")
    print("| set | group | updates found (update or possible) | confirmed (expires) | type right, of found "
          "| false, of the \"none\" pairs |")
    print("|---|---|---|---|---|---|")
    for name in SETS if args.set == "both" else (args.set,):
        rows = load(name)
        if args.by == "kind":
            for row in rows:
                row["kind"] = str(row.get("note", "")).split(":")[0] if row["label"] == "none" else "update"
        for group, found, confirmed, type_right, false in score(rows, args.by):
            print(f"| {name}{' (tuned on)' if name == 'dev' else ''} | {group} | {found} | {confirmed} | "
                  f"{type_right} | {false} |")
    print(f"\nDate: {time.strftime('%Y-%m-%d %H:%M')}. Total {time.perf_counter() - started:.1f} s.")
    print(f"Machine: {machine(['llama-index-core'])}")
    print(f"Command: {' '.join(shlex.quote(a) for a in [sys.executable, *sys.argv])}")
    print(f"Commit: {commit()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
