"""Every ```python block of README.md and the site's pages (docs/**/*.md, examples/mcp_server.md) runs, offline, against the embedded servers.

The blocks of one page run in order in one namespace, as a reader pastes them, in a fresh working and data
directory per page (``LLAMA_CONSCIOUSNESS_HOME``), without ``OPENAI_API_KEY``. An HTML comment right
before a block's fence changes how it is run:

* ``<!-- snippet: llm -->``: the block needs an LLM (an API key in real use); it runs with a scripted
  LlamaIndex LLM: ``llama_consciousness.llms.resolve_llm`` returns it, and ``llm`` is it when the page did
  not define one.
* ``<!-- snippet: file NAME -->``: the block (JSON Lines, say) is written to ``NAME`` in the page's working
  directory, for the blocks after it to read.
* ``<!-- snippet: skip REASON -->``: not run (a cluster, a long-running server); the reason is required
  and such blocks stay few.

Other languages (bash, json, text) are not run; the README's two commands for a fresh machine are checked
to be there, as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "examples" / "mcp_server.md"]  # the site's
MAX_SKIPS = 3
README_COMMANDS = [
    'python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/llama-consciousness demo',
    'python3 -m venv .venv && .venv/bin/pip install -q -e ".[test]" && .venv/bin/python -m pytest -q',
]
MARK = re.compile(r"^<!--\s*snippet:\s*(\S+)\s*(.*?)\s*-->$")
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    code: str
    mark: str | None = None
    arg: str = ""


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a page, each with the snippet mark right before its fence (if any)."""
    found: list[Block] = []
    lines = page.read_text().split("\n")
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent, lang, start = fence.group(1), fence.group(2), i
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        block = Block(page, start + 1, lang, "\n".join(body) + "\n")
        before = start - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        mark = MARK.match(lines[before].strip()) if before >= 0 else None
        if mark:
            block.mark, block.arg = mark.group(1), mark.group(2)
        found.append(block)
        i += 1
    return found


def runnable(page: Path) -> bool:
    return any(b.lang == "python" and b.mark != "skip" for b in blocks(page))


def name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_marks_are_known_and_skips_have_reasons_and_are_few():
    skips = []
    for page in PAGES:
        for block in blocks(page):
            if block.mark is None:
                continue
            where = f"{name(page)}:{block.line}"
            assert block.mark in ("skip", "llm", "file"), f"{where}: unknown snippet mark {block.mark!r}"
            if block.mark == "skip":
                assert block.arg, f"{where}: a skipped block says why"
                skips.append(where)
            if block.mark == "file":
                assert re.fullmatch(r"[\w.-]+", block.arg), f"{where}: a file mark names a file"
    assert len(skips) <= MAX_SKIPS, f"too many skipped blocks: {skips}"


def test_the_readme_keeps_the_two_commands_for_a_fresh_machine():
    readme = (ROOT / "README.md").read_text()
    first_screen = readme[: readme.index("## Quick start")]
    bash = {b.code.strip() for b in blocks(ROOT / "README.md") if b.lang == "bash"}
    for command in README_COMMANDS:
        assert command in bash and command in first_screen, f"README lost its command: {command}"
    assert len(readme) <= 8000, f"README is {len(readme)} characters (at most 8,000)"


def test_the_readmes_links_lead_to_files_that_exist():
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)\s]+)\)", readme):
        path = target.split("#")[0]
        if "://" in target or not path:
            continue
        assert (ROOT / path).exists(), f"README links to {target}, which does not exist"
        if "#" in target and path.endswith(".md"):
            anchor = target.split("#", 1)[1]
            assert anchor in github_anchors(ROOT / path), f"README links to {target}: no such heading"


def github_anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings (lower case, punctuation dropped, spaces to hyphens)."""
    anchors = set()
    for heading in re.findall(r"^#+ (.+)$", page.read_text(), flags=re.M):
        anchors.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return anchors


def scripted_llm():
    """A LlamaIndex LLM that needs no key: it answers with a fixed text, and calls no tool."""
    from llama_index.core.base.llms.types import LLMMetadata
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    class ScriptedLLM(MockFunctionCallingLLM):
        @property
        def metadata(self) -> LLMMetadata:  # a real model's context window: a query engine fits its context
            return super().metadata.model_copy(update={"context_window": 128_000})

    def answer(messages, **kwargs):
        from llama_index.core.base.llms.types import ChatMessage

        asked = str(messages[-1].content or "") if messages else ""
        if "cypher" in asked.lower():  # TextToCypherRetriever asks for one read query
            return ChatMessage(role="assistant", content="MATCH (m) RETURN m.name AS name LIMIT 5")
        return ChatMessage(role="assistant", content="From what I remember: " + asked[-200:])

    return ScriptedLLM(is_chat_model=True, response_generator=answer)


@pytest.mark.parametrize("page", [p for p in PAGES if runnable(p)], ids=name)
def test_the_page_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import llama_consciousness.llms

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LLAMA_CONSCIOUSNESS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    namespace: dict = {"__name__": "__docs__"}
    try:
        for block in blocks(page):
            if block.mark == "file":
                (tmp_path / block.arg).write_text(block.code)
                continue
            if block.lang != "python" or block.mark == "skip":
                continue
            if block.mark == "llm":
                llm = scripted_llm()
                monkeypatch.setattr(llama_consciousness.llms, "resolve_llm", lambda spec=None, _llm=llm: _llm)
                namespace.setdefault("llm", llm)
            code = compile(block.code, f"{name(page)}:{block.line}", "exec")
            try:
                exec(code, namespace)
            except Exception as error:
                raise AssertionError(f"the block at {name(page)}:{block.line} failed: {error!r}") from error
    finally:
        from llama_consciousness import ConsciousnessMemory

        for value in list(namespace.values()):
            if isinstance(value, ConsciousnessMemory):
                value.close()
