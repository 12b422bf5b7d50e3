"""The memory as tools an agent calls when it decides to: a LlamaIndex ``BaseToolSpec``.

:class:`ConsciousnessMemoryBlock` recalls on every turn by itself; these tools let the agent choose when to
store something, look something up, see how a thing changed, take a memory back or put it back, and read or
set the citizen's state::

    from llama_index.core.agent.workflow import FunctionAgent

    tools = ConsciousnessToolSpec(memory, citizen_id="ada").to_tool_list()
    agent = FunctionAgent(tools=tools, llm=llm, system_prompt="You are Ada's assistant.")

Every tool answers in text an LLM reads: what was done, with the memory ids it can name in a later call,
and an ``Error: ...`` line that says what to do instead when a call cannot be done (bad arguments, a memory
that is not the citizen's, a server that does not answer in time): a tool never raises into the agent.

The citizen is fixed when the spec is made: no tool takes a citizen, so an agent can only read and write
that citizen's N1 (and read the shared levels it is given).  A spec keeps nothing of a call on itself, so
one spec serves many threads and event loops at once.  ``llama-consciousness mcp`` serves the same tools
over the Model Context Protocol (``llama_consciousness.mcp_server``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from datetime import datetime, timedelta
from typing import Any, Literal, Optional

from llama_index.core.tools.tool_spec.base import BaseToolSpec
from llama_index.core.tools.types import ToolMetadata
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from llama_consciousness.errors import ConsciousnessError, LevelError, StorageError
from llama_consciousness.memory_block import ENGAGED, MAX_MESSAGE_CHARS, MEMORY_CHARS
from llama_consciousness.render import render_stream
from llama_consciousness.schema import ForgetReason, MemoryNode, RetrievalIntention
from llama_consciousness.schema._time import parse_time, utcnow
from llama_consciousness.schema.common import CitizenId

log = logging.getLogger(__name__)

__all__ = ["ConsciousnessToolSpec", "TOOL_ARGS", "ToolCallError"]

QUERY_CHARS = 2_000
"""The longest question or topic a tool takes (a question, not a document)."""
NOTE_CHARS = 500
"""The longest rationale, note or reason text."""
ID_CHARS = 200
MAX_K = 50
MAX_SELECTED = 10
"""A forget or restore by words that matches more memories than this is refused: name them by id."""
MAX_VERSIONS = 20
"""what_changed follows a thing's versions this far."""
MAX_EMOTIONS = 20
NEUTRAL_ENERGY = 0.5
"""A citizen's first state, when update_state does not say its energy."""

MEMORY_KINDS = ("Memory", "Fact", "Preference", "Belief", "Decision", "Task", "Event", "Learning")
TEMPORAL_MODES = ("current", "point_in_time", "evolution", "full_history")
REASONS = tuple(r.value for r in ForgetReason)


class ToolCallError(ValueError):
    """A call the tool cannot do, in words the LLM can act on."""


# -- the arguments of each tool: one declaration for the LlamaIndex schema, the MCP schema and validation --


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class RememberArgs(_Args):
    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description=(
        "what to remember, as one self-contained statement that names who and what "
        "(\"Ada's dentist is Dr Okafor in Belleville\", not \"it's him now\")"))
    rationale: Optional[str] = Field(default=None, max_length=NOTE_CHARS, description=(
        "why this is worth remembering (kept with the memory)"))
    kind: Literal[MEMORY_KINDS] = Field(default="Memory", description=(  # type: ignore[valid-type]
        "what sort of memory: " + ", ".join(MEMORY_KINDS)))
    valid_from: Optional[str] = Field(default=None, max_length=40, description=(
        "when it became true, ISO date or time (2025-09-01); default: now"))


class RecallArgs(_Args):
    query: str = Field(min_length=1, max_length=QUERY_CHARS, description="what to look for, in words")
    mode: Literal[TEMPORAL_MODES] = Field(default="current", description=(  # type: ignore[valid-type]
        "current: what is believed now; point_in_time: what was believed at as_of; evolution: every "
        "version, replaced ones marked [past]; full_history: everything, forgotten memories too"))
    as_of: Optional[str] = Field(default=None, max_length=40, description=(
        "for point_in_time: the moment, ISO date or time (2025-09-01)"))
    k: int = Field(default=10, ge=1, le=MAX_K, description="at most this many memories per level")


class WhatChangedArgs(_Args):
    topic: str = Field(min_length=1, max_length=QUERY_CHARS, description=(
        "the thing whose history you want, in words (\"Ada's dentist\") or a memory id from recall"))


class ForgetArgs(_Args):
    memory_id: Optional[str] = Field(default=None, max_length=ID_CHARS, description=(
        "the id of the memory to forget (from recall); or give query instead"))
    query: Optional[str] = Field(default=None, max_length=QUERY_CHARS, description=(
        f"instead of an id: forget the memories whose text contains these exact words "
        f"(case-insensitive; refused when more than {MAX_SELECTED} match)"))
    reason: Literal[REASONS] = Field(default="user_requested", description=(  # type: ignore[valid-type]
        "why: " + ", ".join(REASONS)))
    note: Optional[str] = Field(default=None, max_length=NOTE_CHARS, description="a word on why (kept)")


class RestoreArgs(_Args):
    memory_id: Optional[str] = Field(default=None, max_length=ID_CHARS, description=(
        "the id of the forgotten memory (forget's answer gives it); or give query instead"))
    query: Optional[str] = Field(default=None, max_length=QUERY_CHARS, description=(
        "instead of an id: restore the forgotten memories whose text contains these exact words"))


class StateArgs(_Args):
    pass


class UpdateStateArgs(_Args):
    energy: Optional[float] = Field(default=None, ge=0.0, le=1.0, description="energy from 0 (drained) to 1")
    emotions: Optional[dict[str, float]] = Field(default=None, description=(
        "feelings and their intensity from 0 to 1, e.g. {\"curiosity\": 0.7}"))
    goal: Optional[str] = Field(default=None, max_length=NOTE_CHARS, description="the current goal; \"\" clears it")
    mindstate: Optional[str] = Field(default=None, max_length=200, description=(
        "a word for the state of mind (focused, tired, ...); \"\" clears it"))
    reason: Optional[str] = Field(default=None, max_length=NOTE_CHARS, description="why it changed (kept)")

    @field_validator("emotions")
    @classmethod
    def _check_emotions(cls, value: Optional[dict[str, float]]) -> Optional[dict[str, float]]:
        if value is None:
            return None
        if len(value) > MAX_EMOTIONS:
            raise ValueError(f"at most {MAX_EMOTIONS} emotions")
        for name, level in value.items():
            if not name.strip() or len(name) > 60:
                raise ValueError("emotion names must be 1-60 characters")
            if not 0.0 <= level <= 1.0:
                raise ValueError(f"emotion {name!r} must be between 0 and 1, not {level}")
        return value


TOOL_ARGS: dict[str, type[_Args]] = {
    "remember": RememberArgs, "recall": RecallArgs, "what_changed": WhatChangedArgs, "forget": ForgetArgs,
    "restore": RestoreArgs, "state": StateArgs, "update_state": UpdateStateArgs,
}
"""Each tool's arguments (names, types, limits, descriptions): the schema an LLM is shown."""

READ_ONLY = frozenset({"recall", "what_changed", "state"})


def _validation_text(exc: ValidationError) -> str:
    """What was wrong with the arguments, without echoing them (a huge or private value stays out)."""
    parts = []
    for err in exc.errors()[:6]:
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "invalid arguments: " + "; ".join(parts)


def _clip(text: str, n: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _when(text: str | None, what: str) -> datetime | None:
    if text is None or not text.strip():
        return None
    at = parse_time(text.strip().replace("Z", "+00:00"))
    if at is None:
        raise ToolCallError(f"{what} {text!r} is not an ISO date or time: write it as 2025-09-01 or "
                            "2025-09-01T14:30:00Z")
    return at


class ConsciousnessToolSpec(BaseToolSpec):
    """The memory of one citizen as LlamaIndex tools: ``remember``, ``recall``, ``what_changed``, ``forget``,
    ``restore``, ``state`` and ``update_state`` (``to_tool_list()`` for ``FunctionAgent`` / ``ReActAgent``).

    ``memory``: the :class:`~llama_consciousness.ConsciousnessMemory`.  ``citizen_id``: whose memory; fixed,
    no tool takes another.  ``levels``: what ``recall`` and ``what_changed`` search (the citizen's N1 by
    default; add ``"N2"``, ``"N3"`` for what is shared, read-only here).  ``token_budget``: the most tokens a
    recall answers with.  ``by``: who the forgets and restores are recorded as made by.  ``ingest_options``:
    more ``IngestOptions`` for ``remember`` (the default ingestion: validation, PII scrubbing, injection
    guard, entities, near-duplicates, knowledge updates).  ``timeout_s``: how long an async call (what
    agents use) waits for the memory before answering with an error.
    """

    spec_functions = [("remember", "aremember"), ("recall", "arecall"), ("what_changed", "awhat_changed"),
                      ("forget", "aforget"), ("restore", "arestore"), ("state", "astate"),
                      ("update_state", "aupdate_state")]

    def __init__(self, memory: Any, citizen_id: str, *, levels: Any = ("N1",), token_budget: int = 1500,
                 memory_chars: int | None = MEMORY_CHARS, by: str = "agent",
                 ingest_options: dict[str, Any] | None = None, timeout_s: float = 60.0) -> None:
        from llama_consciousness.ingestion.steps import IngestOptions

        self.memory = memory
        self.citizen_id = TypeAdapter(CitizenId).validate_python(citizen_id)
        self.levels = tuple(dict.fromkeys(levels))
        if not self.levels or any(level not in ("N1", "N2", "N3") for level in self.levels):
            raise ValueError(f"levels must be some of 'N1', 'N2', 'N3', not {levels!r}")
        if not 50 <= int(token_budget) <= 200_000:
            raise ValueError(f"token_budget must be between 50 and 200,000, not {token_budget}")
        self.token_budget = int(token_budget)
        self.memory_chars = memory_chars
        if not isinstance(by, str) or not by.strip():
            raise ValueError("by must say who acts (a non-empty string)")
        self.by = by.strip()
        self.ingest_options = dict(ingest_options or {})
        try:  # a misspelt option fails now, not at the first remember
            IngestOptions(**{**self.ingest_options, "on_invalid": "drop"})
        except TypeError as exc:
            raise ValueError(f"ingest_options: {exc}") from None
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, not {timeout_s}")
        self.timeout_s = float(timeout_s)

    # -- the tools (sync) ----------------------------------------------------------------------------------

    def remember(self, text: str, rationale: Optional[str] = None, kind: str = "Memory",
                 valid_from: Optional[str] = None) -> str:
        """Store something worth remembering about the user or the work, for later conversations.

        Write one self-contained statement that names who and what. A statement that changes an earlier
        one (a new address, a new dentist) replaces it: the old one is kept as past. Personal data such as
        emails and phone numbers is redacted; text that tries to instruct the model is flagged. Answers
        with the memory id.
        """
        return self.call("remember", text=text, rationale=rationale, kind=kind, valid_from=valid_from)

    def recall(self, query: str, mode: str = "current", as_of: Optional[str] = None, k: int = 10) -> str:
        """Look up what is remembered about something, most relevant first, each memory with its id.

        mode current gives what is believed now; evolution also gives replaced versions marked [past];
        point_in_time with as_of gives what was believed then; full_history includes forgotten memories.
        """
        return self.call("recall", query=query, mode=mode, as_of=as_of, k=k)

    def what_changed(self, topic: str) -> str:
        """How a thing changed over time: its versions in order, which one is current, why each older one was
        replaced (reality changed, or it was wrong), and which were forgotten."""
        return self.call("what_changed", topic=topic)

    def forget(self, memory_id: Optional[str] = None, query: Optional[str] = None,
               reason: str = "user_requested", note: Optional[str] = None) -> str:
        """Stop remembering a memory from now on, e.g. when the user asks or it was wrong. Give the memory_id
        from recall (or query: exact words its text contains) and a reason. It can be restored within 30
        days; to correct a fact, prefer remember with the new statement."""
        return self.call("forget", memory_id=memory_id, query=query, reason=reason, note=note)

    def restore(self, memory_id: Optional[str] = None, query: Optional[str] = None) -> str:
        """Remember a forgotten memory again, exactly as it was (within 30 days of the forget). Give its
        memory_id, or query: exact words its text contains."""
        return self.call("restore", memory_id=memory_id, query=query)

    def state(self) -> str:
        """The citizen's current state: energy, feelings, goal and state of mind, and since when."""
        return self.call("state")

    def update_state(self, energy: Optional[float] = None, emotions: Optional[dict[str, float]] = None,
                     goal: Optional[str] = None, mindstate: Optional[str] = None,
                     reason: Optional[str] = None) -> str:
        """Record a change in the citizen's state (a new version; the old one is kept). Give only what
        changed: the rest carries over. An empty goal or mindstate clears it."""
        return self.call("update_state", energy=energy, emotions=emotions, goal=goal, mindstate=mindstate,
                         reason=reason)

    # -- the tools (async: off the event loop, bounded by timeout_s) ------------------------------------------

    async def aremember(self, text: str, rationale: Optional[str] = None, kind: str = "Memory",
                        valid_from: Optional[str] = None) -> str:
        """The ``remember`` tool, awaited: ``acall("remember", ...)``."""
        return await self.acall("remember", text=text, rationale=rationale, kind=kind, valid_from=valid_from)

    async def arecall(self, query: str, mode: str = "current", as_of: Optional[str] = None, k: int = 10) -> str:
        """The ``recall`` tool, awaited: ``acall("recall", ...)``."""
        return await self.acall("recall", query=query, mode=mode, as_of=as_of, k=k)

    async def awhat_changed(self, topic: str) -> str:
        """The ``what_changed`` tool, awaited: ``acall("what_changed", ...)``."""
        return await self.acall("what_changed", topic=topic)

    async def aforget(self, memory_id: Optional[str] = None, query: Optional[str] = None,
                      reason: str = "user_requested", note: Optional[str] = None) -> str:
        """The ``forget`` tool, awaited: ``acall("forget", ...)``."""
        return await self.acall("forget", memory_id=memory_id, query=query, reason=reason, note=note)

    async def arestore(self, memory_id: Optional[str] = None, query: Optional[str] = None) -> str:
        """The ``restore`` tool, awaited: ``acall("restore", ...)``."""
        return await self.acall("restore", memory_id=memory_id, query=query)

    async def astate(self) -> str:
        """The ``state`` tool, awaited: ``acall("state")``."""
        return await self.acall("state")

    async def aupdate_state(self, energy: Optional[float] = None, emotions: Optional[dict[str, float]] = None,
                            goal: Optional[str] = None, mindstate: Optional[str] = None,
                            reason: Optional[str] = None) -> str:
        """The ``update_state`` tool, awaited: ``acall("update_state", ...)``."""
        return await self.acall("update_state", energy=energy, emotions=emotions, goal=goal, mindstate=mindstate,
                                reason=reason)

    # -- LlamaIndex metadata ---------------------------------------------------------------------------------

    def get_fn_schema_from_fn_name(self, fn_name: str, spec_functions: Any = None) -> type[BaseModel] | None:
        """The argument model of a tool (its async form shares it), or None for a name that is not a tool."""
        return TOOL_ARGS.get(fn_name.removeprefix("a") if fn_name not in TOOL_ARGS else fn_name)

    def get_metadata_from_fn_name(self, fn_name: str, spec_functions: Any = None) -> ToolMetadata | None:
        """The tool's name, its docstring as the description (no Python signature: the schema says it), and
        its argument model as the schema."""
        name = fn_name if fn_name in TOOL_ARGS else fn_name.removeprefix("a")
        if name not in TOOL_ARGS:
            return None
        return ToolMetadata(name=name, description=tool_description(name), fn_schema=TOOL_ARGS[name])

    # -- running a call ----------------------------------------------------------------------------------------

    def call(self, name: str, **arguments: Any) -> str:
        """Run tool ``name``: its answer, or ``Error: ...`` (never an exception)."""
        return self.execute(name, arguments)[1]

    async def acall(self, name: str, **arguments: Any) -> str:
        """``call`` in a worker thread, waited for at most ``timeout_s``."""
        return (await self.aexecute(name, arguments))[1]

    def execute(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        """``(True, answer)``, or ``(False, "Error: ...")`` for a call that could not be done."""
        try:
            args_model = TOOL_ARGS.get(name)
            if args_model is None:
                raise ToolCallError(f"no tool {name!r}; the tools are {', '.join(TOOL_ARGS)}")
            given = {k: v for k, v in (arguments or {}).items() if v is not None}
            args = args_model.model_validate(given)
            return True, getattr(self, f"_{name}")(args)
        except ValidationError as exc:
            return False, f"Error: {_validation_text(exc)}"
        except (ToolCallError, LevelError) as exc:
            return False, f"Error: {exc}"
        except (StorageError, ConnectionError, TimeoutError, OSError) as exc:
            log.warning("tool %s: the memory failed: %s", name, type(exc).__name__)
            return False, (f"Error: the memory is unavailable right now ({type(exc).__name__}); try again in a "
                           "moment")
        except (ValueError, ConsciousnessError) as exc:
            return False, f"Error: {_clip(str(exc), 400)}"
        except Exception as exc:  # noqa: BLE001 - an agent's tool answers, it does not crash the agent
            log.exception("tool %s failed", name)
            return False, f"Error: the tool failed ({type(exc).__name__}: {_clip(str(exc), 200)})"

    async def aexecute(self, name: str, arguments: dict[str, Any], timings: dict[str, float] | None = None
                       ) -> tuple[bool, str]:
        """``execute`` in a worker thread, waited for at most ``timeout_s``; ``timings["tool_ms"]`` is set to
        the time ``execute`` itself took there (what a direct call would have cost)."""

        def run() -> tuple[bool, str]:
            started = time.perf_counter()
            try:
                return self.execute(name, arguments)
            finally:
                if timings is not None:
                    timings["tool_ms"] = (time.perf_counter() - started) * 1000

        try:
            return await asyncio.wait_for(asyncio.to_thread(run), self.timeout_s)
        except asyncio.TimeoutError:
            log.warning("tool %s: no answer within %g s", name, self.timeout_s)
            what = "" if name in READ_ONLY else " (the change may still be made: check with recall)"
            return False, f"Error: the memory did not answer within {self.timeout_s:g} s{what}; try again later"

    # -- what each tool does --------------------------------------------------------------------------------

    def _store(self) -> Any:
        return self.memory.level("N1", self.citizen_id)

    def _remember(self, args: RememberArgs) -> str:
        valid_at = _when(args.valid_from, "valid_from")
        text = args.text
        key = "\x1f".join([self.citizen_id, " ".join(text.split()).lower(), valid_at.isoformat() if valid_at else ""])
        node_id = "mem_" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:20]
        existing = self.memory.get_node(node_id, "N1", self.citizen_id)
        if existing is not None and existing.expired_at is None:
            return f"Already remembered (memory id {node_id}): nothing changed."
        if existing is not None:  # said again after it was replaced or forgotten: a new memory of now
            node_id = "mem_" + hashlib.sha256(f"{key}\x1f{utcnow().isoformat()}".encode(
                "utf-8", "surrogatepass")).hexdigest()[:20]
        times = {"valid_at": valid_at} if valid_at else {}
        node = MemoryNode(
            node_id=node_id, level="N1", citizen_id=self.citizen_id, node_type=args.kind,
            name=text if len(text) <= 120 else text[:119] + "…", description=text, energy=0.5, confidence=0.8,
            goal="remember", mindstate="attentive", emotion_vector=dict(ENGAGED),
            formation_trigger=args.rationale or f"stored by {self.by} with the remember tool",
            extra={"source": "remember_tool", "by": self.by, **({"rationale": args.rationale} if args.rationale
                                                                   else {})}, **times)
        report = self.memory.ingest([node], **{**self.ingest_options, "on_invalid": "drop"})
        stored = self.memory.get_node(node_id, "N1", self.citizen_id)
        if stored is None:
            reasons = [r for rej in report.rejected if rej.item_id == node_id for r in rej.reasons]
            return "Not remembered: " + ("; ".join(reasons) or "the ingestion steps left it out (a near-duplicate "
                                                              "of a memory already there, or refused text)") + "."
        lines = [f"Remembered (memory id {node_id})."]
        if stored.description != text:
            lines.append("Personal data in it was redacted before storing: " + _clip(stored.description, 300))
        if stored.injection_suspected:
            lines.append("It reads like an instruction to the model: it is flagged, and recall shows it as "
                         "untrusted text.")
        if stored.quarantined:
            lines.append("It is quarantined: it will not be recalled.")
        for old in self._replaced_by(node_id):
            sure = "replaces" if old.superseded_by == node_id else "may replace"
            lines.append(f"It {sure} an earlier memory, now shown as past: \"{_clip(old.description)}\" "
                         f"(id {old.node_id}).")
        if report.duplicates:
            lines.append("It repeats something already remembered (linked as a duplicate).")
        return "\n".join(lines)

    def _replaced_by(self, node_id: str) -> list[MemoryNode]:
        """The memories that ``node_id`` superseded or may supersede (its outgoing SUPERSEDES links)."""
        from llama_consciousness.storage.level_store import NODE_LABEL, Query

        def plan() -> Any:
            rows = yield Query(f"MATCH (n:{NODE_LABEL}) WHERE n.superseded_by = $id OR n.possibly_superseded_by = "
                               "$id RETURN n.node_id LIMIT 10", {"id": node_id}, read_only=True)
            return [row[0] for row in rows]

        ids = self._store().run(plan())
        return self.memory.get_nodes(ids, "N1", self.citizen_id) if ids else []

    def _intention(self, query: str, mode: str, as_of: datetime | None, k: int) -> RetrievalIntention:
        return RetrievalIntention(query_text=query, citizen_id=self.citizen_id, query_levels=list(self.levels),
                                  temporal_mode=mode, as_of_time=as_of, max_results_per_level=k,
                                  generated_by="ConsciousnessToolSpec")

    def _stream(self, intention: RetrievalIntention) -> Any:
        from llama_consciousness.postprocessors.pipeline import text_postprocessors

        return self.memory.retrieve_stream(intention, postprocessors=text_postprocessors(self.memory))

    def _recall(self, args: RecallArgs) -> str:
        as_of = _when(args.as_of, "as_of")
        mode = args.mode
        if mode == "point_in_time" and as_of is None:
            raise ToolCallError("mode point_in_time needs as_of (the moment, e.g. 2025-09-01)")
        if as_of is not None and mode == "current":
            mode = "point_in_time"  # a moment was asked for
        if as_of is not None and mode != "point_in_time":
            raise ToolCallError(f"as_of goes with mode point_in_time, not {mode}")
        stream = self._stream(self._intention(args.query, mode, as_of, args.k))
        when = f" as believed at {as_of:%Y-%m-%d %H:%M} UTC" if as_of else ""
        head = f"Memories of {self.citizen_id} for {_clip(args.query, 80)!r} ({mode}{when}); ids in the first brackets:"
        if not stream.consciousness_summary.total_results:
            return f"Nothing remembered about {_clip(args.query, 80)!r} ({mode}{when})."
        rendered = render_stream(_with_ids(stream), self.token_budget, current_first=True, shared_once=True,
                                 question=args.query, memory_chars=self.memory_chars)
        more = f"\n({len(rendered.left_out)} more left out of the token budget)" if rendered.left_out else ""
        return f"{head}\n{rendered.text}{more}"

    def _what_changed(self, args: WhatChangedArgs) -> str:
        from llama_consciousness.scoring.dissonance import detect_temporal_dissonances

        seeds: list[tuple[str, str | None]] = []  # (level, node id) of the things asked about
        if len(args.topic) <= ID_CHARS and " " not in args.topic:
            for level in self.levels:
                if self.memory.get_node(args.topic, level, self._citizen_of(level)) is not None:
                    seeds.append((level, args.topic))
                    break
        stream = None
        if not seeds:
            stream = self._stream(self._intention(args.topic, "full_history", None, 10))
            ranked = [n for tier in ("focus", "peripheral", "background")
                      for n in stream.activation_tiers.get(tier, [])] or [
                n for results in stream.levels.values() for n in results.vector_results + results.keyword_results]
            successors = {x for n in ranked for x in (n.superseded_by, n.possibly_superseded_by) if x}
            for n in ranked:
                changed = (n.expired_at is not None or n.superseded_by or n.possibly_superseded_by
                           or n.possibly_outdated_by or n.forgotten_at is not None or n.node_id in successors)
                if changed and (n.level, n.node_id) not in seeds:
                    seeds.append((n.level or "N1", n.node_id))
            if not seeds:
                current = [n for n in ranked if n.expired_at is None][:3]
                if not current:
                    return f"Nothing remembered about {_clip(args.topic, 80)!r}."
                return (f"No change recorded about {_clip(args.topic, 80)!r}: each memory found has one version.\n"
                        + "\n".join(f"- {_clip(n.description or n.name)} (id {n.node_id}, since "
                                    f"{n.valid_at:%Y-%m-%d})" for n in current))
        out: list[str] = [f"What changed about {_clip(args.topic, 80)!r}:"]
        seen: set[str] = set()
        for level, seed in seeds:
            if seed in seen or len(out) > 60:
                continue
            versions, why = self._versions(level, seed)
            seen.update(v.node_id for v in versions)
            out.append("")
            out.append(f"{_clip(versions[-1].name, 80)} ({level}, {len(versions)} version"
                       f"{'s' if len(versions) != 1 else ''}, oldest first):")
            for v in versions:
                out.append(f"- {v.valid_at:%Y-%m-%d} {_version_mark(v, why.get(v.node_id))} "
                           f"\"{_clip(v.description or v.name, 200)}\" (id {v.node_id})")
            for d in detect_temporal_dissonances(versions, "full_history"):
                kind = "reality changed" if d.dissonance_type == "reality_changed" else "the old belief was wrong"
                out.append(f"  learning moment ({kind}, {d.corrected_at:%Y-%m-%d}): was "
                           f"\"{_clip(d.original_belief, 100)}\", now \"{_clip(d.corrected_belief, 100)}\"")
            if len(seen) >= MAX_VERSIONS * 3:
                break
        return "\n".join(out)

    def _citizen_of(self, level: str) -> str | None:
        return self.citizen_id if level == "N1" else None

    def _versions(self, level: str, seed: str) -> tuple[list[MemoryNode], dict[str, Any]]:
        """Every version linked to ``seed`` (the chains of memory_history, and SUPERSEDES links either way),
        oldest first, with why each was superseded."""
        from llama_consciousness.inspection import memory_history

        citizen = self._citizen_of(level)
        found: dict[str, MemoryNode] = {}
        why: dict[str, Any] = {}
        frontier = [seed]
        visited: set[str] = set()
        while frontier and len(visited) < MAX_VERSIONS:
            node_id = frontier.pop(0)
            if node_id in visited:
                continue
            visited.add(node_id)
            try:
                history = memory_history(self.memory, node_id, level, citizen, max_links=50)
            except LookupError:
                continue
            for v in history["versions"]:
                why.setdefault(v["node_id"], v.get("why_superseded"))
                if v["node_id"] not in visited and v["node_id"] not in frontier:
                    frontier.append(v["node_id"])
            for link in history["links"]:
                if link["relation_type"] in ("SUPERSEDES", "POSSIBLY_SUPERSEDES") and link["other_id"] not in visited:
                    frontier.append(link["other_id"])
        for node in self.memory.get_nodes(sorted(visited), level, citizen):
            found[node.node_id] = node
        versions = sorted(found.values(), key=lambda n: (n.valid_at, n.created_at, -_later_versions(n, found),
                                                         n.node_id))
        return versions[-MAX_VERSIONS:], why

    def _select(self, query: str, forgotten: bool) -> list[str]:
        from llama_consciousness.forgetting import MemorySelector

        # times are kept to the second: "forgotten before tomorrow" takes in what was forgotten this second too
        selector = MemorySelector(contains=query, forgotten_before=utcnow() + timedelta(days=1) if forgotten else None)
        try:
            return self._store().run(selector.plan(limit=MAX_SELECTED))
        except ValueError as exc:
            if "matches more than" not in str(exc):
                raise
            raise ToolCallError(f"more than {MAX_SELECTED} memories contain {_clip(query, 80)!r}: name the one you "
                                "mean by its memory_id (recall shows ids) or use more of its words") from None

    @staticmethod
    def _one_of(args: Any) -> None:
        if (args.memory_id is None) == (args.query is None):
            raise ToolCallError("give memory_id (from recall) or query (words the memory contains), one of them")

    def _described(self, ids: list[str]) -> dict[str, str]:
        nodes = self.memory.get_nodes(ids, "N1", self.citizen_id)
        return {n.node_id: _clip(n.description or n.name, 120) for n in nodes}

    def _targets(self, args: ForgetArgs | RestoreArgs, forgotten: bool) -> list[str]:
        """The memories a forget or restore names: its ``memory_id``, or those its ``query`` selects among the
        forgotten ones (restore) or the others (forget); empty when the query selects none."""
        self._one_of(args)
        return [args.memory_id] if args.memory_id is not None else self._select(args.query, forgotten=forgotten)

    def _forget(self, args: ForgetArgs) -> str:
        ids = self._targets(args, forgotten=False)
        if not ids:
            return (f"No memory contains {_clip(args.query, 80)!r} (forgotten ones aside): nothing forgotten. Use "
                    "recall to find it, then forget it by memory_id.")
        report = self.memory.forget(ids, "N1", self.citizen_id, reason=args.reason, by=self.by, note=args.note)
        if report.missing and len(report.missing) == len(ids):  # only in this citizen's N1: nothing else is looked at
            raise ToolCallError(_not_mine(report.missing, self.citizen_id, "nothing forgotten"))
        text = self._described(report.forgotten + report.already_forgotten)
        lines = []
        if report.forgotten:
            lines.append(f"Forgotten ({args.reason.replace('_', ' ')}); it no longer comes up in recall:")
            lines += [f"- {i}: \"{text.get(i, '')}\"" for i in report.forgotten]
            lines.append(f"Undo within {self.memory.restore_window.days} days with restore(memory_id=...).")
        if report.already_forgotten:
            lines.append("Already forgotten: " + ", ".join(report.already_forgotten) + ".")
        if report.missing:
            lines.append(_not_mine(report.missing, self.citizen_id, "nothing forgotten"))
        return "\n".join(lines)

    def _restore(self, args: RestoreArgs) -> str:
        ids = self._targets(args, forgotten=True)
        if not ids:
            return f"No forgotten memory contains {_clip(args.query, 80)!r}: nothing restored."
        report = self.memory.restore(ids, "N1", self.citizen_id, by=self.by)
        if report.missing and len(report.missing) == len(ids):
            raise ToolCallError(_not_mine(report.missing, self.citizen_id, "nothing restored"))
        text = self._described(report.restored)
        lines = []
        if report.restored:
            lines.append("Restored, remembered again as before:")
            lines += [f"- {i}: \"{text.get(i, '')}\"" for i in report.restored]
        if report.not_forgotten:
            lines.append("Not forgotten, nothing to restore: " + ", ".join(report.not_forgotten) + ".")
        if report.too_late:
            lines.append("Forgotten too long ago to restore: " + ", ".join(report.too_late) + ".")
        if report.missing:
            lines.append(_not_mine(report.missing, self.citizen_id, "nothing restored"))
        return "\n".join(lines)

    def _state(self, args: StateArgs) -> str:
        state = self.memory.citizen_state(self.citizen_id)
        if state is None:
            return f"No state recorded for {self.citizen_id} yet (update_state records one)."
        return f"State of {self.citizen_id}: {_state_text(state)}"

    def _update_state(self, args: UpdateStateArgs) -> str:
        from llama_consciousness import living

        given = args.model_dump(exclude_none=True)
        if not set(given) - {"reason"}:
            raise ToolCallError("give at least one of energy, emotions, goal, mindstate")
        before = self.memory.citizen_state(self.citizen_id)
        energy = args.energy
        if energy is None and before is None:  # a first state needs an energy: a neutral one, said below
            energy = NEUTRAL_ENERGY
        state = self.memory.update_citizen_state(
            self.citizen_id,
            energy=living.UNSET if energy is None else energy,
            emotion_vector=living.UNSET if args.emotions is None else args.emotions,
            goal=living.UNSET if args.goal is None else (args.goal or None),
            mindstate=living.UNSET if args.mindstate is None else (args.mindstate or None),
            reason=args.reason)
        started = "" if args.energy is not None else f"; energy {NEUTRAL_ENERGY} to start"
        was = f"\nBefore: {_state_text(before)}" if before is not None else f"\n(The first state recorded{started}.)"
        return f"State of {self.citizen_id} updated: {_state_text(state)}{was}"


def tool_description(name: str) -> str:
    """A tool's description: the docstring of its method, as one paragraph per blank line."""
    doc = getattr(ConsciousnessToolSpec, name).__doc__ or ""
    paragraphs = [" ".join(p.split()) for p in doc.strip().split("\n\n")]
    return "\n".join(p for p in paragraphs if p)


def _not_mine(ids: list[str], citizen: str, what: str) -> str:
    return (f"Not in {citizen}'s memory: {', '.join(_clip(i, 60) for i in ids)}; {what}. Ids come from recall "
            "(shared memories of N2 and N3 cannot be changed here).")


def _later_versions(node: MemoryNode, found: dict[str, MemoryNode]) -> int:
    """How many of ``found`` replaced ``node`` one after the other: versions of one second keep their order."""
    count, seen = 0, {node.node_id}
    while True:
        later = node.superseded_by or node.possibly_superseded_by
        if later is None or later in seen or later not in found:
            return count
        seen.add(later)
        node = found[later]
        count += 1


def _version_mark(v: MemoryNode, why: dict[str, Any] | None) -> str:
    if v.forgotten_at is not None:
        reason = v.forgotten_reason.value.replace("_", " ") if v.forgotten_reason else "no reason"
        return f"[forgotten {v.forgotten_at:%Y-%m-%d}: {reason}]"
    if v.expired_at is not None:
        cause = {"reality_changed": "reality changed", "discovered_false": "it was wrong"}.get(
            v.invalidation_reason or "", "replaced")
        source = (why or {}).get("source") or v.supersession_source
        return f"[past, until {v.expired_at:%Y-%m-%d}: {cause}" + (f", by {source}]" if source else "]")
    if v.possibly_superseded_by:
        return f"[possibly outdated by {v.possibly_superseded_by}]"
    return "[current]"


def _state_text(state: Any) -> str:
    feelings = ", ".join(f"{k} {v:.1f}" for k, v in sorted(state.emotion_vector.items(), key=lambda kv: -kv[1])[:5])
    parts = [f"energy {state.energy:.2f}", f"feels {feelings}" if feelings else "no feelings recorded",
             f"goal: {state.goal}" if state.goal else "no goal", f"mindstate: {state.mindstate}" if state.mindstate
             else "no mindstate", f"since {state.valid_at:%Y-%m-%d %H:%M} UTC"]
    return "; ".join(parts)


def _with_ids(stream: Any) -> Any:
    """The stream with each memory's id in its line's first brackets (``- [N1 Memory id=mem_...]``): the
    renderer counts it in the budget like the rest, and the agent can name the memory in forget or
    what_changed.  A copy: the stream itself is unchanged."""

    def label(nodes: list[Any]) -> list[Any]:
        return [n.model_copy(update={"node_type": f"{n.node_type} id={n.node_id}"}) for n in nodes]

    tiers = {tier: label(nodes) for tier, nodes in stream.activation_tiers.items()}
    levels = {key: results.model_copy(update={part: label(getattr(results, part)) for part in
                                              ("vector_results", "graph_results", "keyword_results")})
              for key, results in stream.levels.items()}
    return stream.model_copy(update={"activation_tiers": tiers, "levels": levels})
