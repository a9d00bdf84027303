"""The offline SWE-bench cache at scale: parallel builds (a shared level built once, also
across processes), the disk budget's eviction (least recently used instance levels first, then
env levels nothing stands on, never a leased level), ``ab swebench du`` and ``prune``.

Every test has a cache root of its own (tests/support/swebench_cache_fixtures.py): a base level
copied from the shared cache, real env and instance levels of a tiny repository above it, built with
pip from the package index, and real Docker images under the root's own image prefix.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS

from benchsite.cli.main import main
from sandbox.environments import cache, docker_images, eviction
from sandbox.environments.build import Builder, built_instance, use_built_instance
from sandbox.environments.parallel import build_all, next_index
from sandbox.environments.repos import RepoSource
from tests.conftest import REPO_ROOT
from tests.support.swebench_cache_fixtures import (
    TINY_REPO,
    TINY_SPECS,
    drop_root,
    new_root,
    seed_base,
    tiny_repos,
    tiny_rows,
)

pytestmark = pytest.mark.slow

# Run in another process: build one instance (or hold an instance's use lease until stdin
# closes) with the tiny specification registered there too.
OTHER_PROCESS = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from tests.support.swebench_cache_fixtures import register_tiny_specs
    from sandbox.environments.build import Builder, use_built_instance
    from sandbox.environments.repos import RepoSource

    register_tiny_specs()
    action, argument = sys.argv[1], sys.argv[2]
    if action == "lease":
        with use_built_instance(argument) as built:
            print("leased" if built else "not built", flush=True)
            sys.stdin.read()
    else:
        row = json.loads(argument)
        outcome = Builder(RepoSource(Path(action)), docker=False, max_bytes=None).build(row)
        seconds = outcome.built.seconds if outcome.built else {}
        print(json.dumps({"status": outcome.status, "reason": outcome.reason,
                          "seconds": seconds, "waited": outcome.waited}))
    """
)


def other_process(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", OTHER_PROCESS, *args],
        cwd=REPO_ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
        **kwargs,
    )


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A cache root of the test's own with the base level, and the tiny repository's rows."""
    root = new_root()
    monkeypatch.setenv("SWEBENCH_CACHE_DIR", str(root))
    monkeypatch.setitem(MAP_REPO_VERSION_TO_SPECS, TINY_REPO, TINY_SPECS)
    repos = tmp_path / "repos"
    rows = tiny_rows(tiny_repos(repos))
    try:
        yield root, repos, rows
    finally:
        drop_root(root)


def level_of(instance_id: str) -> cache.Level:
    built = built_instance(instance_id)
    assert built is not None, f"{instance_id} is not built"
    level = cache.read_level(Path(built.rootfs).name)
    assert level is not None
    return level


# --- parallel builds ------------------------------------------------------------------------


@pytest.mark.bwrap
def test_it_builds_levels_in_parallel_and_a_shared_env_level_once_across_processes(tiny):
    root, repos, (one, two, three) = tiny
    seed_base(root, docker=False)
    snapshots: list[tuple[int, int, int, str]] = []
    other: list[subprocess.Popen] = []

    def on_progress(progress) -> None:
        snapshots.append(
            (len(progress.done), len(progress.running), len(progress.left), progress.line())
        )
        shared_env = [n for n in progress.running if n.startswith("env-agentbench-test__tiny-1.0")]
        if shared_env and not other:
            # tiny-2 needs the env level this process is building: another process asks for it.
            other.append(other_process(str(repos), json.dumps(two)))

    builder = Builder(RepoSource(repos), docker=False, max_bytes=None)
    outcomes = build_all(builder, [one, three], jobs=2, on_progress=on_progress)
    out, _ = other[0].communicate(timeout=1800)
    theirs = json.loads(out.strip().splitlines()[-1])

    mine = outcomes[one["instance_id"]]
    assert mine.status == "built" and outcomes[three["instance_id"]].status == "built"
    assert theirs["status"] == "built", theirs
    # The env level tiny-1 and tiny-2 share was built once: here; the other process waited.
    assert mine.built.seconds["env"] > 0
    assert theirs["seconds"]["env"] == 0 and theirs["waited"]["env"] > 0, theirs
    envs = [p for p in (root / "trees").glob("env-agentbench-test__tiny-1.0-*") if p.is_dir()]
    assert len(envs) == 1
    # Levels: 2 envs and 2 instances missing at the start; two built at once at some point.
    assert snapshots[0][:3] == (0, 0, 4)
    assert max(s[1] for s in snapshots) == 2
    assert any("2 running" in s[3] and "left" in s[3] for s in snapshots)
    assert snapshots[-1][:3] == (4, 0, 0)
    assert snapshots[-1][3] == "levels: 4 done, 0 running, 0 left"


def test_it_starts_the_env_level_the_most_instances_wait_for_and_never_two_on_one_level():
    levels = {
        "a-1": ("base", "env-a", "inst-a-1"),
        "b-1": ("base", "env-b", "inst-b-1"),
        "b-2": ("base", "env-b", "inst-b-2"),
        "c-1": ("base", "env-c", "inst-c-1"),
        "broken": (),  # not buildable: no levels
    }
    everything = {name for names in levels.values() for name in names} - {"base"}
    pending = ["a-1", "b-1", "b-2", "c-1"]
    # env-b has two instances waiting: it starts first, though a-1 comes first in the list.
    assert next_index(pending, levels, set(), everything) == 1
    # While another build holds env-b, b-2 would only wait: the first free one, a-1.
    assert next_index(["a-1", "b-2", "c-1"], levels, set(levels["b-1"]), everything) == 0
    # env-b built: its instances count like any other; the list's order decides.
    built = everything - {"env-b", "inst-b-1"}
    assert next_index(["c-1", "b-2"], levels, set(levels["b-1"]), built) == 0
    # Nothing free: the first, which then waits for its level.
    assert next_index(["b-2"], levels, set(levels["b-1"]), everything) == 0
    assert next_index(["broken", "a-1"], levels, set(), everything) == 0


# --- the budget -----------------------------------------------------------------------------


@pytest.mark.docker
def test_it_evicts_lru_instance_levels_then_unused_envs_and_never_a_leased_level(tiny):
    root, repos, (one, two, three) = tiny
    seed_base(root)
    builder = Builder(RepoSource(repos), docker=True, max_bytes=None)
    assert builder.build(one).ok and builder.build(two).ok
    with use_built_instance(two["instance_id"]):
        pass  # tiny-2 was used after tiny-1
    level_one, level_two = level_of(one["instance_id"]), level_of(two["instance_id"])
    env_one = cache.read_level(level_one.parent)
    assert env_one is not None and level_two.parent == env_one.name
    # Another process runs from tiny-2 (an attempt would): its lease is held there.
    holder = other_process("lease", two["instance_id"])
    assert holder.stdout.readline().strip() == "leased"
    # A budget the cache already nearly fills: tiny-3 (a new env and instance) needs room.
    budget = eviction.snapshot().total + 10_000_000
    lines: list[str] = []
    budgeted = Builder(RepoSource(repos), docker=True, max_bytes=budget, report=lines.append)

    third = budgeted.build(three)

    assert third.status == "built", third.line()
    # tiny-1's instance level went (least recently used, nobody on it): tree, image, record.
    assert not level_one.tree.exists() and not cache.record_path(level_one.name).exists()
    assert docker_images.image_key(level_one.image) is None
    assert built_instance(one["instance_id"]) is None
    # tiny-2 is in use and its env level stands under it: both stay, and the log says so.
    assert level_two.tree.is_dir() and docker_images.image_key(level_two.image) == level_two.key
    assert env_one.tree.is_dir() and docker_images.image_key(env_one.image) == env_one.key
    evicted = [x for x in lines if x.startswith(f"evicted instance level {level_one.name} (")]
    assert len(evicted) == 1 and "last used never" not in evicted[0], lines
    assert any("nothing left to evict (1 level(s) in use)" in line for line in lines), lines
    assert f"evicted instance level {level_one.name}" in (root / "evictions.log").read_text()

    holder.stdin.close()
    holder.wait(timeout=60)
    remaining = {lv.name: lv for lv in cache.all_levels()}
    used = {name: level.last_used() for name, level in remaining.items()}
    order = eviction.make_room(max_bytes=1, report=lines.append)

    # With the lease gone everything goes, instance levels first (least recently used first),
    # then env levels, then the base.
    kinds = [remaining[name].kind for name in order]
    assert kinds == sorted(kinds, key=lambda k: ("instance", "env", "base").index(k))
    instances = [remaining[name] for name in order if remaining[name].kind == "instance"]
    assert [lv.name for lv in instances] == [
        lv.name for lv in sorted(instances, key=lambda lv: used[lv.name])
    ]
    assert set(order) == set(remaining) and cache.all_levels() == []
    assert eviction.snapshot().image_bytes == 0


@pytest.mark.django_db
@pytest.mark.bwrap
def test_an_attempt_holds_a_use_lease_on_its_instance_level_while_it_runs(tiny, monkeypatch):
    """The pipeline leases the instance level it runs from for the whole attempt, and lets go
    when the attempt ends (here: stopped on purpose right after the lease was checked)."""
    from runs.pipeline import execute
    from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
    from tasks_app.models import Task
    from tasks_app.swebench.importer import swebench_import
    from tests.support.swebench_fixtures import write_jsonl

    root, repos, (one, _two, _three) = tiny
    seed_base(root, docker=False)
    assert Builder(RepoSource(repos), docker=False, max_bytes=None).build(one).ok
    level = level_of(one["instance_id"])
    swebench_import(source=write_jsonl(repos.parent / "tiny.jsonl", [one]), suite_name="tiny")
    task = Task.objects.get(suite__name="tiny", task_id=one["instance_id"])
    seen: list[bool] = []

    def probing(self, plan):
        with cache.exclusive(level.name) as free:
            seen.append(free)
        raise RuntimeError("probe: the lease was checked, stop here")

    monkeypatch.setattr(execute.Execution, "_stages", probing)
    attempt = execute.attempt_execute(
        attempt_create_adhoc(task=task, model_config=model_config_for_variant("nop")),
        backend="bwrap",
    )
    with cache.exclusive(level.name) as free_after:
        pass

    assert seen == [False]  # in use while the attempt ran from it
    assert "probe: the lease was checked" in attempt.error_text
    assert free_after is True


# --- du and prune ---------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.docker
def test_du_shows_each_level_and_prune_removes_stale_levels_and_unnamed_images(
    tiny, monkeypatch, capsys
):
    from sandbox.environments import envspec

    root, repos, (one, _two, _three) = tiny
    seed_base(root)
    builder = Builder(RepoSource(repos), docker=True, max_bytes=None)
    assert builder.build(one).ok
    first = level_of(one["instance_id"])
    first_env = cache.read_level(first.parent)
    assert first_env is not None
    # A pin added for the repository: a new env level, and tiny-1 rebuilt on it. The old
    # instance level goes with the rebuild; its old env level stays behind.
    monkeypatch.setitem(envspec.PIP_PINS, TINY_REPO, [("wheel>=0.30", "test pin")])
    assert builder.build(one).status == "built"
    second = level_of(one["instance_id"])
    assert second.parent != first_env.name and not first.tree.exists()
    assert first_env.tree.is_dir()
    # An image no level names (its key is nobody's), and what a killed build leaves.
    orphan = f"{cache.image_repository('instance', 'agentbench-test__gone')}:0123456789abcdef"
    dockerfile = f"FROM {second.image}\nLABEL {docker_images.LABEL}=0123456789abcdef\n"
    subprocess.run(
        ["docker", "build", "-q", "-t", orphan, "-"],
        input=dockerfile,
        text=True,
        check=True,
        capture_output=True,
    )
    work = root / "trees" / f".{second.name}.leftover"
    work.mkdir()

    assert main(["swebench", "du", "--json"]) == 0
    usage = json.loads(capsys.readouterr().out)
    assert main(["swebench", "du"]) == 0
    table = capsys.readouterr().out
    assert main(["swebench", "prune", "--dry-run"]) == 0
    dry = capsys.readouterr().out
    dry_usage = eviction.snapshot()
    assert main(["swebench", "prune"]) == 0
    pruned = capsys.readouterr().out
    after = eviction.snapshot()

    by_name = {lv["name"]: lv for lv in usage["levels"]}
    assert set(by_name) == {first_env.name, second.parent, second.name, first_env.parent}
    assert by_name[second.name]["instance_id"] == one["instance_id"]
    assert by_name[second.name]["tree_bytes"] > 1_000_000  # its own copy of the venv
    assert by_name[second.parent]["image_bytes"] > 1_000_000  # the venv's layer
    assert [i["image"] for i in usage["images_without_level"]] == [orphan]
    assert usage["total_bytes"] == sum(lv["bytes"] for lv in usage["levels"]) + sum(
        i["bytes"] for i in usage["images_without_level"]
    )
    assert f"    instance {one['instance_id']}" in table
    assert "  env agentbench-test/tiny 1.0" in table
    assert f"would remove env {first_env.name}" in dry and "would remove image " + orphan in dry
    assert f"would remove work folder {work}" in dry
    assert len(dry_usage.levels) == 4 and dry_usage.orphans  # a dry run removes nothing
    assert f"removed env {first_env.name}" in pruned and "rebuilt on newer env levels" in pruned
    assert f"removed image {orphan}" in pruned and not work.exists()
    assert {lv.name for lv in after.levels} == {second.name, second.parent, first_env.parent}
    assert after.orphans == [] and docker_images.image_key(first_env.image) is None
    assert built_instance(one["instance_id"]) is not None  # what is current stays usable


@pytest.mark.docker
def test_prune_removes_levels_built_with_an_older_recipe_unless_in_use(tiny, monkeypatch):
    from sandbox.environments import envspec

    root, repos, (one, _two, three) = tiny
    seed_base(root)
    builder = Builder(RepoSource(repos), docker=True, max_bytes=None)
    assert builder.build(one).ok and builder.build(three).ok
    old_one, old_three = level_of(one["instance_id"]), level_of(three["instance_id"])

    with use_built_instance(three["instance_id"]):
        items = eviction.prune(dry_run=False, recipe=envspec.RECIPE_VERSION + 1)

    why = {item.what: item for item in items}
    assert all(item.why.startswith("built with recipe ") for item in items if item.kind != "record")
    # tiny-1's levels go; tiny-3 is in use, and so its env level and the base stay under it.
    assert why[old_one.name].skipped == "" and not old_one.tree.exists()
    assert why[old_one.parent].skipped == "" and docker_images.image_key(old_one.image) is None
    assert why[old_three.name].skipped == "in use" and old_three.tree.is_dir()
    assert why[old_three.parent].skipped == f"{old_three.name} stays and stands on it"
    base = cache.read_level(old_three.parent).parent
    assert why[base].skipped == f"{old_three.parent} stays and stands on it"
    assert {lv.name for lv in cache.all_levels()} == {old_three.name, old_three.parent, base}


@pytest.mark.django_db
@pytest.mark.bwrap
def test_gold_validation_keeps_to_the_budget_by_building_just_ahead_of_its_attempts(tiny, settings):
    """A budget that holds the base and about one env and instance level: the validation
    builds each instance shortly before its attempts, eviction makes room as it goes, and no
    attempt finds its level gone."""
    from runs.models import Attempt
    from runs.pipeline.swebench_validation import gold_validate
    from tasks_app.swebench.importer import swebench_import
    from tests.support.swebench_fixtures import write_jsonl

    root, repos, rows = tiny
    settings.ARTIFACTS_ROOT = repos.parent / "artifacts"
    seed_base(root, docker=False)
    swebench_import(source=write_jsonl(repos.parent / "tiny.jsonl", rows), suite_name="tiny")
    budget = eviction.snapshot().total + 100_000_000
    lines: list[str] = []
    builder = Builder(RepoSource(repos), docker=False, max_bytes=budget, report=lines.append)

    report = gold_validate(suite_name="tiny", builder=builder, backend="bwrap", jobs=2)

    assert [r.instance_id for r in report.rows] == [r["instance_id"] for r in rows]
    assert all(r.build in ("built", "cached") for r in report.rows), report.rows
    errors = list(
        Attempt.objects.filter(task__suite__name="tiny").values_list("error_text", flat=True)
    )
    assert len(errors) == 6 and not any("not built on this machine" in e for e in errors), errors
    assert any(line.startswith("evicted ") for line in lines), lines
    # Every lease was given back.
    for level in cache.all_levels():
        with cache.exclusive(level.name) as free:
            assert free, level.name
