"""The ``ui`` inspector shows a forgotten memory (``memory.forget``) greyed, with why it was forgotten: in the
JSON API (``/api/stream`` in ``full_history``, ``/api/memory``) and on the page in a real headless Chromium
(Playwright, the system's browser), as ``tests/test_ui.py`` does; and leaves it out of ``current`` recall."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from llama_consciousness.schema import MemoryNode
from llama_consciousness.ui import serve
from test_ui import CHROMIUM_ARGS, _api, _chromium, ask_n1

QUESTION = "Which telescope does the observatory on the hill use?"
TEXTS = {
    "scope": "The observatory on the hill uses a refracting telescope called Old Brass.",
    "cafe": "The cafe near the observatory serves cardamom buns on Fridays.",
}


@pytest.fixture
def forgotten(memory, citizen: str) -> tuple[str, str]:
    """A citizen with two memories, ``scope`` forgotten (reason incorrect, by ada), ``cafe`` kept."""
    memory.ingest([MemoryNode(node_id=key, level="N1", citizen_id=citizen, node_type="Observation", name=text[:50],
                              description=text, energy=0.6, confidence=0.8) for key, text in TEXTS.items()])
    report = memory.forget("scope", "N1", citizen, reason="incorrect", by="ada", note="it is a reflector")
    assert report.forgotten == ["scope"]
    return citizen, "scope"


@pytest.fixture
def ui(memory) -> Iterator[Any]:
    server = serve(memory)
    try:
        yield server
    finally:
        server.stop()


def _stream_nodes(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The stream's memories by id: its tiers and each level's channels."""
    stream = answer["stream"]
    found = {n["node_id"]: n for tier in stream["activation_tiers"].values() for n in tier}
    for level in stream["levels"].values():
        for channel in ("vector_results", "graph_results", "keyword_results"):
            for n in level.get(channel) or []:
                found.setdefault(n["node_id"], n)
    return found


def test_the_api_gives_a_forgotten_memory_its_reason(ui, forgotten: tuple[str, str]) -> None:
    citizen, node_id = forgotten
    status, history = _api(ui, "/api/stream", citizen=citizen, q=QUESTION, mode="full_history", levels="N1")
    assert status == 200, history
    nodes = _stream_nodes(history)
    assert node_id in nodes and "cafe" in nodes
    assert nodes[node_id]["forgotten_at"] and nodes[node_id]["forgotten_reason"] == "incorrect"
    assert nodes[node_id]["forgotten_by"] == "ada"
    assert nodes["cafe"].get("forgotten_at") is None and nodes["cafe"].get("forgotten_reason") is None

    status, now = _api(ui, "/api/stream", citizen=citizen, q=QUESTION, mode="current", levels="N1")
    assert status == 200 and node_id not in _stream_nodes(now) and "cafe" in _stream_nodes(now)

    status, record = _api(ui, "/api/memory", id=node_id, level="N1", citizen=citizen)
    assert status == 200, record
    assert record["memory"]["forgotten_at"] and record["memory"]["forgotten_reason"] == "incorrect"
    (version,) = [v for v in record["versions"] if v["node_id"] == node_id]
    assert version["forgotten_at"] and version["forgotten_reason"] == "incorrect"


def test_the_page_greys_a_forgotten_memory_with_its_reason(ui, forgotten: tuple[str, str]) -> None:
    if os.environ.get("CI"):
        from playwright.sync_api import sync_playwright
    else:
        sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    chromium = _chromium()
    citizen, node_id = forgotten

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(15_000)
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)

            page.goto(ui.url)
            ask_n1(page, citizen, QUESTION, mode="full_history")

            card = page.locator(f'#view-stream .memory-card[data-gid="N1:{node_id}"]')
            card.wait_for()
            assert "is-forgotten" in card.get_attribute("class").split()
            badge = card.locator(".badge-forgotten")
            assert badge.count() == 1 and badge.inner_text() == "forgotten: incorrect"
            assert "by ada" in badge.get_attribute("title")
            # greyed: the stylesheet's colours, not the default card's
            assert card.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(241, 241, 244)"
            kept = page.locator('#view-stream .memory-card[data-gid="N1:cafe"]')
            kept.wait_for()
            assert "is-forgotten" not in kept.get_attribute("class").split()
            assert kept.locator(".badge-forgotten").count() == 0

            # its details: the version list says it too
            card.click()
            page.wait_for_selector("#node-versions .version")
            assert page.locator("#node-versions .badge-forgotten").inner_text() == "forgotten: incorrect"

            # and the history view
            page.click("#node-open-history")
            page.wait_for_selector("#timeline .tl-item")
            assert page.locator("#history-badges .badge-forgotten").inner_text() == "forgotten: incorrect"
            assert page.locator(f'#timeline .tl-item[data-id="{node_id}"] .badge-forgotten').count() == 1

            # in current mode it is not shown at all
            page.click("#tab-stream")
            page.select_option("#mode", "current")
            page.click("#ask")
            page.wait_for_function(  # the new answer is shown (its mode in the summary), not the last one
                "() => [...document.querySelectorAll('#summary .query-meta .badge')]"
                ".some(b => b.textContent === 'current')")
            page.locator('#view-stream .memory-card[data-gid="N1:cafe"]').wait_for()
            assert page.locator(f'#view-stream .memory-card[data-gid="N1:{node_id}"]').count() == 0
            assert problems == []
        finally:
            browser.close()
