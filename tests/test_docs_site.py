"""The documentation site (mkdocs.yml, docs/) builds with ``mkdocs build --strict``: no broken link, no
missing reference, and every public name of ``llama_consciousness.__all__`` has its API reference entry."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import llama_consciousness

ROOT = Path(__file__).resolve().parent.parent


def test_every_public_name_is_in_the_api_reference():
    documented = set()
    for page in (ROOT / "docs" / "reference").glob("*.md"):
        documented |= set(re.findall(r"^::: llama_consciousness\.(\w+)\s*$", page.read_text(), flags=re.M))
    missing = sorted(set(llama_consciousness.__all__) - documented)
    assert not missing, f"public names without an API reference entry in docs/reference/: {missing}"


def test_the_site_builds_strictly(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f", str(ROOT / "mkdocs.yml"),
         "-d", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stdout}\n{run.stderr}"
    assert (tmp_path / "site" / "reference" / "memory" / "index.html").exists()
    assert (tmp_path / "site" / "benchmarks" / "RESULTS" / "index.html").exists()


def test_every_public_name_and_its_public_methods_have_a_docstring():
    """The API reference is generated from docstrings: nothing public goes without one."""
    import inspect

    missing = []
    for name in llama_consciousness.__all__:
        obj = getattr(llama_consciousness, name)
        if name == "__version__":
            continue
        if not (inspect.getdoc(obj) or "").strip():
            missing.append(name)
        if inspect.isclass(obj):
            for attr, value in vars(obj).items():
                if attr.startswith("_"):
                    continue
                function = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
                if inspect.isfunction(function) and not (function.__doc__ or "").strip():
                    missing.append(f"{name}.{attr}")
    assert not missing, f"public names without a docstring: {missing}"


def test_the_architecture_page_names_every_module_of_the_package():
    text = (ROOT / "docs" / "architecture.md").read_text()
    layout = text[text.index("## Package layout"):]
    layout = layout[: layout.index("\n## ", 1)]
    package = ROOT / "llama_consciousness"
    modules = [p.name for p in package.iterdir()
               if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and not p.name.startswith("__"))]
    missing = sorted(name for name in modules if name not in layout)
    assert not missing, f"docs/architecture.md's package layout does not name: {missing}"
