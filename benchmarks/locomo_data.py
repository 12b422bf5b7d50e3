"""LoCoMo as memories, questions and retrieval metrics (pure functions, no storage).

Used by ``benchmarks/locomo_quality.py`` and its tests.  LoCoMo itself (CC
BY-NC 4.0) is not part of this repository and is never copied into it: get
``data/locomo10.json`` from https://github.com/snap-research/locomo and pass
its path (``--data PATH``; the default is
``<repo>/../shared/benchmarks/locomo/locomo10.json``); it is read in place.
The tests read ``tests/fixtures/locomo_mini.json``, two invented
conversations in LoCoMo's format.

``python benchmarks/locomo_data.py [--data PATH]`` prints what the loader
reads from a file (conversations, sessions, turns, questions per category).

Mapping (one conversation = one citizen, level N1)
--------------------------------------------------
* one memory per dialog turn: ``node_id`` ``<sample_id>:<dia_id>``
  (``conv-26:D1:3``; the node-id rules allow any 1-256 characters and no
  version suffix such as ``_v2``/``@2`` can match, so no rewriting is needed);
  ``description`` = ``"<speaker>: <text>"`` plus ``" [shares a photo: <blip
  caption>]"`` when the turn carries an image; ``name`` = the same text
  (a turn has no title; the speaker alone as name would make every turn a
  "Caroline" for the graph channel's name matching, and the embedding of
  ``name\\ndescription`` with name == description is the embedding of the
  text, since WordLlama mean-pools tokens); ``valid_at`` = ``created_at`` =
  the session's date ("1:56 pm on 8 May, 2023" -> 2023-05-08T13:56Z), so that
  point-in-time queries see what had been said by then;
  ``extra`` keeps ``sample_id``, ``dia_id``, ``session``, ``turn``, ``speaker``.
* relationships: ``FOLLOWS`` from each turn to the previous turn of the same
  session (relation types are free-form upper-case labels in the schema; the
  project has no built-in temporal-sequence type, and FOLLOWS is the
  conventional name), energy 0.3 (weaker than a memory's MENTIONS links,
  which carry the memory's energy 0.5).  Entities (speakers, names, places)
  come from the project's own ``EntityExtractor`` in the ingestion pipeline.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "benchmarks" / "locomo" / "locomo10.json"
SOURCE = "https://github.com/snap-research/locomo"
DATA_HELP = "LoCoMo's locomo10.json (default: %(default)s); read in place, never copied into the repository"
DATA_EPILOG = ("LoCoMo (CC BY-NC 4.0) is not part of this repository: get data/locomo10.json from\n"
               f"{SOURCE} and pass --data PATH.  The file is read in place and never copied.")

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"^D(\d+):(\d+)$")
_DATE = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.IGNORECASE
)
_MONTHS = {m: i for i, m in enumerate(
    "january february march april may june july august september october november december".split(), start=1)}


# -- evidence ids ------------------------------------------------------------------


def normalize_dia_id(raw: str) -> str | None:
    """One evidence id in canonical ``D<session>:<turn>`` form, or None.

    ``D:11:26`` -> ``D11:26``, ``D30:05`` -> ``D30:5``, a bare ``D`` -> None.
    """
    text = raw.strip().strip(",")
    if not text:
        return None
    if text.startswith("D:"):
        text = "D" + text[2:]
    match = _DIA_ID.match(text)
    if match is None:
        return None
    return f"D{int(match.group(1))}:{int(match.group(2))}"


def normalize_evidence(evidence: Iterable[str]) -> list[str]:
    """A question's evidence as canonical dia ids, split on ';' and spaces, deduplicated, in order."""
    out: list[str] = []
    for item in evidence:
        for part in re.split(r"[;\s]+", str(item)):
            dia = normalize_dia_id(part)
            if dia is not None and dia not in out:
                out.append(dia)
    return out


def session_of(dia_id: str) -> int:
    """``D11:26`` -> 11."""
    match = _DIA_ID.match(dia_id)
    if match is None:
        raise ValueError(f"not a dia id: {dia_id!r}")
    return int(match.group(1))


def turn_node_id(sample_id: str, dia_id: str) -> str:
    return f"{sample_id}:{dia_id}"


def dia_of_node_id(node_id: str) -> str:
    """``conv-26:D1:3`` -> ``D1:3`` (the level prefix ``N1:`` of a retrieved id is dropped too)."""
    parts = node_id.split(":")
    return ":".join(parts[-2:])


def citizen_for(sample_id: str, prefix: str = "locomo") -> str:
    """A citizen id (``[A-Za-z0-9_-]{1,64}``) for a conversation."""
    cid = re.sub(r"[^A-Za-z0-9_-]", "_", f"{prefix}-{sample_id}" if prefix else sample_id)
    return cid[:64]


# -- dates -------------------------------------------------------------------------


def parse_session_date(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` -> 2023-05-08 13:56 UTC."""
    match = _DATE.match(text)
    if match is None:
        raise ValueError(f"unrecognised LoCoMo session date: {text!r}")
    hour, minute, ampm, day, month, year = match.groups()
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    mon = _MONTHS.get(month.lower())
    if mon is None:
        raise ValueError(f"unknown month {month!r} in {text!r}")
    return datetime(int(year), mon, int(day), h, int(minute), tzinfo=timezone.utc)


# -- conversations -----------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    sample_id: str
    session: int
    index: int  # position in the session, from 0
    dia_id: str
    speaker: str
    text: str
    caption: str | None
    date: datetime

    @property
    def node_id(self) -> str:
        return turn_node_id(self.sample_id, self.dia_id)

    @property
    def description(self) -> str:
        out = f"{self.speaker}: {self.text}".strip()
        if self.caption:
            out += f" [shares a photo: {self.caption}]"
        return out


@dataclass(frozen=True)
class Question:
    sample_id: str
    index: int
    question: str
    category: int
    gold: tuple[str, ...]  # canonical dia ids
    answer: Any = None


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    @property
    def session_dates(self) -> dict[int, datetime]:
        return {t.session: t.date for t in self.turns}


def missing_data_message(path: str | Path) -> str:
    """One line: where the data was looked for and where to get it."""
    return (f"LoCoMo data not found at {path}: download data/locomo10.json from {SOURCE} "
            "(CC BY-NC 4.0; it is read in place, never copied) and pass --data PATH")


def require_data(path: str | Path) -> Path:
    """``path`` if it is a file, else exit with :func:`missing_data_message` (for the command lines)."""
    path = Path(path)
    if not path.is_file():
        raise SystemExit(missing_data_message(path))
    return path


def load_raw(path: str | Path = DEFAULT_DATA) -> list[dict[str, Any]]:
    if not Path(path).is_file():
        raise FileNotFoundError(missing_data_message(path))
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def conversation_turns(sample: Mapping[str, Any]) -> list[Turn]:
    """The turns of one LoCoMo sample in record order (sessions by number, turns as given).

    Date keys without a session are ignored; a session without a date is an error.
    """
    conv = sample["conversation"]
    sid = sample["sample_id"]
    sessions = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.match(k)))
    turns: list[Turn] = []
    for n in sessions:
        date = parse_session_date(conv[f"session_{n}_date_time"])
        for i, raw in enumerate(conv[f"session_{n}"]):
            dia = normalize_dia_id(raw["dia_id"]) or raw["dia_id"]
            caption = raw.get("blip_caption") or None
            turns.append(Turn(sid, n, i, dia, str(raw["speaker"]), str(raw.get("text") or ""), caption, date))
    return turns


def conversation_questions(sample: Mapping[str, Any]) -> list[Question]:
    """Every question with its canonical gold ids (questions without evidence are kept, gold empty)."""
    out = []
    for i, qa in enumerate(sample["qa"]):
        answer = qa.get("answer", qa.get("adversarial_answer"))
        out.append(Question(sample["sample_id"], i, str(qa["question"]), int(qa["category"]),
                            tuple(normalize_evidence(qa.get("evidence") or [])), answer))
    return out


def load_conversations(path: str | Path = DEFAULT_DATA, only: Sequence[str] | None = None) -> list[Conversation]:
    """The conversations (``only``: sample ids, or 0-based indexes as strings)."""
    raw = load_raw(path)
    if only:
        wanted = set(only)
        raw = [s for i, s in enumerate(raw) if s["sample_id"] in wanted or str(i) in wanted]
    return [Conversation(s["sample_id"], conversation_turns(s), conversation_questions(s)) for s in raw]


def turn_memories(turns: Sequence[Turn], citizen_id: str, *, follows: bool = True,
                  energy: float = 0.5, confidence: float = 0.8, follows_energy: float = 0.3) -> list[Any]:
    """MemoryNodes (and FOLLOWS relationships) for ``memory.ingest``: memories first, in record order."""
    from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode

    nodes: list[Any] = []
    rels: list[Any] = []
    previous: Turn | None = None
    for turn in turns:
        text = turn.description
        nodes.append(MemoryNode(
            node_id=turn.node_id, level="N1", citizen_id=citizen_id, node_type="Memory",
            name=text, description=text, energy=energy, confidence=confidence,
            valid_at=turn.date, created_at=turn.date,
            goal="converse", mindstate="conversation", emotion_vector={"engagement": 0.5},
            extra={"sample_id": turn.sample_id, "dia_id": turn.dia_id, "session": turn.session,
                   "turn": turn.index, "speaker": turn.speaker},
        ))
        if follows and previous is not None and previous.session == turn.session:
            rels.append(ConsciousnessRelationship(
                source_id=turn.node_id, target_id=previous.node_id, relation_type="FOLLOWS",
                goal="converse", mindstate="conversation", energy=follows_energy, confidence=confidence,
                emotion_vector={"engagement": 0.5},
                valid_at=turn.date, created_at=turn.date, level="N1", citizen_id=citizen_id,
                formation_trigger="next turn of the session",
            ))
        previous = turn
    return nodes + rels


# -- metrics -----------------------------------------------------------------------


def dedupe(ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def recall_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """|gold ∩ top-k| / |gold| (ranked ids are deduplicated first); 0 for empty gold."""
    gold_set = set(gold)
    if not gold_set:
        return 0.0
    return len(gold_set.intersection(dedupe(ranked)[:k])) / len(gold_set)


def hit_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1 if any gold id is in the top k, else 0."""
    return 1.0 if set(gold).intersection(dedupe(ranked)[:k]) else 0.0


def session_recall_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """Recall over evidence *sessions*: a gold session counts when any top-k turn comes from it."""
    gold_sessions = {session_of(g) for g in gold}
    if not gold_sessions:
        return 0.0
    got = {session_of(r) for r in dedupe(ranked)[:k] if _DIA_ID.match(r)}
    return len(gold_sessions & got) / len(gold_sessions)


METRICS = ("R@5", "R@10", "R@20", "Hit@10", "SessR@10")


def question_metrics(ranked: Sequence[str], gold: Sequence[str]) -> dict[str, float]:
    """The table's metrics for one question (``ranked``: dia ids, best first)."""
    return {
        "R@5": recall_at_k(ranked, gold, 5),
        "R@10": recall_at_k(ranked, gold, 10),
        "R@20": recall_at_k(ranked, gold, 20),
        "Hit@10": hit_at_k(ranked, gold, 10),
        "SessR@10": session_recall_at_k(ranked, gold, 10),
    }


def mean_metrics(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Mean of each metric over questions (empty -> NaN), plus ``n``."""
    if not rows:
        return {**{m: float("nan") for m in METRICS}, "n": 0}
    return {**{m: sum(r[m] for r in rows) / len(rows) for m in METRICS}, "n": len(rows)}


def summarise(per_question: Sequence[tuple[int, Mapping[str, float]]]) -> dict[str, dict[str, float]]:
    """``[(category, metrics)]`` -> overall (categories 1-4), each category, and 5 on its own."""
    out = {"overall": mean_metrics([m for c, m in per_question if c in (1, 2, 3, 4)])}
    for cat in (1, 2, 3, 4, 5):
        out[f"cat{cat}"] = mean_metrics([m for c, m in per_question if c == cat])
    return out


# -- command line --------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Print what the loader reads from a LoCoMo file, one line per conversation."""
    import argparse

    parser = argparse.ArgumentParser(description="What the LoCoMo loader reads from a file (no storage).",
                                     epilog=DATA_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, metavar="PATH", help=DATA_HELP)
    parser.add_argument("--conversations", default="", help="comma-separated sample ids or indexes (default: all)")
    args = parser.parse_args(argv)
    path = require_data(args.data)
    only = [c.strip() for c in args.conversations.split(",") if c.strip()] or None
    for conv in load_conversations(path, only):
        sessions = sorted({t.session for t in conv.turns})
        cats = {c: sum(1 for q in conv.questions if q.category == c) for c in CATEGORY_NAMES}
        with_gold = sum(1 for q in conv.questions if q.gold)
        print(f"{conv.sample_id}: {len(sessions)} sessions, {len(conv.turns)} turns "
              f"({sum(1 for t in conv.turns if t.caption)} with a photo), {len(conv.questions)} questions "
              f"({with_gold} with evidence; " + ", ".join(f"{CATEGORY_NAMES[c]} {n}" for c, n in cats.items()) + ")")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
