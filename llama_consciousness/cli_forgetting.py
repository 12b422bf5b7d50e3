"""The command line's ``forget`` and ``restore``: take memories out of what is believed, and put them back.

    llama-consciousness forget m42 m43 --citizen ada --reason user_requested --by support
    llama-consciousness forget --citizen ada --contains "door code" --reason user_requested
    llama-consciousness restore m42 --citizen ada
"""

from __future__ import annotations

import argparse
from datetime import datetime

from llama_consciousness.schema import ForgetReason

LEVELS = ("N1", "N2", "N3")


def _when(text: str) -> datetime:
    """An ISO date or time from the command line (a date means its midnight, UTC when no zone is given)."""
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO date or time: {text!r} (e.g. 2026-09-01)") from None


def _where(args: argparse.Namespace) -> dict | None:
    where = {k: v for k, v in (("contains", args.contains), ("node_types", args.node_type),
                               ("created_before", args.created_before), ("created_after", args.created_after))
             if v is not None}
    return where or None


def run_forget(args: argparse.Namespace) -> int:
    from llama_consciousness.memory import ConsciousnessMemory

    where = _where(args)
    if bool(args.node_ids) == bool(where):
        raise ValueError("name the memories (NODE_ID ...) or select them (--contains, --node-type, "
                         "--created-before, --created-after), not both")
    with ConsciousnessMemory(data_dir=args.data_dir) as memory:
        report = memory.forget(args.node_ids or None, args.level, args.citizen, reason=args.reason, by=args.by,
                               note=args.note, where=where)
    if args.json:
        print(report.model_dump_json(indent=2))
        return 0
    print(f"forgotten in {report.graph}: {len(report.forgotten)} ({args.reason}); already forgotten: "
          f"{len(report.already_forgotten)}; not found: {len(report.missing)}")
    for node_id in report.forgotten:
        print(f"  {node_id}")
    if report.forgotten:
        print("restore within the restore window with: llama-consciousness restore "
              + " ".join(report.forgotten[:5]) + (" ..." if len(report.forgotten) > 5 else "")
              + (f" --level {args.level}" if args.level != "N1" else "")
              + (f" --citizen {args.citizen}" if args.citizen else ""))
    return 0


def run_restore(args: argparse.Namespace) -> int:
    from llama_consciousness.memory import ConsciousnessMemory

    with ConsciousnessMemory(data_dir=args.data_dir) as memory:
        report = memory.restore(args.node_ids, args.level, args.citizen, by=args.by, note=args.note)
    if args.json:
        print(report.model_dump_json(indent=2))
        return 0
    print(f"restored in {report.graph}: {len(report.restored)}; not forgotten: {len(report.not_forgotten)}; "
          f"forgotten too long ago: {len(report.too_late)}; not found: {len(report.missing)}")
    for node_id in report.restored:
        print(f"  {node_id}")
    return 0 if not report.too_late else 1


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--level", choices=LEVELS, default="N1")
    p.add_argument("--citizen", default=None, help="whose N1 (needed for --level N1)")
    p.add_argument("--by", default=None, help="who asks (kept with the memory)")
    p.add_argument("--note", default=None, help="a word on why (kept with the memory)")
    p.add_argument("--data-dir", default=None, help="the memory's data directory (default: $LLAMA_CONSCIOUSNESS_HOME)")
    p.add_argument("--json", action="store_true", help="JSON output (the report)")


def add_forgetting_parsers(sub: argparse._SubParsersAction) -> None:
    """``forget`` and ``restore`` on the main parser's sub-commands."""
    f = sub.add_parser("forget", help="stop believing memories from now (kept in the full history, restorable)")
    f.add_argument("node_ids", nargs="*", metavar="NODE_ID", help="the memories to forget")
    f.add_argument("--reason", required=True, choices=[r.value for r in ForgetReason])
    f.add_argument("--contains", default=None, help="or: the memories whose name or text contains this")
    f.add_argument("--node-type", action="append", default=None, help="or: of this node type (repeatable)")
    f.add_argument("--created-before", type=_when, default=None, help="or: recorded before (ISO date)")
    f.add_argument("--created-after", type=_when, default=None, help="or: recorded at or after (ISO date)")
    _common(f)
    f.set_defaults(func=run_forget)

    r = sub.add_parser("restore", help="believe forgotten memories again, as they were (within the window)")
    r.add_argument("node_ids", nargs="+", metavar="NODE_ID")
    _common(r)
    r.set_defaults(func=run_restore)


__all__ = ["add_forgetting_parsers"]
