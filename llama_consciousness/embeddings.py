"""Embedding models, with an offline default.

WordLlama (``l2_supercat``) ships in its wheel and is pure numpy, so nothing is fetched and every test
builds a real index; it is weak on paraphrase and negation: use :class:`OpenAIEmbedding` (or any
``BaseEmbedding``) for production recall.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator

if TYPE_CHECKING:  # pragma: no cover - typing only
    from tokenizers import Tokenizer

__all__ = ["EMBED_MODEL_ENV_VAR", "OPENAI_EMBEDDING_DIMENSIONS", "OpenAIEmbedding", "SUPPORTED_WORDLLAMA_DIMS",
           "WordLlamaEmbedding", "embedding_dimension", "resolve_embed_model"]

EMBED_MODEL_ENV_VAR = "LLAMA_CONSCIOUSNESS_EMBED_MODEL"

# Only the 256-d table ships in the wheel; wordllama truncates it to its
# configured sizes below that (Matryoshka training keeps prefixes meaningful).
_WORDLLAMA_CONFIG = "l2_supercat"
_WORDLLAMA_FILE_DIM = 256
SUPPORTED_WORDLLAMA_DIMS: Tuple[int, ...] = (64, 128, 256)

OPENAI_EMBEDDING_DIMENSIONS: Dict[str, int] = {
    "text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}

_EMPTY_TEXT_MESSAGE = "cannot embed empty text"

_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_texts(texts: Sequence[str]) -> None:
    """Refuse empty or blank inputs instead of inventing a vector: zero (cosine undefined) or one blank
    spot "similar" to every other blank chunk would turn a chunking bug into wrong retrievals."""
    for position, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts to embed must be str, got {type(text).__name__} at position {position}")
        if not text.strip():
            raise ValueError(f"{_EMPTY_TEXT_MESSAGE} (input at position {position} is empty or whitespace only)")
        if not text.isascii() and (found := _SURROGATE.search(text)) is not None:
            # The tokenizer fails on it with an unrelated TypeError.
            raise ValueError(f"texts to embed must be valid Unicode: the input at position {position} contains a "
                             f"lone surrogate (U+{ord(found.group()):04X}) at character {found.start() + 1}")


# -- WordLlama (offline default) -------------------------------------------


def _import_wordllama() -> Any:
    """Import wordllama, undoing the ``logging.basicConfig(level=INFO)`` it runs at import time."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    import wordllama  # noqa: PLC0415 - deferred: import has side effects

    if root.handlers != handlers or root.level != level:
        root.handlers[:] = handlers
        root.setLevel(level)
    return wordllama


def _wordllama_package_dir() -> Path:
    """Where the wheel keeps its bundled ``weights/`` and ``tokenizers/``."""
    return Path(_import_wordllama().__file__).parent


@dataclass(frozen=True)
class _LoadedWordLlama:
    """One loaded WordLlama table, shared by every instance: ``model`` is wordllama's (for its extras);
    we embed with ``matrix`` and a ``tokenizer`` without padding (one long text would pad a batch to GBs)."""

    model: Any
    matrix: np.ndarray
    tokenizer: "Tokenizer"

    # Shared: copies keep the table, and a pickle (the ingestion worker)
    # reloads it from the receiving process's cache instead of 16 MB of weights.
    def __deepcopy__(self, memo: Dict[int, Any]) -> "_LoadedWordLlama":
        return self

    def __reduce__(self) -> Tuple[Any, Tuple[int]]:
        return (_load_wordllama, (int(self.matrix.shape[1]),))


_MODEL_CACHE: Dict[Tuple[str, str, int, int], _LoadedWordLlama] = {}
_MODEL_CACHE_LOCK = threading.Lock()


def _load_wordllama(dim: int) -> _LoadedWordLlama:
    """Load (once per process and directory, also under concurrent first use) the table truncated to ``dim``."""
    package_dir = _wordllama_package_dir()
    key = (str(package_dir), _WORDLLAMA_CONFIG, _WORDLLAMA_FILE_DIM, dim)
    with _MODEL_CACHE_LOCK:
        if key in _MODEL_CACHE:
            return _MODEL_CACHE[key]
        weights_path = package_dir / "weights" / f"{_WORDLLAMA_CONFIG}_{_WORDLLAMA_FILE_DIM}.safetensors"
        tokenizer_path = package_dir / "tokenizers" / f"{_WORDLLAMA_CONFIG}_tokenizer_config.json"
        # Checked here: without the tokenizer file wordllama downloads one even
        # with downloads disabled, and its error for missing weights names no path.
        for label, path in (("weights", weights_path), ("tokenizer", tokenizer_path)):
            if not path.is_file():
                raise FileNotFoundError(
                    f"WordLlama {label} file not found at {path}. It ships inside the "
                    "'wordllama' wheel; reinstall it (pip install --force-reinstall "
                    "'wordllama>=0.4,<0.5') or choose another embed model, e.g. 'openai'."
                )

        from wordllama import WordLlama  # noqa: PLC0415 - imported via _import_wordllama

        # cache_dir is the package itself: only that lookup finds the bundled
        # "tokenizers/" (its project-root check looks for "tokenizer/").
        model = WordLlama.load(config=_WORDLLAMA_CONFIG, cache_dir=package_dir, disable_download=True,
                               dim=_WORDLLAMA_FILE_DIM, trunc_dim=dim)
        from tokenizers import Tokenizer  # noqa: PLC0415 - wordllama dependency

        tokenizer = Tokenizer.from_str(model.tokenizer.to_str())
        tokenizer.no_padding()
        tokenizer.no_truncation()
        matrix = np.ascontiguousarray(model.embedding, dtype=np.float32)
        matrix.setflags(write=False)
        _MODEL_CACHE[key] = _LoadedWordLlama(model=model, matrix=matrix, tokenizer=tokenizer)
        return _MODEL_CACHE[key]


class _EmbedThroughBatches:
    """LlamaIndex's six embedding hooks, all routed through ``_embed`` / ``_aembed``."""

    def _batches(self, texts: List[str]) -> List[List[str]]:
        size = self.embed_batch_size  # type: ignore[attr-defined]
        return [texts[start : start + size] for start in range(0, len(texts), size)]

    async def _aembed(self, texts: List[str]) -> List[Embedding]:
        # CPU work goes to a thread so the event loop stays free (OpenAI overrides it).
        return await asyncio.to_thread(self._embed, texts)

    def _get_query_embedding(self, query: str) -> Embedding:
        return self._embed([query])[0]

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._embed([text])[0]

    def _get_text_embeddings(self, texts: List[str]) -> List[Embedding]:
        return self._embed(list(texts))

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return (await self._aembed([query]))[0]

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return (await self._aembed([text]))[0]

    async def _aget_text_embeddings(self, texts: List[str]) -> List[Embedding]:
        return await self._aembed(list(texts))


class WordLlamaEmbedding(_EmbedThroughBatches, BaseEmbedding):
    """Offline WordLlama embeddings, the package default; L2-normalised, so cosine is the dot product
    (for stores with inner-product search only)."""

    model_name: str = Field(default=f"wordllama-{_WORDLLAMA_CONFIG}", description="Name reported to callbacks.")
    embed_batch_size: int = Field(default=64, gt=0, le=2048, description="Texts per batch; bounds peak memory.")
    dim: int = Field(default=_WORDLLAMA_FILE_DIM, description=f"Output size; one of {SUPPORTED_WORDLLAMA_DIMS}.")

    _loaded: _LoadedWordLlama = PrivateAttr()

    @field_validator("dim")
    @classmethod
    def _check_dim(cls, value: int) -> int:
        if value not in SUPPORTED_WORDLLAMA_DIMS:
            dims = ", ".join(map(str, SUPPORTED_WORDLLAMA_DIMS))
            raise ValueError(f"WordLlama dim must be one of {dims} (truncations of the {_WORDLLAMA_FILE_DIM}-d "
                             f"weights bundled with wordllama); got {value}")
        return value

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        # Eagerly, so a broken installation fails here, not mid-ingestion.
        self._loaded = _load_wordllama(self.dim)

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises the class under."""
        return "WordLlamaEmbedding"

    @property
    def dimension(self) -> int:
        """The number of dimensions of the vectors (``dim``)."""
        return self.dim

    def embedding_dimension(self) -> int:
        """The number of dimensions of the vectors (256 by default)."""
        return self.dim

    @property
    def wordllama(self) -> Any:
        """The shared ``WordLlamaInference``, for its non-embedding utilities."""
        return self._loaded.model

    def _embed(self, texts: List[str]) -> List[Embedding]:
        _check_texts(texts)
        return [vector for batch in self._batches(texts) for vector in self._embed_batch(batch)]

    def _embed_batch(self, texts: List[str]) -> List[Embedding]:
        """Mean-pool token vectors as wordllama does, without padding: each text's distinct tokens weighted by
        their counts, in float64 (a text's vector never depends on the batch it came in; a 2 KB message's 700
        tokens are some 300 distinct rows: 0.05 ms against 0.29 ms gathering and summing every token's row,
        with the same vectors bit for bit on BEAM's long messages); no division by the count, which
        normalisation removes."""
        loaded = self._loaded
        tokenizer = loaded.tokenizer
        # ``encode_batch_fast`` gives the same ids without computing character offsets.
        encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
        encodings = encode(texts, add_special_tokens=False)
        matrix = loaded.matrix
        top = matrix.shape[0] - 1
        sums = np.empty((len(texts), matrix.shape[1]), dtype=np.float64)
        for position, encoding in enumerate(encodings):
            raw = encoding.ids
            if not raw:
                raise ValueError(f"{_EMPTY_TEXT_MESSAGE} (input at position {position} produced no tokens)")
            ids = np.asarray(raw, dtype=np.int64)
            np.clip(ids, 0, top, out=ids)
            distinct, counts = np.unique(ids, return_counts=True)
            np.matmul(counts.astype(np.float64), matrix[distinct].astype(np.float64), out=sums[position])
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        for position, norm in enumerate(norms[:, 0]):
            if not norm > 1e-12:
                raise ValueError(f"WordLlama produced a zero vector for the input at position {position}; "
                                 "it has no direction, so cosine similarity would be undefined")
        return (sums / norms).tolist()


# -- OpenAI (and OpenAI-compatible servers) --------------------------------


class _ClientSlot:
    """SDK clients built lazily, each with the settings it was built for (a changed key or ``base_url``
    gets a new client).  Clients cannot be copied or pickled: a copy starts empty."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.built: Dict[bool, Tuple[Any, Tuple[Any, ...]]] = {}  # async? -> (client, settings)

    def __deepcopy__(self, memo: Dict[int, Any]) -> "_ClientSlot":
        return _ClientSlot()

    def __reduce__(self) -> Tuple[Any, Tuple[()]]:
        return (_ClientSlot, ())


class OpenAIEmbedding(_EmbedThroughBatches, BaseEmbedding):
    """Embeddings from the OpenAI API or a server that speaks it.  Not ``llama-index-embeddings-openai``,
    which serialises the key, reuses one async client across event loops and retries far beyond ``timeout``."""

    model_name: str = Field(default="text-embedding-3-small", description="Embedding model identifier.")
    embed_batch_size: int = Field(default=100, gt=0, le=2048, description="Inputs per request (API max).")
    dimensions: Optional[int] = Field(default=None, gt=0, description="Shortened output size (text-embedding-3-*).")
    base_url: Optional[str] = Field(default=None, description="API base URL, e.g. http://localhost:8000/v1.")
    timeout: float = Field(default=60.0, gt=0, description="Per-request timeout in seconds.")
    max_retries: int = Field(default=2, ge=0, description="SDK retries on transient errors.")

    _api_key: str = PrivateAttr()
    _clients: _ClientSlot = PrivateAttr(default_factory=lambda: _ClientSlot())

    def __init__(self, *, api_key: Optional[str] = None, base_url: Optional[str] = None, **data: Any) -> None:
        api_key = api_key or os.environ.get("OPENAI_API_KEY")
        if not api_key:
            raise ValueError(
                "OpenAIEmbedding needs an API key: pass api_key=... or set the "
                "OPENAI_API_KEY environment variable (for a local OpenAI-compatible "
                "server that ignores keys, any non-empty string works). The offline "
                "default embedding, WordLlamaEmbedding (spec 'wordllama'), needs no key."
            )
        if base_url is None:
            base_url = os.environ.get("OPENAI_BASE_URL") or None
        super().__init__(base_url=base_url, **data)
        self._api_key = api_key

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises the class under."""
        return "OpenAIEmbedding"

    @property
    def dimension(self) -> Optional[int]:
        """Known output size, or None for models this module has no table entry for."""
        return self.dimensions or OPENAI_EMBEDDING_DIMENSIONS.get(self.model_name)

    def _client(self, aio: bool = False) -> Any:
        """The SDK client for the current settings; an async one per event loop (its pool is bound to
        the loop that opened it: reused after that loop closes, it fails with "Event loop is closed")."""
        loop = weakref.ref(asyncio.get_running_loop()) if aio else None
        settings = (self._api_key, self.base_url, self.timeout, self.max_retries, loop)
        slot = self._clients
        with slot.lock:
            client, built_for = slot.built.get(aio, (None, None))
            if built_for != settings:
                import openai  # noqa: PLC0415 - ~0.6 s import, only when used

                client = (openai.AsyncOpenAI if aio else openai.OpenAI)(
                    api_key=self._api_key, base_url=self.base_url, timeout=self.timeout,
                    max_retries=self.max_retries)
                slot.built[aio] = (client, settings)
            return client

    def _request(self, batch: List[str]) -> Dict[str, Any]:
        # "float" explicitly: the SDK otherwise asks for base64, which some
        # OpenAI-compatible servers do not implement.
        kwargs: Dict[str, Any] = {"model": self.model_name, "input": batch, "encoding_format": "float"}
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        return kwargs

    @staticmethod
    def _vectors(response: Any, expected: int) -> List[Embedding]:
        # Sorted by index because the API does not promise response order.
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != expected:
            raise RuntimeError(f"embedding server returned {len(data)} vectors for {expected} inputs")
        return [[float(x) for x in item.embedding] for item in data]

    def _embed(self, texts: List[str]) -> List[Embedding]:
        _check_texts(texts)
        client = self._client()
        results: List[Embedding] = []
        for batch in self._batches(texts):
            results += self._vectors(client.embeddings.create(**self._request(batch)), len(batch))
        return results

    async def _aembed(self, texts: List[str]) -> List[Embedding]:
        _check_texts(texts)
        client = self._client(aio=True)
        results: List[Embedding] = []
        # Sequential on purpose: LlamaIndex's aget_text_embedding_batch already
        # fans out across batches (num_workers); more here would trip rate limits.
        for batch in self._batches(texts):
            results += self._vectors(await client.embeddings.create(**self._request(batch)), len(batch))
        return results


# -- Selection and introspection -------------------------------------------

_ACCEPTED_FORMS = (
    f"None (uses ${EMBED_MODEL_ENV_VAR}, default 'wordllama'), a BaseEmbedding instance, 'wordllama', "
    f"'wordllama:<dim>' with dim in {'/'.join(map(str, SUPPORTED_WORDLLAMA_DIMS))}, 'openai', 'openai:<model>' "
    "(e.g. 'openai:text-embedding-3-large')"
)


def resolve_embed_model(spec: Any = None) -> BaseEmbedding:
    """Turn a config value (a short spec, None for the env variable, or a model passed through) into a model."""
    if isinstance(spec, BaseEmbedding):
        return spec
    env_value = os.environ.get(EMBED_MODEL_ENV_VAR, "").strip() if spec is None else ""
    source = f"${EMBED_MODEL_ENV_VAR}" if env_value else "spec"
    spec = env_value or ("wordllama" if spec is None else spec)
    if not isinstance(spec, str):
        raise ValueError(f"unsupported embed model {spec!r} ({type(spec).__name__}); accepted: {_ACCEPTED_FORMS}")

    text = spec.strip()
    kind, _, arg = text.partition(":")
    kind, arg = kind.strip().lower(), arg.strip()
    if kind == "wordllama" and (not arg or arg.isdigit() and int(arg) in SUPPORTED_WORDLLAMA_DIMS):
        return WordLlamaEmbedding(dim=int(arg)) if arg else WordLlamaEmbedding()
    if kind == "openai":
        return OpenAIEmbedding(model_name=arg) if arg else OpenAIEmbedding()
    raise ValueError(f"unknown embed model {text!r} (from {source}); accepted: {_ACCEPTED_FORMS}")


_PROBE_TEXT = "dimension probe"
_PROBED_DIMENSIONS: Dict[int, int] = {}  # id of a live model -> its size (forgotten when it dies)


def embedding_dimension(embed_model: BaseEmbedding) -> int:
    """Output size of ``embed_model``, for vector indexes made up front: its ``dimension``, or a probe
    embedded once per model (a paid API should not be called again), keyed by ``id`` (models are unhashable)."""
    declared = getattr(embed_model, "dimension", None)
    if callable(declared):
        declared = declared()
    if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0:
        return declared
    key = id(embed_model)
    if key in _PROBED_DIMENSIONS:
        return _PROBED_DIMENSIONS[key]
    size = len(embed_model.get_text_embedding(_PROBE_TEXT))
    if size <= 0:
        raise ValueError(f"{type(embed_model).__name__} returned an empty probe embedding")
    _PROBED_DIMENSIONS[key] = size
    # Dropped when the model dies, before another object can take its id.
    weakref.finalize(embed_model, _PROBED_DIMENSIONS.pop, key, None)
    return size
