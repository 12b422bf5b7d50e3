"""The MCP server's configuration: bearer tokens (file and environment, digests only, never echoed) and the
command line's refusals, each before any server starts."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from llama_consciousness.cli import main

mcp = pytest.importorskip("mcp")

from llama_consciousness.mcp_server import (  # noqa: E402 - after the skip: the module needs mcp at use
    TOKENS_ENV, CitizenTokens, MemoryMCPServer, load_tokens, parse_tokens)

ADA = "ada-secret-token-000000001"
BOB = "bob-secret-token-000000002"


def test_pairs_by_line_or_comma_with_comments() -> None:
    digests = parse_tokens(f"# who=token\nada={ADA}  # laptop\n\nada=ada-second-token-0000003, bob = {BOB}\n")
    assert sorted(digests.values()) == ["ada", "ada", "bob"]
    assert ADA not in str(digests) and BOB not in str(digests)  # digests only


@pytest.mark.parametrize("text, says", [
    ("ada", "entry 1 is not citizen=token"),
    (f"=  {ADA}", "entry 1 is not citizen=token"),
    ("ada=short", "at least 16 characters"),
    ("ada=has a space in the token", "at least 16 characters"),
    (f"../x={ADA}", "is not a citizen id"),
    (f"ada={ADA},bob={ADA}", "also given to 'ada'"),
])
def test_bad_entries_are_refused_without_showing_the_token(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as raised:
        parse_tokens(text, "tokens.txt")
    assert "short" not in str(raised.value).replace("shorter", "") and ADA not in str(raised.value)
    assert "has a space" not in str(raised.value)


def test_tokens_from_a_file_and_the_environment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "tokens"
    file.write_text(f"ada={ADA}\n")
    os.chmod(file, 0o644)
    digests = load_tokens(file, {TOKENS_ENV: f"bob={BOB}"})
    assert sorted(digests.values()) == ["ada", "bob"]
    assert "can be read by other users" in capsys.readouterr().err
    os.chmod(file, 0o600)
    load_tokens(file, {})
    assert capsys.readouterr().err == ""
    with pytest.raises(ValueError, match="given to both 'ada' and 'bob'"):
        load_tokens(file, {TOKENS_ENV: f"bob={ADA}"})
    with pytest.raises(ValueError, match="cannot read the tokens file"):
        load_tokens(tmp_path / "missing", {})
    assert load_tokens(None, {}) == {}


def test_the_verifier_names_the_citizen_and_keeps_no_token() -> None:
    verifier = CitizenTokens(parse_tokens(f"ada={ADA},bob={BOB}"))
    assert verifier.citizens == ["ada", "bob"]
    access = asyncio.run(verifier.verify_token(ADA))
    assert (access.client_id, access.subject, access.scopes) == ("ada", "ada", ["memory"])
    assert ADA not in access.model_dump_json()
    assert asyncio.run(verifier.verify_token(ADA + "x")) is None and asyncio.run(verifier.verify_token("")) is None
    with pytest.raises(ValueError, match="no bearer tokens"):
        CitizenTokens({})


def test_the_server_has_one_way_of_naming_the_citizen(memory) -> None:
    with pytest.raises(ValueError, match="one of them"):
        MemoryMCPServer(memory)
    with pytest.raises(ValueError, match="one of them"):
        MemoryMCPServer(memory, citizen_id="ada", tokens=CitizenTokens(parse_tokens(f"ada={ADA}")))
    with pytest.raises(ValueError):
        MemoryMCPServer(memory, citizen_id="../ada")


@pytest.mark.parametrize("argv, says", [
    (["mcp"], "whose memory? give --citizen"),
    (["mcp", "--citizen", "ada", "--tokens", "t.txt"], "--tokens goes with --http"),
    (["mcp", "--citizen", "a b"], "citizen"),
    (["mcp", "--http", "127.0.0.1:0"], "no bearer tokens"),
    (["mcp", "--http", "127.0.0.1:0", "--citizen", "ada"], "no --citizen"),
])
def test_the_command_refuses_what_it_cannot_serve(argv: list[str], says: str, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(TOKENS_ENV, raising=False)
    monkeypatch.delenv("LLAMA_CONSCIOUSNESS_MCP_CITIZEN", raising=False)
    assert main(argv) == 2
    assert says in capsys.readouterr().err


def test_a_bad_address_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["mcp", "--http", "localhost"])
    assert raised.value.code == 2 and "not HOST:PORT" in capsys.readouterr().err


def test_a_slow_or_failing_memory_is_an_mcp_error_in_time() -> None:
    """In process (the SDK's own MCPServer.call_tool / read_resource): a memory that does not answer within the
    timeout, or is down, gives an error result or a resource error at once, with words a client can act on."""
    import threading
    import time
    from types import SimpleNamespace

    from mcp.server.mcpserver.exceptions import ResourceError

    release = threading.Event()

    def hang(*args: object, **kwargs: object) -> None:
        release.wait(5)

    def down(*args: object, **kwargs: object) -> None:
        raise ConnectionError("connection refused")

    slow = MemoryMCPServer(SimpleNamespace(citizen_state=hang, citizen_state_history=hang), citizen_id="ada",
                           timeout_s=0.2)
    broken = MemoryMCPServer(SimpleNamespace(citizen_state=down, citizen_state_history=down), citizen_id="ada")

    async def run() -> tuple[object, object, BaseException, float]:
        started = time.perf_counter()
        late = await slow.server.call_tool("state", {})
        with pytest.raises(ResourceError, match="did not answer within 0.2 s") as raised:
            await slow.server.read_resource("memory://state")
        elapsed = time.perf_counter() - started
        release.set()
        return late, await broken.server.call_tool("state", {}), raised.value, elapsed

    late, failed, _, elapsed = asyncio.run(run())
    assert late.is_error and late.content[0].text == "Error: the memory did not answer within 0.2 s; try again later"
    assert failed.is_error and "unavailable right now (ConnectionError)" in failed.content[0].text
    assert elapsed < 2
