"""Long real-world messages (BEAM-like: 100 KB with code blocks, tables and colons) go in and come back whole,
and a question quoting code finds them; nothing on the way is quadratic in the message's length."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

from llama_consciousness.render import render_stream
from llama_consciousness.schema import MemoryNode, RetrievalIntention

T0 = datetime(2024, 3, 2, tzinfo=timezone.utc)


def _long_message(marker: str, value: str) -> str:
    block = ("Here's my code:\n```python\ndef handler(event: dict) -> None:\n    retries: int = 3\n"
             "    print(f'{event}: done')\n```\n"
             "| step | owner: name | time: ms |\n|---|---|---|\n| build | ci: bot | 120 |\n"
             "Note: the queue worker restarts at 5:30 pm. Update: the cache TTL is 3600 s.\n")
    body = block * (100_000 // len(block) + 1)
    return f"user: The {marker} latency of the queue worker is {value} under load. " + body


def test_a_100_kb_message_with_code_and_tables_goes_in_and_is_found(memory, citizen) -> None:
    first = _long_message("zephyrine", "220ms")
    second = _long_message("zephyrine", "140ms")
    assert len(first) > 100_000
    started = time.perf_counter()
    report = memory.ingest([
        MemoryNode(node_id="m1", level="N1", citizen_id=citizen, name="queue worker latency", description=first,
                   energy=0.5, confidence=0.8, valid_at=T0, created_at=T0),
        MemoryNode(node_id="m2", level="N1", citizen_id=citizen, name="queue worker latency, later",
                   description=second, energy=0.5, confidence=0.8, valid_at=T0 + timedelta(days=9),
                   created_at=T0 + timedelta(days=9)),
    ])
    assert not report.rejected and report.inserted == 2
    stored = memory.get_node("m1", "N1", citizen)
    assert len(stored.description) == len(first)  # nothing cut
    question = "What is the zephyrine latency of the queue worker? ```retries: int = 3```"
    stream = memory.retrieve_stream(RetrievalIntention(query_text=question, citizen_id=citizen,
                                                       query_levels=["N1"]))
    found = [n.node_id for tier in stream.activation_tiers.values() for n in tier]
    assert {"m1", "m2"} <= set(found)
    # the later value first and the earlier marked, though the statements sit before 100 KB of code
    text = render_stream(stream, 200_000, current_first=True).text
    assert text.index("140ms") < text.index("220ms") and "[possibly outdated" in text
    assert time.perf_counter() - started < 60  # a guard against quadratic work, not a benchmark
