"""Screenshots of the ``llama-consciousness ui`` page for the README: docs/ui-stream.png and docs/ui-history.png.

Writes the demo scenario into a temporary memory, serves the page on a free port and drives a headless
Chromium through Playwright (``pip install playwright``; the browser is the system's, e.g. Debian's
``apt-get install chromium``: ``playwright install`` is not needed).

    python examples/ui_screenshots.py [--out docs] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def find_chromium(given: str | None) -> str:
    for candidate in (given, os.environ.get("CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"),
                      shutil.which("google-chrome")):
        if candidate and Path(candidate).exists():
            return candidate
    raise SystemExit("no Chromium found: apt-get install chromium, or pass --chromium PATH")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs"))
    parser.add_argument("--chromium", default=None, help="the Chromium executable (default: found on PATH)")
    parser.add_argument("--state", action="store_true", help="also ui-state.png (a citizen's state over time)")
    args = parser.parse_args(argv)
    chromium = find_chromium(args.chromium)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from playwright.sync_api import sync_playwright

    from llama_consciousness import ConsciousnessMemory
    from llama_consciousness.cli import DEMO_QUERY
    from llama_consciousness.ingestion import demo_memory_file
    from llama_consciousness.ui import serve

    data_dir = Path(tempfile.mkdtemp(prefix="lcui", dir="/tmp"))
    try:
        with ConsciousnessMemory(data_dir=data_dir) as memory:
            memory.ingest(demo_memory_file())
            # a few state versions, so that the state view has a curve
            start = datetime(2025, 9, 1, 9, tzinfo=timezone.utc)
            for days, energy, goal, reason in ((0, 0.45, "design_retrieval_architecture", "surveying options"),
                                               (14, 0.85, "design_retrieval_architecture", "FalkorDB has vectors"),
                                               (19, 0.75, "ship_v2_architecture", "V2 decided"),
                                               (36, 0.6, "implement_vector_search", "long implementation week")):
                memory.update_citizen_state("ada", energy=energy, goal=goal, valid_at=start + timedelta(days=days),
                                            emotion_vector={"excitement": energy, "focus": 0.6}, reason=reason)
            server = serve(memory)
            try:
                with sync_playwright() as p:
                    browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                    try:
                        page = browser.new_page(viewport={"width": 1440, "height": 1000}, device_scale_factor=1)
                        page.goto(server.url)
                        page.wait_for_selector("#citizen option[value=ada]", state="attached")
                        page.select_option("#citizen", "ada")
                        page.fill("#question", DEMO_QUERY)
                        page.select_option("#mode", "evolution")
                        page.click("#ask")
                        page.wait_for_selector("#viewport g.node")
                        node = page.locator('#viewport g.node[data-id="N1:ada_belief_falkordb_capabilities_v2"] circle.node-circle')
                        node.click()
                        page.wait_for_selector("#node-versions .version")
                        time.sleep(0.3)
                        page.screenshot(path=str(out / "ui-stream.png"), full_page=False)
                        print(f"wrote {out / 'ui-stream.png'}")

                        page.click("#node-open-history")
                        page.wait_for_selector("#timeline .tl-item")
                        page.fill("#find-text", "FalkorDB")
                        page.click("#find")
                        page.wait_for_selector("#find-results .result")
                        time.sleep(0.3)
                        page.screenshot(path=str(out / "ui-history.png"), full_page=False)
                        print(f"wrote {out / 'ui-history.png'}")

                        if args.state:
                            page.click("#tab-state")
                            page.select_option("#state-citizen", "ada")  # loads it
                            page.wait_for_selector("#state-chart .energy-dot")
                            page.wait_for_selector("#status.busy", state="detached")
                            page.screenshot(path=str(out / "ui-state.png"), full_page=False)
                            print(f"wrote {out / 'ui-state.png'}")
                    finally:
                        browser.close()
            finally:
                server.stop()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
