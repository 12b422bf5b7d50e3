"""MkDocs hook: the site also shows two files that live outside ``docs/`` (the measurements and the MCP
client configuration), and links between the repository's files work on GitHub and on the site alike.

A page links to a file by its path in the repository (``../benchmarks/RESULTS.md`` from ``docs/index.md``);
this hook adds those files as pages and rewrites such links to the site's own paths, so
``mkdocs build --strict`` checks them like any other link.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

REPO = Path(__file__).resolve().parent.parent
EXTRA_PAGES = ["benchmarks/RESULTS.md", "examples/mcp_server.md"]  # repository paths shown on the site
ALIASES = {"design.md": "architecture.md"}  # pages that moved: old links lead to the new page
LINK = re.compile(r"(\]\()([^)\s#]+\.md)(#[^)\s]*)?(\))")


def on_files(files, config):
    for path in EXTRA_PAGES:
        files.append(File(path, str(REPO), config["site_dir"], config["use_directory_urls"]))
    return files


def _repo_path(page_src: str) -> str:
    """The repository path of a page's source file."""
    return page_src if page_src in EXTRA_PAGES else "docs/" + page_src


def on_page_markdown(markdown, page, config, files):
    here = posixpath.dirname(_repo_path(page.file.src_uri))

    def rewrite(match: re.Match) -> str:
        url = match.group(2)
        if "://" in url:
            return match.group(0)
        target = posixpath.normpath(posixpath.join(here, url))  # a path in the repository
        if target.startswith("docs/"):
            site_src = target[len("docs/"):]
            if page.file.src_uri != "design.md":
                site_src = ALIASES.get(site_src, site_src)
        elif target in EXTRA_PAGES:
            site_src = target
        else:
            return match.group(0)  # left for mkdocs to report
        new = posixpath.relpath(site_src, posixpath.dirname(page.file.src_uri) or ".")
        return f"{match.group(1)}{new}{match.group(3) or ''}{match.group(4)}"

    return LINK.sub(rewrite, markdown)
