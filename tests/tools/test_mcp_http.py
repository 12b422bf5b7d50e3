"""``llama-consciousness mcp --http`` with bearer tokens, as a deployed server is used: the SDK's client over
streamable HTTP, raw HTTP requests for what a client library would not send, and LlamaIndex's
``McpToolSpec`` (llama-index-tools-mcp) giving a FunctionAgent the memory through MCP end to end."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tool_helpers import HttpServer, McpClient, first_id, http_connect, ids_in, scripted_llm, server_env

mcp = pytest.importorskip("mcp")
httpx2 = pytest.importorskip("httpx2")

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:inspect")  # llama-index-workflows' reads

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class Citizens:
    def __init__(self) -> None:
        stem = "h" + uuid.uuid4().hex[:10]
        self.ada, self.bob = stem + "a", stem + "b"
        self.ada_token, self.bob_token = "ada." + uuid.uuid4().hex, "bob." + uuid.uuid4().hex


@pytest.fixture(scope="module")
def who() -> Citizens:
    return Citizens()


@pytest.fixture(scope="module")
def server(memory, shared_dir, postgres_url, tmp_path_factory, who) -> Iterator[HttpServer]:
    """One server for the module: ada's token in a file (mode 600), bob's in the environment."""
    folder = tmp_path_factory.mktemp("mcp_http")
    tokens = folder / "tokens.txt"
    tokens.write_text(f"# citizen=token\n{who.ada}={who.ada_token}\n")
    os.chmod(tokens, 0o600)
    env = server_env(postgres_url, LLAMA_CONSCIOUSNESS_MCP_TOKENS=f"{who.bob}={who.bob_token}")
    running = HttpServer(shared_dir, env, folder / "server.log", "--tokens", str(tokens), "--verbose")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def ada(server, who) -> Iterator[McpClient]:
    client = McpClient(http_connect(server.url, who.ada_token))
    yield client
    client.close()


@pytest.fixture(scope="module")
def bob(server, who) -> Iterator[McpClient]:
    client = McpClient(http_connect(server.url, who.bob_token))
    yield client
    client.close()


def test_each_token_reaches_its_own_citizen_only(ada, bob, memory, who) -> None:
    secret = first_id(ada.text("remember", {"text": "Ada's locker code is 4417."}))
    assert memory.get_node(secret, "N1", who.ada) is not None and memory.get_node(secret, "N1", who.bob) is None
    assert "4417" in ada.text("recall", {"query": "locker code"})
    assert "4417" not in bob.text("recall", {"query": "locker code"})
    assert "4417" not in bob.text("what_changed", {"topic": secret})
    for name in ("forget", "restore"):
        result = bob.call(name, {"memory_id": secret, **({"reason": "incorrect"} if name == "forget" else {})})
        assert result.is_error and f"Not in {who.bob}'s memory" in result.content[0].text
    assert bob.text("forget", {"query": "locker code"}).startswith("No memory contains")
    with pytest.raises(Exception, match="no memory"):
        bob.run(lambda s: s.read_resource(f"memory://memories/{secret}"))
    ada.text("update_state", {"goal": "keep the locker safe"})
    bob_state = json.loads(bob.run(lambda s: s.read_resource("memory://state")).contents[0].text)
    assert bob_state == {"citizen_id": who.bob, "state": None, "history": []}
    assert memory.get_node(secret, "N1", who.ada).forgotten_at is None


def test_requests_without_a_valid_token_are_refused(server, who) -> None:
    with httpx2.Client(timeout=10) as http:
        for token in (None, "not-a-token-at-all-0000", who.ada_token + "x", who.ada_token[:-1]):
            headers = {**HEADERS, **({"Authorization": f"Bearer {token}"} if token else {})}
            answer = http.post(server.url, json=INITIALIZE, headers=headers)
            assert answer.status_code == 401, (token, answer.status_code)
            assert "invalid_token" in answer.text
        valid = {**HEADERS, "Authorization": f"Bearer {who.ada_token}"}
        ok = http.post(server.url, json=INITIALIZE, headers=valid)
        assert ok.status_code == 200 and ok.headers.get("mcp-session-id")
        # a web page's request (DNS rebinding) is refused even with a valid token: foreign Host, foreign Origin
        assert http.post(server.url, json=INITIALIZE, headers={**valid, "Host": "evil.example:80"}).status_code == 421
        assert http.post(server.url, json=INITIALIZE, headers={**valid, "Origin": "http://evil.example"}
                         ).status_code == 403
    with pytest.raises(BaseException):  # the SDK's client fails to connect, too
        McpClient(http_connect(server.url, "not-a-token-at-all-0000"), timeout=30)


def test_a_session_does_not_change_hands(server, ada, memory, who) -> None:
    """Bob's token on a session ada opened: refused, or served as bob; never ada's memory."""
    first_id(ada.text("remember", {"text": "Ada's bank PIN hint is the cat's birthday."}))
    with httpx2.Client(timeout=10) as http:
        opened = http.post(server.url, json=INITIALIZE, headers={**HEADERS, "Authorization": f"Bearer {who.ada_token}"})
        session = opened.headers["mcp-session-id"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "recall", "arguments": {"query": "bank PIN hint"}}}
        answer = http.post(server.url, json=call, headers={
            **HEADERS, "Authorization": f"Bearer {who.bob_token}", "mcp-session-id": session,
            "mcp-protocol-version": "2025-06-18"})
        assert "cat's birthday" not in answer.text
        assert answer.status_code in (400, 403, 404) or "Nothing remembered" in answer.text


def test_two_clients_writing_at_once(server, ada, bob, memory, who) -> None:
    second_ada = McpClient(http_connect(server.url, who.ada_token))
    try:
        async def burst(session: Any, name: str) -> list[Any]:
            texts = [f"{name}'s errand {i}: buy item {i} at shop {i}." for i in range(5)]
            texts.append(f"{name}'s umbrella is the red one.")
            return await asyncio.gather(*(session.call_tool("remember", {"text": t}) for t in texts))

        futures = [asyncio.run_coroutine_threadsafe(burst(c.session, name), c._loop)
                   for c, name in ((ada, "Ada"), (second_ada, "Ada"), (bob, "Bob"))]
        results = [f.result(120) for f in futures]
    finally:
        second_ada.close()
    assert not any(r.is_error for rs in results for r in rs)
    ada_ids = {first_id(r.content[0].text) for rs in results[:2] for r in rs}
    bob_ids = {first_id(r.content[0].text) for r in results[2]}
    assert len(ada_ids) == 6 and len(bob_ids) == 6  # the same six statements twice: six memories
    assert all(memory.get_node(i, "N1", who.ada) is not None and memory.get_node(i, "N1", who.bob) is None
               for i in ada_ids)
    assert all(memory.get_node(i, "N1", who.bob) is not None for i in bob_ids)


def test_huge_and_malformed_requests_change_nothing(server, ada, memory, who) -> None:
    before = memory.counts("N1", who.ada)
    headers = {**HEADERS, "Authorization": f"Bearer {who.ada_token}"}
    with httpx2.Client(timeout=30) as http:
        huge = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "remember", "arguments": {"text": "z" * 8_000_000}}}
        assert http.post(server.url, content=json.dumps(huge), headers=headers).status_code >= 400
        assert http.post(server.url, content=b"{not json", headers=headers).status_code >= 400
    over = ada.call("remember", {"text": "z" * 50_000})
    assert over.is_error and "at most 20000 characters" in over.content[0].text
    assert ada.call("no_such_tool", {}).is_error
    assert memory.counts("N1", who.ada) == before


def test_a_llamaindex_agent_uses_the_memory_through_mcp(server, memory, who) -> None:
    """LlamaIndex's own MCP client and tool spec in front of our server: the agent stores, recalls and forgets."""
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.memory import Memory
    from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

    def plan(user: str, history: list[Any]) -> list[tuple[str, dict[str, Any]]]:
        if user.startswith("Remember"):
            return [("remember", {"text": "Bob's favourite tea is genmaicha.", "rationale": "gift ideas"})]
        if user.startswith("What tea"):
            return [("recall", {"query": "Bob's favourite tea"})]
        if user.startswith("Forget"):
            return [("forget", {"memory_id": ids_in(history, "genmaicha")[-1], "reason": "user_requested"})]
        return []

    client = BasicMCPClient(server.url, headers={"Authorization": f"Bearer {who.bob_token}"}, timeout=30)
    llm, script = scripted_llm(plan)

    async def conversation() -> list[str]:
        tools = await McpToolSpec(client=client).to_tool_list_async()
        assert {t.metadata.name for t in tools} == {"remember", "recall", "what_changed", "forget", "restore",
                                                    "state", "update_state"}
        agent = FunctionAgent(tools=tools, llm=llm, system_prompt="You are Bob's assistant.")
        chat = Memory.from_defaults(session_id="mcp-agent", token_limit=20_000)
        return [str(await agent.run(user_msg=turn, memory=chat)) for turn in (
            "Remember that my favourite tea is genmaicha.", "What tea do I like?", "Forget my tea, please.",
            "What tea do I like?")]

    stored, recalled, forgotten, after = asyncio.run(conversation())
    tea = first_id(stored)
    assert "genmaicha" in recalled and tea in recalled
    assert "Forgotten (user requested)" in forgotten and tea in forgotten
    assert "genmaicha" not in after and "umbrella" in after  # bob's other memories are still recalled
    node = memory.get_node(tea, "N1", who.bob)
    assert node.forgotten_by == f"mcp:{who.bob}" and node.formation_trigger == "gift ideas"
    assert len(script.tool_outputs) == 4


def test_the_log_holds_no_token(server, who) -> None:
    """Last in the module: after every call above (the server logs at INFO), neither token was written."""
    log = Path(server.log).read_text()
    assert "serving the memory of 2 citizen(s)" in log
    assert who.ada_token not in log and who.bob_token not in log
