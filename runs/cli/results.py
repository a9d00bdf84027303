"""``ab leaderboard``: a suite's leaderboard on the command line, the figures of the page."""

from __future__ import annotations

import argparse
import json

from benchsite.cli.main import CommandError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "leaderboard", help="a suite's leaderboard: the leaderboard page's rows and figures"
    )
    p.add_argument("suite")
    p.add_argument(
        "--view",
        choices=["runs", "configs"],
        default="runs",
        help="one row per run (default) or per configuration with its runs pooled",
    )
    p.add_argument("--labels", default="", help="only tasks with all these labels (a,b)")
    p.add_argument(
        "--count-out-flagged",
        action="store_true",
        help="count successes carrying an integrity flag as failures",
    )
    p.add_argument("--json", action="store_true", help="the API's JSON rows instead of a table")
    p.set_defaults(handler=cmd_leaderboard)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from runs.api.results import leaderboard_row_out
    from runs.results.leaderboard import leaderboard
    from tasks_app.models import Suite

    suite = Suite.objects.filter(name=args.suite).first()
    if suite is None:
        raise CommandError(f"no suite named {args.suite!r}")
    labels = [v.strip() for v in args.labels.split(",") if v.strip()]
    board = leaderboard(
        suite=suite,
        view=args.view,
        labels=labels or None,
        count_out_flagged=args.count_out_flagged,
    )
    if args.json:
        rows = [leaderboard_row_out(r) for r in board.all_rows]
        print(json.dumps({"suite": suite.name, "view": args.view, "rows": rows}, default=str))
        return 0
    print(table(board))
    return 0


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def table(board) -> str:
    """One line per row: rank, row, resolved % (the whole-suite rate, the order), interval,
    count, the rate on attempted tasks with its interval and count, pass@k, pass^k, standing."""
    lines = [
        f"{'#':>3} {'row':<44} {'resolved':>9} {'95% CI':>15} {'tasks':<26} "
        f"{'attempted':>9} {'95% CI':>15} {'of':<11} {'pass@k':>8} {'pass^k':>8}  standing"
    ]
    for r in board.all_rows:
        ci = f"{_pct(r.ci_low)}-{_pct(r.ci_high)}" if r.ci_low is not None else "-"
        s = r.score
        a_ci = (
            f"{_pct(s.attempted_ci_low)}-{_pct(s.attempted_ci_high)}"
            if s.attempted_ci_low is not None
            else "-"
        )
        pk = f"{_pct(r.pass_at_k)}" if r.pass_at_k is not None else "-"
        phk = f"{_pct(r.pass_hat_k)}" if r.pass_hat_k is not None else "-"
        standing = r.status
        if r.p_value_vs_leader is not None:
            standing += f" (p = {r.p_value_vs_leader:.3f}, n = {r.paired_vs_leader}"
            if r.coverage_differs_from_leader:
                standing += ", coverage differs"
            standing += ")"
        if s.missing:
            standing += f"; {s.missing} not attempted"
        if s.flagged:
            standing += f"; {s.flagged} flagged"
        lines.append(
            f"{r.rank or '':>3} {r.key[:44]:<44} {_pct(r.rate):>9} {ci:>15} "
            f"{s.resolved_label:<26} {_pct(s.attempted_rate):>9} {a_ci:>15} "
            f"{s.attempted_label:<11} {pk:>8} {phk:>8}  {standing}"
        )
    return "\n".join(lines)
