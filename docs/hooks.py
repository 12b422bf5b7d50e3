"""MkDocs hook: the site also shows two files that live outside ``docs/`` (the measurements and the MCP
client configuration), and links between the repository's files work on GitHub and on the site alike.

A page links to a file by its path in the repository (``../benchmarks/RESULTS.md`` from ``docs/index.md``),
which is what GitHub follows. On the site this hook adds those two files as pages and rewrites such links
to the site's own paths, so ``mkdocs build --strict`` checks them like any other link; a link to another
file of the repository that exists but is not on the site (``../../examples/chatbot.py``) becomes its text;
a link to a file that does not exist is left for mkdocs to report.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

REPO = Path(__file__).resolve().parent.parent
EXTRA_PAGES = ["benchmarks/RESULTS.md", "examples/mcp_server.md"]  # repository paths shown on the site
ALIASES = {"design.md": "architecture.md"}  # pages that moved: old links lead to the new page
LINK = re.compile(r"(?<!!)\[([^\]\n]*)\]\(([^)\s#]+)(#[^)\s]*)?\)")


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
        text, url, anchor = match.group(1), match.group(2), match.group(3) or ""
        if ":" in url or url.startswith("/"):
            return match.group(0)  # a URL (https:, mailto:) or an absolute path
        target = posixpath.normpath(posixpath.join(here, url))  # a path in the repository
        if target.startswith("docs/"):
            site_src = target[len("docs/"):]
            if page.file.src_uri != "design.md":
                site_src = ALIASES.get(site_src, site_src)
        elif target in EXTRA_PAGES:
            site_src = target
        elif (REPO / target).exists():
            return text  # a file of the repository that the site does not show
        else:
            return match.group(0)  # left for mkdocs to report
        new = posixpath.relpath(site_src, posixpath.dirname(page.file.src_uri) or ".")
        return f"[{text}]({new}{anchor})"

    return LINK.sub(rewrite, markdown)
