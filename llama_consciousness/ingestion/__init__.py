"""Ingestion: the memory file format, LlamaIndex transforms, and the graph writer.

The default pipeline (``build_pipeline``) runs, in order: validation, PII
scrubbing, the prompt-injection guard, concepts / surfaces_when / authority,
entity extraction, near-duplicate detection, and the writer.
"""

from llama_consciousness.ingestion.cognitive import AuthorityScorer, ConceptExtractor, SurfacesWhenInferrer
from llama_consciousness.ingestion.dedupe import DuplicateMemo, NearDuplicateFilter
from llama_consciousness.ingestion.entities import Entity, EntityExtractor, LLMEntityExtractor, OfflineEntityExtractor
from llama_consciousness.ingestion.guards import InjectionGuard, PIIScrubber
from llama_consciousness.ingestion.loader import MemoryFileError, demo_memory_file, iter_memory_file, read_memory_file
from llama_consciousness.nodes import (
    memory_to_text_node, relationship_to_text_node, text_node_to_memory, text_node_to_relationship,
)
from llama_consciousness.ingestion.pipeline import build_pipeline, ingest, to_text_nodes
from llama_consciousness.ingestion.steps import IngestOptions
from llama_consciousness.ingestion.report import IngestReport, Rejection
from llama_consciousness.ingestion.validator import ConsciousnessMetadataValidator, MemoryValidationError
from llama_consciousness.ingestion.writer import ConsciousnessGraphWriter

__all__ = [
    "AuthorityScorer",
    "ConceptExtractor",
    "ConsciousnessGraphWriter",
    "ConsciousnessMetadataValidator",
    "Entity",
    "EntityExtractor",
    "IngestOptions",
    "IngestReport",
    "InjectionGuard",
    "LLMEntityExtractor",
    "MemoryFileError",
    "MemoryValidationError",
    "DuplicateMemo",
    "NearDuplicateFilter",
    "OfflineEntityExtractor",
    "PIIScrubber",
    "Rejection",
    "SurfacesWhenInferrer",
    "build_pipeline",
    "demo_memory_file",
    "ingest",
    "iter_memory_file",
    "memory_to_text_node",
    "read_memory_file",
    "relationship_to_text_node",
    "text_node_to_memory",
    "text_node_to_relationship",
    "to_text_nodes",
]
