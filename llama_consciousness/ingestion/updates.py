"""``KnowledgeUpdateDetector``: a later statement supersedes an earlier one without ids saying so.

For each new memory that states a single-valued fact (``scoring.updates``),
the earlier memories of its level graph (for N1, of its citizen) about the
same thing are found through the keyword index the retrievers use, never by a scan (BM25
over the memory's words and the words of what it is about, which the index
adds to every memory: "we moved to Berlin" finds "I live in Lyon" by
"home"), plus the memories of the same call.  Each pair is judged by the
offline judge and, when one is given, confirmed or rejected by an LLM judge
(``ingestion.llm_judge``).  A decision is put on the node
(``metadata["lc_updates"]``) for the writer, which applies it exactly as an
explicit ``supersedes``: the older memory expires (``update``) or is only
marked ``possibly_superseded_by`` (``possible``).

The pair is ordered by when each statement holds, not by arrival: a memory
ingested late but dated before its successor is the one that expires.  A
memory already stored under its id keeps the judgement of its first write, so
ingesting again changes nothing; a supersession taken back with
``memory.unsupersede`` is not made again (the store refuses it).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from llama_index.core.schema import BaseNode
from pydantic import Field, SkipValidation

from llama_consciousness.entities import ENTITY_TYPES
from llama_consciousness.ingestion.report import IngestReport, ReportingTransform
from llama_consciousness.levels import home_key
from llama_consciousness.nodes import is_relationship, text_node_to_memory
from llama_consciousness.schema import MemoryNode
from llama_consciousness.scoring.updates import (
    CONFIRM_AT, DATE_PATTERN, Fact, Statement, UpdateJudgement, extract_facts, judge_update, order_pair, speaker_of,
    about_words, clauses_of, ended_names, statement_of, states_something,
)
from llama_consciousness.storage.reader import MemoryReader

log = logging.getLogger(__name__)

UPDATES_KEY = "lc_updates"
STORED_KEY = "lc_stored"  # set by the near-duplicate filter: whether the memory is stored already
_DATE_VALUE = re.compile(DATE_PATTERN, re.IGNORECASE)
QUARANTINE_KEY = "lc_quarantine"  # the writer's (``writer.QUARANTINE_KEY``), which imports this module


@dataclass(frozen=True)
class UpdateDecision:
    """A judged pair for the writer: ``new_id`` replaces (``confirmed``) or may replace ``old_id``."""

    old_id: str
    new_id: str
    reason: str
    source: str
    confidence: float
    confirmed: bool
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UpdateDecision:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def decisions_of(node: BaseNode) -> list[UpdateDecision]:
    return [UpdateDecision.from_json(d) for d in node.metadata.get(UPDATES_KEY) or ()]


@dataclass
class _New:
    memory: MemoryNode
    statement: Statement
    facts: list[Fact]
    stored: bool | None = None  # stored already, when the near-duplicate filter asked


@dataclass(frozen=True)
class _Stored:
    """A stored memory as the judge reads it (``scoring.updates.statement_of``)."""

    node_id: str
    name: str | None
    description: str | None
    extra: dict[str, Any]
    valid_at: Any
    created_at: Any


UPDATE_MAX_CHARS = 600
"""The longest statement the offline judge reads.  Its patterns are of chat facts ("I live in Berlin now"); in
the long messages of real assistant conversations (code, plans, explanations: BEAM 500K's tune half) they
marked a fifth of all messages and found 2 of 33 real updates, for about 3x the ingestion time; up to 600
characters they mark 0.3% of them at no measurable cost.  Longer memories are left to read time
(``scoring.recency``) and to an LLM judge."""


def _screened(node: BaseNode, every_statement: bool = False, max_chars: int | None = UPDATE_MAX_CHARS) -> bool:
    """Whether a memory states something the update judge compares (``scoring.updates.states_something``;
    with ``every_statement``, any memory: an LLM judge reads what the offline one cannot); entities,
    versions placed by ids, quarantined memories and texts flagged as possible prompt injections never do
    (a flagged text must not retire what the citizen believes)."""
    meta = node.metadata
    if meta.get(QUARANTINE_KEY) or meta.get("is_entity") or meta.get("node_type") in ENTITY_TYPES \
            or meta.get("supersedes") or meta.get("injection_suspected") or meta.get("quarantined"):
        return False
    if every_statement:
        return True
    text = node.get_content(metadata_mode="none") or str(meta.get("name") or "")
    if max_chars is not None and len(text) > max_chars:
        return False
    speaker, body = speaker_of(text, meta.get("extra") if isinstance(meta.get("extra"), dict) else None)
    return states_something(body, speaker)


class KnowledgeUpdateDetector(ReportingTransform):
    """Find the earlier memories that new memories update, and judge each pair (see the module doc)."""

    memory: SkipValidation[MemoryReader] = Field(exclude=True, description="the ConsciousnessMemory to compare against")
    candidates: int = Field(default=8, ge=1, le=100, description="earlier memories per new memory, by keyword")
    llm_judge: Any = Field(default=None, exclude=True, description=(
        "an LLMUpdateJudge: confirms or rejects each pair the offline judge finds, and gives its type"))
    llm_near_pairs: int = Field(default=2, ge=0, le=10, description=(
        "with an LLM judge: per new memory the offline judge pairs with nothing, how many of its closest "
        "earlier memories of the same speaker (by keyword) the LLM judge is also asked about; 0: only the "
        "pairs the offline judge finds"))
    max_chars: int | None = Field(default=UPDATE_MAX_CHARS, ge=1, description=(
        "the longest memory the offline judge reads, new or stored (None: any); an LLM judge that also reads "
        "near pairs (llm_near_pairs > 0) reads every length"))
    memo: Any = Field(default=None, exclude=True, description=(
        "the run's DuplicateMemo: the statements of its earlier chunks, per graph, by what they are about; in "
        "a level empty when the run reached it (a bulk load) they are the only candidates, and no index is read"))

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[BaseNode]:
        self._report = IngestReport()
        by_id: dict[str, BaseNode] = {}
        memories: list[MemoryNode] = []
        for node in nodes:
            if is_relationship(node):
                continue
            if not _screened(node, self._asks_llm, self.max_chars):
                continue  # most memories state nothing the judge compares: no model, no query
            try:
                memory = text_node_to_memory(node, embedding=False)  # the judge reads words
            except Exception:  # noqa: BLE001 - the writer reports an invalid record; nothing to judge here
                continue
            by_id[memory.node_id] = node
            memories.append(memory)
        stored = {node_id: node.metadata.get(STORED_KEY) for node_id, node in by_id.items()}
        for decision in self.detect(memories, self._report, checked=True, stored=stored):
            holder = by_id.get(decision.new_id) or by_id.get(decision.old_id)
            if holder is not None:
                holder.metadata.setdefault(UPDATES_KEY, []).append(decision.to_json())
        return list(nodes)

    def detect(self, memories: Sequence[MemoryNode], report: IngestReport | None = None,
               checked: bool = False, stored: dict[str, bool | None] | None = None) -> list[UpdateDecision]:
        """The updates among ``memories`` and the current memories of their graphs
        (``checked``: the memories are known to state something; ``stored``: whether each is stored already,
        when the near-duplicate filter read it)."""
        report = report if report is not None else IngestReport()
        stored = stored or {}
        groups: dict[tuple[str, str | None], list[_New]] = {}
        for memory in memories:
            if memory.is_entity or memory.quarantined or memory.injection_suspected or memory.supersedes:
                # a text flagged as a possible injection must not retire what the citizen believes
                continue
            statement = statement_of(memory)
            if self._too_long(statement.text):
                continue  # the offline judge reads chat facts, not long messages (UPDATE_MAX_CHARS)
            facts = extract_facts(statement.text, statement.speaker)
            if checked or facts or self._asks_llm or states_something(statement.text, statement.speaker):
                groups.setdefault(home_key(memory.level, memory.citizen_id), []).append(
                    _New(memory, statement, facts, stored.get(memory.node_id)))
        out: list[UpdateDecision] = []
        for (level, citizen), group in groups.items():
            out += self._detect(level, citizen, group, report)
        report.updates += sum(1 for d in out if d.confirmed)
        report.possible_updates += sum(1 for d in out if not d.confirmed)
        return out

    def _too_long(self, text: str) -> bool:
        """Whether ``text`` is longer than the offline judge reads (an LLM judge that reads near pairs reads
        every length)."""
        return not self._asks_llm and self.max_chars is not None and len(text) > self.max_chars

    @property
    def _asks_llm(self) -> bool:
        """Whether an LLM judge also reads the near pairs the offline judge passes over."""
        return self.llm_judge is not None and self.llm_near_pairs > 0

    # -- one graph ------------------------------------------------------------

    def _detect(self, level: str, citizen: str | None, group: list[_New], report: IngestReport
                ) -> list[UpdateDecision]:
        store = self.memory.level(level, citizen)
        run = self.memo.judged((level, citizen), store) if self.memo is not None else None
        recent: dict[str, list[Statement]] = run.update_keys if run is not None else {}
        bulk = run is not None and run.empty_at_start
        # the graph's own current memories like them, through its indexes (and which of them are stored)
        found: list[list[_Stored]] = []
        if bulk:
            stored_ids = {g.memory.node_id for g in group if g.stored}
        elif all(g.stored is not None for g in group):
            stored_ids = {g.memory.node_id for g in group if g.stored}
            unstored = [g for g in group if not g.stored]
            candidates = iter(self._stored_candidates(store, unstored)[0] if unstored else [])
            found = [[] if g.stored else next(candidates) for g in group]
        else:
            found, stored_ids = self._stored_candidates(store, group)
        fresh = [g for g in group if g.memory.node_id not in stored_ids]  # the rest: judged at their first write
        if not fresh:
            return []
        known: dict[str, Statement] = {g.memory.node_id: g.statement for g in group}
        pairs: set[tuple[str, str]] = set()
        near: dict[str, list[str]] = {}  # per new memory, the others it is compared with, closest first
        for g, candidates in zip(group, found):
            if g.memory.node_id in stored_ids:
                continue
            for candidate in candidates:
                if candidate.node_id != g.memory.node_id:
                    known.setdefault(candidate.node_id, statement_of(candidate))
                    pairs.add((g.memory.node_id, candidate.node_id))
                    near.setdefault(g.memory.node_id, []).append(candidate.node_id)
        # The run's earlier statements and the chunk's, about the same things (the latest few of each key).
        for g in group:
            for key in update_keys(g.statement, g.facts):
                bucket = recent.setdefault(key, [])
                if g.memory.node_id not in stored_ids:
                    for other in bucket[-BUCKET:]:
                        if other.node_id != g.memory.node_id:
                            known.setdefault(other.node_id, other)
                            pairs.add((g.memory.node_id, other.node_id))
                            near.setdefault(g.memory.node_id, []).append(other.node_id)
                if all(other.node_id != g.memory.node_id for other in bucket[-BUCKET:]):
                    bucket.append(g.statement)
                    del bucket[:-BUCKET]
        judgements: list[UpdateJudgement] = []
        for a, b in sorted(pairs):
            ordered = order_pair(known[a], known[b])
            older, newer = ordered if ordered is not None else (known[b], known[a])  # arrival decides ties
            judgement = judge_update(older, newer)
            if judgement.verdict != "none":
                judgements.append(judgement)
        if self._asks_llm:
            judgements += self._near_pairs(fresh, near, known, judgements)
        decisions = self._decide(judgements, known, report)
        expired = {d.old_id for d in decisions if d.confirmed}
        if expired and recent:  # a replaced statement is nobody's candidate any more
            for bucket in recent.values():
                bucket[:] = [st for st in bucket if st.node_id not in expired]
        return decisions

    def _near_pairs(self, fresh: list[_New], near: dict[str, list[str]], known: dict[str, Statement],
                    judgements: list[UpdateJudgement]) -> list[UpdateJudgement]:
        """For the LLM judge, the closest earlier memories of the same speaker of each new memory the offline
        judge paired with nothing: "Tom ran away" of "we have a cat, Tom" uses no word the offline judge
        reads.  Undecided until the LLM answers (a "not_update" leaves them as they are)."""
        judged = {node_id for j in judgements for node_id in (j.older, j.newer)}
        out: list[UpdateJudgement] = []
        for g in fresh:
            new = g.statement
            if new.node_id in judged:
                continue
            others = [known[o] for o in dict.fromkeys(near.get(new.node_id, ()))
                      if (known[o].speaker or None) == (new.speaker or None)]
            for other in others[:self.llm_near_pairs]:
                older, newer = order_pair(other, new) or (other, new)
                out.append(UpdateJudgement(older.node_id, newer.node_id, "possible", "reality_changed", 0.0,
                                           "a near pair the offline judge reads no change in"))
        return out

    def _stored_candidates(self, store: Any, fresh: list[_New]) -> tuple[list[list[_Stored]], set[str]]:
        """Per new memory, the current memories of the graph most like it by keyword (BM25 over its words
        and the words of what it is about), read in one query for the whole chunk, which also tells which of
        the new memories are stored already.  (Vector neighbours were tried beside them: they found no pair
        the keywords missed on the tune conversations, for one more query per call.)"""
        from llama_consciousness.storage import channels
        from llama_consciousness.storage.keyword_index import query_terms

        wanted: list[list[str]] = [[] for _ in fresh]
        indexes = getattr(self.memory, "keyword_indexes", None)
        if indexes is not None:
            index = indexes.get(store.plans.graph)
            store.run(channels.catch_up(index))
            for i, g in enumerate(fresh):
                # its words and the words of what it is about ("home" for "we moved to Berlin"), which the
                # index adds to every memory: "I live in Lyon" is found by "home"
                text = (" ".join(f.sentence for f in g.facts) or g.statement.text[:1000]) + " " + about_words(
                    g.statement.text, g.statement.speaker)
                # twice as many: some are expired, quarantined or entities, and are left out below
                wanted[i] += [node_id for node_id, _, _ in index.search(query_terms(text), 2 * self.candidates)]
        mine = {g.memory.node_id for g in fresh}
        ids = sorted({node_id for found in wanted for node_id in found} | mine)
        read = store.statements(ids)  # what the judge reads of them, not whole memories
        stored = {row[0] for row in read} & mine
        judged = {node_id: _Stored(node_id, name, description, extra, valid_at, created_at)
                  for node_id, name, description, extra, valid_at, created_at, current in read
                  if current and not self._too_long(description or name or "")}  # either side of a pair
        return [[judged[node_id] for node_id in dict.fromkeys(found) if node_id in judged] for found in wanted], \
            stored

    def _decide(self, judgements: list[UpdateJudgement], statements: dict[str, Statement], report: IngestReport
                ) -> list[UpdateDecision]:
        """One successor per older memory: the earliest that updates it (so A -> B -> C expires A by B and
        B by C), confirmed ones first; each pair confirmed or rejected by the LLM judge when there is one."""
        by_older: dict[str, list[UpdateJudgement]] = {}
        for j in judgements:
            by_older.setdefault(j.older, []).append(j)
        out: list[UpdateDecision] = []
        for older, found in by_older.items():
            found.sort(key=lambda j: (j.verdict != "update", _when(statements[j.newer]), j.newer))
            for j in found:
                decision = self._confirm(j, statements, report)
                if decision is not None:
                    out.append(decision)
                    break
        return out

    def _confirm(self, j: UpdateJudgement, statements: dict[str, Statement], report: IngestReport
                 ) -> UpdateDecision | None:
        if self.llm_judge is None:
            return UpdateDecision(j.older, j.newer, j.reason, "offline_judge", j.confidence,
                                  j.confidence >= CONFIRM_AT, j.why)
        try:
            verdict = self.llm_judge.judge(statements[j.older], statements[j.newer])
        except Exception as exc:  # noqa: BLE001 - a judge error never loses a memory: no decision, reported
            report.judge_errors += 1
            report.warn(j.newer, f"update judge failed on {j.older} -> {j.newer} ({type(exc).__name__}: "
                                       f"{exc}); stored without an update decision")
            return None
        if verdict.verdict == "not_update":
            return None
        confirmed = verdict.verdict == "update" and verdict.confidence >= CONFIRM_AT
        return UpdateDecision(j.older, j.newer, verdict.type, "llm_judge", verdict.confidence, confirmed,
                              verdict.why or j.why)


BUCKET = 4
"""Earlier statements a new one is compared with per key it shares with them (the latest ones)."""
NAME_KEY = "name|"


def update_keys(statement: Statement, facts: Sequence[Fact]) -> set[str]:
    """What a statement is about, for finding the earlier statements it may update without comparing it with
    every one: each fact's subject and attribute, each thing it names, each value it gives."""
    keys = {f"{f.subject}|{f.slot}" for f in facts}
    for clause in clauses_of(statement):
        keys.update(f"thing|{a}" for a in clause.anchors)
        # names only: a weekday or a state is shared by too many unrelated statements to find anything
        keys.update(f"value|{v}" for v in clause.values | clause.initial
                    if not v.startswith("state:") and not _DATE_VALUE.fullmatch(v))
        # and each word of those names, for the named rule ("the Golf" of "a VW Golf")
        keys.update(NAME_KEY + w for v in clause.values if not v.startswith("state:") and not _DATE_VALUE.fullmatch(v)
                    for w in v.split() if len(w) > 2)
    keys.update(NAME_KEY + w for w in ended_names(statement.text, statement.speaker) if len(w) > 2)
    return keys


def _when(s: Statement) -> tuple[Any, Any]:
    return (s.valid_at, s.created_at)

