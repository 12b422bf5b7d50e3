"""Helpers of the tool tests (tests/tools): a scripted function-calling LLM, an MCP client session driven from
synchronous tests, and the ``llama-consciousness mcp`` server started as a user would start it (a subprocess)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM

ID = re.compile(r"\bmem_[0-9a-f]{20}\b")


def first_id(text: str) -> str:
    """The first memory id a tool's answer names (the test fails, showing the answer, when it names none)."""
    found = ID.findall(text)
    assert found, text
    return found[0]


class ToolScript:
    """What a function-calling LLM decides, one turn at a time: ``plan(user_text, history)`` gives the tool
    calls for a user message (``[(name, kwargs)]``); once the tools have answered, the LLM replies with their
    outputs, so the agent's answer shows what the tools said.  Keeps every tool output it saw."""

    def __init__(self, plan: Callable[[str, list[ChatMessage]], list[tuple[str, dict[str, Any]]]]) -> None:
        self.plan = plan
        self.tool_outputs: list[str] = []

    def __call__(self, messages: Any, **kwargs: Any) -> ChatMessage:
        messages = list(messages)
        last = messages[-1]
        if last.role == MessageRole.TOOL:
            outputs = []
            for message in reversed(messages):
                if message.role != MessageRole.TOOL:
                    break
                outputs.insert(0, message.content or "")
            self.tool_outputs += outputs
            return ChatMessage(role="assistant", content="\n".join(outputs))
        calls = self.plan(last.content or "", messages)
        if not calls:
            return ChatMessage(role="assistant", content="Nothing to do.")
        return ChatMessage(role="assistant", blocks=[
            ToolCallBlock(tool_call_id=f"call_{len(messages)}_{i}", tool_name=name, tool_kwargs=kwargs)
            for i, (name, kwargs) in enumerate(calls)])


def scripted_llm(plan: Callable[..., list[tuple[str, dict[str, Any]]]]) -> tuple[MockFunctionCallingLLM, ToolScript]:
    script = ToolScript(plan)
    return MockFunctionCallingLLM(response_generator=script, is_chat_model=True), script


def ids_in(messages: list[ChatMessage], near: str) -> list[str]:
    """The memory ids on the lines of earlier tool outputs that mention ``near`` (as an LLM reads them; an MCP
    tool's output reaches it as the repr of the ``CallToolResult``, its line breaks written as ``\\n``)."""
    found = []
    for message in messages:
        if message.role == MessageRole.TOOL:
            for line in (message.content or "").replace("\\n", "\n").splitlines():
                if near in line:
                    found += ID.findall(line)
    return found


class McpClient:
    """An MCP ``ClientSession`` kept open in its own thread and event loop (anyio's scopes must close in the task
    that opened them), called from synchronous tests: ``call(tool, args)``, ``run(lambda session: ...)``."""

    def __init__(self, connect: Callable[[], Any], timeout: float = 90.0) -> None:
        from mcp import ClientSession

        self._client_session = ClientSession
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-client", daemon=True)
        self._thread.start()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self.session: Any = None
        self.init: Any = None
        self._main = asyncio.run_coroutine_threadsafe(self._hold(connect), self._loop)
        if not self._ready.wait(timeout):
            self.close()
            raise TimeoutError(f"the MCP session did not open within {timeout} s")
        if self._error is not None:
            self.close()
            raise self._error

    async def _hold(self, connect: Callable[[], Any]) -> None:
        self._stop = asyncio.Event()
        try:
            async with connect() as (read, write):
                async with self._client_session(read, write, read_timeout_seconds=60) as session:
                    self.init = await session.initialize()
                    self.session = session
                    self._ready.set()
                    await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 - handed to the test that waits
            if not self._ready.is_set():
                self._error = exc
                self._ready.set()
            else:
                raise

    def run(self, fn: Callable[[Any], Any], timeout: float = 60.0) -> Any:
        return asyncio.run_coroutine_threadsafe(fn(self.session), self._loop).result(timeout)

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        return self.run(lambda s: s.call_tool(name, arguments or {}))

    def text(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        """A call that must succeed: its text."""
        result = self.call(name, arguments)
        assert not result.is_error, result.content[0].text
        return result.content[0].text

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        with contextlib.suppress(BaseException):
            self._main.result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def server_env(postgres_url: str, **extra: str) -> dict[str, str]:
    """The environment of a server subprocess on the tests' shared memory (the same vector backends), with the
    machine's OpenBLAS settings (the SDK's stdio client passes a child only HOME, PATH, SHELL and TERM)."""
    blas = {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS_")}
    return {**blas, "LLAMA_CONSCIOUSNESS_POSTGRES_URL": postgres_url, "LLAMA_CONSCIOUSNESS_PGVECTOR_LEVELS": "N3",
            "HF_HUB_OFFLINE": "1", **extra}


def stdio_command(citizen: str, data_dir: Path) -> list[str]:
    return ["-m", "llama_consciousness.cli", "mcp", "--citizen", citizen, "--data-dir", str(data_dir)]


class HttpServer:
    """``llama-consciousness mcp --http 127.0.0.1:0`` in a subprocess; ``url`` once it listens; its stderr in
    ``log`` (read by the tests: no token may appear there)."""

    def __init__(self, data_dir: Path, env: dict[str, str], log: Path, *extra: str) -> None:
        self.log = log
        self._err = open(log, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llama_consciousness.cli", "mcp", "--http", "127.0.0.1:0", "--data-dir",
             str(data_dir), *extra], env={**os.environ, **env}, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=self._err)
        deadline = time.monotonic() + 90
        self.url = ""
        while time.monotonic() < deadline:
            found = re.search(r"on (http://\S+/mcp)", log.read_text())
            if found:
                self.url = found.group(1)
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the MCP HTTP server did not start: {log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._err.close()


def http_connect(url: str, token: str | None) -> Callable[[], Any]:
    """A connector for :class:`McpClient`: streamable HTTP with ``Authorization: Bearer token``."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    @contextlib.asynccontextmanager
    async def connect() -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else None
        async with create_mcp_http_client(headers=headers) as client:
            async with streamable_http_client(url, http_client=client) as streams:
                yield streams

    return connect
