"""Embedding models for llama-consciousness, with an offline default.

Why WordLlama is the default
----------------------------
A memory library that cannot embed a sentence without an API key or a
multi-gigabyte model download is unusable in tests, CI, air-gapped machines
and first-run demos. WordLlama (``l2_supercat``) is the one embedding model
that fits those constraints:

* its 256-d weights (~16 MB) and tokenizer ship *inside the wheel*, so
  nothing is fetched at run time;
* it is a static token-embedding table plus mean pooling: pure numpy,
  no torch, no GPU, no ONNX runtime;
* loading takes ~0.2 s and embedding thousands of short texts takes
  milliseconds, so every test can build a real index.

The price is quality. Mean-pooled static token vectors ignore word order
and context, so WordLlama separates topics well but is weak on paraphrase,
negation and fine-grained relevance. It is markedly worse than
``text-embedding-3-small`` on retrieval benchmarks. Use :class:`OpenAIEmbedding`
(or any LlamaIndex ``BaseEmbedding``) for production recall; the default
exists so that everything works out of the box, not because it is good.

Selecting a model
-----------------
:func:`resolve_embed_model` turns a short spec (``"wordllama"``,
``"wordllama:128"``, ``"openai"``, ``"openai:text-embedding-3-large"``) or the
``LLAMA_CONSCIOUSNESS_EMBED_MODEL`` environment variable into an instance, so
configuration files and CLIs can choose a backend without importing classes.
Vector stores need the dimension before the first insert;
:func:`embedding_dimension` answers that for any ``BaseEmbedding``.
"""

from __future__ import annotations

import asyncio
import itertools
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

__all__ = [
    "EMBED_MODEL_ENV_VAR",
    "OPENAI_EMBEDDING_DIMENSIONS",
    "OpenAIEmbedding",
    "SUPPORTED_WORDLLAMA_DIMS",
    "WordLlamaEmbedding",
    "embedding_dimension",
    "resolve_embed_model",
]

EMBED_MODEL_ENV_VAR = "LLAMA_CONSCIOUSNESS_EMBED_MODEL"

# Only ``l2_supercat_256.safetensors`` ships in the wordllama wheel. wordllama
# can truncate a loaded table to any of its configured sizes that is <= the
# file's size (its Matryoshka training keeps prefixes meaningful), which for
# the shipped file leaves exactly these. Larger sizes would need a download.
_WORDLLAMA_CONFIG = "l2_supercat"
_WORDLLAMA_FILE_DIM = 256
SUPPORTED_WORDLLAMA_DIMS: Tuple[int, ...] = (64, 128, 256)

OPENAI_EMBEDDING_DIMENSIONS: Dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}

_EMPTY_TEXT_MESSAGE = "cannot embed empty text"

logger = logging.getLogger(__name__)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_texts(texts: Sequence[str]) -> None:
    """Refuse empty or whitespace-only inputs instead of inventing a vector.

    An empty text has no tokens, so mean pooling has nothing to average: the
    honest result is a zero vector, whose cosine with anything is undefined
    (NaN) and which vector stores then rank arbitrarily. Whitespace-only text
    does tokenize, but into space tokens that carry no meaning, so it lands
    in one spot that is "similar" to every other blank chunk. Either way a
    silent vector would turn an upstream chunking bug into wrong retrievals,
    so we fail loudly at the source. The OpenAI API rejects empty strings
    too, which keeps both backends consistent.
    """
    for position, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(
                f"texts to embed must be str, got {type(text).__name__} at position {position}"
            )
        if not text.strip():
            raise ValueError(
                f"{_EMPTY_TEXT_MESSAGE} (input at position {position} is empty or whitespace only)"
            )
        if not text.isascii() and (found := _SURROGATE.search(text)) is not None:
            # The tokenizer fails on it with an unrelated TypeError.
            raise ValueError(
                f"texts to embed must be valid Unicode: the input at position {position} contains a lone "
                f"surrogate (U+{ord(found.group()):04X}) at character {found.start() + 1}"
            )


# --------------------------------------------------------------------------
# WordLlama (offline default)
# --------------------------------------------------------------------------


def _import_wordllama() -> Any:
    """Import wordllama without letting it reconfigure the host's logging.

    ``wordllama.inference`` calls ``logging.basicConfig(level=INFO)`` at import
    time, which would attach a handler to the root logger and turn on INFO
    output for every library in the host application. A library must not do
    that, so the root logger's handlers and level are restored afterwards.
    """
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
    """One loaded WordLlama table, shared by every embedding instance.

    ``model`` is wordllama's own inference object (kept for callers who want
    its extras such as ``rank`` or ``split``). ``matrix`` and ``tokenizer`` are
    what we embed with: the tokenizer is a private copy with padding disabled,
    because wordllama's shared one pads each batch to its longest text, which
    makes memory grow with ``batch * longest_text`` and lets one long document
    in a batch cost gigabytes.
    """

    model: Any
    matrix: np.ndarray
    tokenizer: "Tokenizer"
    weights_path: Path

    # Immutable and shared by design: copying an embedding model (pydantic
    # deep copies, LlamaIndex pipelines) must not duplicate the table, and
    # pickling (multiprocess ingestion) should reload from the receiving
    # process's own cache rather than ship 16 MB of weights.
    def __deepcopy__(self, memo: Dict[int, Any]) -> "_LoadedWordLlama":
        return self

    def __reduce__(self) -> Tuple[Any, Tuple[int]]:
        return (_load_wordllama, (int(self.matrix.shape[1]),))


_MODEL_CACHE: Dict[Tuple[str, str, int, int], _LoadedWordLlama] = {}
_MODEL_CACHE_LOCK = threading.Lock()


def _load_wordllama(dim: int) -> _LoadedWordLlama:
    """Load (once per process) the bundled WordLlama table truncated to ``dim``.

    The cache key includes the directory the files came from so that a
    different installation or test fixture never receives a stale table.
    The lock makes concurrent first use (e.g. several threads building
    indexes) load the weights exactly once.
    """
    package_dir = _wordllama_package_dir()
    key = (str(package_dir), _WORDLLAMA_CONFIG, _WORDLLAMA_FILE_DIM, dim)
    loaded = _MODEL_CACHE.get(key)
    if loaded is not None:
        return loaded
    with _MODEL_CACHE_LOCK:
        loaded = _MODEL_CACHE.get(key)
        if loaded is not None:
            return loaded

        weights_path = package_dir / "weights" / f"{_WORDLLAMA_CONFIG}_{_WORDLLAMA_FILE_DIM}.safetensors"
        tokenizer_path = package_dir / "tokenizers" / f"{_WORDLLAMA_CONFIG}_tokenizer_config.json"
        # Checked here rather than left to wordllama: with a missing tokenizer
        # file wordllama silently falls back to downloading one from Hugging
        # Face even when downloads are disabled, and its own error for missing
        # weights does not say where it looked.
        for label, path in (("weights", weights_path), ("tokenizer", tokenizer_path)):
            if not path.is_file():
                raise FileNotFoundError(
                    f"WordLlama {label} file not found at {path}. It ships inside the "
                    "'wordllama' wheel; reinstall it (pip install --force-reinstall "
                    "'wordllama>=0.4,<0.5') or choose another embed model, e.g. 'openai'."
                )

        from wordllama import WordLlama  # noqa: PLC0415 - imported via _import_wordllama

        # cache_dir points at the package itself: wordllama looks for bundled
        # tokenizers under "tokenizer/" (singular) in its project-root check but
        # they live in "tokenizers/", so only the cache_dir lookup finds them.
        model = WordLlama.load(
            config=_WORDLLAMA_CONFIG,
            cache_dir=package_dir,
            disable_download=True,
            dim=_WORDLLAMA_FILE_DIM,
            trunc_dim=dim,
        )
        from tokenizers import Tokenizer  # noqa: PLC0415 - wordllama dependency

        tokenizer = Tokenizer.from_str(model.tokenizer.to_str())
        tokenizer.no_padding()
        tokenizer.no_truncation()
        matrix = np.ascontiguousarray(model.embedding, dtype=np.float32)
        matrix.setflags(write=False)
        loaded = _LoadedWordLlama(
            model=model, matrix=matrix, tokenizer=tokenizer, weights_path=weights_path
        )
        _MODEL_CACHE[key] = loaded
        return loaded


class _EmbedThroughBatches:
    """LlamaIndex's six embedding hooks, all routed through ``_embed`` / ``_aembed``.

    Queries and documents are embedded the same way by both backends, so
    the only thing a backend writes is ``_embed(texts)``: how to embed a list.
    """

    async def _aembed(self, texts: List[str]) -> List[Embedding]:
        # CPU-bound work goes to a worker thread so the event loop stays
        # responsive; network-bound backends override this with real async I/O.
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
    """Offline WordLlama embeddings; the package default (see module docs).

    Vectors are L2-normalised so cosine similarity equals the dot product,
    letting stores that only offer inner-product search rank correctly.
    Queries and documents share one encoder because WordLlama is symmetric.
    """

    model_name: str = Field(
        default=f"wordllama-{_WORDLLAMA_CONFIG}",
        description="Name reported to LlamaIndex callbacks and instrumentation.",
    )
    embed_batch_size: int = Field(
        default=64,
        gt=0,
        le=2048,
        description="Texts per batch; bounds peak memory of the token gather.",
    )
    dim: int = Field(
        default=_WORDLLAMA_FILE_DIM,
        description=f"Output dimension; one of {SUPPORTED_WORDLLAMA_DIMS}.",
    )

    _loaded: _LoadedWordLlama = PrivateAttr()

    @field_validator("dim")
    @classmethod
    def _check_dim(cls, value: int) -> int:
        if value not in SUPPORTED_WORDLLAMA_DIMS:
            raise ValueError(
                f"WordLlama dim must be one of {', '.join(map(str, SUPPORTED_WORDLLAMA_DIMS))} "
                f"(truncations of the {_WORDLLAMA_FILE_DIM}-d weights bundled with wordllama); "
                f"got {value}"
            )
        return value

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        # Loaded eagerly so a broken installation fails at construction, not
        # in the middle of an ingestion run; the module cache makes it free
        # after the first instance.
        self._loaded = _load_wordllama(self.dim)

    @classmethod
    def class_name(cls) -> str:
        return "WordLlamaEmbedding"

    @property
    def dimension(self) -> int:
        return self.dim

    def embedding_dimension(self) -> int:
        return self.dim

    @property
    def wordllama(self) -> Any:
        """The shared ``WordLlamaInference``, for its non-embedding utilities."""
        return self._loaded.model

    def _embed(self, texts: List[str]) -> List[Embedding]:
        _check_texts(texts)
        results: List[Embedding] = []
        for start in range(0, len(texts), self.embed_batch_size):
            results.extend(self._embed_batch(texts[start : start + self.embed_batch_size]))
        return results

    def _embed_batch(self, texts: List[str]) -> List[Embedding]:
        """Mean-pool token vectors exactly as wordllama does, without padding.

        Each text's token vectors are summed on their own, in float64, so
        memory is proportional to the total number of tokens and a text's
        vector does not depend on which other texts share its batch (batch
        and single calls agree bit for bit).  One reduction per text costs a
        quarter of one ``reduceat`` over the batch, which converts and adds
        row by row.  The division by token count is skipped: normalisation
        removes it.
        """
        loaded = self._loaded
        tokenizer = loaded.tokenizer
        # ``encode_batch_fast`` gives the same ids without computing character offsets.
        encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
        encodings = encode(texts, add_special_tokens=False)
        lengths = [len(e.ids) for e in encodings]
        for position, length in enumerate(lengths):
            if length == 0:
                raise ValueError(
                    f"{_EMPTY_TEXT_MESSAGE} (input at position {position} produced no tokens)"
                )
        ids = np.fromiter(
            itertools.chain.from_iterable(e.ids for e in encodings),
            dtype=np.int64,
            count=sum(lengths),
        )
        np.clip(ids, 0, loaded.matrix.shape[0] - 1, out=ids)
        tokens = loaded.matrix[ids]
        sums = np.empty((len(texts), tokens.shape[1]), dtype=np.float64)
        start = 0
        for position, length in enumerate(lengths):
            tokens[start : start + length].sum(axis=0, dtype=np.float64, out=sums[position])
            start += length
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        for position, norm in enumerate(norms[:, 0]):
            if not norm > 1e-12:
                raise ValueError(
                    f"WordLlama produced a zero vector for the input at position {position}; "
                    "it has no direction, so cosine similarity would be undefined"
                )
        return (sums / norms).tolist()


# --------------------------------------------------------------------------
# OpenAI (and OpenAI-compatible servers)
# --------------------------------------------------------------------------


class _ClientSlot:
    """Lazily built SDK clients plus the settings they were built with.

    Clients hold sockets and locks, which can be neither deep-copied nor
    pickled, so copies and unpickled models start with an empty slot and
    build their own. Recording the settings means a model whose ``base_url``
    or key changed (assignment, ``model_copy(update=...)`` sharing this slot)
    gets a new client instead of talking to the old endpoint.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sync: Any = None
        self.sync_settings: Optional[Tuple[Any, ...]] = None
        self.aio: Any = None
        self.aio_settings: Optional[Tuple[Any, ...]] = None
        self.aio_loop: Optional[weakref.ref] = None

    def __deepcopy__(self, memo: Dict[int, Any]) -> "_ClientSlot":
        return _ClientSlot()

    def __reduce__(self) -> Tuple[Any, Tuple[()]]:
        return (_ClientSlot, ())


class OpenAIEmbedding(_EmbedThroughBatches, BaseEmbedding):
    """Embeddings from the OpenAI API or any server that speaks its protocol.

    Written against the ``openai`` SDK directly so the package does not pull
    in ``llama-index-embeddings-openai`` and its version pins. Vectors are
    returned as the server sends them (OpenAI's are already unit length).
    The API key is kept out of the pydantic fields so that serialising the
    model (``to_dict``, ``model_dump``, instrumentation payloads) never
    leaks it.
    """

    model_name: str = Field(
        default="text-embedding-3-small", description="Embedding model identifier."
    )
    embed_batch_size: int = Field(
        default=100,
        gt=0,
        le=2048,
        description="Inputs per request (the API accepts at most 2048).",
    )
    dimensions: Optional[int] = Field(
        default=None,
        gt=0,
        description="Shortened output size for models that support it (text-embedding-3-*).",
    )
    base_url: Optional[str] = Field(
        default=None, description="API base URL, e.g. http://localhost:8000/v1."
    )
    timeout: float = Field(default=60.0, gt=0, description="Per-request timeout in seconds.")
    max_retries: int = Field(default=2, ge=0, description="SDK retries on transient errors.")

    _api_key: str = PrivateAttr()
    _clients: _ClientSlot = PrivateAttr(default_factory=lambda: _ClientSlot())

    def __init__(
        self,
        *,
        api_key: Optional[str] = None,
        base_url: Optional[str] = None,
        **data: Any,
    ) -> None:
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
        return "OpenAIEmbedding"

    @property
    def dimension(self) -> Optional[int]:
        """Known output size, or None for models this module has no table entry for."""
        if self.dimensions is not None:
            return self.dimensions
        return OPENAI_EMBEDDING_DIMENSIONS.get(self.model_name)

    def _client_settings(self) -> Tuple[Any, ...]:
        return (self._api_key, self.base_url, self.timeout, self.max_retries)

    def _sync_client(self) -> Any:
        slot, settings = self._clients, self._client_settings()
        with slot.lock:
            if slot.sync is None or slot.sync_settings != settings:
                import openai  # noqa: PLC0415 - ~0.6 s import, only when used

                slot.sync = openai.OpenAI(
                    api_key=self._api_key,
                    base_url=self.base_url,
                    timeout=self.timeout,
                    max_retries=self.max_retries,
                )
                slot.sync_settings = settings
            return slot.sync

    def _async_client(self) -> Any:
        """One async client per event loop.

        An ``AsyncOpenAI`` pools connections bound to the loop that opened
        them; reusing it after that loop closes (e.g. across two
        ``asyncio.run`` calls) fails with "Event loop is closed".
        """
        loop = asyncio.get_running_loop()
        slot, settings = self._clients, self._client_settings()
        with slot.lock:
            if (
                slot.aio is None
                or slot.aio_settings != settings
                or slot.aio_loop is None
                or slot.aio_loop() is not loop
            ):
                import openai  # noqa: PLC0415 - ~0.6 s import, only when used

                slot.aio = openai.AsyncOpenAI(
                    api_key=self._api_key,
                    base_url=self.base_url,
                    timeout=self.timeout,
                    max_retries=self.max_retries,
                )
                slot.aio_settings = settings
                slot.aio_loop = weakref.ref(loop)
            return slot.aio

    def _request_kwargs(self, batch: List[str]) -> Dict[str, Any]:
        # "float" explicitly: the SDK otherwise asks for base64, which some
        # OpenAI-compatible servers do not implement.
        kwargs: Dict[str, Any] = {
            "model": self.model_name,
            "input": batch,
            "encoding_format": "float",
        }
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        return kwargs

    @staticmethod
    def _vectors(response: Any, expected: int) -> List[Embedding]:
        # Sorted by index because the API does not promise response order.
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != expected:
            raise RuntimeError(
                f"embedding server returned {len(data)} vectors for {expected} inputs"
            )
        return [[float(x) for x in item.embedding] for item in data]

    def _batches(self, texts: List[str]) -> List[List[str]]:
        size = self.embed_batch_size
        return [texts[start : start + size] for start in range(0, len(texts), size)]

    def _embed(self, texts: List[str]) -> List[Embedding]:
        _check_texts(texts)
        client = self._sync_client()
        results: List[Embedding] = []
        for batch in self._batches(texts):
            response = client.embeddings.create(**self._request_kwargs(batch))
            results.extend(self._vectors(response, len(batch)))
        return results

    async def _aembed(self, texts: List[str]) -> List[Embedding]:
        _check_texts(texts)
        client = self._async_client()
        results: List[Embedding] = []
        # Sequential on purpose: LlamaIndex's aget_text_embedding_batch already
        # fans out across batches (num_workers); doing it here as well would
        # multiply concurrency and trip rate limits.
        for batch in self._batches(texts):
            response = await client.embeddings.create(**self._request_kwargs(batch))
            results.extend(self._vectors(response, len(batch)))
        return results



# --------------------------------------------------------------------------
# Selection and introspection
# --------------------------------------------------------------------------

_ACCEPTED_FORMS = (
    "None (uses $" + EMBED_MODEL_ENV_VAR + ", default 'wordllama'), a BaseEmbedding instance, "
    "'wordllama', 'wordllama:<dim>' with dim in "
    + "/".join(map(str, SUPPORTED_WORDLLAMA_DIMS))
    + ", 'openai', 'openai:<model>' (e.g. 'openai:text-embedding-3-large')"
)


def resolve_embed_model(spec: Any = None) -> BaseEmbedding:
    """Turn a config value into an embedding model.

    Lets settings files, CLIs and environment variables pick a backend with
    a short string, while code that already built a model passes it through
    untouched.
    """
    if isinstance(spec, BaseEmbedding):
        return spec
    source = "spec"
    if spec is None:
        env_value = os.environ.get(EMBED_MODEL_ENV_VAR, "").strip()
        if env_value:
            spec, source = env_value, f"${EMBED_MODEL_ENV_VAR}"
        else:
            spec = "wordllama"
    if not isinstance(spec, str):
        raise ValueError(
            f"unsupported embed model {spec!r} ({type(spec).__name__}); accepted: {_ACCEPTED_FORMS}"
        )

    text = spec.strip()
    kind, _, arg = text.partition(":")
    kind, arg = kind.strip().lower(), arg.strip()
    if kind == "wordllama":
        if not arg:
            return WordLlamaEmbedding()
        if arg.isdigit() and int(arg) in SUPPORTED_WORDLLAMA_DIMS:
            return WordLlamaEmbedding(dim=int(arg))
    elif kind == "openai":
        if not arg:
            return OpenAIEmbedding()
        return OpenAIEmbedding(model_name=arg)
    raise ValueError(f"unknown embed model {text!r} (from {source}); accepted: {_ACCEPTED_FORMS}")


_PROBE_TEXT = "dimension probe"
_PROBED_DIMENSIONS: Dict[int, Tuple[weakref.ref, int]] = {}
# Re-entrant: the weakref callback below may run during garbage collection
# triggered while this same thread already holds the lock.
_PROBED_LOCK = threading.RLock()


def embedding_dimension(embed_model: BaseEmbedding) -> int:
    """Output size of ``embed_model``, needed to create vector indexes up front.

    Uses the model's ``dimension`` when it declares one; otherwise embeds a
    probe text once and remembers the answer for as long as the model lives
    (a paid API should not be called for this more than once). The memo is
    keyed by ``id`` with a weak reference because pydantic models are not
    hashable and so cannot go into a ``WeakKeyDictionary``.
    """
    declared = getattr(embed_model, "dimension", None)
    if callable(declared):
        declared = declared()
    if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0:
        return declared

    key = id(embed_model)
    with _PROBED_LOCK:
        entry = _PROBED_DIMENSIONS.get(key)
        if entry is not None and entry[0]() is embed_model:
            return entry[1]

    size = len(embed_model.get_text_embedding(_PROBE_TEXT))
    if size <= 0:
        raise ValueError(f"{type(embed_model).__name__} returned an empty probe embedding")

    def _forget(_ref: weakref.ref, key: int = key) -> None:
        with _PROBED_LOCK:
            current = _PROBED_DIMENSIONS.get(key)
            if current is not None and current[0] is _ref:
                del _PROBED_DIMENSIONS[key]

    with _PROBED_LOCK:
        _PROBED_DIMENSIONS[key] = (weakref.ref(embed_model, _forget), size)
    return size
