"""S6 autonomous continuation: the spec's loop, on the demo memories.

Ada wakes several times without anyone asking her anything.  Each time the
loop (Couche 3) decides *what kind* of retrieval she needs, as the spec's
``s6_autonomous_cycle`` does:

* a specific intention waiting (a question she had)  -> six-way retrieval
  of a ``RetrievalIntention`` (here in ``evolution`` mode, which also
  surfaces corrected beliefs);
* no question -> state-based retrieval (decision #8), from her energy,
  emotions and goal:
    - she is blocked            -> ``find_resolution_patterns``
      ("how did I get unstuck before?"),
    - her energy is low         -> ``find_what_i_was_doing`` (re-orient),
    - she has a goal            -> ``find_related_unresolved``,
    - otherwise                 -> ``find_similar_state``.

Then, as in the spec: the energy feedback of the stream is applied when its
potential is above 0.5 (``apply_energy_feedback``), the temporal dissonances
are recorded as learning moments, and the focus tier is what she attends to.

The demo memories are dated 2025, so the states use ``temporal_scope="all_time"``
("recent" means the last 30 days before now).

Run:  python examples/s6_autonomous.py
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field

from llama_consciousness import ConsciousnessMemory, RetrievalIntention, StateBasedRetrieval
from llama_consciousness.ingestion import demo_memory_file
from llama_consciousness.postprocessors.pipeline import default_postprocessors
from llama_consciousness.retrievers.state_based import StateBasedRetriever
from llama_consciousness.schema import ConsciousnessStream, TemporalDissonance
from llama_consciousness.scoring.emotions import canonical_vector
from llama_consciousness.scoring.energy import apply_energy_feedback

FEEDBACK_THRESHOLD = 0.5  # the spec's S6 cycle applies feedback above this potential


@dataclass
class Citizen:
    """What S6 knows about Ada between two wake-ups."""

    id: str
    energy: float
    emotions: dict[str, float]
    goal: str | None
    intentions: list[str] = field(default_factory=list)
    blocked_on: str | None = None
    learning_moments: list[TemporalDissonance] = field(default_factory=list)

    def record_learning_moment(self, dissonance: TemporalDissonance) -> None:
        if all(d.node_id != dissonance.node_id for d in self.learning_moments):
            self.learning_moments.append(dissonance)


def choose(citizen: Citizen) -> tuple[RetrievalIntention | StateBasedRetrieval, str]:
    """The S6 decision: a specific intention if one waits, else a state-based retrieval."""
    if citizen.intentions:
        question = citizen.intentions.pop(0)
        return (RetrievalIntention(query_text=question, citizen_id=citizen.id, temporal_mode="evolution",
                                   query_levels=["N1", "N2"]),
                f"a specific intention waits: {question!r}")
    common = {"current_energy": citizen.energy, "current_emotions": citizen.emotions,
              "current_goal": citizen.goal, "citizen_id": citizen.id, "temporal_scope": "all_time"}
    if citizen.blocked_on:
        reason = f"blocked on {citizen.blocked_on!r}: how did I resolve similar blockages before?"
        citizen.blocked_on = None  # asked once; the answer is now in context
        return StateBasedRetrieval(**common, query_mode="find_resolution_patterns"), reason
    if citizen.energy < 0.4:
        return StateBasedRetrieval(**common, query_mode="find_what_i_was_doing"), "low energy: re-orient"
    if citizen.goal:
        return (StateBasedRetrieval(**common, query_mode="find_related_unresolved"),
                f"no question, a goal ({citizen.goal}): unfinished business")
    return StateBasedRetrieval(**common, query_mode="find_similar_state"), "no question, no goal: what felt like this?"


def absorb(citizen: Citizen, stream: ConsciousnessStream) -> None:
    """After attending to the focus tier: a blockage is felt, else emotions are coloured by the focus."""
    focus = stream.activation_tiers.get("focus", [])
    blocked = [n for n in focus if n.resolution_state == "blocked" and n.goal == citizen.goal]
    if blocked:  # attending to a blockage, she feels it
        citizen.blocked_on = blocked[0].name
        citizen.emotions = canonical_vector(blocked[0].emotion_vector)
        return
    mixed = canonical_vector(citizen.emotions)
    for node in focus[:3]:
        for name, value in canonical_vector(node.emotion_vector).items():
            mixed[name] = round(0.8 * mixed.get(name, 0.0) + 0.2 * value, 2)
    citizen.emotions = dict(sorted(mixed.items(), key=lambda kv: -kv[1])[:4])


def cycle(number: int, citizen: Citizen, memory: ConsciousnessMemory, state_retriever: StateBasedRetriever) -> None:
    request, reason = choose(citizen)
    mode = getattr(request, "query_mode", "specific intention (six-way)")
    print(f"\n=== wake-up {number}: energy {citizen.energy:.2f}, emotions {citizen.emotions}, goal {citizen.goal}")
    print(f"  S6 chooses {mode}: {reason}")
    if isinstance(request, RetrievalIntention):
        stream, nodes = memory.stream_retriever().retrieve_stream_and_nodes(request)
    else:
        stream, nodes = state_retriever.retrieve_stream_and_nodes(request)

    before = citizen.energy
    potential = stream.energy_feedback_potential
    if potential > FEEDBACK_THRESHOLD:
        citizen.energy = apply_energy_feedback(citizen.energy, potential)
        print(f"  energy feedback: potential {potential:.3f} -> energy {before:.2f} -> {citizen.energy:.2f}")
    else:
        print(f"  energy feedback: potential {potential:.3f} (<= {FEEDBACK_THRESHOLD}), energy stays {before:.2f} "
              f"(applied it would be {apply_energy_feedback(before, potential):.2f})")

    for dissonance in stream.temporal_dissonances:
        citizen.record_learning_moment(dissonance)
        kind = "I was wrong" if dissonance.dissonance_type == "discovered_false" else "reality changed"
        print(f"  learning moment: {dissonance.node_name} ({kind}): {dissonance.original_belief!r} -> "
              f"{dissonance.corrected_belief!r}")

    focus = stream.activation_tiers.get("focus", [])
    summary = stream.consciousness_summary
    print(f"  {summary.total_results} memories ({summary.n1_result_count} personal, {summary.n2_result_count} "
          f"collective, {summary.n3_result_count} ecosystem) in {stream.retrieval_latency_ms} ms; focus:")
    roles = {n.node.metadata["node_id"]: n.node.metadata.get("state_role") for n in nodes}
    for node in focus:
        role = roles.get(node.node_id) if not isinstance(request, RetrievalIntention) else None
        extra = f", {role}" if role else ""
        print(f"    - [{node.retrieval_source}{extra}] {node.name} ({node.node_type}, {node.resolution_state}, "
              f"energy {node.energy:.2f})")
    if not focus:
        print("    (nothing fits this state)")
    absorb(citizen, stream)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="lcs6", dir="/tmp") as data_dir:
        with ConsciousnessMemory(data_dir=data_dir) as memory:
            memory.ingest(demo_memory_file())
            state_retriever = StateBasedRetriever(memory, stream_postprocessors=default_postprocessors(memory))
            ada = Citizen(
                id="ada", energy=0.7, emotions={"drive": 0.8, "uncertainty": 0.3},
                goal="design_retrieval_architecture",
                intentions=["My understanding of FalkorDB capabilities"],
            )
            for number in range(1, 6):
                if number == 4:
                    ada.energy = 0.3  # a long day: she wakes up tired
                if number == 5:
                    ada.energy, ada.goal = 0.65, None  # rested, and without a goal in mind
                cycle(number, ada, memory, state_retriever)
            print(f"\n=== after 5 wake-ups: energy {ada.energy:.2f}; {len(ada.learning_moments)} learning moment(s) "
                  "recorded:")
            for moment in ada.learning_moments:
                print(f"  - {moment.node_name}: {moment.dissonance_type}, discovery energy "
                      f"{moment.discovery_energy:.2f}")


if __name__ == "__main__":
    main()
