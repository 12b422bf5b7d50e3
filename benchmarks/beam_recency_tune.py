"""How the read-time update rule's settings (``scoring.recency``: COVERAGE, MIN_TERMS) were chosen: replayed,
without a store, over the ranked lists ``beam_quality.py --json-out`` wrote for a system run with
``later_versions_first`` off.

    .venv/bin/python benchmarks/beam_quality.py --split tune --variants none \\
        --config-json '{"later_versions_first": false}' --json-out /tmp/beam-tune.json
    .venv/bin/python benchmarks/beam_recency_tune.py /tmp/beam-tune.json --system json1

For each setting: knowledge updates' updated message in the top 10 and ranked above the original, the original
marked, contradictions' earlier statement marked, and the share of other questions' evidence marked (a false
mark an LLM would read) with the recall@10 of every category after the reorder.  Run it on the tune half only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from beam_data import DATA_HELP, DEFAULT_DATA, hit_at_k, load, rank_of, recall_at_k  # noqa: E402


def replay(rows: list[dict], texts: dict[tuple[int, int], tuple[str, object]], coverage: float,
           min_terms: int) -> dict[str, float]:
    from llama_consciousness.scoring.recency import Candidate, later_versions
    from llama_consciousness.scoring import recency

    out: dict[str, list[float]] = {k: [] for k in ("update@10", "updated above", "original marked",
                                                   "contra earlier marked", "false marks", "R@10")}
    for row in rows:
        conv, ranked = row["conv"], row["ranked"][:20]
        question = row["question"]
        found = [Candidate(str(m), *texts[(conv, m)]) for m in ranked]
        successors = later_versions(question, found, coverage, min_terms)
        when = {str(m): texts[(conv, m)][1] for m in ranked}
        order = [int(k) for k, _ in recency.latest_first([(str(m), 0.0) for m in ranked], successors, when)]
        marked = {int(k) for k in successors}
        out["R@10"].append(recall_at_k(order, row["gold"], 10))
        if row["category"] == "knowledge_update" and row["first"] and row["second"] \
                and not set(row["first"]) & set(row["second"]):
            out["update@10"].append(hit_at_k(order, row["second"], 10))
            a, b = rank_of(order, row["first"]), rank_of(order, row["second"])
            if a is not None and b is not None:
                out["updated above"].append(float(b < a))
            if a is not None and a < 10:
                out["original marked"].append(float(bool(set(row["first"]) & marked)))
        elif row["category"] == "contradiction_resolution" and row["first"] and row["second"]:
            both = [*row["first"], *row["second"]]
            earliest = min(both, key=lambda m: texts[(conv, m)][1])
            if earliest in order[:10]:
                out["contra earlier marked"].append(float(earliest in marked))
        else:
            out["false marks"] += [float(m in marked) for m in row["gold"] if m in order[:10]]
    return {k: (sum(v) / len(v) if v else float("nan")) for k, v in out.items()} | {
        "n updated above": len(out["updated above"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ranks", type=Path, help="beam_quality.py --json-out file")
    parser.add_argument("--system", default="json1")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help=DATA_HELP)
    parser.add_argument("--coverage", default="0.4,0.5,0.6,0.7,0.8")
    parser.add_argument("--min-terms", default="2,3")
    args = parser.parse_args()
    rows = json.loads(args.ranks.read_text())[args.system]
    convs, temp = load(args.data, sorted({r["conv"] for r in rows}))
    texts = {(c.conv, m.id): (m.text, m.valid_at) for c in convs for m in c.messages}
    print("| coverage | min terms | update@10 | updated above (n) | original marked | contra earlier marked | "
          "false marks | R@10 |\n|---|---|---|---|---|---|---|---|")
    base = replay(rows, texts, 2.0, 99)  # nothing found: the order as retrieved
    print(f"| off | - | {base['update@10']:.3f} | {base['updated above']:.3f} ({base['n updated above']}) | - | - | "
          f"- | {base['R@10']:.3f} |")
    for coverage in (float(x) for x in args.coverage.split(",")):
        for min_terms in (int(x) for x in args.min_terms.split(",")):
            r = replay(rows, texts, coverage, min_terms)
            print(f"| {coverage} | {min_terms} | {r['update@10']:.3f} | {r['updated above']:.3f} "
                  f"({r['n updated above']}) | {r['original marked']:.3f} | {r['contra earlier marked']:.3f} | "
                  f"{r['false marks']:.3f} | {r['R@10']:.3f} |")
    if temp is not None:
        import shutil

        shutil.rmtree(temp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
