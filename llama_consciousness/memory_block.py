"""Long-term memory for LlamaIndex agents and chat engines: a memory block over a :class:`ConsciousnessMemory`.

LlamaIndex gives an agent long-term memory through ``llama_index.core.memory.Memory`` and its memory
blocks: the messages that leave the short-term queue are handed to each block's ``aput``, and before each
turn every block's ``aget`` says what the agent should remember.  :class:`ConsciousnessMemoryBlock` is
that block for this package::

    from llama_index.core.memory import Memory

    block = ConsciousnessMemoryBlock(memory=memory, citizen_id="ada", token_budget=1000)
    chat_memory = Memory.from_defaults(session_id="ada-1", memory_blocks=[block])

``aput`` stores each chat message as an N1 memory of the citizen through the same ingestion steps as
``memory.ingest`` (validation, PII scrubbing, injection guard, entities, near-duplicates, knowledge
updates), with FOLLOWS links between consecutive turns; ``aget`` retrieves with the recent turns as the
question and returns the complete stream rendered for an LLM within the token budget, current memories
before replaced ones, flagged text marked as untrusted.

Why a message's id is a hash of what it is (citizen, session, role, time when given, text): the same
message put twice (a retried flush, a replayed history) is the same memory, written once.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, Optional

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from pydantic import Field, PrivateAttr, SkipValidation, field_validator, model_validator
from llama_index.core.memory.memory import BaseMemoryBlock

from llama_consciousness.render import render_stream, token_counter
from llama_consciousness.schema import (ConsciousnessRelationship, ForgetReason, ForgetReport, MemoryNode,
                                        RetrievalIntention)
from llama_consciousness.schema.common import LevelName

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 20_000
"""A longer message is refused: a pasted file or log is a document to ingest, not a turn to remember."""

QUESTION_CHARS = 2_000
"""The recent turns make the question up to this many characters (the latest first; a longer one is cut
to its end, the words nearest to now)."""

RECALL_DEPTH = (10, 20)
"""The results per level a recall the block sizes itself asks for: at least, and at most (``recall_depth``)."""

DEPTH_MARGIN = 1.5
"""How many times the memories its token budget holds a sized recall asks for (chosen on BEAM 500K's and
LoCoMo's tune halves: ``benchmarks/RESULTS.md``, "What a memory block's text holds")."""


def recall_depth(token_budget: int, tokens_per_memory: float | None, margin: float = DEPTH_MARGIN,
                 bounds: tuple[int, int] = RECALL_DEPTH) -> int:
    """How many results per level a recall asks for, when the text it is rendered into holds ``token_budget``
    tokens and a recalled memory has taken ``tokens_per_memory`` of them (None: not known yet, the most).

    Why: a recall reads, checks and ranks every result it asks for, but only the first few reach the text
    when memories are long: a 1,000-token text holds four or five excerpts of long messages, and asking
    for about 10 results instead of 20 there cost a fifth less CPU with the evidence as often in the text.
    Short turns fill the same text with twenty, and are asked for as many as before."""
    low, high = bounds
    if not tokens_per_memory or tokens_per_memory <= 0:
        return high
    return max(low, min(high, math.ceil(margin * token_budget / tokens_per_memory)))


ENGAGED = {"engagement": 0.5}
"""What a turn of conversation is known to feel like without an emotion model: engaged, no more."""

_SPOKEN = {MessageRole.USER: "user", MessageRole.ASSISTANT: "assistant", MessageRole.CHATBOT: "assistant",
           MessageRole.MODEL: "assistant"}
_TOOL = {MessageRole.TOOL, MessageRole.FUNCTION}


@dataclass
class PutReport:
    """What one ``put_messages`` call did: the memories stored (ids, in message order), the messages
    refused (their position in the call and why), and the ingestion report."""

    stored: list[str] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)
    ingest: Any = None


MEMORY_CHARS = 1000
"""The longest memory the block gives whole (chosen on BEAM 500K's tune half, ``benchmarks/beam_quality.py``)."""


class ConsciousnessMemoryBlock(BaseMemoryBlock[str]):
    """A ``BaseMemoryBlock`` (``llama_index.core.memory``) that remembers a citizen's conversations in a
    :class:`ConsciousnessMemory` and recalls what matters for the current turn (see the module doc).

    Safe to share between conversations and event loops: nothing of a call is kept on the block but the
    last stored turn of each session (for the FOLLOWS link to the next one) and, with
    ``max_results_per_level=None``, how many tokens its recalled memories take (for how many to ask for
    next: ``recall_depth``), behind a lock.
    """

    name: str = Field(default="consciousness_memory", description="the block's name in the memory template")
    memory: SkipValidation[Any] = Field(exclude=True, description="the ConsciousnessMemory to store in and recall from")
    citizen_id: str = Field(description="whose memory: every message becomes an N1 memory of this citizen")
    levels: list[LevelName] = Field(default_factory=lambda: ["N1"], description=(
        "the levels recalled from: the citizen's own N1 by default (add N2, N3 for what is shared: their memories "
        "then compete with the citizen's own for the budget)"))
    temporal_mode: Literal["current", "evolution", "full_history"] = Field(
        default="evolution", description=(
            "evolution (default): replaced memories come back too, marked as past, after the current ones; "
            "current: only what is believed now"))
    config: SkipValidation[Any] = Field(default=None, exclude=True, description=(
        "a RetrievalConfig for the six-way retrieval (None: the package default)"))
    postprocessors: SkipValidation[Any] = Field(default="default", exclude=True, description=(
        "the stream postprocessors: 'default' (those whose results the text shows: quality, usage, ranking, "
        "tiers, dissonances; the traversal graph and constellation print nothing) or a list"))
    state_retriever: SkipValidation[Any] = Field(default=None, exclude=True, description=(
        "a StateBasedRetriever with a default_state: recall by the citizen's state, the recent turns as its goal"))
    token_budget: int = Field(default=1000, ge=50, le=200_000, description="tokens of the recalled text (tiktoken)")
    max_results_per_level: int | None = Field(default=None, ge=1, le=200, description=(
        "results per level a recall asks for; None (default): sized to what the token budget holds, from the "
        "tokens the memories it recalled took so far (``recall_depth``: 20 at first, 10 for long messages)"))
    memory_chars: int | None = Field(default=MEMORY_CHARS, ge=200, description=(
        "a recalled memory longer than this is given as an excerpt (its beginning and the passage that speaks "
        "of the question), so that one long message does not spend the budget of several (None: whole)"))
    shared_once: bool = Field(default=True, description=(
        "metadata all recalled memories share (chat turns: the same energy, goal, feelings) said once, not per "
        "line: more memories fit the budget"))
    query_turns: int = Field(default=3, ge=1, le=50, description="how many recent messages make the question")
    user_name: str = Field(default="user", min_length=1, max_length=80,
                           description="the speaker of user messages in the stored text ('Ada: ...')")
    assistant_name: str = Field(default="assistant", min_length=1, max_length=80)
    tool_messages: Literal["refuse", "store"] = Field(default="refuse", description=(
        "a tool's output is refused (the default: it is what a tool returned, not what was said) or stored"))
    max_message_chars: int = Field(default=MAX_MESSAGE_CHARS, ge=1)
    ingest_options: dict[str, Any] = Field(default_factory=dict, description=(
        "more IngestOptions for the messages' ingestion (on_invalid is always 'drop': one bad message never "
        "loses the rest of its batch)"))
    priority: int = Field(default=1, description="LlamaIndex's truncation priority (0: never truncated)")

    _last: OrderedDict = PrivateAttr(default_factory=OrderedDict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _memory_tokens: float | None = PrivateAttr(default=None)  # a recalled memory's tokens, running mean

    @field_validator("ingest_options")
    @classmethod
    def _check_options(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Checked now: a misspelt option found at the first put would lose that flush's messages."""
        from llama_consciousness.ingestion.steps import IngestOptions

        try:
            IngestOptions(**{**value, "on_invalid": "drop"})
        except TypeError as exc:  # an unknown option: said as pydantic's ValueError
            raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _check_state_retriever(self) -> ConsciousnessMemoryBlock:
        """A state retriever recalls by its default state: it must have one, and of this block's citizen."""
        retriever = self.state_retriever
        if retriever is not None:
            state = getattr(retriever, "default_state", None)
            if state is None:
                raise ValueError("state_retriever needs a default_state (the citizen's state to recall by)")
            if state.citizen_id != self.citizen_id:
                raise ValueError(f"state_retriever's default_state is {state.citizen_id!r}'s, not "
                                 f"{self.citizen_id!r}'s")
        return self

    @field_validator("citizen_id")
    @classmethod
    def _check_citizen(cls, value: str) -> str:
        from pydantic import TypeAdapter

        from llama_consciousness.schema.common import CitizenId

        return TypeAdapter(CitizenId).validate_python(value)

    # -- put ------------------------------------------------------------------

    async def _aput(self, messages: list[ChatMessage]) -> None:
        report = await self.aput_messages(messages)
        for index, reason in report.refused:
            log.warning("ConsciousnessMemoryBlock: message %d not stored: %s", index, reason)

    async def aput_messages(self, messages: Sequence[ChatMessage | dict], session_id: str | None = None
                            ) -> PutReport:
        """``put_messages`` off the event loop (ingestion writes to the store).  The messages are copied
        first: ``Memory`` hands the same objects to every block, and another block may change them meanwhile
        (``VectorMemoryBlock`` pops their ``session_id``)."""
        copies = [m.model_copy(deep=True) if isinstance(m, ChatMessage) else m for m in messages]
        return await asyncio.to_thread(self.put_messages, copies, session_id)

    def put_messages(self, messages: Sequence[ChatMessage | dict], session_id: str | None = None) -> PutReport:
        """Store ``messages`` (``ChatMessage`` or ``{"role": ..., "content": ...}``) as memories of the citizen,
        in order; a message that cannot be stored is refused with its reason, and the others are stored.

        The session is ``session_id``, else each message's ``additional_kwargs["session_id"]`` (set by
        ``Memory``), else "default"; its time is ``additional_kwargs["timestamp"]`` (a datetime, ISO text or
        seconds) when given, else now.
        """
        report = PutReport()
        records: list[Any] = []
        turns: list[tuple[str, str, datetime | None]] = []  # (node id, session, time)
        position: dict[str, int] = {}
        before: dict[str, str] = {}  # per session, the text of the message before (two "Noted." are two turns)
        for index, raw in enumerate(messages):
            try:
                node, session, when = self._memory_of(raw, session_id, before)
            except ValueError as exc:
                report.refused.append((index, str(exc)))
                continue
            if node.node_id in position:  # the very same message twice in one call: one memory
                continue
            position[node.node_id] = index
            records.append(node)
            turns.append((node.node_id, session, when))
        if not records:
            return report
        store = self.memory.level("N1", self.citizen_id)
        stored_before = store.existing_ids([t[0] for t in turns])
        records += self._follows(turns, stored_before)
        report.ingest = self.memory.ingest(records, **{**self.ingest_options, "on_invalid": "drop"})
        written = store.existing_ids([t[0] for t in turns])
        rejected = {r.item_id: r for r in report.ingest.rejected}
        for node_id, _, _ in turns:
            if node_id in written:
                report.stored.append(node_id)
            else:  # refused by a step (validation, the injection guard, the near-duplicate filter)
                why = "; ".join(rejected[node_id].reasons) if node_id in rejected else "not written by the ingestion " \
                    f"steps ({', '.join(f'{k}={v!r}' for k, v in self.ingest_options.items()) or 'defaults'})"
                report.refused.append((position[node_id], why))
        kept = [t for t in turns if t[0] in written]
        if len(kept) < len(turns):  # a turn went missing: link the ones around it to each other
            repair = [r for r in self._follows(kept, stored_before) if r.target_id in written]
            if repair:
                self.memory.ingest(repair, on_invalid="drop")
        with self._lock:  # the last stored turn of each session, for the link to the next one
            for node_id, session, _ in kept:
                self._last[session] = node_id
                self._last.move_to_end(session)
            while len(self._last) > 10_000:
                self._last.popitem(last=False)
        return report

    def _memory_of(self, raw: ChatMessage | dict, session_id: str | None, before: dict[str, str]
                   ) -> tuple[MemoryNode, str, datetime | None]:
        """One message as a memory (its session and time), or ValueError saying why it cannot be one."""
        if isinstance(raw, dict):
            try:
                raw = ChatMessage.model_validate(raw)
            except Exception as exc:  # noqa: BLE001 - said as the refusal's reason
                raise ValueError(f"not a chat message: {str(exc).splitlines()[0]}") from None
        if not isinstance(raw, ChatMessage):
            raise ValueError(f"not a chat message: {type(raw).__name__}")
        extra = raw.additional_kwargs or {}
        role = raw.role
        if role in _TOOL:
            if self.tool_messages == "refuse":
                raise ValueError(f"a {role.value} message (a tool's output, not something said); "
                                 "tool_messages='store' keeps them")
            speaker = str(extra.get("name") or extra.get("tool_name") or "tool")
        elif role in _SPOKEN:
            speaker = self.user_name if _SPOKEN[role] == "user" else self.assistant_name
        else:
            raise ValueError(f"a {role.value} message: instructions to the model, not a turn of the conversation")
        text = (raw.content or "").strip()
        if not text:
            what = "a tool call" if extra.get("tool_calls") or any(
                getattr(b, "block_type", "") == "tool_call" for b in raw.blocks) else "no text"
            raise ValueError(f"nothing to remember ({what})")
        if len(text) > self.max_message_chars:
            raise ValueError(f"{len(text):,} characters, more than max_message_chars ({self.max_message_chars:,}); "
                             "ingest a long document with memory.ingest instead")
        session = str(session_id or extra.get("session_id") or "default")
        when = _when(extra.get("timestamp", extra.get("created_at")))
        given = str(extra.get("id") or extra.get("message_id") or "")
        # without an id or a time, the message before it in the call tells two "Noted." apart
        previous = "" if given or when else before.get(session, "")
        before[session] = text
        key = "\x1f".join([self.citizen_id, session, role.value, when.isoformat() if when else "", given, previous,
                           text])
        node_id = "msg_" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        description = f"{speaker}: {text}"
        times = {"valid_at": when, "created_at": when} if when else {}
        node = MemoryNode(
            node_id=node_id, level="N1", citizen_id=self.citizen_id, node_type="Memory",
            name=description if len(description) <= 120 else description[:119] + "…", description=description,
            energy=0.5, confidence=0.8, goal="converse", mindstate="conversation", emotion_vector=dict(ENGAGED),
            formation_trigger=f"said by {speaker} in conversation {session}",
            extra={"speaker": speaker, "role": role.value, "session_id": session}, **times)
        return node, session, when

    def _follows(self, turns: list[tuple[str, str, datetime | None]], stored: set[str]
                 ) -> list[ConsciousnessRelationship]:
        """FOLLOWS from each new turn to the one before it in its session (the last stored one for the first);
        a turn stored already keeps the links it was given then (a message put again adds none)."""
        with self._lock:
            previous = {session: self._last.get(session) for _, session, _ in turns}
        out = []
        for node_id, session, when in turns:
            before = previous.get(session)
            if before and before != node_id and node_id not in stored:
                times = {"valid_at": when, "created_at": when} if when else {}
                out.append(ConsciousnessRelationship(
                    source_id=node_id, target_id=before, relation_type="FOLLOWS", goal="converse",
                    mindstate="conversation", energy=0.3, confidence=0.8, emotion_vector=dict(ENGAGED),
                    level="N1", citizen_id=self.citizen_id,
                    formation_trigger="next turn of the conversation", **times))
            previous[session] = node_id
        return out

    # -- forget ---------------------------------------------------------------

    def forget_message(self, message: ChatMessage | dict, reason: ForgetReason | str = ForgetReason.USER_REQUESTED,
                       *, by: str | None = None, note: str | None = None) -> ForgetReport:
        """Forget what ``message`` said: every memory of this citizen that stored its text as said by its
        speaker (in any session) stops being recalled from now (``memory.forget``: kept in the full history,
        restorable with ``memory.restore`` within its window).  ``ValueError`` for a message this block would
        not store (no text, a system prompt)."""
        node, _, _ = self._memory_of(message, None, {})
        return self.memory.forget(None, "N1", self.citizen_id, reason=reason, by=by, note=note,
                                  where={"description": node.description})

    async def aforget_message(self, message: ChatMessage | dict,
                              reason: ForgetReason | str = ForgetReason.USER_REQUESTED, *, by: str | None = None,
                              note: str | None = None) -> ForgetReport:
        """``forget_message`` off the event loop."""
        return await asyncio.to_thread(self.forget_message, message, reason, by=by, note=note)

    # -- get ------------------------------------------------------------------

    async def _aget(self, messages: Optional[list[ChatMessage]] = None, **block_kwargs: Any) -> str:
        question = self.question(messages or [])
        if not question:
            return ""
        if self.state_retriever is not None:
            stream = await self.state_retriever.aretrieve_stream(question)
        else:
            stream = await self.memory.aretrieve_stream(self.intention(question), config=self.config,
                                                        postprocessors=self._steps())
        return self.render(stream, question)

    def get_text(self, messages: Sequence[ChatMessage] | str) -> str:
        """``aget`` for synchronous code: what to remember for ``messages`` (or a question), as text."""
        question = messages if isinstance(messages, str) else self.question(messages)
        if not question.strip():
            return ""
        if self.state_retriever is not None:
            return self.render(self.state_retriever.retrieve_stream(question), question)
        return self.render(self.memory.retrieve_stream(self.intention(question), config=self.config,
                                                       postprocessors=self._steps()), question)

    def _steps(self) -> Any:
        if isinstance(self.postprocessors, str) and self.postprocessors == "default":
            from llama_consciousness.postprocessors.pipeline import text_postprocessors

            return text_postprocessors(self.memory)
        return self.postprocessors

    def question(self, messages: Sequence[ChatMessage]) -> str:
        """The recent turns that make the question: the last ``query_turns`` spoken messages, latest last,
        at most ``QUESTION_CHARS`` characters (older turns are cut first)."""
        texts: list[str] = []
        used = 0
        for message in reversed(messages):
            if message.role not in _SPOKEN:
                continue
            text = (message.content or "").strip()
            if not text:
                continue
            if used >= QUESTION_CHARS:
                break
            text = text[-(QUESTION_CHARS - used):] if used + len(text) > QUESTION_CHARS else text
            texts.append(text)
            used += len(text) + 1
            if len(texts) >= self.query_turns:
                break
        return "\n".join(reversed(texts))

    def intention(self, question: str) -> RetrievalIntention:
        """The ``RetrievalIntention`` the block recalls with for ``question``: its citizen, levels, temporal mode
        and results per level."""
        depth = self.max_results_per_level
        if depth is None:
            with self._lock:
                depth = recall_depth(self.token_budget, self._memory_tokens, DEPTH_MARGIN)
        return RetrievalIntention(query_text=question, citizen_id=self.citizen_id, query_levels=list(self.levels),
                                  temporal_mode=self.temporal_mode, max_results_per_level=depth,
                                  generated_by="ConsciousnessMemoryBlock")

    async def atruncate(self, content: str, tokens_to_truncate: int) -> Optional[str]:
        """Fewer tokens when ``Memory`` is over its limit: whole lines dropped from the end (the lowest tier
        and the replaced memories go first); None when nothing is left."""
        if not isinstance(content, str) or not content:
            return None  # Memory passes [] for a block that recalled nothing
        count = token_counter()
        lines = content.splitlines()
        saved = 0
        while lines and saved < tokens_to_truncate:
            saved += count(lines.pop() + "\n")
        if not any(line.startswith("- [") for line in lines):
            return None  # headings without a memory say nothing
        return "\n".join(lines)

    def render(self, stream: Any, question: str = "") -> str:
        """The stream as the block's text: within ``token_budget``, current memories before replaced ones, a
        long memory as the excerpt that speaks of ``question`` (``memory_chars``)."""
        if not stream.consciousness_summary.total_results:
            return ""
        rendered = render_stream(stream, self.token_budget, current_first=True, shared_once=self.shared_once,
                                 question=question, memory_chars=self.memory_chars)
        if rendered.included and self.max_results_per_level is None:
            took = rendered.tokens / len(rendered.included)  # headings shared out: a little over a line
            with self._lock:  # a running mean where the last renders weigh most: messages change length
                known = self._memory_tokens
                self._memory_tokens = took if known is None else 0.7 * known + 0.3 * took
        return rendered.text


def _when(value: Any) -> datetime | None:
    """A message's time from what callers put in ``additional_kwargs`` (UTC when naive)."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError("timestamp must be a datetime, ISO text or seconds, not a bool")
    if isinstance(value, (int, float)):
        try:
            return datetime.fromtimestamp(float(value), tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"timestamp {value!r} is not a time (seconds since 1970)") from None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"timestamp {value!r} is not ISO 8601 text") from None
    if not isinstance(value, datetime):
        raise ValueError(f"timestamp must be a datetime, ISO text or seconds, not {type(value).__name__}")
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
