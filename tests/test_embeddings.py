"""Tests for the embedding backends, all offline.

The OpenAI wrapper is exercised end to end against a tiny OpenAI-compatible
HTTP server started on 127.0.0.1, so the real SDK, request shape, batching
and response parsing are covered without network access or a key.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List

import numpy as np
import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import TextNode

from llama_consciousness import embeddings as emb
from llama_consciousness.embeddings import (
    EMBED_MODEL_ENV_VAR,
    SUPPORTED_WORDLLAMA_DIMS,
    OpenAIEmbedding,
    WordLlamaEmbedding,
    embedding_dimension,
    resolve_embed_model,
)

GRAPH_A = "the graph database stores memories"
GRAPH_B = "FalkorDB stores graph memories"
BANANA = "bananas are yellow fruit"


def cosine(a: List[float], b: List[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def wl() -> WordLlamaEmbedding:
    return WordLlamaEmbedding()


# --------------------------------------------------------------------------
# WordLlamaEmbedding
# --------------------------------------------------------------------------


def test_default_dimension_is_256(wl: WordLlamaEmbedding) -> None:
    vector = wl.get_text_embedding(GRAPH_A)
    assert len(vector) == 256
    assert wl.dim == wl.dimension == wl.embedding_dimension() == 256
    assert wl.model_name == "wordllama-l2_supercat"
    assert wl.embed_batch_size == 64
    assert all(type(x) is float for x in vector)


def test_dimension_128() -> None:
    model = WordLlamaEmbedding(dim=128)
    assert len(model.get_query_embedding(GRAPH_A)) == 128
    assert model.dimension == 128


def test_truncated_dims_are_prefixes_of_the_full_table(wl: WordLlamaEmbedding) -> None:
    small = WordLlamaEmbedding(dim=64)
    assert small.wordllama.embedding.shape[1] == 64
    np.testing.assert_array_equal(small.wordllama.embedding, wl.wordllama.embedding[:, :64])


def test_supported_dims_match_wordllama_config() -> None:
    from wordllama.config.models import WordLlamaModels

    available = WordLlamaModels.l2_supercat.available_dims
    assert SUPPORTED_WORDLLAMA_DIMS == tuple(d for d in available if d <= 256)


@pytest.mark.parametrize("bad", [0, 32, 100, 512, 1024])
def test_bad_dim_is_rejected(bad: int) -> None:
    with pytest.raises(ValueError, match=r"64, 128, 256"):
        WordLlamaEmbedding(dim=bad)


def test_vectors_are_unit_length(wl: WordLlamaEmbedding) -> None:
    for vector in wl.get_text_embedding_batch([GRAPH_A, GRAPH_B, BANANA, "x"]):
        assert math.isclose(float(np.linalg.norm(vector)), 1.0, rel_tol=1e-9)


def test_deterministic(wl: WordLlamaEmbedding) -> None:
    assert wl.get_text_embedding(GRAPH_A) == wl.get_text_embedding(GRAPH_A)
    assert wl.get_text_embedding(GRAPH_A) == WordLlamaEmbedding().get_text_embedding(GRAPH_A)


def test_query_and_text_embeddings_agree(wl: WordLlamaEmbedding) -> None:
    assert wl.get_query_embedding(GRAPH_A) == wl.get_text_embedding(GRAPH_A)


def test_matches_wordllama_reference_pooling(wl: WordLlamaEmbedding) -> None:
    texts = [GRAPH_A, GRAPH_B, BANANA, "a much longer sentence " * 40]
    ours = np.array(wl.get_text_embedding_batch(texts))
    reference = wl.wordllama.embed(texts, norm=True)
    np.testing.assert_allclose(ours, reference, atol=1e-5)


def test_semantic_ordering(wl: WordLlamaEmbedding) -> None:
    a, b, c = wl.get_text_embedding_batch([GRAPH_A, GRAPH_B, BANANA])
    related, unrelated_a, unrelated_b = cosine(a, b), cosine(a, c), cosine(b, c)
    assert related > 0.6
    assert related > unrelated_a + 0.3
    assert related > unrelated_b + 0.3
    # Unit vectors: cosine is the plain dot product.
    assert math.isclose(float(np.dot(a, b)), related, rel_tol=1e-9)


def test_batch_equals_single(wl: WordLlamaEmbedding) -> None:
    texts = [GRAPH_A, "short", BANANA + " " + "and more words " * 30, GRAPH_B]
    batch = wl.get_text_embedding_batch(texts)
    singles = [wl.get_text_embedding(t) for t in texts]
    assert batch == singles


def test_batching_across_embed_batch_size() -> None:
    model = WordLlamaEmbedding(embed_batch_size=3)
    texts = [f"memory number {i} about topic {i % 4}" for i in range(10)]
    batched = model._get_text_embeddings(texts)  # more texts than one batch
    assert batched == [model.get_text_embedding(t) for t in texts]


async def test_async_equals_sync(wl: WordLlamaEmbedding) -> None:
    texts = [GRAPH_A, GRAPH_B, BANANA]
    assert await wl.aget_query_embedding(GRAPH_A) == wl.get_query_embedding(GRAPH_A)
    assert await wl.aget_text_embedding(GRAPH_B) == wl.get_text_embedding(GRAPH_B)
    assert await wl.aget_text_embedding_batch(texts) == wl.get_text_embedding_batch(texts)


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_text_is_rejected(wl: WordLlamaEmbedding, text: str) -> None:
    with pytest.raises(ValueError, match="cannot embed empty text"):
        wl.get_text_embedding(text)
    with pytest.raises(ValueError, match="cannot embed empty text"):
        wl.get_text_embedding_batch([GRAPH_A, text])


async def test_empty_text_is_rejected_async(wl: WordLlamaEmbedding) -> None:
    with pytest.raises(ValueError, match="cannot embed empty text"):
        await wl.aget_query_embedding("")


def test_model_is_shared_between_instances() -> None:
    first, second = WordLlamaEmbedding(), WordLlamaEmbedding()
    assert first.wordllama is second.wordllama
    assert first._loaded is second._loaded
    assert WordLlamaEmbedding(dim=128).wordllama is not first.wordllama


def test_concurrent_first_load_happens_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emb, "_MODEL_CACHE", {})
    loaded: List[Any] = []
    barrier = threading.Barrier(6)

    def build() -> None:
        barrier.wait()
        loaded.append(WordLlamaEmbedding(dim=64)._loaded)

    threads = [threading.Thread(target=build) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loaded) == 6
    assert all(item is loaded[0] for item in loaded)
    assert len(emb._MODEL_CACHE) == 1


def test_missing_weights_error_names_path(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setattr(emb, "_wordllama_package_dir", lambda: tmp_path)
    with pytest.raises(FileNotFoundError) as excinfo:
        WordLlamaEmbedding()
    message = str(excinfo.value)
    assert str(tmp_path / "weights" / "l2_supercat_256.safetensors") in message


def test_copies_and_pickles_share_the_loaded_table() -> None:
    import copy
    import pickle

    model = WordLlamaEmbedding(dim=128)
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model)), model.model_copy()):
        assert clone.dim == 128
        assert clone._loaded is model._loaded
        assert clone.get_text_embedding(GRAPH_A) == model.get_text_embedding(GRAPH_A)


def test_importing_wordllama_leaves_root_logging_alone() -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    emb._import_wordllama()
    assert root.handlers == handlers and root.level == level


def test_vector_store_index_retrieves_the_right_node(wl: WordLlamaEmbedding) -> None:
    nodes = [
        TextNode(text="FalkorDB stores graph memories as nodes and edges.", id_="graph"),
        TextNode(text="Bananas are a yellow tropical fruit rich in potassium.", id_="banana"),
    ]
    index = VectorStoreIndex(nodes, embed_model=wl)
    retriever = index.as_retriever(similarity_top_k=1)
    assert retriever.retrieve("which graph database keeps the memories?")[0].node.node_id == "graph"
    assert retriever.retrieve("what colour is a banana")[0].node.node_id == "banana"


async def test_vector_store_index_async_retrieval(wl: WordLlamaEmbedding) -> None:
    nodes = [
        TextNode(text="FalkorDB stores graph memories as nodes and edges.", id_="graph"),
        TextNode(text="Bananas are a yellow tropical fruit rich in potassium.", id_="banana"),
    ]
    index = VectorStoreIndex(nodes, embed_model=wl, use_async=True)
    results = await index.as_retriever(similarity_top_k=1).aretrieve("yellow banana fruit")
    assert results[0].node.node_id == "banana"


# --------------------------------------------------------------------------
# OpenAIEmbedding against a local OpenAI-compatible server
# --------------------------------------------------------------------------

FAKE_DIM = 8


def fake_vector(text: str, dim: int = FAKE_DIM) -> List[float]:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return [round(digest[i] / 255.0 - 0.5, 6) for i in range(dim)]


class FakeOpenAIServer:
    """Records every request and answers like POST /v1/embeddings."""

    def __init__(self) -> None:
        self.requests: List[Dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path != "/v1/embeddings":
                    self._reply(404, {"error": {"message": f"no route {self.path}"}})
                    return
                with server.lock:
                    server.requests.append(
                        {"body": body, "authorization": self.headers.get("Authorization")}
                    )
                inputs = body["input"]
                dim = body.get("dimensions") or FAKE_DIM
                data = [
                    {"object": "embedding", "index": i, "embedding": fake_vector(text, dim)}
                    for i, text in enumerate(inputs)
                ]
                data.reverse()  # the client must order by "index", not position
                self._reply(
                    200,
                    {
                        "object": "list",
                        "data": data,
                        "model": body["model"],
                        "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)},
                    },
                )

            def _reply(self, status: int, payload: Dict[str, Any]) -> None:
                raw = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()


@pytest.fixture(scope="module")
def fake_openai() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer()
    server.thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
        server.thread.join(timeout=5)


@pytest.fixture
def server(fake_openai: FakeOpenAIServer) -> FakeOpenAIServer:
    fake_openai.reset()
    return fake_openai


def make_openai(server: FakeOpenAIServer, **kwargs: Any) -> OpenAIEmbedding:
    return OpenAIEmbedding(api_key="test-key", base_url=server.base_url, max_retries=0, **kwargs)


def test_openai_missing_key_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError) as excinfo:
        OpenAIEmbedding()
    message = str(excinfo.value)
    assert "OPENAI_API_KEY" in message
    assert "needs no key" in message and "wordllama" in message


def test_openai_env_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    model = OpenAIEmbedding()
    assert model.model_name == "text-embedding-3-small"
    assert model.embed_batch_size == 100
    assert model.base_url == "http://127.0.0.1:1/v1"
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert OpenAIEmbedding().base_url is None


def test_openai_key_is_not_serialised(monkeypatch: pytest.MonkeyPatch) -> None:
    model = OpenAIEmbedding(api_key="sk-secret-value")
    assert "sk-secret-value" not in json.dumps(model.to_dict(), default=str)
    assert "sk-secret-value" not in repr(model.model_dump())
    assert "sk-secret-value" not in json.dumps(model.to_payload())


def test_openai_known_dimensions() -> None:
    def dim(**kwargs: Any) -> Any:
        return OpenAIEmbedding(api_key="k", **kwargs).dimension

    assert dim() == 1536
    assert dim(model_name="text-embedding-3-large") == 3072
    assert dim(model_name="text-embedding-ada-002") == 1536
    assert dim(model_name="text-embedding-3-large", dimensions=256) == 256
    assert dim(model_name="some-local-model") is None


def test_openai_sync_round_trip_batches_in_order(server: FakeOpenAIServer) -> None:
    model = make_openai(server)
    texts = [f"memory {i}" for i in range(250)]
    vectors = model.get_text_embedding_batch(texts)
    assert vectors == [fake_vector(t) for t in texts]
    sizes = [len(r["body"]["input"]) for r in server.requests]
    assert sizes == [100, 100, 50]
    first = server.requests[0]
    assert first["body"]["model"] == "text-embedding-3-small"
    assert first["body"]["encoding_format"] == "float"
    assert "dimensions" not in first["body"]
    assert first["authorization"] == "Bearer test-key"


def test_openai_direct_batch_call_is_chunked(server: FakeOpenAIServer) -> None:
    model = make_openai(server)
    texts = [f"note {i}" for i in range(250)]
    assert model._get_text_embeddings(texts) == [fake_vector(t) for t in texts]
    assert [len(r["body"]["input"]) for r in server.requests] == [100, 100, 50]


def test_openai_query_and_dimensions(server: FakeOpenAIServer) -> None:
    model = make_openai(server, model_name="text-embedding-3-large", dimensions=4)
    assert model.get_query_embedding("hello") == fake_vector("hello", 4)
    body = server.requests[0]["body"]
    assert body["dimensions"] == 4 and body["model"] == "text-embedding-3-large"
    assert embedding_dimension(model) == 4


async def test_openai_async_round_trip_batches_in_order(server: FakeOpenAIServer) -> None:
    model = make_openai(server)
    texts = [f"async memory {i}" for i in range(250)]
    vectors = await model.aget_text_embedding_batch(texts)
    assert vectors == [fake_vector(t) for t in texts]
    assert sorted(len(r["body"]["input"]) for r in server.requests) == [50, 100, 100]
    assert await model.aget_query_embedding("q") == fake_vector("q")
    assert await model.aget_text_embedding("t") == fake_vector("t")
    # The async path gives the same answers as the sync one.
    assert model.get_text_embedding_batch(texts[:3]) == vectors[:3]


def test_openai_async_client_survives_separate_event_loops(server: FakeOpenAIServer) -> None:
    model = make_openai(server)

    def run_in_fresh_loop() -> List[float]:
        # A new thread has no running loop, so asyncio.run can create one
        # even though the test session's loop is active in this thread.
        out: List[List[float]] = []
        thread = threading.Thread(
            target=lambda: out.append(asyncio.run(model.aget_text_embedding("loop")))
        )
        thread.start()
        thread.join()
        return out[0]

    assert run_in_fresh_loop() == fake_vector("loop")
    assert run_in_fresh_loop() == fake_vector("loop")


def test_openai_copies_get_their_own_clients(server: FakeOpenAIServer) -> None:
    import copy
    import pickle

    model = make_openai(server)
    assert model.get_text_embedding("a") == fake_vector("a")
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert clone._clients is not model._clients
        assert clone.get_text_embedding("b") == fake_vector("b")


def test_openai_client_follows_changed_base_url(server: FakeOpenAIServer) -> None:
    model = OpenAIEmbedding(api_key="k", base_url="http://127.0.0.1:9/v1", max_retries=0)
    model._client()  # built for the dead endpoint
    moved = model.model_copy(update={"base_url": server.base_url})
    assert moved.get_text_embedding("c") == fake_vector("c")


def test_openai_rejects_empty_text_without_a_request(server: FakeOpenAIServer) -> None:
    model = make_openai(server)
    with pytest.raises(ValueError, match="cannot embed empty text"):
        model.get_text_embedding_batch(["fine", "  "])
    assert server.requests == []


# --------------------------------------------------------------------------
# resolve_embed_model / embedding_dimension
# --------------------------------------------------------------------------


def test_resolve_default_is_wordllama(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EMBED_MODEL_ENV_VAR, raising=False)
    model = resolve_embed_model()
    assert isinstance(model, WordLlamaEmbedding) and model.dim == 256


def test_resolve_uses_env_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EMBED_MODEL_ENV_VAR, "wordllama:128")
    model = resolve_embed_model(None)
    assert isinstance(model, WordLlamaEmbedding) and model.dim == 128

    monkeypatch.setenv(EMBED_MODEL_ENV_VAR, "nonsense")
    with pytest.raises(ValueError, match=EMBED_MODEL_ENV_VAR):
        resolve_embed_model()


def test_resolve_string_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert resolve_embed_model("wordllama").dim == 256
    assert resolve_embed_model(" WordLlama:64 ").dim == 64
    openai_default = resolve_embed_model("openai")
    assert isinstance(openai_default, OpenAIEmbedding)
    assert openai_default.model_name == "text-embedding-3-small"
    large = resolve_embed_model("openai:text-embedding-3-large")
    assert isinstance(large, OpenAIEmbedding) and large.model_name == "text-embedding-3-large"


def test_resolve_passes_instances_through(wl: WordLlamaEmbedding) -> None:
    assert resolve_embed_model(wl) is wl
    mock = MockEmbedding(embed_dim=3)
    assert resolve_embed_model(mock) is mock


@pytest.mark.parametrize("spec", ["bert", "wordllama:512", "wordllama:abc", "openai-ish", 42])
def test_resolve_unknown_lists_accepted_forms(spec: Any) -> None:
    with pytest.raises(ValueError) as excinfo:
        resolve_embed_model(spec)
    message = str(excinfo.value)
    for form in ("'wordllama'", "'wordllama:<dim>'", "'openai'", "'openai:<model>'"):
        assert form in message


def test_embedding_dimension_uses_declared_dimension(wl: WordLlamaEmbedding) -> None:
    assert embedding_dimension(wl) == 256
    assert embedding_dimension(OpenAIEmbedding(api_key="k", model_name="text-embedding-3-large")) == 3072


def test_embedding_dimension_probes_once_and_caches() -> None:
    class CountingEmbedding(MockEmbedding):
        calls: int = 0

        def _get_text_embedding(self, text: str) -> List[float]:
            self.calls += 1
            return super()._get_text_embedding(text)

    model = CountingEmbedding(embed_dim=5)
    assert embedding_dimension(model) == 5
    assert embedding_dimension(model) == 5
    assert model.calls == 1
    other = CountingEmbedding(embed_dim=7)
    assert embedding_dimension(other) == 7 and other.calls == 1


def test_embedding_dimension_cache_forgets_dead_models() -> None:
    import gc

    model = MockEmbedding(embed_dim=3)
    key = id(model)
    assert embedding_dimension(model) == 3
    assert key in emb._PROBED_DIMENSIONS
    del model
    gc.collect()
    assert key not in emb._PROBED_DIMENSIONS
