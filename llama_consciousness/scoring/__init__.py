"""Pure functions (no I/O): each formula of the spec lives here once, tested alone."""

from llama_consciousness.scoring.cognitive import compute_authority_score, extract_concepts, infer_surfaces_when
from llama_consciousness.scoring.emotions import EMOTION_SYNONYMS, canonical_emotion, canonical_vector
from llama_consciousness.scoring.identity import base_identity, extract_base_identity, group_by_identity
from llama_consciousness.scoring.names import EntityIndex, name_similarity, normalize_entity_name
from llama_consciousness.scoring.validation import (
    assess_metadata_quality,
    validate_consciousness_link,
    validate_consciousness_node,
    validate_field_type,
)

__all__ = [
    "EMOTION_SYNONYMS",
    "EntityIndex",
    "assess_metadata_quality",
    "base_identity",
    "canonical_emotion",
    "canonical_vector",
    "compute_authority_score",
    "extract_base_identity",
    "extract_concepts",
    "group_by_identity",
    "infer_surfaces_when",
    "name_similarity",
    "normalize_entity_name",
    "validate_consciousness_link",
    "validate_consciousness_node",
    "validate_field_type",
]
