"""llama-consciousness: a memory LlamaIndex applications can reason over.

Memories live in a bitemporal graph per level (N1 personal, N2 collective,
N3 ecosystem) with vectors and "consciousness" metadata: energy, confidence,
emotions, goals and resolution state.  Start with :class:`ConsciousnessMemory`.
"""

from llama_consciousness.embeddings import OpenAIEmbedding, WordLlamaEmbedding, resolve_embed_model
from llama_consciousness.errors import (
    ConsciousnessError,
    DataDirectoryError,
    EmbeddedServerError,
    EmbeddingDimensionError,
    LevelError,
    StorageError,
    VectorBackendError,
)
from llama_consciousness.forgetting import MemorySelector
from llama_consciousness.memory import ConsciousnessMemory
from llama_consciousness.memory_block import ConsciousnessMemoryBlock
from llama_consciousness.query_engine import ConsciousnessQueryEngine
from llama_consciousness.postprocessors import (
    ActivationTierPostprocessor,
    ConsciousnessRanker,
    ConstellationPostprocessor,
    MetadataQualityPostprocessor,
    TemporalDissonancePostprocessor,
    TraversalPathPostprocessor,
)
from llama_consciousness.render import render_stream
from llama_consciousness.retention import RetentionPolicy, RetentionReport, RetentionRule
from llama_consciousness.retrievers import RetrievalConfig, SixWayHybridRetriever
from llama_consciousness.schema import (
    ConsciousnessNode,
    ConsciousnessRelationship,
    ConsciousnessStream,
    ErasureReceipt,
    ForgetReason,
    ForgetReport,
    MemoryNode,
    RestoreReport,
    RetrievalIntention,
    StateBasedRetrieval,
)
from llama_consciousness.schema.citizen import CitizenState, FeedbackReport, UseReport
from llama_consciousness.storage.level_store import UpsertResult, VectorIndexConfig
from llama_consciousness.temporal import TemporalWindow
from llama_consciousness.tools import ConsciousnessToolSpec  # needs no mcp: llama_consciousness.mcp_server does

__version__ = "0.1.0"

__all__ = [
    "ActivationTierPostprocessor",
    "ConsciousnessError",
    "CitizenState",
    "ConsciousnessQueryEngine",
    "ConsciousnessRanker",
    "FeedbackReport",
    "UseReport",
    "ConstellationPostprocessor",
    "MetadataQualityPostprocessor",
    "RetrievalConfig",
    "SixWayHybridRetriever",
    "TemporalDissonancePostprocessor",
    "TraversalPathPostprocessor",
    "render_stream",
    "ConsciousnessMemory",
    "ConsciousnessMemoryBlock",
    "ConsciousnessNode",
    "ConsciousnessRelationship",
    "ConsciousnessStream",
    "ConsciousnessToolSpec",
    "DataDirectoryError",
    "EmbeddedServerError",
    "EmbeddingDimensionError",
    "ErasureReceipt",
    "ForgetReason",
    "ForgetReport",
    "MemorySelector",
    "RestoreReport",
    "RetentionPolicy",
    "RetentionReport",
    "RetentionRule",
    "LevelError",
    "MemoryNode",
    "OpenAIEmbedding",
    "RetrievalIntention",
    "StateBasedRetrieval",
    "StorageError",
    "TemporalWindow",
    "UpsertResult",
    "VectorBackendError",
    "VectorIndexConfig",
    "WordLlamaEmbedding",
    "resolve_embed_model",
    "__version__",
]
