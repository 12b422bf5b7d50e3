"""LoCoMo as memories, questions and retrieval metrics (pure functions, no storage).

Used by ``benchmarks/locomo_quality.py`` and its tests.  LoCoMo itself (CC
BY-NC 4.0) is not part of this repository and is never copied into it: get
``data/locomo10.json`` from https://github.com/snap-research/locomo and pass
its path (``--data PATH``; the default is
``<repo>/../shared/benchmarks/locomo/locomo10.json``); it is read in place.
The tests read ``tests/fixtures/locomo_mini.json``, two invented
conversations in LoCoMo's format.

``python benchmarks/locomo_data.py [--data PATH] [--split tune|test|all]``
prints what the loader reads from a file (conversations, sessions, turns,
questions per category).

Split by conversation (tune / test)
-----------------------------------
Every default the package chooses from data (fusion, weights, keyword
scoring and its parameters, stop words, neighbour expansion, graph start
rules) is chosen on the *tune* part; reported numbers come from the *test*
part, so that a choice is never graded on the questions it was fitted to.
The rule (:func:`split_conversations`) takes the conversations in file order:
the first ceil(n/2) are tune, the rest test.  For locomo10.json (10
conversations) that is

* tune: ``conv-26, conv-30, conv-41, conv-42, conv-43`` (first 5)
* test: ``conv-44, conv-47, conv-48, conv-49, conv-50`` (last 5)

and for the two-conversation fixture: tune ``mini-1``, test ``mini-2``.
Splitting whole conversations (never questions of one conversation) keeps
the people, places and wording of a test conversation out of tuning.

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
* long memories (``memories="turns+windows"``): beside its single turns,
  each session is also stored as windows of consecutive turns
  (:func:`session_windows`): 12 turns long, a new window every 6 turns, the
  last window of a session aligned to the session's end (so every turn is in
  one or two windows and every window of a session of >= 12 turns has
  exactly 12 turns; a shorter session is one window of all its turns).  On
  LoCoMo that is ~320 words per window (turns average 27 words).  A window
  is an N1 memory of the same citizen: ``node_id``
  ``<sample_id>:W<session>:<first>-<last>`` (positions in the session from
  1, which are the turn numbers of LoCoMo's dia ids: ``conv-26:W1:7-18``
  covers ``D1:7`` .. ``D1:18``), ``name`` = its first ten words and "...",
  ``description`` = the turns' descriptions joined by newlines,
  ``valid_at`` = ``created_at`` = the session's date, ``extra`` keeps
  ``sample_id``, ``session``, ``first_turn``, ``last_turn``, ``kind`` =
  ``"window"``; windows get no FOLLOWS links (entities and MENTIONS come
  from ingestion, as for turns).  A question's gold stays its turns: a
  window in the top k takes a slot and counts as a miss, which is how a
  length bias (long memories crowding out the short one that answers)
  shows in recall.
* relationships: ``FOLLOWS`` from each turn to the previous turn of the same
  session (relation types are free-form upper-case labels in the schema; the
  project has no built-in temporal-sequence type, and FOLLOWS is the
  conventional name), energy 0.3 (weaker than a memory's MENTIONS links,
  which carry the memory's energy 0.5).  Entities (speakers, names, places)
  come from the project's own ``EntityExtractor`` in the ingestion pipeline.
"""

from __future__ import annotations

import json
import math
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
_WINDOW_KEY = re.compile(r"^W(\d+):(\d+)-(\d+)$")

SPLITS = ("tune", "test", "all")
SPLIT_HELP = ("conversations by a fixed split, in file order: tune = the first ceil(n/2), test = the rest; "
              "for locomo10.json tune = conv-26, conv-30, conv-41, conv-42, conv-43 and "
              "test = conv-44, conv-47, conv-48, conv-49, conv-50 (default: %(default)s; --conversations overrides)")
MEMORIES = ("turns", "turns+windows")
WINDOW_SIZE = 12
WINDOW_STRIDE = 6
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


def split_conversations(items: Sequence[Any], split: str) -> list[Any]:
    """The ``split`` part of ``items`` (conversations or raw samples, in file order).

    tune = the first ceil(n/2), test = the rest, all = everything: for
    locomo10.json the first five and the last five conversations.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    cut = math.ceil(len(items) / 2)
    if split == "tune":
        return list(items[:cut])
    if split == "test":
        return list(items[cut:])
    return list(items)


def load_conversations(path: str | Path = DEFAULT_DATA, only: Sequence[str] | None = None,
                       split: str = "all") -> list[Conversation]:
    """The conversations of ``split`` (``only``, sample ids or 0-based file indexes as strings,
    overrides the split)."""
    raw = load_raw(path)
    if only:
        wanted = set(only)
        raw = [s for i, s in enumerate(raw) if s["sample_id"] in wanted or str(i) in wanted]
    else:
        raw = split_conversations(raw, split)
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


# -- long memories: windows of consecutive turns ------------------------------------


@dataclass(frozen=True)
class Window:
    """Consecutive turns of one session, stored as one long memory."""

    turns: tuple[Turn, ...]

    @property
    def sample_id(self) -> str:
        return self.turns[0].sample_id

    @property
    def session(self) -> int:
        return self.turns[0].session

    @property
    def first(self) -> int:
        return self.turns[0].index + 1

    @property
    def last(self) -> int:
        return self.turns[-1].index + 1

    @property
    def key(self) -> str:
        """``W<session>:<first>-<last>`` (what :func:`dia_of_node_id` returns for a window)."""
        return f"W{self.session}:{self.first}-{self.last}"

    @property
    def node_id(self) -> str:
        return f"{self.sample_id}:{self.key}"

    @property
    def date(self) -> datetime:
        return self.turns[0].date

    @property
    def description(self) -> str:
        return "\n".join(t.description for t in self.turns)

    @property
    def name(self) -> str:
        words = self.description.split()
        return " ".join(words[:10]) + (" ..." if len(words) > 10 else "")

    @property
    def words(self) -> int:
        return len(self.description.split())


def window_starts(n: int, size: int = WINDOW_SIZE, stride: int = WINDOW_STRIDE) -> list[int]:
    """0-based starts of the windows of a session of ``n`` turns: every ``stride`` turns while a
    full window fits before the end, then one window aligned to the end."""
    if n <= 0:
        return []
    if size < 1 or stride < 1:
        raise ValueError(f"window size and stride must be >= 1, got {size} and {stride}")
    starts = list(range(0, max(n - size, 0), stride))
    last = max(n - size, 0)
    if last not in starts:
        starts.append(last)
    return starts


def session_windows(turns: Sequence[Turn], size: int = WINDOW_SIZE, stride: int = WINDOW_STRIDE) -> list[Window]:
    """The windows of every session of ``turns`` (record order; see the module docstring)."""
    by_session: dict[int, list[Turn]] = {}
    for turn in turns:
        by_session.setdefault(turn.session, []).append(turn)
    out = []
    for session_turns in by_session.values():
        for start in window_starts(len(session_turns), size, stride):
            out.append(Window(tuple(session_turns[start:start + size])))
    return out


def window_memories(windows: Sequence[Window], citizen_id: str, *, energy: float = 0.5,
                    confidence: float = 0.8) -> list[Any]:
    """MemoryNodes of the windows (no relationships)."""
    from llama_consciousness.schema import MemoryNode

    return [MemoryNode(
        node_id=w.node_id, level="N1", citizen_id=citizen_id, node_type="Memory",
        name=w.name, description=w.description, energy=energy, confidence=confidence,
        valid_at=w.date, created_at=w.date,
        goal="converse", mindstate="conversation", emotion_vector={"engagement": 0.5},
        extra={"sample_id": w.sample_id, "session": w.session, "first_turn": w.first, "last_turn": w.last,
               "kind": "window"},
    ) for w in windows]


def conversation_memories(conv: Conversation, citizen_id: str, memories: str = "turns", *,
                          size: int = WINDOW_SIZE, stride: int = WINDOW_STRIDE) -> list[Any]:
    """Records for ``memory.ingest``: the turns (with FOLLOWS), plus the session windows for
    ``memories="turns+windows"``; memories before relationships."""
    if memories not in MEMORIES:
        raise ValueError(f"unknown memories {memories!r}; expected one of {MEMORIES}")
    records = turn_memories(conv.turns, citizen_id)
    if memories == "turns":
        return records
    nodes = [r for r in records if hasattr(r, "node_type")]
    rels = [r for r in records if not hasattr(r, "node_type")]
    return nodes + window_memories(session_windows(conv.turns, size, stride), citizen_id) + rels


def is_turn(key: str) -> bool:
    """True for a dia id (``D1:3``), False for a window key (``W1:1-12``) or anything else."""
    return _DIA_ID.match(key) is not None


def window_turns(key: str) -> list[str]:
    """The dia ids a window key covers (``W1:3-5`` -> D1:3, D1:4, D1:5); [] for anything else."""
    match = _WINDOW_KEY.match(key)
    if match is None:
        return []
    session, first, last = (int(g) for g in match.groups())
    return [f"D{session}:{i}" for i in range(first, last + 1)]


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


METRICS = ("R@5", "R@10", "R@20", "Hit@10", "SessR@10", "Win@10", "WinGold@10")


def question_metrics(ranked: Sequence[str], gold: Sequence[str]) -> dict[str, float]:
    """The table's metrics for one question (``ranked``: dia ids and window keys, best first).

    Windows never count as gold.  ``Win@10`` is the share of the top 10 that
    are windows (0 with turns only); ``WinGold@10`` is 1 when a window that
    covers a gold turn is in the top 10 (the answer was found, but as a long
    memory).
    """
    top10 = dedupe(ranked)[:10]
    gold_set = set(gold)
    return {
        "R@5": recall_at_k(ranked, gold, 5),
        "R@10": recall_at_k(ranked, gold, 10),
        "R@20": recall_at_k(ranked, gold, 20),
        "Hit@10": hit_at_k(ranked, gold, 10),
        "SessR@10": session_recall_at_k(ranked, gold, 10),
        "Win@10": sum(1 for r in top10 if _WINDOW_KEY.match(r)) / 10,
        "WinGold@10": 1.0 if any(gold_set.intersection(window_turns(r)) for r in top10) else 0.0,
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
    parser.add_argument("--split", choices=SPLITS, default="all", help=SPLIT_HELP)
    parser.add_argument("--conversations", default="",
                        help="comma-separated sample ids or indexes (overrides --split)")
    args = parser.parse_args(argv)
    path = require_data(args.data)
    only = [c.strip() for c in args.conversations.split(",") if c.strip()] or None
    for conv in load_conversations(path, only, args.split):
        sessions = sorted({t.session for t in conv.turns})
        cats = {c: sum(1 for q in conv.questions if q.category == c) for c in CATEGORY_NAMES}
        with_gold = sum(1 for q in conv.questions if q.gold)
        print(f"{conv.sample_id}: {len(sessions)} sessions, {len(conv.turns)} turns "
              f"({sum(1 for t in conv.turns if t.caption)} with a photo), {len(conv.questions)} questions "
              f"({with_gold} with evidence; " + ", ".join(f"{CATEGORY_NAMES[c]} {n}" for c, n in cats.items()) + ")")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
