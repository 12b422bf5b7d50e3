"""The ingestion options and the steps that read nothing but their records: they may run in the
worker process (``ingestion.worker``) or in the caller's (``ingestion.pipeline``), both import them here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin, get_type_hints

from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.schema import BaseNode

from llama_consciousness.ingestion.cognitive import AuthorityScorer, ConceptExtractor, SurfacesWhenInferrer
from llama_consciousness.ingestion.entities import EntityExtractor
from llama_consciousness.llms import resolve_llm
from llama_consciousness.ingestion.guards import InjectionGuard, PIIScrubber
from llama_consciousness.ingestion.report import IngestReport
from llama_consciousness.ingestion.updates import UPDATE_MAX_CHARS
from llama_consciousness.ingestion.validator import ConsciousnessMetadataValidator
from llama_consciousness.nodes import embedding_text, is_relationship

@dataclass(frozen=True)
class IngestOptions:
    """How ``ingest`` treats the records it is given.

    ``on_invalid``: an invalid record stops the run before anything is
    written (``raise``) or is skipped and reported (``drop``); ``on_bad_line``
    the same for a line that is not JSON.  ``pii``, ``injection``,
    ``duplicates``, ``entities`` and ``concepts`` switch the transforms;
    ``max_entities`` is how many entities each memory keeps, the most
    confident (None: ``MAX_ENTITIES_PER_MEMORY``, 3, with the offline
    extractor, ``LLM_MAX_ENTITIES_PER_MEMORY``, 10, with an LLM; fewer ingest
    faster and link less);
    ``updates`` the knowledge-update detection (``ingestion.updates``), whose
    pairs an ``update_judge`` (``ingestion.llm_judge.LLMUpdateJudge``)
    confirms or rejects when given.
    ``worker``: run the pure steps in a second process while this one
    writes; ``auto`` for more than ``WORKER_THRESHOLD`` records, where its
    start (about a second of imports) pays.
    """

    on_invalid: Literal["raise", "drop"] = "raise"
    on_bad_line: Literal["raise", "skip"] = "raise"
    pii: bool = True
    injection: Literal["flag", "quarantine", "drop", "off"] = "flag"
    duplicates: Literal["link", "skip", "off"] = "link"
    duplicate_threshold: float = 0.9
    entities: bool = True
    max_entities: int | None = None
    concepts: bool = True
    batch_size: int = 500
    chunk_size: int = 1000
    worker: Literal["auto", "on", "off"] = "auto"
    updates: Literal["offline", "off"] = "offline"
    # the longest memory the offline update judge reads (None: any; ingestion.updates.UPDATE_MAX_CHARS)
    update_max_chars: int | None = UPDATE_MAX_CHARS
    update_judge: Any = None  # an LLMUpdateJudge confirming the offline judge's pairs (not sent to the worker)
    # An LLM extracting entities instead of the offline extractor (offline on any failure of a call): any
    # LlamaIndex LLM, "openai[:model]" or "auto" (OpenAI when OPENAI_API_KEY is set; llms.resolve_llm).  With
    # one, the pure steps run in this process (an LLM client does not travel to the worker).
    entity_llm: Any = None

    def __post_init__(self) -> None:
        # A value that would otherwise be read as another (``on_invalid="skip"`` as drop) is refused.
        for name, choices in _CHOICES.items():
            if (value := getattr(self, name)) not in choices:
                raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, not {value!r}")
        limit = self.update_max_chars
        if limit is not None and (type(limit) is not int or limit < 1):
            raise ValueError(f"update_max_chars must be an integer of at least 1 (or None for any length), not {limit!r}")
        if self.max_entities is not None and (type(self.max_entities) is not int or self.max_entities < 0):
            raise ValueError(f"max_entities must be an integer of at least 0, not {self.max_entities!r} "
                             "(or None: the extractor's own default)")
        for name in ("chunk_size", "batch_size"):
            if type(value := getattr(self, name)) is not int or value < 1:
                raise ValueError(f"{name} must be an integer of at least 1, not {value!r}")
        # A switch given as text ("false" from JSON or a form) would be truthy and leave the step on.
        for name in ("pii", "entities", "concepts"):
            if type(value := getattr(self, name)) is not bool:
                raise ValueError(f"{name} must be True or False, not {value!r}")
        threshold = self.duplicate_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
            raise ValueError(f"duplicate_threshold must be a number above 0 and at most 1, not {threshold!r}")


_CHOICES = {name: get_args(hint) for name, hint in get_type_hints(IngestOptions).items()
            if get_origin(hint) is Literal}  # the values each Literal option accepts


def pure_steps(o: IngestOptions) -> list[Any]:
    """The steps that read nothing but their records (they may run in a worker process)."""
    steps: list[Any] = [ConsciousnessMetadataValidator(mode=o.on_invalid)]
    if o.pii:
        steps.append(PIIScrubber())
    if o.injection != "off":
        steps.append(InjectionGuard(action=o.injection))
    if o.concepts:
        steps += [ConceptExtractor(), SurfacesWhenInferrer(), AuthorityScorer()]
    if o.entities:
        # Names only: the concepts are already stored as the memory's
        # ``concepts``; as entities they would link every memory to "asked".
        llm = resolve_llm(o.entity_llm)
        by_llm = {} if llm is None else {"extractor": "llm", "llm": llm}
        steps.append(EntityExtractor(use_concepts=False, max_entities_per_memory=o.max_entities, **by_llm))
    return steps


def pure_pipeline(o: IngestOptions) -> IngestionPipeline:
    return IngestionPipeline(transformations=pure_steps(o), disable_cache=True)


def embed_memories(embed_model: Any, nodes: Sequence[BaseNode]) -> None:
    """Embed, in place, the memories among ``nodes`` without an embedding, from the text the store would embed."""
    todo = [n for n in nodes if n.embedding is None and not is_relationship(n)]
    if todo:
        vectors = embed_model.get_text_embedding_batch([embedding_text(n) for n in todo])
        for node, vector in zip(todo, vectors):
            node.embedding = list(vector)


def collect_reports(pipeline: IngestionPipeline, report: IngestReport) -> None:
    """Fold the reports of every step into one."""
    for step in pipeline.transformations:
        part = getattr(step, "report", None)
        if isinstance(part, IngestReport):
            report.merge(part)
        if isinstance(step, InjectionGuard):
            for node_id in step.last_report.get("dropped_ids", []):
                report.reject(node_id, "InjectionGuard", ["dropped: looks like a prompt injection"])
