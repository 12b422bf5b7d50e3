"""The ``llama-consciousness`` command.

``demo`` writes the bundled scenario into an embedded FalkorDB and runs a vector query per level under a
temporal mode, so a new user sees the whole stack work in one command.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from llama_consciousness.levels import LEVELS
from llama_consciousness.schema._time import parse_time
from llama_consciousness.temporal import TEMPORAL_MODES, TemporalWindow

from llama_consciousness.ingestion.loader import DEMO_QUERY  # noqa: E402 - re-exported: the demo's question
LEVEL_TITLES = {"N1": "N1 personal", "N2": "N2 collective", "N3": "N3 ecosystem"}


def _time_arg(text: str) -> datetime:
    at = parse_time(text)
    if at is None:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 time: {text!r} (e.g. 2025-09-01 or 2025-09-01T12:00:00Z)")
    return at


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]], max_width: int = 60) -> str:
    """A plain-text table; long cells are cut with an ellipsis."""

    def cell(value: object) -> str:
        text = "" if value is None else str(value)
        return text if len(text) <= max_width else text[: max_width - 1] + "…"

    cells = [[cell(h) for h in headers]] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _span(start: datetime | None, end: datetime | None) -> str:
    """A half-open interval by day: ``2025-08-01→`` is open-ended."""
    day = "%Y-%m-%d"
    return ("?" if start is None else start.strftime(day)) + "→" + ("" if end is None else end.strftime(day))


def run_demo(args: argparse.Namespace) -> int:
    from llama_consciousness.ingestion.loader import demo_memory_file, read_memory_file
    from llama_consciousness.levels import graph_name
    from llama_consciousness.memory import ConsciousnessMemory

    window = TemporalWindow(
        args.mode, as_of_time=args.as_of, time_range_start=args.range_start, time_range_end=args.range_end
    )
    if "N1" in args.levels:
        graph_name("N1", args.citizen)  # refuse a bad citizen id before starting anything
    temporary = args.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="lcdemo", dir="/tmp")) if temporary else Path(args.data_dir)
    out = sys.stdout
    try:
        started = time.perf_counter()
        with ConsciousnessMemory(data_dir=data_dir, embed_model=args.embed_model) as memory:
            server = "embedded FalkorDB" if memory.falkordb_url is None else memory.falkordb_url
            print(f"memory: {server} in {data_dir} ({time.perf_counter() - started:.2f} s to open), "
                  f"embedding {type(memory.embed_model).__name__} ({memory.dimension}-d)", file=out)
            nodes, relationships = read_memory_file(args.file or demo_memory_file())
            written = memory.upsert(nodes, relationships)
            print(f"wrote {written.nodes_created} memories and {written.edges_created} relationships "
                  f"({written.nodes_unchanged + written.edges_unchanged} already there, unchanged)", file=out)
            mode = args.mode + (f" as of {args.as_of.isoformat()}" if args.as_of else "")
            print(f"\nquery: {args.query!r}  [temporal mode: {mode}]", file=out)
            for level in args.levels:
                citizen = args.citizen if level == "N1" else None
                t0 = time.perf_counter()
                found = memory.vector_search(args.query, level, citizen, k=args.k, window=window)
                ms = (time.perf_counter() - t0) * 1000
                title = LEVEL_TITLES[level] + (f" (citizen {citizen})" if citizen else "")
                print(f"\n{title}: {len(found)} memories in {ms:.1f} ms", file=out)
                rows = [
                    (f"{n.relevance_score:.3f}", n.node_type, n.name, n.description, f"{n.energy:.2f}",
                     f"{n.confidence:.2f}", n.resolution_state, _span(n.valid_at, n.invalid_at),
                     _span(n.created_at, n.expired_at))
                    for n in found
                ]
                headers = ("sim", "type", "name", "description", "energy", "conf", "state", "valid", "believed")
                print(format_table(headers, rows, max_width=38), file=out)
        if args.mode == "current":
            print("\nTry the past: llama-consciousness demo --mode point_in_time --as-of 2025-09-10 "
                  "(what Ada believed about FalkorDB before she found out it was false)", file=out)
    finally:
        if temporary and not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
    return 0


def run_ingest(args: argparse.Namespace) -> int:
    from llama_consciousness.ingestion.steps import IngestOptions

    options = dict(on_invalid=args.on_invalid, on_bad_line=args.on_bad_line, pii=not args.no_pii,
                   injection=args.injection, duplicates=args.duplicates, entities=not args.no_entities,
                   concepts=not args.no_concepts, batch_size=args.batch_size, worker=args.worker,
                   entity_llm=args.entity_llm, max_entities=args.max_entities)
    IngestOptions(**options)  # a bad value: one clear line before anything is opened
    if args.entity_llm is not None:  # a bad name or a missing key: the same
        from llama_consciousness.llms import LLMUnavailableError, resolve_llm

        try:
            resolve_llm(args.entity_llm)
        except LLMUnavailableError as exc:
            raise ValueError(str(exc)) from None
    from llama_consciousness.memory import ConsciousnessMemory

    if not Path(args.file).is_file():
        raise ValueError(f"no such memory file: {args.file}")
    started = time.perf_counter()
    with ConsciousnessMemory(data_dir=args.data_dir, embed_model=args.embed_model) as memory:
        report = memory.ingest(args.file, progress=not args.no_progress and sys.stderr.isatty(), **options)
    print(report.summary())
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0


def run_query(args: argparse.Namespace) -> int:
    from llama_consciousness.memory import ConsciousnessMemory
    from llama_consciousness.retrievers import RetrievalConfig
    from llama_consciousness.schema import RetrievalIntention

    intention = RetrievalIntention(
        query_text=args.text,
        citizen_id=args.citizen,
        temporal_mode=args.mode,
        as_of_time=args.as_of,
        time_range_start=args.range_start,
        time_range_end=args.range_end,
        query_levels=args.levels,
        max_results_per_level=args.k,
        min_energy=args.min_energy,
        min_confidence=args.min_confidence,
        required_emotions=args.emotions,
    )
    if args.six_way:  # the core document's six ways, concatenated (plus keyword when asked)
        config = RetrievalConfig(channels=("vector", "graph", "keyword") if args.keyword else ("vector", "graph"),
                                 fusion="rrf" if args.rrf else "concatenate", neighbour_expansion=0,
                                 graph_depth=args.depth or 2)
    else:
        config = RetrievalConfig(fusion="rrf" if args.rrf else "score",
                                 **({"graph_depth": args.depth} if args.depth else {}))
    full = args.stream or args.graph
    with ConsciousnessMemory(data_dir=args.data_dir, embed_model=args.embed_model) as memory:
        if full:
            retriever = memory.stream_retriever(args.citizen, config=config)
        else:
            retriever = memory.retriever(args.citizen, config=config)
        stream, nodes = retriever.retrieve_stream_and_nodes(intention)
    if args.graph:
        write_graph_picture(stream, args.graph)
        print(f"traversal graph written to {args.graph}", file=sys.stderr)
    if args.stream and not args.json:
        print_stream(stream, args.budget)
        return 0
    if args.json:
        print(stream.model_dump_json(indent=2) if args.stream_json else json_dumps_nodes(nodes))
        return 0
    rows = [(f"{n.score:.3f}", ",".join(n.node.metadata["retrieval_sources"]), n.node.metadata["node_type"],
             n.node.metadata["name"], n.node.get_content(), n.node.metadata["energy"], n.node.metadata["resolution_state"])
            for n in nodes]
    print(format_table(("score", "sources", "type", "name", "text", "energy", "state"), rows, max_width=40))
    summary = stream.consciousness_summary
    errors = [f"{key}: {lvl.error}" for key, lvl in stream.levels.items() if lvl.error]
    print(f"\n{summary.total_results} memories (N1 {summary.n1_result_count}, N2 {summary.n2_result_count}, "
          f"N3 {summary.n3_result_count}) in {stream.retrieval_latency_ms} ms, {stream.query_count} queries; "
          f"themes: {', '.join(summary.emotional_themes) or '-'}; energy feedback {stream.energy_feedback_potential:.2f}")
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    return 0


def write_graph_picture(stream: object, target: str) -> None:
    """The stream's traversal graph as a page a person can open (.html) or Mermaid (.md)."""
    from llama_consciousness.postprocessors.traversal_paths import to_html, to_mermaid

    graph = stream.traversal_graph
    if graph is None:
        raise ValueError("the stream has no traversal graph")
    if target.endswith(".md"):
        Path(target).write_text("```mermaid\n" + to_mermaid(graph) + "\n```\n", encoding="utf-8")
    elif target.endswith((".html", ".htm")):
        to_html(graph, target)
    else:
        raise ValueError(f"--graph wants a .html or .md file, not {target!r}")


def print_stream(stream: object, budget: int) -> None:
    """Tiers, learning moments and the most likely thought paths."""
    from llama_consciousness.render import render_stream

    for tier in ("focus", "peripheral", "background"):
        nodes = stream.activation_tiers.get(tier, [])
        if not nodes:
            continue
        print(f"\n{tier.upper()} ({len(nodes)})")
        rows = [(f"{n.relevance_score:.3f}", n.retrieval_source, n.node_type, n.name, n.description,
                 f"{n.energy:.2f}", n.resolution_state) for n in nodes]
        print(format_table(("score", "source", "type", "name", "text", "energy", "state"), rows, max_width=40))
    if stream.temporal_dissonances:
        print("\nLEARNING MOMENTS")
        for d in stream.temporal_dissonances:
            kind = "I was wrong" if d.dissonance_type == "discovered_false" else "reality changed"
            print(f"  {d.node_name} ({kind}, {d.corrected_at.date()}): was {d.original_belief!r}; now {d.corrected_belief!r}")
    graph = stream.traversal_graph
    if graph is not None and graph.suggested_paths:
        names = {n.node_id: n.content for n in graph.nodes}
        print(f"\nTHOUGHT PATHS ({graph.node_count} memories, {graph.edge_count} links, density {graph.graph_density:.2f};"
              f" hubs: {', '.join(names.get(h, h) for h in graph.hub_nodes) or '-'})")
        for path in graph.suggested_paths[:5]:
            steps = " -> ".join(names.get(i, i) for i in path.path_nodes)
            print(f"  p={path.traversal_probability:.3f} [{path.path_narrative}] {steps}")
    report = stream.metadata_validation
    if report is not None:
        print(f"\nmetadata quality: {report.quality_grade} (average completeness {report.average_completeness:.2f}, "
              f"{report.memories_with_errors} with errors)")
    rendered = render_stream(stream, budget)
    print(f"energy feedback potential {stream.energy_feedback_potential:.2f}; "
          f"LLM context {rendered.tokens} tokens (budget {budget}); latency {stream.retrieval_latency_ms} ms")


def json_dumps_nodes(nodes: Sequence[object]) -> str:
    import json

    return json.dumps([{"score": n.score, "id": n.node.node_id, "text": n.node.get_content(),
                        "metadata": n.node.metadata} for n in nodes], indent=2, default=str)


def _shared(p: argparse.ArgumentParser, citizen: str, k: int, k_help: str) -> None:
    """The options demo and query share: where the memory is, whose N1, which window."""
    p.add_argument("--data-dir", default=None,
                   help="the memory's data directory (default: $LLAMA_CONSCIOUSNESS_HOME; demo: a temporary one)")
    p.add_argument("--citizen", default=citizen, help="whose N1 memory to search")
    p.add_argument("-k", type=int, default=k, help=k_help)
    p.add_argument("--mode", choices=TEMPORAL_MODES, default="current", help="temporal mode")
    p.add_argument("--as-of", type=_time_arg, default=None, help="time for --mode point_in_time")
    p.add_argument("--range-start", type=_time_arg, default=None, help="range start (evolution, full_history)")
    p.add_argument("--range-end", type=_time_arg, default=None, help="range end (evolution, full_history)")
    p.add_argument("--embed-model", default=None, help="wordllama (default), openai, openai:<model>")


def run_citizens(args: argparse.Namespace) -> int:
    import json

    from llama_consciousness.memory import ConsciousnessMemory

    with ConsciousnessMemory(data_dir=args.data_dir) as memory:
        rows = []
        for citizen in memory.citizens():
            memories, relationships = memory.counts("N1", citizen)
            rows.append({"citizen": citizen, "memories": memories, "relationships": relationships,
                         "server": memory.server_of("N1", citizen)})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(format_table(("citizen", "memories", "relationships", "server"),
                           [tuple(r.values()) for r in rows]))
        print(f"{len(rows)} citizens")
    return 0


def run_move_vectors(args: argparse.Namespace) -> int:
    from llama_consciousness.memory import PGVECTOR_LEVELS_ENV, ConsciousnessMemory

    with ConsciousnessMemory(data_dir=args.data_dir) as memory:
        report = memory.move_vectors(args.level, args.to)
    for graph, count in report.moved.items():
        print(f"{graph}: {count} vectors moved")
    print(f"{report.total} vectors of {args.level} moved to {args.to} in {report.seconds:.1f} s. From now on, open "
          f"this data directory with {args.level}'s vectors in {args.to}: vector_backends={{{args.level!r}: "
          f"{args.to!r}}} (with the other levels' as before), or {PGVECTOR_LEVELS_ENV} listing the levels in "
          "Postgres.")
    return 0


def _fmt(value: object, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_fmt(v)}" for k, v in value.items()) or "-"
    return str(value)


def _print_overview(data: dict) -> None:
    print(format_table(("level", "graph", "memories", "relationships"),
                       [(lv["level"], lv["graph"], lv["memories"], lv["relationships"]) for lv in data["levels"]]))
    print()
    rows = []
    for c in data["citizens"]:
        state = c["state"] or {}
        rows.append((c["citizen"], c["memories"], c["relationships"], _fmt(state.get("energy")),
                     _fmt(state.get("emotion_vector")), _fmt(state.get("goal"))))
    print(format_table(("citizen", "memories", "relationships", "energy", "emotions", "goal"), rows))
    print(f"{len(rows)} citizens")


def _print_memory(data: dict) -> None:
    m = data["memory"]
    print(f"{m['name']} ({data['level']}{', ' + data['citizen_id'] if data['citizen_id'] else ''}): "
          f"{m['description']}")
    if m.get("forgotten_at"):
        print(f"FORGOTTEN {_fmt(m['forgotten_at'])} ({m['forgotten_reason']})"
              + (f" by {m['forgotten_by']}" if m.get("forgotten_by") else ""))
    for event in m.get("retractions") or []:
        print(f"  {event['event']} {_fmt(event['at'])}" + "".join(
            f"; {k} {event[k]}" for k in ("reason", "by", "note") if event.get(k)))
    print(f"\nversions ({len(data['versions'])}, oldest first):")
    for v in data["versions"]:
        mark = "forgotten" if v.get("forgotten_at") else "current" if v["current"] else "superseded"
        print(f"  {v['node_id']}  [{mark}]  valid {_fmt(v['valid_at'])} -> {_fmt(v['invalid_at'])}, "
              f"recorded {_fmt(v['created_at'])} -> {_fmt(v['expired_at'])}; used {v['access_count']}x")
        print(f"    {v['description']}")
        why = v["why_superseded"]
        if why:
            by = why["superseded_by"] or f"possibly {why['possibly_superseded_by']}"
            details = [f"{k} {why[k]}" for k in ("invalidation_reason", "reason", "source", "confidence") if why[k]]
            print(f"    superseded by {by}" + (f" ({'; '.join(details)})" if details else ""))
    print(f"\nlinks ({len(data['links'])}):")
    for link in data["links"]:
        arrow = "->" if link["direction"] == "outgoing" else "<-"
        print(f"  {arrow} {link['relation_type']} {arrow} {link['other_name']} ({link['other_id']}); "
              f"energy {_fmt(link['energy'])}, co-activated {link.get('co_activation') or 0}x")
    print(f"\ndissonances ({len(data['dissonances'])}):")
    for d in data["dissonances"]:
        print(f"  {d['dissonance_type']}: {d['original_belief']!r} -> {d['corrected_belief']!r}")


def _print_states(citizen: str, states: list) -> None:
    rows = [(s["valid_at"], _fmt(s["energy"], 3), _fmt(s["emotion_vector"]), _fmt(s["goal"]), _fmt(s["mindstate"]),
             s["source"], "corrected" if s["expired_at"] else "", _fmt(s["reason"])) for s in states]
    print(format_table(("valid from", "energy", "emotions", "goal", "mindstate", "source", "", "reason"), rows))
    print(f"{len(rows)} state versions of {citizen}")


def run_inspect(args: argparse.Namespace) -> int:
    import json

    from llama_consciousness import inspection
    from llama_consciousness.memory import ConsciousnessMemory

    what = args.what or "overview"
    with ConsciousnessMemory(data_dir=args.data_dir) as memory:
        if what == "overview":
            data = inspection.overview(memory)
            show = _print_overview
        elif what == "memory":
            try:
                data = inspection.memory_history(memory, args.node_id, args.level, args.citizen)
            except LookupError as exc:
                raise ValueError(str(exc)) from None
            show = _print_memory
        elif what == "state":
            data = inspection.state_history(memory, args.citizen_id)
            show = lambda d: _print_states(args.citizen_id, d)  # noqa: E731
        elif what == "erasures":
            data = inspection.erasures(memory, args.citizen)
            show = lambda d: print(format_table(  # noqa: E731
                ("at", "reason", "graphs", "memories", "links", "entities", "files rewritten"),
                [(r["at"], r["reason"], ", ".join(r["graphs"] + r["graphs_deleted"]), r["memories"], r["links"],
                  r["entities"], r["files_rewritten"]) for r in d]))
        else:
            data = inspection.find_memories(memory, args.text, args.level, args.citizen, args.limit)
            show = lambda d: print(format_table(("node_id", "name", "current", "description"), [  # noqa: E731
                (r["node_id"], r["name"], r["current"], r["description"]) for r in d]))
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        show(data)
    return 0


def _add_inspect(sub: argparse._SubParsersAction) -> None:
    ins = sub.add_parser("inspect", help="look into a memory: levels and citizens, one memory's versions, "
                                         "a citizen's state history")
    ins.add_argument("--data-dir", default=None, help="the memory's data directory (default: $LLAMA_CONSCIOUSNESS_HOME)")
    ins.add_argument("--json", action="store_true", help="JSON output")
    ins.set_defaults(func=run_inspect, what=None)
    what = ins.add_subparsers(dest="what")
    what.add_parser("overview", help="levels, citizens, counts and current states (the default)")
    m = what.add_parser("memory", help="one memory: all its versions, why each was superseded, links, dissonances")
    m.add_argument("node_id")
    m.add_argument("--level", choices=LEVELS, default="N1")
    m.add_argument("--citizen", default=None, help="whose N1 (needed for --level N1)")
    st = what.add_parser("state", help="a citizen's state versions (energy, emotions, goal, mindstate)")
    st.add_argument("citizen_id")
    er = what.add_parser("erasures", help="the receipts of erasures made here (citizens as digests)")
    er.add_argument("--citizen", default=None, help="only the erasures of this citizen")
    f = what.add_parser("find", help="memories whose name or description contains TEXT")
    f.add_argument("text")
    f.add_argument("--level", choices=LEVELS, default="N1")
    f.add_argument("--citizen", default=None)
    f.add_argument("--limit", type=int, default=20)
    for p in what.choices.values():  # options after the sub-command work too
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="JSON output")
        p.add_argument("--data-dir", default=argparse.SUPPRESS, help="the memory's data directory")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llama-consciousness", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="write the bundled scenario and query each level")
    _shared(demo, "ada", 5, "results per level")
    demo.add_argument("--query", default=DEMO_QUERY, help="what to look for")
    demo.add_argument("--levels", nargs="+", choices=LEVELS, default=["N1", "N2", "N3"])
    demo.add_argument("--keep", action="store_true", help="do not delete the temporary data directory")
    demo.add_argument("--file", default=None, help="a memory file (JSON Lines) instead of the bundled scenario")
    demo.set_defaults(func=run_demo)

    ing = sub.add_parser("ingest", help="ingest a memory file (JSON Lines) into the memory")
    ing.add_argument("file", help="the memory file; format: llama_consciousness/ingestion/loader.py")
    ing.add_argument("--data-dir", default=None, help="the memory's data directory (default: $LLAMA_CONSCIOUSNESS_HOME)")
    ing.add_argument("--on-invalid", choices=("raise", "drop"), default="raise",
                     help="an invalid record stops the run or is skipped")
    ing.add_argument("--on-bad-line", choices=("raise", "skip"), default="raise",
                     help="a malformed line refuses the file or is skipped")
    ing.add_argument("--no-pii", action="store_true", help="do not scrub emails, phone numbers, keys, ...")
    ing.add_argument("--injection", choices=("flag", "quarantine", "drop", "off"), default="flag")
    ing.add_argument("--duplicates", choices=("link", "skip", "off"), default="link")
    ing.add_argument("--no-entities", action="store_true", help="do not extract and link entities")
    ing.add_argument("--max-entities", type=int, default=None, metavar="N",
                     help="entities each memory keeps, the most confident (fewer: faster, and fewer links to "
                          "follow; default: 3 with the offline extractor, 10 with --entity-llm)")
    ing.add_argument("--no-concepts", action="store_true", help="do not compute concepts, surfaces_when, authority")
    ing.add_argument("--entity-llm", default=None, metavar="LLM",
                     help="extract entities with an LLM: openai, openai:<model>, or auto (OpenAI when "
                          "OPENAI_API_KEY is set, else offline); default: the offline extractor")
    ing.add_argument("--batch-size", type=int, default=500, help="memories per transaction")
    ing.add_argument("--worker", choices=("auto", "on", "off"), default="auto",
                     help="prepare in a second process (auto: above 3,000 records)")
    ing.add_argument("--no-progress", action="store_true", help="no progress bar")
    ing.add_argument("--embed-model", default=None, help="wordllama (default), openai, openai:<model>")
    ing.set_defaults(func=run_ingest)

    cit = sub.add_parser("citizens", help="the citizens with an N1 memory, their counts and server")
    cit.add_argument("--data-dir", default=None,
                     help="the memory's data directory (default: $LLAMA_CONSCIOUSNESS_HOME; unused with "
                          "$LLAMA_CONSCIOUSNESS_FALKORDB_URL, a server or any node of a cluster)")
    cit.add_argument("--json", action="store_true", help="JSON output")
    cit.set_defaults(func=run_citizens)

    mv = sub.add_parser("move-vectors", help="move a level's vectors to Postgres (a large level then restarts and "
                                             "recovers in seconds) or back to FalkorDB")
    mv.add_argument("--level", required=True, choices=LEVELS, help="every graph of it (N1: each citizen's)")
    mv.add_argument("--to", required=True, choices=("pgvector", "falkordb"))
    mv.add_argument("--data-dir", default=None,
                    help="the memory's data directory (default: $LLAMA_CONSCIOUSNESS_HOME)")
    mv.set_defaults(func=run_move_vectors)
    _add_inspect(sub)
    from llama_consciousness.cli_forgetting import add_forgetting_parsers

    add_forgetting_parsers(sub)
    from llama_consciousness.mcp_server import add_mcp_parser

    add_mcp_parser(sub)

    q = sub.add_parser("query", help="six-way retrieval over a memory")
    q.add_argument("text", help="what to look for")
    _shared(q, "default", 10, "results per channel and level")
    q.add_argument("--levels", nargs="+", default=["N1", "N2", "N3"], help="levels to search (N1 N2 N3)")
    q.add_argument("--min-energy", type=float, default=None)
    q.add_argument("--min-confidence", type=float, default=None)
    q.add_argument("--emotions", nargs="+", default=None, help="required emotions (any of them)")
    q.add_argument("--depth", type=int, default=None,
                   help="graph traversal depth (1-4; default: 2 with --six-way, as the spec walks, else 1)")
    q.add_argument("--six-way", action="store_true",
                   help="vector + graph, concatenated (default: + keyword, score fusion, neighbours)")
    q.add_argument("--keyword", action="store_true", help="with --six-way: add the BM25 keyword channel")
    q.add_argument("--rrf", action="store_true", help="fuse by weighted reciprocal rank")
    q.add_argument("--json", action="store_true", help="JSON output (the result nodes)")
    q.add_argument("--stream-json", action="store_true", help="with --json: the whole consciousness stream")
    q.add_argument("--stream", action="store_true", help="tiers, learning moments, thought paths, quality")
    q.add_argument("--graph", default=None, help="write the traversal graph to FILE.html or FILE.md (Mermaid)")
    q.add_argument("--budget", type=int, default=4000, help="token budget of the LLM context (with --stream)")
    q.set_defaults(func=run_query)

    from llama_consciousness.ui.server import add_ui_parser

    add_ui_parser(sub)
    return parser


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _exit_on_signal(signum: int, frame: object) -> None:
    """SIGTERM (or SIGHUP) as SIGINT already is: an exception, so that what was started is stopped on the
    way out (the memory closed, its server stopped, a temporary directory removed).  Once: a second one
    ends the process at once, should the way out hang; the server's watcher then stops the server."""
    for stop in STOP_SIGNALS:
        signal.signal(stop, signal.SIG_DFL)
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    # Before anything else: a signal that arrives while a command starts its server (the first moments of
    # ``demo``) must find the handler, not the default that would end the process on the spot.
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = {stop: signal.signal(stop, _exit_on_signal) for stop in STOP_SIGNALS} if in_main_thread else {}
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except ValueError as exc:  # bad input reaches the user as one clear line
        print(f"llama-consciousness: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        from llama_consciousness.errors import ConsciousnessError

        if isinstance(exc, ConsciousnessError):
            print(f"llama-consciousness: error: {exc}", file=sys.stderr)
            return 1
        raise
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, signal.SIG_DFL if handler is None else handler)


if __name__ == "__main__":
    sys.exit(main())
