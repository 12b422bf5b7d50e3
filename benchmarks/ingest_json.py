"""``--ingest-json``: the ``IngestOptions`` a benchmark ingests with, as JSON, checked before anything starts
(a typo or a bad value is a usage error, not a stack trace after minutes of loading)."""

from __future__ import annotations

import argparse
import json
from typing import Any

HELP = "IngestOptions of the ingestion, as JSON (e.g. '{\"max_entities\": 5}'); the defaults by default"


def add_argument(parser: argparse.ArgumentParser, help: str = HELP) -> None:
    parser.add_argument("--ingest-json", default="{}", metavar="JSON", help=help)


def ingest_options(parser: argparse.ArgumentParser, text: str) -> dict[str, Any]:
    """``--ingest-json`` as keyword arguments of ``memory.ingest``, or the parser's usage error saying why not."""
    from llama_consciousness.ingestion.steps import IngestOptions

    try:
        options = json.loads(text)
        if not isinstance(options, dict):
            raise ValueError("not a JSON object")
        IngestOptions(**options)
    except Exception as exc:  # noqa: BLE001 - said in the usage error
        parser.error(f"--ingest-json {text!r}: {str(exc).splitlines()[0]}")
    return options
