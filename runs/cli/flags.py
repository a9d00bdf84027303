"""``ab flags recompute``: the integrity flags again, after the rules changed
(``runs.integrity``)."""

from __future__ import annotations

import argparse

from benchsite.cli.main import CommandError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "flags",
        help="integrity flags: recompute them for attempts checked under older rules (--all)",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    r = actions.add_parser(
        "recompute",
        help="recompute the flags of final attempts whose stored rule versions differ",
    )
    r.add_argument("--all", action="store_true", help="every final attempt, whatever its rules")
    r.add_argument("--suite", default="", help="only this suite's attempts")
    r.add_argument(
        "--run", default="", metavar="RUN", help="only this run's attempts (its id or a prefix)"
    )
    r.set_defaults(handler=cmd_recompute)
    lst = actions.add_parser("rules", help="list the rules: name, version, why")
    lst.set_defaults(handler=cmd_rules)


def cmd_recompute(args: argparse.Namespace) -> int:
    from runs.integrity.services import flags_recompute
    from tasks_app.models import Suite

    suite_ids = None
    if args.suite:
        suite = Suite.objects.filter(name=args.suite).first()
        if suite is None:
            raise CommandError(f"no suite named {args.suite!r}")
        suite_ids = [suite.id]
    run_ids = None
    if args.run:
        from runs.cli.runs import run_by_ref

        run_ids = [run_by_ref(args.run).pk]
    report = flags_recompute(everything=args.all, suite_ids=suite_ids, run_ids=run_ids)
    print(f"checked {report.checked} attempts: {report.flagged} flagged, {report.flags} flags")
    return 0


def cmd_rules(args: argparse.Namespace) -> int:
    from runs.integrity.rules import RULES

    for rule in RULES:
        print(f"{rule.name:<18} v{rule.version}  {rule.why}")
    return 0
