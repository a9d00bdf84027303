"""``ab swebench du`` and ``ab swebench prune``: the offline SWE-bench cache by level and
instance, and removing what nothing names (sandbox/environments/eviction.py)."""

from __future__ import annotations

import argparse
import json
import time

from benchsite.cli.main import CommandError


def register_cache(inner: argparse._SubParsersAction) -> None:
    p = inner.add_parser(
        "du",
        help="disk use of the SWE-bench cache by level and instance (trees and images)",
    )
    p.add_argument("--json", action="store_true", help="print it as JSON")
    p.set_defaults(handler=cmd_du)
    p = inner.add_parser(
        "prune",
        help="remove levels of older recipes, levels nothing uses any more and images no "
        "level names",
    )
    p.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")
    p.set_defaults(handler=cmd_prune)


def _budget() -> int | None:
    from sandbox.environments.eviction import BudgetError, max_bytes_from_env

    try:
        return max_bytes_from_env()
    except BudgetError as exc:
        raise CommandError(str(exc)) from exc


def usage() -> dict:
    """The cache as data: every level (base, its envs, their instances) with its bytes."""
    from sandbox.environments import cache
    from sandbox.environments.eviction import other_bytes, own_tags, snapshot
    from sandbox.environments.repos import cache_root

    snap = snapshot()
    levels = []
    for level in snap.levels:
        with cache.exclusive(level.name) as free:
            in_use = not free
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
                "folder": str(f.folder),
            }
            for f in snap.fetched
        ],
        "fetched_bytes": snap.fetched_bytes,
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
    header = ("level", "tree", "image", "total", "last used", "")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    for image in data["images_without_level"]:
        print(f"image no level names: {image['image']} ({human(image['bytes'])})")
    for item in data["fetched"]:
        print(
            f"fetched {item['repo']} {item['commit']} ({human(item['bytes'])}, last used "
            f"{_when(item['last_used'])}) from {item['url']}"
        )
    print(
        f"total {human(data['total_bytes'])}: trees {human(data['tree_bytes'])}, images "
        f"{human(data['image_bytes'])}, fetched commits {human(data['fetched_bytes'])}"
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
    from sandbox.environments.eviction import human, prune

    items = prune(dry_run=args.dry_run, recipe=RECIPE_VERSION)
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
    return 0
