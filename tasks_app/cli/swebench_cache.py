"""``ab environments du`` and ``ab environments prune`` (also ``ab swebench du|prune``, their
older names): every environment the cache holds (offline levels by level and instance, pulled
images and image trees, Dockerfile images, fetched commits: sandbox/environments/inventory.py),
and removing what nothing names, what was not used for days, or the least recently used down
to a size (sandbox/environments/eviction.py)."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict

from benchsite.cli.main import CommandError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "environments",
        help="every cached environment, whatever its source: disk use (du) and pruning (prune)",
    )
    inner = p.add_subparsers(dest="environments_command", metavar="SUBCOMMAND", required=True)
    register_cache(inner)


def register_cache(inner: argparse._SubParsersAction) -> None:
    p = inner.add_parser(
        "du",
        help="disk use of every cached environment: kind, key, bytes, last use, leased",
    )
    p.add_argument("--json", action="store_true", help="print it as JSON")
    p.set_defaults(handler=cmd_du)
    p = inner.add_parser(
        "prune",
        help="remove levels of older recipes, levels nothing uses any more and images no "
        "level names; with --unused-days or --to-gb, least recently used environments of "
        "every kind (never a leased one)",
    )
    p.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")
    p.add_argument(
        "--unused-days",
        type=float,
        metavar="N",
        help="also remove every environment not used for N days",
    )
    p.add_argument(
        "--to-gb",
        type=float,
        metavar="X",
        help="also evict least recently used environments until the cache fits X GB",
    )
    p.set_defaults(handler=cmd_prune)


def _budget() -> int | None:
    from sandbox.environments.eviction import BudgetError, max_bytes_from_env

    try:
        return max_bytes_from_env()
    except BudgetError as exc:
        raise CommandError(str(exc)) from exc


def usage() -> dict:
    """The cache as data: every level (base, its envs, their instances) with its bytes."""
    from sandbox.environments import inventory
    from sandbox.environments.eviction import other_bytes, own_tags, snapshot
    from sandbox.environments.repos import cache_root

    snap = snapshot()
    everything = inventory.entries(snap)
    leased = {e.name: e.leased for e in everything}
    levels = []
    for level in snap.levels:
        in_use = leased[level.name]
        levels.append(
            {
                "name": level.name,
                "kind": level.kind,
                "parent": level.parent,
                "instance_id": level.instance_id,
                "repo": level.repo,
                "version": level.version,
                "recipe": level.recipe,
                "tree_bytes": level.tree_bytes or 0,
                "image": next(iter(own_tags(snap.image_of[level.name])), "")
                if level.name in snap.image_of
                else "",
                "image_bytes": level.image_bytes or 0,
                "bytes": level.bytes,
                "last_used": level.last_used(),
                "in_use": in_use,
                "instances_on_it": sum(
                    1 for o in snap.levels if o.kind == "instance" and o.parent == level.name
                ),
            }
        )
    return {
        "root": str(cache_root()),
        "levels": levels,
        "images_without_level": [{"image": own_tags(i)[0], "bytes": i.size} for i in snap.orphans],
        # Commits fetched over the network (sandbox/environments/repo_fetch.py).
        "fetched": [
            {
                "repo": f.repo,
                "commit": f.commit,
                "url": f.url,
                "bytes": f.bytes,
                "last_used": f.last_used(),
                "in_use": leased[f.name],
                "folder": str(f.folder),
            }
            for f in snap.fetched
        ],
        "fetched_bytes": snap.fetched_bytes,
        # Images built from Dockerfiles (sandbox/environments/dockerfile.py).
        "dockerfile_images": [
            {
                "key": e.key,
                "image": e.label,
                "bytes": e.bytes,
                "last_used": e.last_used,
                "in_use": e.leased,
            }
            for e in everything
            if e.kind == "dockerfile"
        ],
        "dockerfile_bytes": snap.dockerfile_bytes,
        # Every environment of every kind, least recently used first.
        "environments": [
            asdict(e) | {"bytes": e.bytes} for e in sorted(everything, key=lambda e: e.last_used)
        ],
        "docker": snap.images is not None,
        "tree_bytes": snap.tree_bytes,
        "image_bytes": snap.image_bytes,
        "total_bytes": snap.total,
        "budget_bytes": _budget(),
        "not_counted": other_bytes(),
    }


def cmd_du(args: argparse.Namespace) -> int:
    from sandbox.environments.eviction import GB, human

    data = usage()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    by_parent: dict[str, list[dict]] = {}
    for level in data["levels"]:
        by_parent.setdefault(level["parent"], []).append(level)
    names = {level["name"] for level in data["levels"]}
    rows: list[tuple[str, ...]] = []

    def walk(level: dict, depth: int) -> None:
        label = level["instance_id"] or level["name"]
        if level["kind"] == "env":
            label = f"{level['repo']} {level['version']}" if level["repo"] else level["name"]
        rows.append(
            (
                "  " * depth + f"{level['kind']} {label}",
                level["name"].rsplit("-", 1)[-1][:16],
                human(level["tree_bytes"]),
                human(level["image_bytes"]) if level["image_bytes"] else "-",
                human(level["bytes"]),
                _when(level["last_used"]),
                "in use" if level["in_use"] else "",
            )
        )
        for child in sorted(by_parent.get(level["name"], []), key=lambda c: c["name"]):
            walk(child, depth + 1)

    roots = [lv for lv in data["levels"] if not lv["parent"] or lv["parent"] not in names]
    for level in sorted(roots, key=lambda lv: (lv["kind"] != "base", lv["name"])):
        walk(level, 0)
    for item in data["dockerfile_images"]:
        rows.append(
            (
                f"dockerfile {item['image']}",
                item["key"][:16],
                "-",
                human(item["bytes"]),
                human(item["bytes"]),
                _when(item["last_used"]),
                "in use" if item["in_use"] else "",
            )
        )
    for item in data["fetched"]:
        rows.append(
            (
                f"fetched {item['repo']}",
                item["commit"][:16],
                human(item["bytes"]),
                "-",
                human(item["bytes"]),
                _when(item["last_used"]),
                "in use" if item["in_use"] else "",
            )
        )
    header = ("environment", "key", "tree", "image", "total", "last used", "")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    for image in data["images_without_level"]:
        print(f"image no level names: {image['image']} ({human(image['bytes'])})")
    print(
        f"total {human(data['total_bytes'])}: trees {human(data['tree_bytes'])}, images "
        f"{human(data['image_bytes'])}, Dockerfile images {human(data['dockerfile_bytes'])}, "
        f"fetched commits {human(data['fetched_bytes'])}"
        + ("" if data["docker"] else " (no Docker engine answers: images not counted)")
    )
    budget = data["budget_bytes"]
    print(
        f"budget SWEBENCH_CACHE_MAX_GB={budget / GB:g}: {100 * data['total_bytes'] / budget:.0f}%"
        " used"
        if budget
        else "no budget (SWEBENCH_CACHE_MAX_GB unset)"
    )
    others = ", ".join(f"{name} {human(n)}" for name, n in data["not_counted"].items())
    if others:
        print(f"not counted in the budget: {others}")
    print(
        "a tree counts the disk bytes it does not share with the levels below it (hard links "
        "once); an image counts the layers it adds over the image below it"
    )
    return 0


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else "-"


def cmd_prune(args: argparse.Namespace) -> int:
    from sandbox.environments.envspec import RECIPE_VERSION
    from sandbox.environments.eviction import GB, human, prune
    from sandbox.environments.inventory import prune_unused as unused
    from sandbox.environments.inventory import shrink_to

    if args.to_gb is not None and args.to_gb < 0:
        raise CommandError(f"--to-gb must be 0 or more, got {args.to_gb:g}")

    items = prune(dry_run=args.dry_run, recipe=RECIPE_VERSION)
    if args.unused_days is not None:
        if args.unused_days < 0:
            raise CommandError(f"--unused-days must be 0 or more, got {args.unused_days:g}")
        items += unused(unused_days=args.unused_days, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    freed = 0
    for item in items:
        if item.skipped:
            print(f"kept     {item.kind} {item.what}: {item.skipped} ({item.why})")
            continue
        freed += item.bytes
        print(f"{verb} {item.kind} {item.what} ({human(item.bytes)}): {item.why}")
    done = sum(1 for i in items if not i.skipped)
    print(f"{verb} {done} item(s), {human(freed)}" + (" (dry run)" if args.dry_run else ""))
    if args.to_gb is not None:
        if args.dry_run:
            print(f"--to-gb {args.to_gb:g}: nothing evicted (dry run)")
        else:
            went = shrink_to(int(args.to_gb * GB), report=print)
            print(f"evicted {len(went)} environment(s) to fit {args.to_gb:g} GB")
    return 0
