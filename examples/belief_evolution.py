"""A belief corrected over time, and the learning moments it leaves.

The spec's scenario: Ada believed FalkorDB had no native vector search
(August 2025); in September she found out she was wrong.  Meanwhile the
team changed in reality (Nicolas was no longer a solo founder).  Queried in
``evolution`` mode, the memory returns every version, and the stream's
temporal dissonances tell the two kinds of change apart: "I was wrong"
(discovered_false) and "the world changed" (reality_changed).

Run:  python examples/belief_evolution.py
"""

from __future__ import annotations

import tempfile

from llama_consciousness import ConsciousnessMemory, RetrievalIntention
from llama_consciousness.ingestion import demo_memory_file
from llama_consciousness.render import render_stream


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="lcbelief", dir="/tmp") as data_dir:
        with ConsciousnessMemory(data_dir=data_dir) as memory:
            memory.ingest(demo_memory_file())
            for mode in ("current", "evolution"):
                intention = RetrievalIntention(
                    query_text="My understanding of FalkorDB capabilities and who is on the team",
                    citizen_id="ada",
                    temporal_mode=mode,
                    query_levels=["N1", "N2"],
                )
                stream = memory.retrieve_stream(intention)
                beliefs = [n for tier in stream.activation_tiers.values() for n in tier
                           if n.name in ("FalkorDB capabilities", "Team composition")]
                print(f"\n=== {mode} mode: {len(beliefs)} versions of the two beliefs ===")
                for n in beliefs:
                    state = "believed until " + n.expired_at.date().isoformat() if n.expired_at else "current"
                    print(f"  {n.name}: {n.description}  [{state}]")
                if not stream.temporal_dissonances:
                    print("  no learning moments (current mode sees only active beliefs)")
                for d in stream.temporal_dissonances:
                    kind = "I was wrong" if d.dissonance_type == "discovered_false" else "reality changed"
                    print(f"\n  Learning moment: {d.node_name} ({kind})")
                    print(f"    was: {d.original_belief}")
                    print(f"    now: {d.corrected_belief}")
                    print(f"    held {d.belief_held_from.date()} -> {d.belief_held_until.date()}, "
                          f"corrected {d.corrected_at.date()}; {d.correction_trigger}; "
                          f"discovery energy {d.discovery_energy:.2f}; emotions {d.discovery_emotions}")
            context = render_stream(stream, token_budget=600)
            print(f"\n=== context for the LLM ({context.tokens} tokens of {context.budget}) ===\n{context.text}")


if __name__ == "__main__":
    main()
