"""Environments end to end for one SWE-bench instance, per backend: offline build, registry
pull, tree export, and the first command of an attempt's sandbox.

    python bench/environments.py [--instance ID] [--repos DIR]

For one instance (default marshmallow-code__marshmallow-1359, which builds offline from
../shared/swebench/repos), each in a fresh cache root of its own under
/var/lib/agentbench/swebench-bench (the shared cache is only read: its base level is given
to the roots as a hard-link copy, built there once if missing, as bench/swebench_build.py does):

- the offline build cold, on bubblewrap (trees only) and on Docker (trees and images), and
  the same build again (a no-op);
- a Dockerfile ``FROM`` the built instance image, built cold and again unchanged (a no-op);
- the instance image, flattened to one layer so no layer of it is on the engine, pushed to
  Debian's docker-registry on loopback (tests/support/registry_fixtures.py) and pulled cold: on
  Docker by the engine (``pulled.ensure_pulled``), on bubblewrap straight into its tree by
  skopeo and umoci (``oci_trees.pull_tree``, in a root of its own), each then again (cached:
  a no-op);
- the engine image's export to a bubblewrap tree, cold (seconds per GB) and cached;
- the first command of a sandbox on the pulled environment, per backend (start + ``python3
  -c pass``), i.e. what an attempt's first stage waits for once its environment is there.

Prints the load average before and after and the ratios; removes its roots and images.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BENCH_ROOT = Path("/var/lib/agentbench/swebench-bench")
DEFAULT_INSTANCE = "marshmallow-code__marshmallow-1359"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores)"


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def instance_row(instance_id: str) -> dict:
    source = ROOT / "examples" / "swebench" / "lite_dev.jsonl"
    for line in source.read_text().splitlines():
        row = json.loads(line)
        if row["instance_id"] == instance_id:
            return row
    raise SystemExit(f"{instance_id} is not in {source}")


def new_root(label: str) -> Path:
    BENCH_ROOT.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=f"env-{label}-", dir=BENCH_ROOT))
    root.chmod(0o755)  # the sandbox uid reads the trees
    os.environ["SWEBENCH_CACHE_DIR"] = str(root)
    return root


def offline_build(row: dict, repos: Path, *, docker: bool) -> tuple[Path, Any, float, float]:
    """(root, the built instance, cold seconds, again seconds) in a fresh root."""
    from sandbox.environments.build import Builder
    from sandbox.environments.parallel import build_all
    from sandbox.environments.repos import RepoSource
    from tests.support.swebench_cache_fixtures import seed_base

    root = new_root("docker" if docker else "bwrap")
    seed_base(root, docker=docker)
    (root / "pip-cache").unlink()  # the seed links the shared pip cache: start cold

    def build() -> Any:
        builder = Builder(RepoSource(repos), docker=docker, max_bytes=None)
        try:
            outcome = build_all(builder, [row], jobs=1)[row["instance_id"]]
        finally:
            builder.close()
        if not outcome.ok:
            raise SystemExit(f"build failed: {outcome.line()}\n{outcome.log_tail}")
        return outcome.built

    built, cold = timed(build)
    _, again = timed(build)
    return root, built, cold, again


def flatten(image: str, tag: str) -> None:
    """``image``'s files as one new layer (export | import), keeping its Env and workdir."""
    info = json.loads(
        subprocess.run(
            ["docker", "image", "inspect", image], capture_output=True, text=True, check=True
        ).stdout
    )[0]
    config = info.get("Config") or {}
    changes = [
        f"ENV {item.partition('=')[0]}={item.partition('=')[2]}" for item in config.get("Env") or []
    ]
    if config.get("WorkingDir"):
        changes.append(f"WORKDIR {config['WorkingDir']}")
    container = subprocess.run(
        ["docker", "create", image, "true"], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        change_args = " ".join(f"--change '{c}'" for c in changes)
        subprocess.run(
            f"docker export {container} | docker import {change_args} - {tag}",
            shell=True,
            check=True,
            capture_output=True,
        )
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True)


def first_command(backend: str, *, image: str = "", tree: Path | None = None,
                  env: dict[str, str] | None = None) -> float:  # fmt: skip
    """Seconds from opening a sandbox on the environment to its first command's end."""
    from sandbox import open_sandbox
    from sandbox.base import SandboxConfig

    with tempfile.TemporaryDirectory(prefix="ab-bench-env-") as tmp:
        config = SandboxConfig(
            name=f"bench-env-{uuid.uuid4().hex[:8]}",
            workspace=Path(tmp) / "ws",
            image=image or "agentbench/py-runner:0.1.0",
            allow_network=False,
            env=env or {},
            labels={"agentbench.bench": "environments"},
        )
        started = time.perf_counter()
        with open_sandbox(config, backend, bwrap_rootfs=tree) as sandbox:
            done = sandbox.exec(["python3", "-c", "pass"], timeout=120)
            took = time.perf_counter() - started
        if not done.ok:
            raise SystemExit(f"{backend}: the first command failed: {done}")
    return took


def dockerfile_noop(base_image: str) -> tuple[Any, float, float]:
    from sandbox.environments import dockerfile

    with tempfile.TemporaryDirectory(prefix="ab-bench-dockerfile-") as tmp:
        context = Path(tmp)
        (context / "Dockerfile").write_text(
            f"FROM {base_image}\nUSER root\n"
            f"RUN echo bench-{uuid.uuid4().hex[:8]} > /etc/bench-marker\n"
        )
        first, cold = timed(lambda: dockerfile.build(context, timeout_sec=1800, network="none"))
        again, warm = timed(lambda: dockerfile.build(context, timeout_sec=1800, network="none"))
        assert again.reused and again.image_id == first.image_id
    return first, cold, warm


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instance", default=DEFAULT_INSTANCE)
    parser.add_argument("--repos", type=Path, default=ROOT.parent / "shared/swebench/repos")
    args = parser.parse_args()
    row = instance_row(args.instance)
    # tests/ fixtures read the settings (the fake providers' keys) when imported.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    # The swebench package's import (seconds) out of every clock.
    import swebench.harness.test_spec.python  # noqa: F401

    from sandbox.environments import cache, oci_trees
    from sandbox.environments.image_trees import tree_for_image
    from sandbox.environments.pulled import ensure_pulled
    from tests.support.registry_fixtures import local_registry
    from tests.support.swebench_cache_fixtures import remove_images

    os.environ.pop("SWEBENCH_CACHE_MAX_GB", None)
    os.environ.pop("REGISTRY_MIRRORS", None)
    print(f"instance {args.instance}; load average before: {load()}", flush=True)
    roots: list[Path] = []
    images: list[str] = []
    try:
        root, _, bwrap_cold, bwrap_again = offline_build(row, args.repos, docker=False)
        roots.append(root)
        print(
            f"offline build, bubblewrap (trees): cold {bwrap_cold:.0f} s, "
            f"again {bwrap_again:.2f} s "
            f"(no-op), {bwrap_cold / max(bwrap_again, 1e-3):.0f}x",
            flush=True,
        )
        root, built, docker_cold, docker_again = offline_build(row, args.repos, docker=True)
        roots.append(root)
        print(
            f"offline build, Docker (trees + images): cold {docker_cold:.0f} s, again "
            f"{docker_again:.2f} s (no-op), {docker_cold / max(docker_again, 1e-3):.0f}x",
            flush=True,
        )
        built_df, df_cold, df_again = dockerfile_noop(built.image)
        images.append(built_df.tag)
        print(
            f"Dockerfile FROM the instance image: cold {df_cold:.1f} s, rebuild unchanged "
            f"{df_again:.2f} s (no-op, reused={True})",
            flush=True,
        )
        local = f"agentbench-bench/env-{uuid.uuid4().hex[:8]}:1"
        flatten(built.image, local)
        images.append(local)
        subprocess.run(["docker", "image", "rm", "--force", built_df.tag], capture_output=True)
        remove_images(root)  # the instance's layers leave the engine: the pull is cold
        with tempfile.TemporaryDirectory() as tmp, local_registry(Path(tmp) / "registry") as reg:
            reference = f"{reg.host}/bench/instance:1"
            images.append(reference)
            _, push = timed(lambda: reg.push(local, "bench/instance:1"))
            subprocess.run(["docker", "image", "rm", "--force", local], capture_output=True)
            pull_root = new_root("pull")
            roots.append(pull_root)
            pulled, pull_cold = timed(lambda: ensure_pulled(reference))
            _, pull_again = timed(lambda: ensure_pulled(reference))
            size_gb = pulled.size / 1e9
            print(
                f"image: {pulled.size / 1e6:.0f} MB unpacked, one layer (push {push:.1f} s)\n"
                f"pull cold, Docker engine (local registry): {pull_cold:.1f} s "
                f"({pull_cold / max(size_gb, 1e-9):.0f} s/GB); cached {pull_again:.2f} s "
                f"(no-op), {pull_cold / max(pull_again, 1e-3):.0f}x",
                flush=True,
            )
            tree, export = timed(lambda: tree_for_image(reference))
            _, export_again = timed(lambda: tree_for_image(reference))
            level = cache.read_level(tree.path.name)
            tree_gb = (level.tree_bytes or 0) / 1e9 if level else size_gb
            print(
                f"image-to-tree export (engine): {export:.1f} s for {tree_gb:.2f} GB "
                f"({export / max(tree_gb, 1e-9):.0f} s/GB); cached {export_again:.2f} s (no-op)",
                flush=True,
            )
            docker_start = first_command("docker", image=pulled.image_id)
            bwrap_start_engine = first_command("bwrap", tree=tree.path, env=tree.env_dict())
            oci_root = new_root("oci")
            roots.append(oci_root)
            via, oci_cold = timed(lambda: oci_trees.pull_tree(reference))
            _, oci_again = timed(lambda: oci_trees.pull_tree(reference))
            oci_tree = oci_trees.tree_of(via.image_id)
            print(
                f"pull cold, bubblewrap straight to its tree (skopeo + umoci, local registry): "
                f"{oci_cold:.1f} s for {via.size / 1e9:.2f} GB "
                f"({oci_cold / max(via.size / 1e9, 1e-9):.0f} s/GB); cached {oci_again:.2f} s "
                f"(no-op); against engine pull + export {(pull_cold + export) / oci_cold:.2f}x",
                flush=True,
            )
            print(
                f"  digest: engine {pulled.repo_digest.rsplit('@', 1)[1][:19]}, skopeo "
                f"{via.repo_digest.rsplit('@', 1)[1][:19]}; image ID: engine "
                f"{pulled.image_id[:19]}, skopeo {via.image_id[:19]}"
            )
            bwrap_start = first_command("bwrap", tree=oci_tree.path, env=oci_tree.env_dict())
            print(
                f"first command of an attempt's sandbox (start + python3 -c pass): Docker "
                f"{docker_start:.2f} s, bubblewrap {bwrap_start:.2f} s (skopeo tree), "
                f"{bwrap_start_engine:.2f} s (engine-exported tree); "
                f"Docker/bubblewrap {docker_start / bwrap_start:.1f}x"
            )
    finally:
        for image in images:
            subprocess.run(["docker", "image", "rm", "--force", image], capture_output=True)
        for root in roots:
            remove_images(root)
            subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=False)
    print(f"load average after: {load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
