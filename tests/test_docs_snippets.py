"""Every python and shell block of README.md and the site's pages (docs/**/*.md, examples/mcp_server.md)
runs, offline, against the embedded servers.

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

Shell blocks (bash, sh, shell, console) run too, line by line, in page order with the python blocks, in the
same working and data directory. A ``llama-consciousness`` command (a leading ``.venv/bin/`` removed) runs
in-process through ``llama_consciousness.cli.main``, split with ``shlex``; it must exit 0, or with the status
its comment gives (``# exits 2: ...``), and it must not report a memory "not found". A line is split at
``&&``, ``||``, ``;`` and ``|``: ``cd`` changes the page's directory, ``export X=Y`` (or a bare ``X=Y``) sets
``X`` for the rest of the page, what a ``llama-consciousness`` part pipes into is not run, and any other
command runs in bash (the venv's ``python`` first on the PATH; the checkout's ``examples`` beside the page).
The command heads of ``NOT_RUN`` are not run: they serve until stopped, install, or are the test suite.
Commands share one embedded server per data directory for the whole page (held by the test), and a ``demo``
without ``--data-dir`` uses the page's ``demo`` directory instead of a temporary one (kept for the next).

Other languages (json, text) are not run; the README's two commands for a fresh machine are checked to be
there, as they are.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "examples" / "mcp_server.md"]  # the site's
MAX_SKIPS = 4
SHELLS = ("bash", "sh", "shell", "console")
# The heads of the shell commands that are shown, not run, and why; every other shell command runs (and a
# multi-line script that needs a cluster is a skipped block).
NOT_RUN = {
    "llama-consciousness ui": "serves the web inspector until stopped (tests/test_ui.py runs it)",
    "llama-consciousness mcp": "serves MCP until stopped (tests/tools/test_mcp_*.py run it)",
    "python3 -m venv": "makes the environment the tests run in",
    "pip": "installs",
    "source": "activates the environment the tests run in",
    "python -m pytest": "the test suite itself",
    "python benchmarks/": "minutes each, some on downloaded data sets",
}
SEPARATORS = ("&&", "||", ";", "|")
EXIT_STATUS = re.compile(r"#.*\bexits? (?:with )?(?:status )?(\d+)\b")
NOT_FOUND = re.compile(r"\bnot found: [1-9]")
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
    return any(b.lang in ("python", *SHELLS) and b.mark != "skip" for b in blocks(page))


def name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def command_lines(code: str) -> list[str]:
    """A shell block's commands, one a line: continuations joined, comment lines and prompts dropped."""
    lines = []
    for line in code.replace("\\\n", " ").split("\n"):
        line = line.strip().removeprefix("$ ")
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def line_parts(line: str) -> list[tuple[str, list[str]]]:
    """A command line's parts as (the separator before it, its words); the comment dropped."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    found: list[tuple[str, list[str]]] = [("", [])]
    for word in lexer:
        if word in SEPARATORS:
            found.append((word, []))
        else:
            found[-1][1].append(word)
    return [(sep, [w.removeprefix(".venv/bin/") for w in words[:1]] + words[1:]) for sep, words in found if words]


def not_run(words: list[str]) -> str | None:
    """The head of NOT_RUN a command starts with (it is not run), or None."""
    text = " ".join(words)
    for head in NOT_RUN:
        if text == head or text.startswith(head + ("" if head.endswith("/") else " ")):
            return head
    return None


def page_commands(page: Path) -> list[list[str]]:
    """The argv of every llama-consciousness command a page runs."""
    found = []
    for block in blocks(page):
        if block.lang in SHELLS and block.mark != "skip":
            for line in command_lines(block.code):
                for _, words in line_parts(line):
                    if words[0] == "llama-consciousness" and not_run(words) is None:
                        found.append(words[1:])
    return found


def data_dir_of(argv: list[str], cwd: Path) -> Path:
    """Where a command keeps its memory: --data-dir, else the page's demo directory (demo) or home."""
    for i, word in enumerate(argv):
        if word == "--data-dir" and i + 1 < len(argv):
            return cwd / argv[i + 1]
        if word.startswith("--data-dir="):
            return cwd / word.split("=", 1)[1]
    return cwd / "demo" if argv[:1] == ["demo"] else Path(os.environ["LLAMA_CONSCIOUSNESS_HOME"])


def run_command(argv: list[str], expected: int, where: str) -> None:
    """One llama-consciousness command, in-process; stdout to the file of a ``>`` if any."""
    from llama_consciousness.cli import main

    target = None
    if ">" in argv:
        at = argv.index(">")
        argv, target = argv[:at], argv[at + 1]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as stop:  # argparse: a bad option
            status = stop.code if isinstance(stop.code, int) else 1
    if target:
        Path(target).write_text(out.getvalue())
    said = f"{where}: llama-consciousness {shlex.join(argv)}"
    assert status == expected, f"{said} exited {status} (expected {expected}): {err.getvalue()[-800:]}"
    assert not NOT_FOUND.search(out.getvalue()), f"{said} names a memory the page did not write: {out.getvalue()}"


def run_shell(line: str, expected: int, where: str) -> None:
    """A command that is not llama-consciousness's, in bash, in the page's directory."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    done = subprocess.run(["bash", "-c", line], cwd=os.getcwd(), env={**os.environ, "PATH": path},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == expected, f"{where}: {line!r} exited {done.returncode}: {done.stderr[-800:]}"


def run_shell_block(block: Block, monkeypatch: pytest.MonkeyPatch) -> None:
    for line in command_lines(block.code):
        where = f"{name(block.page)}:{block.line}"
        status = EXIT_STATUS.search(line)
        expected = int(status.group(1)) if status else 0
        parts = line_parts(line)
        plain = all(words[0] not in ("llama-consciousness", "cd", "export") and not re.match(r"\w+=", words[0])
                    and not_run(words) is None for _, words in parts)
        if plain:  # a shell line of its own: bash runs it as written
            run_shell(line, expected, where)
            continue
        consumer = ours = False
        for separator, words in parts:
            consumer = separator == "|" and (consumer or ours)  # reads what a llama-consciousness part printed
            ours = words[0] == "llama-consciousness"
            if consumer or not_run(words) is not None:
                continue
            if words[0] == "cd":
                monkeypatch.chdir(words[1])
            elif words[0] == "export" or all(re.match(r"\w+=", w) for w in words):
                for assignment in words[1:] if words[0] == "export" else words:
                    key, _, value = assignment.partition("=")
                    monkeypatch.setenv(key, value)
            elif words[0] == "llama-consciousness":
                run_command(words[1:], expected, where)
            else:  # beside a part handled here: its words as shlex read them (no $VAR expansion)
                run_shell(shlex.join(words), expected, where)


def test_the_shell_commands_not_run_are_of_a_short_list_each_used():
    """A shell command that is not run has a head of NOT_RUN (the others run in test_the_page_runs), and
    NOT_RUN keeps no head that no page shows."""
    used = set()
    for page in PAGES:
        for block in blocks(page):
            if block.lang in SHELLS and block.mark != "skip":
                for line in command_lines(block.code):
                    used.update(not_run(words) for _, words in line_parts(line))
    assert used - {None} == set(NOT_RUN), f"heads no page shows: {set(NOT_RUN) - used}"
    assert len(NOT_RUN) <= 8


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
    import llama_consciousness.cli
    import llama_consciousness.llms
    from llama_consciousness.storage.falkordb_server import EmbeddedFalkorDB

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LLAMA_CONSCIOUSNESS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # a reader runs the examples from a checkout
    # a demo without --data-dir: the page's demo directory, kept, instead of a temporary one per command
    demo_dir = types.SimpleNamespace(mkdtemp=lambda **_: str(tmp_path / "demo"))
    monkeypatch.setattr(llama_consciousness.cli, "tempfile", demo_dir)
    monkeypatch.setattr(llama_consciousness.cli, "shutil", types.SimpleNamespace(rmtree=lambda *_, **__: None))
    namespace: dict = {"__name__": "__docs__"}
    servers = []
    try:
        # one embedded server per data directory the page's commands use, held for the whole page: the
        # commands (and the python blocks' memories) join it rather than each starting and stopping one
        for data_dir in dict.fromkeys(data_dir_of(argv, tmp_path) for argv in page_commands(page)):
            servers.append(EmbeddedFalkorDB(data_dir).start())
        for block in blocks(page):
            if block.mark == "file":
                (tmp_path / block.arg).write_text(block.code)
                continue
            if block.lang in SHELLS and block.mark != "skip":
                run_shell_block(block, monkeypatch)
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
        for server in servers:
            server.stop()
