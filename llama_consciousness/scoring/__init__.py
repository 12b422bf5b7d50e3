"""Pure functions (no I/O): each formula of the spec lives here once, tested alone."""

from llama_consciousness.scoring.dissonance import detect_temporal_dissonances
from llama_consciousness.scoring.emotional_intent import extract_emotional_intent
from llama_consciousness.scoring.energy import (
    apply_energy_feedback,
    calculate_energy_feedback_potential,
    feedback_potential,
    item_feedback,
)
from llama_consciousness.scoring.fusion import weighted_rrf
from llama_consciousness.scoring.ranking import (
    activation_tiers,
    calculate_emotional_similarity,
    consciousness_adjusted_score,
    cosine_similarity,
    priority_score,
)
from llama_consciousness.scoring.traversal import (
    calculate_traversal_probability,
    dfs_with_probability,
    generate_traversal_paths,
    traversal_band,
)
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
    "activation_tiers",
    "apply_energy_feedback",
    "calculate_emotional_similarity",
    "calculate_energy_feedback_potential",
    "feedback_potential",
    "item_feedback",
    "calculate_traversal_probability",
    "consciousness_adjusted_score",
    "cosine_similarity",
    "detect_temporal_dissonances",
    "dfs_with_probability",
    "extract_emotional_intent",
    "generate_traversal_paths",
    "priority_score",
    "traversal_band",
    "weighted_rrf",
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
