"""The ``ui`` web inspector: its JSON API (urllib), the page in a real headless Chromium (Playwright, the
system's browser), and the command serving until SIGTERM.

The browser test needs ``playwright`` (test extra) and a Chromium (``apt-get install chromium``); without
them it is skipped locally and fails under CI (``CI`` set), where .ci/run installs both.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from llama_consciousness.cli import DEMO_QUERY
from llama_consciousness.ingestion import demo_memory_file
from llama_consciousness.schema import MemoryNode
from llama_consciousness.ui import serve
from llama_consciousness.ui.server import CSP, STATIC_DIR

PAYLOAD = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
V2 = "ada_belief_falkordb_capabilities_v2"


@pytest.fixture(scope="module")
def ui(memory) -> Iterator[Any]:
    """The demo in the session memory, and the inspector on a free port of 127.0.0.1."""
    memory.ingest(demo_memory_file())  # fixed ids: idempotent across the session
    server = serve(memory)
    try:
        yield server
    finally:
        server.stop()


def _payload_memory(memory, citizen: str) -> str:
    node_id = f"xss_{citizen}"
    memory.upsert([MemoryNode(node_id=node_id, level="N1", citizen_id=citizen, node_type="Observation",
                              name=f"Payload {PAYLOAD}", description=f"{PAYLOAD} zebra marker text",
                              energy=0.7, confidence=0.8, emotion_vector={"alarm": 0.6})])
    return node_id


def _get(url: str, headers: dict[str, str] | None = None, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers), error.read()


def _api(ui, path: str, **params: Any) -> tuple[int, Any]:
    status, headers, body = _get(ui.url.rstrip("/") + path + ("?" + urlencode(params) if params else ""))
    assert headers["Content-Type"].startswith("application/json"), (path, headers)
    assert b"Traceback" not in body
    return status, json.loads(body)


def ask_n1(page: Any, citizen: str, question: str, mode: str | None = None) -> None:
    """On the loaded page: ask ``question`` of ``citizen``'s N1 alone (N2 and N3 unchecked), in ``mode``."""
    page.wait_for_selector(f"#citizen option[value={citizen}]", state="attached")
    page.select_option("#citizen", citizen)
    page.fill("#question", question)
    if mode is not None:
        page.select_option("#mode", mode)
    page.uncheck("input[name=level][value=N2]")
    page.uncheck("input[name=level][value=N3]")
    page.click("#ask")


def test_json_api(ui, memory, citizen: str) -> None:
    # the page and its files, with the headers that keep memory text inert
    status, headers, body = _get(ui.url)
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert headers["Content-Security-Policy"] == CSP == (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:")
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert b'<script src="/static/app.js"' in body and b"<style" not in body and b" style=" not in body
    for name, kind in (("app.js", "text/javascript"), ("app.css", "text/css")):
        status, headers, _ = _get(ui.url + "static/" + name)
        assert status == 200 and headers["Content-Type"].startswith(kind)
        assert headers["Content-Security-Policy"] == CSP
    script = (STATIC_DIR / "app.js").read_text(encoding="utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink

    status, overview = _api(ui, "/api/overview")
    assert status == 200 and "ada" in {c["citizen"] for c in overview["citizens"]}
    assert overview["modes"] == ["current", "point_in_time", "evolution", "full_history"]

    status, answer = _api(ui, "/api/stream", citizen="ada", q=DEMO_QUERY, mode="full_history")
    assert status == 200
    stream = answer["stream"]
    assert stream["activation_tiers"]["focus"]
    assert stream["traversal_graph"]["nodes"] and stream["traversal_graph"]["edges"]
    assert ("FalkorDB capabilities", "discovered_false") in {
        (d["node_name"], d["dissonance_type"]) for d in stream["temporal_dissonances"]}
    assert answer["context"]["tokens"] > 0 and "FalkorDB" in answer["context"]["text"]
    assert answer["request"] == {"citizen": "ada", "q": DEMO_QUERY, "mode": "full_history",
                                 "levels": ["N1", "N2", "N3"], "budget": 4000, "as_of": None,
                                 "range_start": None, "range_end": None}
    status, past = _api(ui, "/api/stream", citizen="ada", q=DEMO_QUERY, mode="point_in_time",
                        as_of="2025-09-10", levels="N1", budget="200")
    assert status == 200 and past["context"]["tokens"] <= 200
    believed = {n["node_id"] for tier in past["stream"]["activation_tiers"].values() for n in tier}
    assert "ada_belief_falkordb_capabilities_v1" in believed and V2 not in believed
    assert all(n["level"] == "N1" for tier in past["stream"]["activation_tiers"].values() for n in tier)

    status, history = _api(ui, "/api/memory", id=V2, level="N1", citizen="ada")
    assert status == 200
    versions = history["versions"]
    assert [v["node_id"] for v in versions] == ["ada_belief_falkordb_capabilities_v1", V2]
    assert [v["current"] for v in versions] == [False, True]
    assert versions[0]["why_superseded"]["superseded_by"] == V2
    status, found = _api(ui, "/api/find", text="falkordb capab", level="N1", citizen="ada")
    assert status == 200 and V2 in {m["node_id"] for m in found["memories"]}

    # a citizen's state versions
    _payload_memory(memory, citizen)
    memory.update_citizen_state(citizen, energy=0.3, goal="stay calm", reason="first")
    status, states = _api(ui, "/api/state", citizen=citizen)
    assert status == 200 and [s["energy"] for s in states["versions"]] == [0.3]
    assert states["current"]["goal"] == "stay calm"

    # bad input: a JSON error, never a traceback
    bad = [
        (400, "/api/stream", {"citizen": "ada", "q": "x", "mode": "sideways"}, "temporal mode"),
        (400, "/api/stream", {"citizen": "ada"}, "'q'"),
        (400, "/api/stream", {"citizen": "ada", "q": "   "}, "'q'"),
        (400, "/api/stream", {"citizen": "ada", "q": "x", "levels": "N1,N9"}, "N9"),
        (400, "/api/stream", {"citizen": "ada", "q": "x", "mode": "point_in_time"}, "as_of"),
        (400, "/api/stream", {"citizen": "ada", "q": "x", "mode": "point_in_time", "as_of": "soon"}, "ISO-8601"),
        (400, "/api/stream", {"citizen": "ada", "q": "x", "as_of": "2025-01-01"}, "as_of"),
        (400, "/api/stream", {"citizen": "ada", "q": "x", "budget": "lots"}, "budget"),
        (400, "/api/stream", {"citizen": "x'})-[", "q": "x"}, "citizen"),
        (404, "/api/stream", {"citizen": "nobody_here_" + citizen, "q": "x"}, "unknown citizen"),
        (404, "/api/memory", {"id": "no_such_memory", "level": "N1", "citizen": "ada"}, "no memory"),
        (404, "/api/memory", {"id": V2, "level": "N1", "citizen": "nobody_here_" + citizen}, "unknown citizen"),
        (400, "/api/memory", {"id": V2, "level": "N4"}, "level"),
        (400, "/api/memory", {"id": V2, "level": "N1"}, "citizen"),
        (400, "/api/memory", {"level": "N2"}, "'id'"),
        (404, "/api/state", {"citizen": "nobody_here_" + citizen}, "unknown citizen"),
        (404, "/api/nothing", {}, "no such page"),
    ]
    for code, path, params, words in bad:
        status, error = _api(ui, path, **params)
        assert (status, error["status"]) == (code, code), (path, params, error)
        assert words in error["error"], (path, params, error)
    status, error = _api(ui, "/api/stream?citizen=ada&citizen=bob&q=x")
    assert status == 400 and "2 times" in error["error"]

    # read-only, and only for this machine's names (a DNS-rebinding page is refused)
    status, headers, body = _get(ui.url + "api/overview", method="POST")
    assert status == 405 and headers["Allow"] == "GET, HEAD" and b"read-only" in body
    status, _, body = _get(ui.url + "api/overview", headers={"Host": "evil.example:80"})
    assert status == 403 and b"Host" in body
    assert _get(ui.url + "api/overview", headers={"Host": f"localhost:{ui.port}"})[0] == 200

    # requests on threads at once, each with its own answer
    questions = [DEMO_QUERY, "Who is on the team?", "What did Ada believe about FalkorDB?", "vector index"]
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda q: _api(ui, "/api/stream", citizen="ada", q=q, levels="N1,N2"), questions))
    assert [(status, a["request"]["q"]) for status, a in answers] == [(200, q) for q in questions]


def _chromium() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        if os.environ.get("CI"):
            pytest.fail("no Chromium: .ci/run installs it (apt-get install chromium)")
        pytest.skip("no Chromium here (apt-get install chromium)")
    return path


def test_page_in_a_real_browser(ui, memory, citizen: str) -> None:
    if os.environ.get("CI"):
        from playwright.sync_api import sync_playwright
    else:
        sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    chromium = _chromium()
    payload_id = _payload_memory(memory, citizen)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(15_000)
            problems: list[str] = []  # script errors, and CSP violations (reported on the console)
            page.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)

            page.goto(ui.url)
            assert page.title() == "llama-consciousness inspector"
            page.wait_for_selector("#citizen option[value=ada]", state="attached")
            page.select_option("#citizen", "ada")
            assert page.input_value("#citizen") == "ada"
            page.fill("#question", DEMO_QUERY)
            page.select_option("#mode", "evolution")
            page.click("#ask")

            # the stream: tiers, graph, learning moments, context
            page.wait_for_selector("#tier-focus .memory-card")
            assert page.locator("#tier-focus .memory-card").count() > 0
            assert page.locator("#tier-focus [data-count]").inner_text() == str(page.locator("#tier-focus .memory-card").count())
            assert page.locator("#viewport g.node").count() > 0
            assert page.locator("#viewport path.edge").count() > 0
            wrong = page.locator("#dissonances li.dissonance", has_text="FalkorDB capabilities")
            assert wrong.count() == 1 and "I was wrong" in wrong.inner_text()
            assert page.locator("#paths li.path").count() > 0
            assert page.locator("#constellation .c-primary .member").count() == 1
            assert int(page.get_attribute("#context-tokens", "data-tokens")) > 0
            assert re.fullmatch(r"\d+ / 4000 tokens", page.inner_text("#context-tokens"))
            assert "FalkorDB" in page.inner_text("#context-text")

            # a graph node: its metadata and its versions
            assert page.locator("#node-panel").is_hidden()
            page.click(f'#viewport g.node[data-id="N1:{V2}"] circle.node-circle')
            page.wait_for_selector("#node-versions .version")
            assert page.locator("#node-panel").is_visible()
            assert page.inner_text("#node-title") == "FalkorDB capabilities"
            assert V2 in page.inner_text("#node-body") and "energy" in page.inner_text("#node-body")
            assert page.locator("#node-versions .version").count() == 2
            assert page.locator("#node-versions .version.current").count() == 1
            assert page.locator(f'#viewport g.node.selected[data-id="N1:{V2}"]').count() == 1

            # zoom: the wheel and the buttons change the graph's transform
            transform = page.get_attribute("#viewport", "transform")
            box = page.locator("#graph").bounding_box()
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.mouse.wheel(0, -400)
            page.wait_for_function("t => document.getElementById('viewport').getAttribute('transform') !== t",
                                   arg=transform)
            zoomed = page.get_attribute("#viewport", "transform")
            assert _scale(zoomed) > _scale(transform)
            page.click("#zoom-out")
            assert _scale(page.get_attribute("#viewport", "transform")) < _scale(zoomed)
            # and dragging the background pans
            before = _translate(page.get_attribute("#viewport", "transform"))
            page.mouse.move(box["x"] + 12, box["y"] + 12)
            page.mouse.down()
            page.mouse.move(box["x"] + 72, box["y"] + 52, steps=4)
            page.mouse.up()
            after = _translate(page.get_attribute("#viewport", "transform"))
            assert after[0] - before[0] == pytest.approx(60, abs=1) and after[1] - before[1] == pytest.approx(40, abs=1)

            # the memory's history as a timeline
            page.click("#node-open-history")
            page.wait_for_selector("#timeline .tl-item")
            assert page.locator("#view-history").is_visible()
            assert page.locator("#timeline .tl-item").count() == 2
            assert page.locator("#timeline .tl-item.current").count() == 1
            assert page.get_attribute("#timeline .tl-item.current", "data-id") == V2
            assert "discovered false" in page.inner_text("#timeline .tl-item.past .why")

            # the API through the browser's own connection
            assert page.request.get(ui.url + "api/stream?citizen=ada&q=x&mode=sideways").status == 400
            assert page.request.get(ui.url + "api/memory?id=nope&level=N1&citizen=ada").status == 404

            # a memory whose text is markup: shown as text, never run
            page.reload()
            ask_n1(page, citizen, "zebra marker text")
            card = page.locator(f'#view-stream .memory-card[data-gid="N1:{payload_id}"]')
            card.wait_for()
            assert PAYLOAD in card.inner_text()
            name = card.locator(".card-name")
            assert name.is_visible() and name.inner_text() == f"Payload {PAYLOAD}"  # `<img` visible as text
            assert PAYLOAD in page.inner_text("#context-text")
            assert PAYLOAD[:28] in page.text_content(f'#viewport g.node[data-id="N1:{payload_id}"]')
            card.click()
            page.wait_for_selector("#node-versions .version")
            assert PAYLOAD in page.inner_text("#node-title") and PAYLOAD in page.inner_text("#node-versions")
            assert page.evaluate("typeof window.__xss") == "undefined"
            assert page.locator("img[src=x]").count() == 0
            assert page.locator("img").count() == 0 and page.locator("body script").count() == 0
            assert problems == []
        finally:
            browser.close()


def _scale(transform: str) -> float:
    return float(re.search(r"scale\(([-\d.]+)\)", transform).group(1))


def _translate(transform: str) -> tuple[float, float]:
    x, y = re.search(r"translate\(([-\d.]+),([-\d.]+)\)", transform).groups()
    return float(x), float(y)


def test_command_serves_until_sigterm() -> None:
    """``run_ui``: opens the memory, prints the URL, answers, and stops cleanly on SIGTERM."""
    data_dir = tempfile.mkdtemp(prefix="lcui", dir="/tmp")  # short: unix socket paths are limited
    code = ("import argparse, sys\n"
            "from llama_consciousness.ui.server import add_ui_parser, run_ui\n"
            "parser = argparse.ArgumentParser(); sub = parser.add_subparsers(dest='command')\n"
            "add_ui_parser(sub)\n"
            "args = parser.parse_args(['ui', '--data-dir', sys.argv[1], '--port', '0'])\n"
            "assert (args.host, args.open, args.func) == ('127.0.0.1', False, run_ui)\n"
            "sys.exit(run_ui(args))\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([sys.executable, "-c", code, data_dir], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = []
        for line in process.stdout:  # the URL line comes once the memory is open
            lines.append(line)
            match = re.search(r"serving (http://127\.0\.0\.1:\d+/)", line)
            if match or len(lines) > 20:
                break
        assert match, (lines, process.stderr.read() if process.poll() is not None else "")
        status, _, body = _get(match.group(1) + "api/overview")
        assert status == 200 and json.loads(body)["citizens"] == []
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert "stopped" in process.stdout.read()
        assert "Traceback" not in process.stderr.read()
        with pytest.raises(OSError):
            urllib.request.urlopen(match.group(1), timeout=2)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        shutil.rmtree(data_dir, ignore_errors=True)
