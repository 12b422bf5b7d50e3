"""``llama-consciousness mcp --citizen X`` over stdio, driven by the ``mcp`` SDK's own client as desktop and
IDE clients drive it: the server is a subprocess on the tests' shared memory (it joins its servers), and what
the calls did is checked in the memory directly."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llama_consciousness import ConsciousnessToolSpec
from llama_consciousness.tools import TOOL_ARGS, tool_description

from tool_helpers import McpClient, first_id, server_env, stdio_command

mcp = pytest.importorskip("mcp")


def stdio_client_of(citizen: str, data_dir: Path, postgres_url: str, errlog: Any) -> McpClient:
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=stdio_command(citizen, data_dir),
                                   env=server_env(postgres_url))
    return McpClient(lambda: stdio_client(params, errlog=errlog))


@pytest.fixture(scope="module")
def stdio_citizen() -> str:
    return "s" + uuid.uuid4().hex[:12]


@pytest.fixture(scope="module")
def client(memory, shared_dir, postgres_url, stdio_citizen) -> Iterator[McpClient]:
    with tempfile.TemporaryFile("w+") as errlog:
        session = stdio_client_of(stdio_citizen, shared_dir, postgres_url, errlog)
        yield session
        session.close()


def test_the_server_lists_the_toolspec_tools_resources_and_prompt(client) -> None:
    assert client.init.server_info.name == "llama-consciousness"
    tools = client.run(lambda s: s.list_tools()).tools
    assert [t.name for t in tools] == list(TOOL_ARGS)
    for tool in tools:
        assert tool.description == tool_description(tool.name)  # what an LLM reads is the ToolSpec's
        assert tool.annotations.read_only_hint == (tool.name in ("recall", "what_changed", "state"))
    schema = {t.name: t.input_schema for t in tools}
    assert schema["remember"]["required"] == ["text"]
    assert schema["remember"]["properties"]["text"]["maxLength"] == 20_000
    assert "citizen" not in json.dumps(schema)  # no tool takes a citizen
    assert schema["forget"]["properties"]["reason"]["enum"][0] == "user_requested"
    assert [r.uri for r in client.run(lambda s: s.list_resources()).resources] == ["memory://state"]
    templates = client.run(lambda s: s.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["memory://memories/{memory_id}"]
    assert [p.name for p in client.run(lambda s: s.list_prompts()).prompts] == ["what_do_you_remember"]


def test_store_recall_correct_forget_restore_over_stdio(client, memory, stdio_citizen) -> None:
    moss = first_id(client.text("remember", {"text": "Ada's dentist is Dr Moss on Rue Cler.", "rationale": "visits"}))
    assert f"id={moss}" in client.text("recall", {"query": "Ada's dentist"})
    corrected = client.text("remember", {"text": "Ada's dentist is now Dr Okafor in Belleville."})
    okafor = first_id(corrected)
    assert "replaces an earlier memory" in corrected
    assert memory.get_node(moss, "N1", stdio_citizen).superseded_by == okafor  # written where the citizen lives

    changed = client.text("what_changed", {"topic": "Ada's dentist"})
    assert changed.index(moss) < changed.index(okafor) and "[current]" in changed
    assert "[past: replaced" in client.text("recall", {"query": "Ada's dentist", "mode": "evolution"})

    assert okafor in client.text("forget", {"memory_id": okafor, "reason": "incorrect"})
    assert memory.get_node(okafor, "N1", stdio_citizen).forgotten_by == f"mcp:{stdio_citizen}"
    assert okafor in client.text("restore", {"memory_id": okafor})
    assert memory.get_node(okafor, "N1", stdio_citizen).forgotten_at is None

    history = json.loads(client.run(lambda s: s.read_resource(f"memory://memories/{moss}")).contents[0].text)
    versions = {v["node_id"]: v for v in history["versions"]}
    assert history["node_id"] == moss and versions[moss]["why_superseded"]["superseded_by"] == okafor
    assert versions[okafor]["current"] and not versions[moss]["current"]
    assert "embedding" not in history["memory"]

    client.text("update_state", {"energy": 0.6, "goal": "see the dentist"})
    state = json.loads(client.run(lambda s: s.read_resource("memory://state")).contents[0].text)
    assert state["citizen_id"] == stdio_citizen and state["state"]["goal"] == "see the dentist"
    assert "goal: see the dentist" in client.text("state")

    prompt = client.run(lambda s: s.get_prompt("what_do_you_remember", {"topic": "Ada's dentist"}))
    text = prompt.messages[0].content.text
    assert prompt.messages[0].role == "user" and "What do you remember about Ada's dentist?" in text
    assert "Okafor" in text and "[past" in text


def test_bad_inputs_are_mcp_errors_and_change_nothing(client, memory, stdio_citizen) -> None:
    client.text("remember", {"text": "Ada keeps her passport in the blue drawer."})
    before = memory.counts("N1", stdio_citizen)
    calls = {
        "wrong type": ("recall", {"query": "passport", "k": "many"}),
        "wrong type 2": ("update_state", {"energy": "high"}),
        "not a string": ("remember", {"text": {"nested": 1}}),
        "huge text": ("remember", {"text": "x" * 1_000_000}),
        "huge query": ("recall", {"query": "y" * 100_000}),
        "missing argument": ("recall", {}),
        "unknown reason": ("forget", {"query": "passport", "reason": "because"}),
        "out of range": ("recall", {"query": "passport", "k": 10_000}),
        "unknown tool": ("erase_everything", {}),
        "another citizen's id": ("forget", {"memory_id": "mem_00000000000000000000"}),
    }
    for what, (name, arguments) in calls.items():
        result = client.call(name, arguments)
        assert result.is_error, (what, result)
        assert "x" * 200 not in result.content[0].text, what  # a huge value is not sent back whole
    assert "Unknown tool" in client.call("erase_everything").content[0].text
    refused = client.call("forget", {"memory_id": "mem_00000000000000000000"})  # worded as the ToolSpec words it
    assert refused.content[0].text == ConsciousnessToolSpec(memory, stdio_citizen).forget(
        memory_id="mem_00000000000000000000")
    assert refused.meta["llama_consciousness/tool_ms"] >= 0  # the tool's own time in the server
    assert memory.counts("N1", stdio_citizen) == before
    assert memory.get_node(first_id(client.text("recall", {"query": "passport"})), "N1",
                           stdio_citizen).forgotten_at is None
    with pytest.raises(Exception, match="no memory"):
        client.run(lambda s: s.read_resource("memory://memories/mem_00000000000000000000"))


def test_no_argument_reaches_another_citizens_memory(client, memory, stdio_citizen) -> None:
    other = stdio_citizen + "o"
    secret = first_id(ConsciousnessToolSpec(memory, other).remember("Bob's locker code is 4417."))
    assert "4417" not in client.text("recall", {"query": "Bob's locker code"})
    # an argument the schema does not have is dropped: the call stays in the server's citizen
    assert "4417" not in client.call("recall", {"query": "Bob's locker code", "citizen_id": other}).content[0].text
    for name in ("forget", "restore"):
        result = client.call(name, {"memory_id": secret})
        assert result.is_error and f"Not in {stdio_citizen}'s memory" in result.content[0].text
    with pytest.raises(Exception, match="no memory"):
        client.run(lambda s: s.read_resource(f"memory://memories/{secret}"))
    assert memory.get_node(secret, "N1", other).forgotten_at is None


def test_calls_at_once_on_one_session_and_from_a_second_server(client, memory, shared_dir, postgres_url,
                                                               stdio_citizen) -> None:
    """Two clients of the same citizen, each with its own server process (two desktop apps), writing at once:
    every distinct statement is stored once, the one both send is stored once."""
    with tempfile.TemporaryFile("w+") as errlog:
        second = stdio_client_of(stdio_citizen, shared_dir, postgres_url, errlog)
        try:
            async def burst(session: Any, who: str) -> list[Any]:
                texts = [f"Ada's {who} reminder {i}: water plant {i} on day {i}." for i in range(6)]
                texts.append("Ada's bike is the green one in the shed.")
                return await asyncio.gather(*(session.call_tool("remember", {"text": t}) for t in texts))

            futures = [asyncio.run_coroutine_threadsafe(burst(c.session, who), c._loop)
                       for c, who in ((client, "first"), (second, "second"))]
            results = [r for f in futures for r in f.result(120)]
        finally:
            second.close()
    assert not any(r.is_error for r in results)
    ids = {first_id(r.content[0].text) for r in results}
    assert len(ids) == 13  # 12 distinct reminders and one bike
    assert all(memory.get_node(i, "N1", stdio_citizen) is not None for i in ids)
    assert "green one in the shed" in client.text("recall", {"query": "Ada's bike"})
