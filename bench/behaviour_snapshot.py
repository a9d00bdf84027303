"""What a reader sees on the demo data, from two trees, compared: the check that a reshaping of
the code changed no page, API answer, CSV or CLI figure (issue 30's "behaviour unchanged").

    python bench/behaviour_snapshot.py OLD_TREE [NEW_TREE]

Each tree (a checkout, e.g. ``git worktree add /tmp/old 387aa8a``) seeds the demo data
(``ab setup-demo``) into a fresh database of its own, in a process of its own with the tree
first on ``sys.path``, and records every read surface: the API's JSON answers and CSVs, the
pages' status and the figures their text shows, and ``ab leaderboard``'s lines. Public ids are
random per database, so each is replaced by what it names (a run by its seed key, an attempt
by its run, task and sample). Then:

- an API answer of the old tree must be inside the new one's: every field it had, the same
  value (a field added since is listed, not a difference);
- a CSV: every column it had, the same cells;
- a page: the same status, and every figure it showed still shown (a figure added is listed);
- a CLI output: the same figures.

Prints the differences and exits 1 if there is one. The new tree's own code reads nothing of
this script's: the child process imports only what both trees have (Django, the CLI's main).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

SHORT = re.compile(r"\b[0-9a-f]{8}\b")  # a run's short id, as keys and links show it
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
FIGURE = re.compile(r"[$]?\d[\d,]*(?:\.\d+)?%?")
ATTEMPT_PAGES = 25  # attempt pages read per tree: every outcome of the demo occurs in them


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path, nargs="?", default=Path(__file__).parent.parent)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--keep", type=Path, help="also write each tree's snapshot here")
    args = parser.parse_args()
    if args.child:
        json.dump(_snapshot(), sys.stdout)
        return 0
    old, new = _take(args.old.resolve()), _take(args.new.resolve())
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        (args.keep / "old.json").write_text(json.dumps(old, indent=1))
        (args.keep / "new.json").write_text(json.dumps(new, indent=1))
    differences, added = compare(old, new)
    print(f"surfaces: {len(old)} old, {len(new)} new")
    for line in added:
        print("added:", line)
    for line in differences:
        print("DIFFERS:", line)
    print(f"{len(differences)} differences, {len(added)} additions")
    return 1 if differences else 0


def _take(tree: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="ab-snapshot-") as var:
        env = {
            **os.environ,
            "AB_VAR_DIR": var,
            "PYTHONPATH": str(tree),
            "DJANGO_SETTINGS_MODULE": "benchsite.settings",
        }
        env.pop("DATABASE_URL", None)
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", str(tree)],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise SystemExit(f"{tree}: the snapshot failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout)


# --- in the tree's own process -------------------------------------------------------------


def _snapshot() -> dict:
    sys.path.insert(0, os.getcwd())
    from benchsite.cli.main import main as ab

    with _quiet():
        ab(["setup-demo"])
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from runs.models import Attempt, ModelConfig, Run
    from tasks_app.models import Suite, Task

    names = {}
    for run in Run.objects.all():
        names[str(run.public_id)] = "run:" + str(
            (run.config_snapshot or {}).get("seed_demo") or run.model_config.slug
        )
    for attempt in Attempt.objects.select_related("run", "task"):
        run = names[str(attempt.run.public_id)]
        names[str(attempt.public_id)] = (
            f"attempt:{run}:{attempt.task.task_id}:{attempt.sample_index}"
        )
    for task in Task.objects.select_related("suite"):
        names[str(task.public_id)] = f"task:{task.suite.name}:{task.task_id}"
    for config in ModelConfig.objects.all():
        names[str(config.public_id)] = f"config:{config.slug}"

    short = {public_id[:8]: name for public_id, name in names.items()}
    today = re.compile(re.escape(dt.date.today().isoformat()) + r"[T ][\d:.]+(?:Z|[+-]\d\d:?\d\d)?")

    def named(text: str) -> str:
        text = UUID.sub(lambda m: names.get(m.group(0), "uuid:?"), text)
        text = SHORT.sub(lambda m: short.get(m.group(0), m.group(0)), text)
        return today.sub("<seeded today>", text).replace(os.getcwd(), "<tree>")

    staff = get_user_model().objects.create_superuser("snapshot", "s@example.com", "x")
    client = Client()
    client.force_login(staff)
    out: dict[str, dict] = {}

    def read(url: str) -> None:
        response = client.get(url)
        kind = response.get("Content-Type", "").split(";")[0]
        body = b"".join(response.streaming_content) if response.streaming else response.content
        text = named(body.decode("utf-8", "replace"))
        record: dict = {"status": response.status_code, "kind": kind}
        if kind == "application/json":
            record["json"] = json.loads(text)
        elif kind == "text/csv":
            record["csv"] = list(csv.DictReader(io.StringIO(text)))
        else:
            record["figures"] = _figures(text)
        out[named(url)] = record

    suites = list(Suite.objects.order_by("name"))
    configs = list(ModelConfig.objects.order_by("slug"))
    for url in ("/", "/api/suites", "/api/runs", "/api/model-configs", "/api/failure-reasons"):
        read(url)
    for config in configs:
        read(f"/configs/{config.slug}/")
        read(f"/api/model-configs/{config.slug}")
    for suite in suites:
        s = suite.name
        slugs = [
            c.slug
            for c in configs
            if Attempt.objects.filter(run__model_config=c, task__suite=suite)
        ]
        pair = ",".join(slugs[:2])
        for url in (
            f"/suites/{s}/",
            f"/suites/{s}/leaderboard/",
            f"/suites/{s}/leaderboard/?view=configs",
            f"/suites/{s}/taxonomy/",
            f"/suites/{s}/attempts/",
            f"/suites/{s}/attempts/?outcome=failed&sort=cost&order=desc",
            f"/api/suites/{s}",
            f"/api/leaderboard?suite={s}",
            f"/api/leaderboard?suite={s}&view=configs",
            f"/api/leaderboard.csv?suite={s}",
            f"/api/taxonomy?suite={s}",
            f"/api/taxonomy.csv?suite={s}",
            f"/api/attempts?suite={s}&page_size=500",
            f"/api/attempts?suite={s}&format=csv",
        ):
            read(url)
        if len(slugs) >= 2:
            for url in (
                f"/suites/{s}/compare/?models={pair}",
                f"/api/compare?suite={s}&models={pair}",
                f"/api/compare.csv?suite={s}&models={pair}",
            ):
                read(url)
        for task in Task.objects.filter(suite=suite).order_by("task_id")[:3]:
            read(f"/suites/{s}/tasks/{task.task_id}/")
            read(f"/api/tasks/{task.public_id}")
    for run in Run.objects.order_by("created_at"):
        read(f"/runs/{run.public_id}/")
        read(f"/api/runs/{run.public_id}")
    for attempt in Attempt.objects.order_by("run__created_at", "task__task_id", "sample_index")[
        :ATTEMPT_PAGES
    ]:
        read(f"/attempts/{attempt.public_id}/")
        read(f"/api/attempts/{attempt.public_id}")
    for suite in suites:
        for view in ("runs", "configs"):
            buffer = io.StringIO()
            with _quiet(stdout=buffer):
                ab(["leaderboard", suite.name, "--view", view])
            out[f"ab leaderboard {suite.name} --view {view}"] = {
                "figures": _figures(named(buffer.getvalue()), html=False)
            }
    return out


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag):
        self._skip -= tag in ("script", "style") and self._skip > 0

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def _figures(text: str, *, html: bool = True) -> dict[str, int]:
    if html:
        parser = _Text()
        parser.feed(text)
        text = " ".join(parser.parts)
    return dict(Counter(FIGURE.findall(text)))


class _quiet:
    """stdout and stderr of a CLI call swallowed (or stdout into ``stdout``)."""

    def __init__(self, stdout: io.StringIO | None = None) -> None:
        self.stdout = stdout or io.StringIO()

    def __enter__(self):
        self.saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = self.stdout, io.StringIO()

    def __exit__(self, *exc):
        sys.stdout, sys.stderr = self.saved


# --- comparing -----------------------------------------------------------------------------


def compare(old: dict, new: dict) -> tuple[list[str], list[str]]:
    differences: list[str] = []
    added: list[str] = []
    for key, before in old.items():
        after = new.get(key)
        if after is None:
            differences.append(f"{key}: not read in the new tree")
            continue
        if before.get("status") != after.get("status"):
            differences.append(f"{key}: status {before.get('status')} -> {after.get('status')}")
            continue
        if "json" in before:
            _inside(key, before["json"], after.get("json"), differences, added)
        elif "csv" in before:
            _csv_inside(key, before["csv"], after.get("csv") or [], differences, added)
        else:
            lost = Counter(before["figures"]) - Counter(after.get("figures", {}))
            more = Counter(after.get("figures", {})) - Counter(before["figures"])
            if lost:
                differences.append(f"{key}: figures no longer shown {dict(lost)}")
            if more:
                added.append(f"{key}: figures shown now {dict(more)}")
    added += [f"{key}: a surface read only in the new tree" for key in new.keys() - old.keys()]
    return differences, added


def _inside(where: str, before, after, differences: list[str], added: list[str]) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        for name in after.keys() - before.keys():
            added.append(f"{where}.{name}")
        for name, value in before.items():
            if name not in after:
                differences.append(f"{where}.{name}: gone")
            else:
                _inside(f"{where}.{name}", value, after[name], differences, added)
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (a, b) in enumerate(zip(before, after, strict=True)):
            _inside(f"{where}[{index}]", a, b, differences, added)
    elif before != after:
        differences.append(f"{where}: {_short(before)} -> {_short(after)}")


def _csv_inside(where: str, before: list, after: list, differences: list, added: list) -> None:
    if len(before) != len(after):
        differences.append(f"{where}: {len(before)} rows -> {len(after)}")
        return
    if before and after:
        added += [f"{where} column {c}" for c in after[0].keys() - before[0].keys()]
    for index, (a, b) in enumerate(zip(before, after, strict=True)):
        for column, value in a.items():
            if b.get(column) != value:
                differences.append(f"{where} row {index} {column}: {value!r} -> {b.get(column)!r}")


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


if __name__ == "__main__":
    sys.exit(main())
