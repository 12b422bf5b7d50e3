"""BEAM 500K as memories and questions: the loader and the metrics of ``beam_quality.py``.

BEAM (Tavakoli et al., 2025, "Beyond a Million Tokens") holds 35 long
conversations between a user and an assistant (about 1,090 messages each,
2,000 characters a message on average: code, plans, numbers that change) and
20 probing questions per conversation in ten categories, most with the ids of
their evidence messages.  It is read in place from
``<repo>/../shared/benchmarks/beam/beam500k.tar.xz`` (unpacked once into a
temporary folder) or from an unpacked ``beam500k/`` folder; it has no licence
file and is never copied into this repository.

The mapping (the data's README, "As a retrieval benchmark"):

* one memory per message, node id ``beam<conv>:<id>``, level N1, one citizen
  per conversation; description ``"<role>: <content>"``, name its first words;
* valid_at = the message's time anchor (a message without one carries the last
  anchor seen), plus its id in seconds, so messages of one day keep their order;
* FOLLOWS links between consecutive messages (``follows=False`` leaves them out);
* gold = the question's ``source_chat_ids`` (flattened); a question without
  them (abstention) is not a retrieval question.

Split by conversation: tune = 1-17, test = 18-35.
"""

from __future__ import annotations

import json
import re
import shutil
import tarfile
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "benchmarks" / "beam" / "beam500k.tar.xz"
DATA_HELP = ("BEAM 500K: the beam500k.tar.xz archive or an unpacked beam500k/ folder (default: %(default)s); "
             "read in place, never copied into the repository")
SPLITS = {"tune": range(1, 18), "test": range(18, 36), "all": range(1, 36)}
CATEGORIES = ("abstention", "contradiction_resolution", "event_ordering", "information_extraction",
              "instruction_following", "knowledge_update", "multi_session_reasoning", "preference_following",
              "summarization", "temporal_reasoning")
SHORT = {"contradiction_resolution": "contradiction", "event_ordering": "event order",
         "information_extraction": "info extraction", "instruction_following": "instruction",
         "knowledge_update": "knowledge update", "multi_session_reasoning": "multi-session",
         "preference_following": "preference", "summarization": "summarization",
         "temporal_reasoning": "temporal", "abstention": "abstention"}
NAME_WORDS = 12
_ANCHOR = "%B-%d-%Y"


@dataclass(frozen=True)
class Message:
    conv: int
    id: int
    role: str
    content: str
    valid_at: datetime

    @property
    def node_id(self) -> str:
        return node_id_of(self.conv, self.id)

    @property
    def text(self) -> str:
        return f"{self.role}: {self.content}"


@dataclass(frozen=True)
class Question:
    conv: int
    category: str
    question: str
    gold: tuple[int, ...]
    # knowledge_update: the original and the updated message ids; contradiction_resolution: the two statements;
    # temporal_reasoning: the two events (first, second) as the data names them
    first: tuple[int, ...] = ()
    second: tuple[int, ...] = ()


@dataclass
class Conversation:
    conv: int
    messages: list[Message] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    def time_of(self, message_id: int) -> datetime | None:
        for m in self.messages:
            if m.id == message_id:
                return m.valid_at
        return None


def node_id_of(conv: int, message_id: int) -> str:
    return f"beam{conv}:{message_id}"


def message_of_node_id(node_id: str) -> int | None:
    """The message id of a node id ``beam<conv>:<id>`` (None for anything else)."""
    match = re.fullmatch(r"beam\d+:(\d+)", node_id)
    return int(match.group(1)) if match else None


def citizen_for(conv: int, prefix: str = "beam") -> str:
    return f"{prefix}-{conv}"


# -- reading ------------------------------------------------------------------------------


def unpacked(path: str | Path) -> tuple[Path, Path | None]:
    """The ``beam500k`` folder of ``path`` (an archive is unpacked into a temporary folder, returned second so
    that the caller removes it)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"BEAM data not found at {path}: pass --data (the beam500k.tar.xz archive or an "
                                "unpacked beam500k/ folder)")
    if path.is_dir():
        return (path / "beam500k" if (path / "beam500k").is_dir() else path), None
    temp = Path(tempfile.mkdtemp(prefix="beam", dir="/tmp"))
    try:
        with tarfile.open(path) as archive:
            archive.extractall(temp, filter="data")
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return temp / "beam500k", temp


def _flatten(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, str):
        return [int(x) for x in re.findall(r"\d+", value)]
    if isinstance(value, Mapping):
        return [i for v in value.values() for i in _flatten(v)]
    return [i for v in value for i in _flatten(v)]


def read_messages(folder: Path, conv: int) -> list[Message]:
    batches = json.loads((folder / str(conv) / "chat.json").read_text())
    out: list[Message] = []
    anchor: datetime | None = None
    for batch in batches:
        if batch.get("time_anchor"):
            anchor = datetime.strptime(batch["time_anchor"], _ANCHOR).replace(tzinfo=timezone.utc)
        for turn in batch["turns"]:
            for m in turn:
                if m.get("time_anchor"):
                    anchor = datetime.strptime(m["time_anchor"], _ANCHOR).replace(tzinfo=timezone.utc)
                if anchor is None:
                    raise ValueError(f"conversation {conv}: message {m['id']} has no time anchor before it")
                out.append(Message(conv, int(m["id"]), m["role"], m["content"],
                                   anchor + timedelta(seconds=int(m["id"]))))
    return out


def read_questions(folder: Path, conv: int) -> list[Question]:
    raw = json.loads((folder / str(conv) / "probing_questions.json").read_text())
    out: list[Question] = []
    for category in CATEGORIES:
        for q in raw.get(category, []):
            source = q.get("source_chat_ids")
            gold = tuple(dict.fromkeys(_flatten(source)))
            first = second = ()
            if isinstance(source, Mapping):
                keys = list(source)
                if len(keys) >= 2:
                    first, second = tuple(_flatten(source[keys[0]])), tuple(_flatten(source[keys[1]]))
            out.append(Question(conv, category, q["question"], gold, first, second))
    return out


def load(path: str | Path, convs: Iterable[int]) -> tuple[list[Conversation], Path | None]:
    """The conversations ``convs`` (and a temporary folder to remove, when ``path`` is the archive)."""
    folder, temp = unpacked(path)
    try:
        return [Conversation(c, read_messages(folder, c), read_questions(folder, c)) for c in convs], temp
    except BaseException:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
        raise


def parse_conversations(text: str, split: str) -> list[int]:
    """``--conversations`` ("1,2,5-7") or the split's conversations."""
    if not text.strip():
        return list(SPLITS[split])
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-", 1)
            out += range(int(a), int(b) + 1)
        elif part:
            out.append(int(part))
    return out


# -- memories -------------------------------------------------------------------------------


def name_of(text: str, words: int = NAME_WORDS) -> str:
    """A message's first words as its name (the description holds it whole)."""
    parts = text.split()
    return " ".join(parts[:words]) + ("…" if len(parts) > words else "")


def memories(conv: Conversation, citizen_id: str, *, follows: bool = True) -> list[Any]:
    """MemoryNodes (and FOLLOWS relationships) for ``memory.ingest``: memories first, in message order."""
    from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode

    nodes: list[Any] = []
    rels: list[Any] = []
    previous: Message | None = None
    for m in conv.messages:
        text = m.text
        nodes.append(MemoryNode(
            node_id=m.node_id, level="N1", citizen_id=citizen_id, node_type="Memory",
            name=name_of(text), description=text, energy=0.5, confidence=0.8,
            valid_at=m.valid_at, created_at=m.valid_at, goal="converse", mindstate="conversation",
            emotion_vector={"engagement": 0.5}, extra={"conversation": m.conv, "message": m.id, "speaker": m.role},
        ))
        if follows and previous is not None:
            rels.append(ConsciousnessRelationship(
                source_id=m.node_id, target_id=previous.node_id, relation_type="FOLLOWS", goal="converse",
                mindstate="conversation", energy=0.3, confidence=0.8, emotion_vector={"engagement": 0.5},
                valid_at=m.valid_at, created_at=m.valid_at, level="N1", citizen_id=citizen_id,
                formation_trigger="next message of the conversation",
            ))
        previous = m
    return nodes + rels


# -- metrics --------------------------------------------------------------------------------


def dedupe(ids: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(ids))


def recall_at_k(ranked: Sequence[int], gold: Iterable[int], k: int) -> float:
    gold_set = set(gold)
    return len(gold_set.intersection(dedupe(ranked)[:k])) / len(gold_set) if gold_set else 0.0


def all_at_k(ranked: Sequence[int], gold: Iterable[int], k: int) -> float:
    """1 when every gold id is in the top k."""
    gold_set = set(gold)
    return 1.0 if gold_set and gold_set.issubset(dedupe(ranked)[:k]) else 0.0


def hit_at_k(ranked: Sequence[int], gold: Iterable[int], k: int) -> float:
    return 1.0 if set(gold).intersection(dedupe(ranked)[:k]) else 0.0


METRICS = ("R@5", "R@10", "R@20", "Hit@10", "All@10")


def question_metrics(ranked: Sequence[int], gold: Sequence[int]) -> dict[str, float]:
    return {"R@5": recall_at_k(ranked, gold, 5), "R@10": recall_at_k(ranked, gold, 10),
            "R@20": recall_at_k(ranked, gold, 20), "Hit@10": hit_at_k(ranked, gold, 10),
            "All@10": all_at_k(ranked, gold, 10)}


def rank_of(ranked: Sequence[int], ids: Iterable[int]) -> int | None:
    """The best rank (0-based) of any of ``ids`` in ``ranked``."""
    wanted = set(ids)
    for i, r in enumerate(dedupe(ranked)):
        if r in wanted:
            return i
    return None


def json_from(command: Sequence[str]) -> Any:
    """What a fresh process of a benchmark prints as its last line, as JSON (the benchmarks that measure a
    reopened memory run themselves again); its stderr is shown and the run stops when it fails."""
    import subprocess
    import sys

    done = subprocess.run(list(command), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        raise SystemExit(done.returncode)
    return json.loads(done.stdout.strip().splitlines()[-1])
