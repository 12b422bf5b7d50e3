"""The package's layers only point down, and nothing imports in a circle.

Read from the source (``ast``), so the check needs no import side effects:
every ``import`` counts, including those inside functions (a deferred
import is still a dependency); those under ``if TYPE_CHECKING:`` do not
(they never run).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "llama_consciousness"
ROOT = "llama_consciousness"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The package modules ``name`` imports when it runs (``from pkg import submodule`` counts as the submodule)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                found.add(f"{module}.{alias.name}" if f"{module}.{alias.name}" in MODULES else module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_checker_finds_a_cycle_and_reads_deferred_imports() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    assert f"{ROOT}.ingestion.pipeline" in GRAPH[f"{ROOT}.memory"]  # imported inside a method


def test_no_import_cycles() -> None:
    assert _cycles(GRAPH) == []


def _under(module: str, *prefixes: str) -> bool:
    return any(module == f"{ROOT}.{p}" or module.startswith(f"{ROOT}.{p}.") for p in prefixes)


# (who, what it must not import): the layers, from the top down
FORBIDDEN = [
    (("ingestion",), ("memory", "retrievers", "postprocessors", "cli")),
    (("retrievers",), ("ingestion", "memory", "cli")),
    (("postprocessors",), ("ingestion", "memory", "retrievers", "cli")),
    (("storage",), ("ingestion", "memory", "retrievers", "postprocessors", "cli", "embeddings")),
    (("schema", "scoring", "temporal", "levels", "errors"),
     ("storage", "ingestion", "memory", "retrievers", "postprocessors", "cli", "embeddings")),
    # the runner and the wire format are storage's own business
    (("retrievers", "postprocessors", "ingestion"),
     ("storage.interleaved", "storage.knn_gate", "storage.replies", "storage.params")),
]


@pytest.mark.parametrize(("who", "what"), FORBIDDEN)
def test_layers_point_down(who: tuple[str, ...], what: tuple[str, ...]) -> None:
    wrong = sorted((name, dep) for name, deps in GRAPH.items() if _under(name, *who)
                   for dep in deps if _under(dep, *what))
    assert wrong == []


def test_nothing_outside_storage_calls_a_private_store_method() -> None:
    private = re.compile(r"(?<!self)\._(run|execute)\(")
    wrong = [str(path.relative_to(PACKAGE)) for name, path in MODULES.items()
             if not _under(name, "storage") and private.search(path.read_text())]
    assert wrong == []
