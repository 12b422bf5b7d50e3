"""The command line's ``forget``, ``restore``, ``erase`` and ``retention``: take memories out of what is
believed, put them back, remove them for good, and keep them only as long as a policy says.

    llama-consciousness forget m42 m43 --citizen ada --reason user_requested --by support
    llama-consciousness forget --citizen ada --contains "door code" --reason user_requested
    llama-consciousness restore m42 --citizen ada
    llama-consciousness erase m42 --citizen ada --yes
    llama-consciousness erase --whole-citizen ada --yes
    llama-consciousness retention policy.json            # what it would do
    llama-consciousness retention policy.json --apply
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

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


def _shown(args: argparse.Namespace, report: Any, summary: str, ids: list[str]) -> bool:
    """Print ``report`` as JSON (``--json``: False) or as ``summary`` and the ids it changed (True)."""
    if args.json:
        print(report.model_dump_json(indent=2))
        return False
    print(summary)
    for node_id in ids:
        print(f"  {node_id}")
    return True


def run_forget(args: argparse.Namespace) -> int:
    from llama_consciousness.memory import ConsciousnessMemory

    where = _where(args)
    if bool(args.node_ids) == bool(where):
        raise ValueError("name the memories (NODE_ID ...) or select them (--contains, --node-type, "
                         "--created-before, --created-after), not both")
    with ConsciousnessMemory(data_dir=args.data_dir) as memory:
        report = memory.forget(args.node_ids or None, args.level, args.citizen, reason=args.reason, by=args.by,
                               note=args.note, where=where)
    if _shown(args, report, f"forgotten in {report.graph}: {len(report.forgotten)} ({args.reason}); already "
                            f"forgotten: {len(report.already_forgotten)}; not found: {len(report.missing)}",
              report.forgotten) and report.forgotten:
        print("restore within the restore window with: llama-consciousness restore "
              + " ".join(report.forgotten[:5]) + (" ..." if len(report.forgotten) > 5 else "")
              + (f" --level {args.level}" if args.level != "N1" else "")
              + (f" --citizen {args.citizen}" if args.citizen else ""))
    return 0


def run_restore(args: argparse.Namespace) -> int:
    from llama_consciousness.memory import ConsciousnessMemory

    with ConsciousnessMemory(data_dir=args.data_dir) as memory:
        report = memory.restore(args.node_ids, args.level, args.citizen, by=args.by, note=args.note)
    _shown(args, report, f"restored in {report.graph}: {len(report.restored)}; not forgotten: "
                         f"{len(report.not_forgotten)}; forgotten too long ago: {len(report.too_late)}; not found: "
                         f"{len(report.missing)}", report.restored)
    return 0 if not report.too_late else 1


def run_erase(args: argparse.Namespace) -> int:
    from llama_consciousness.memory import ConsciousnessMemory

    where = _where(args)
    if args.whole_citizen is not None and (args.node_ids or where):
        raise ValueError("--whole-citizen erases everything about a citizen: name no memories with it")
    if args.whole_citizen is None and bool(args.node_ids) == bool(where):
        raise ValueError("name the memories (NODE_ID ...), select them (--contains, --node-type, "
                         "--created-before, --created-after) or give --whole-citizen, one of them")
    if not args.yes:
        raise ValueError("erase removes memories for good (no restore): add --yes to go ahead")
    with ConsciousnessMemory(data_dir=args.data_dir) as memory:
        if args.whole_citizen is not None:
            receipt = memory.erase_citizen(args.whole_citizen, reason=args.reason, wait=not args.no_wait)
        else:
            receipt = memory.erase(args.node_ids or None, args.level, args.citizen, where=where, reason=args.reason,
                                   wait=not args.no_wait)
    print(receipt.model_dump_json(indent=2))  # the receipt: counts and ids, never the text
    return 0


def run_retention(args: argparse.Namespace) -> int:
    from llama_consciousness.memory import ConsciousnessMemory
    from llama_consciousness.retention import RetentionPolicy

    policy = RetentionPolicy.from_file(args.policy)
    with ConsciousnessMemory(data_dir=args.data_dir) as memory:
        report = memory.apply_retention(policy, dry_run=not args.apply)
    if args.json:
        print(report.model_dump_json(indent=2))
        return 0
    print(("dry run (nothing changed; --apply to do it): " if report.dry_run else "applied: ")
          + f"{report.forgotten} memories to forget, {report.erased} to erase")
    for step in report.steps:
        print(f"  {step.graph}: forget {len(step.forget)}, erase {len(step.erase)}")
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--level", choices=LEVELS, default="N1")
    p.add_argument("--citizen", default=None, help="whose N1 (needed for --level N1)")
    p.add_argument("--by", default=None, help="who asks (kept with the memory)")
    p.add_argument("--note", default=None, help="a word on why (kept with the memory)")
    p.add_argument("--data-dir", default=None, help="the memory's data directory (default: $LLAMA_CONSCIOUSNESS_HOME)")
    p.add_argument("--json", action="store_true", help="JSON output (the report)")


def add_forgetting_parsers(sub: argparse._SubParsersAction) -> None:
    """``forget``, ``restore``, ``erase`` and ``retention`` on the main parser's sub-commands."""
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

    e = sub.add_parser("erase", help="remove memories (or a whole citizen) for good, files included; needs --yes")
    e.add_argument("node_ids", nargs="*", metavar="NODE_ID", help="the memories to erase")
    e.add_argument("--whole-citizen", default=None, metavar="CITIZEN",
                   help="or: everything about this citizen (their N1, their memories in N2 and N3)")
    e.add_argument("--contains", default=None, help="or: the memories whose name or text contains this")
    e.add_argument("--node-type", action="append", default=None, help="or: of this node type (repeatable)")
    e.add_argument("--created-before", type=_when, default=None, help="or: recorded before (ISO date)")
    e.add_argument("--created-after", type=_when, default=None, help="or: recorded at or after (ISO date)")
    e.add_argument("--reason", default="user_requested", help="kept in the receipt (default: user_requested)")
    e.add_argument("--yes", action="store_true", help="erase for good (there is no restore)")
    e.add_argument("--no-wait", action="store_true",
                   help="do not wait for the servers to rewrite their files (the text stays on disk until then)")
    e.add_argument("--level", choices=LEVELS, default="N1")
    e.add_argument("--citizen", default=None, help="whose N1 (needed for --level N1)")
    e.add_argument("--data-dir", default=None, help="the memory's data directory (default: $LLAMA_CONSCIOUSNESS_HOME)")
    e.set_defaults(func=run_erase)

    t = sub.add_parser("retention", help="apply a retention policy (JSON); a dry run unless --apply")
    t.add_argument("policy", help='e.g. {"rules": [{"level": "N1", "node_types": ["Memory"], '
                                  '"forget_after": "P90D", "erase_after": "P30D"}]}')
    t.add_argument("--apply", action="store_true", help="forget and erase (default: only say what it would do)")
    t.add_argument("--data-dir", default=None, help="the memory's data directory (default: $LLAMA_CONSCIOUSNESS_HOME)")
    t.add_argument("--json", action="store_true", help="JSON output (the report)")
    t.set_defaults(func=run_retention)


__all__ = ["add_forgetting_parsers"]
