"""The metadata validator transform in a real ``IngestionPipeline``: drop or raise."""

from __future__ import annotations

import pytest
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.schema import TextNode

from llama_consciousness.ingestion.validator import ConsciousnessMetadataValidator, MemoryValidationError
from llama_consciousness.nodes import memory_to_text_node

from memory_builders import _m


def test_validator_transform_modes() -> None:
    good = memory_to_text_node(_m("ok", emotion_vector={"calm": 0.4}, goal="g"))
    bad = TextNode(id_="bad", text="x", metadata={"level": "N2", "name": "B", "energy": 1.5})
    rel = TextNode(id_="r", text="", metadata={"kind": "relationship", "source_id": "ok", "target_id": "bad",
                                               "relation_type": "X", "goal": "g", "mindstate": "m",
                                               "energy": 0.5, "confidence": 0.5, "emotion_vector": {"calm": 0.2}})
    validator = ConsciousnessMetadataValidator(mode="drop")
    out = IngestionPipeline(transformations=[validator]).run(nodes=[good, bad, rel])
    assert [n.node_id for n in out] == ["ok", "r"]  # defaults made the relationship complete enough
    assert 0 < out[0].metadata["metadata_completeness"] <= 1
    assert [r.item_id for r in validator.report.rejected] == ["bad"]
    assert validator.report.rejected[0].reasons == [
        "REQUIRED field invalid: energy (got 1.5)", "REQUIRED field missing: confidence"]
    with pytest.raises(MemoryValidationError, match="bad rejected: REQUIRED field invalid: energy"):
        IngestionPipeline(transformations=[ConsciousnessMetadataValidator()]).run(nodes=[bad])
    inverted = memory_to_text_node(_m("inv"))
    inverted.metadata["invalid_at"] = "2020-01-01T00:00:00Z"
    inverted.metadata["valid_at"] = "2021-01-01T00:00:00Z"
    with pytest.raises(MemoryValidationError, match="invalid_at"):
        ConsciousnessMetadataValidator()([inverted])
