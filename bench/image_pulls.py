"""Images from a registry, timed: a pull from a loopback registry cold and cached (a no-op),
and the image-to-tree export for bubblewrap cold (seconds per GB) and cached (a no-op).

The image is the runner image's files as one new layer, pushed to Debian's docker-registry on
127.0.0.1 (tests/support/registry_fixtures.py); the cache root is a fresh one, removed at the end.

Run: python bench/image_pulls.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox.environments import cache, eviction
from sandbox.environments.image_trees import tree_for_image
from sandbox.environments.pulled import ensure_pulled
from tests.support.registry_fixtures import local_registry

RUNNER = "agentbench/py-runner:0.1.0"
# Beside the shared cache (the same filesystem), reachable by the sandbox uid.
ROOTS = Path("/var/lib/agentbench/swebench-tests")


def timed(call):
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def main() -> None:
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    local = f"agentbench-bench/pull-{uuid.uuid4().hex[:8]}:1"
    # The runner's files as one new layer (docker export | docker import): the engine has no
    # layer of it, so the pull below is cold for all of its bytes.
    container = subprocess.run(
        ["docker", "create", RUNNER, "true"], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        subprocess.run(
            f"docker export {container} | docker import - {local}",
            shell=True,
            check=True,
            capture_output=True,
        )
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True)
    ROOTS.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bench-", dir=ROOTS))
    os.environ["SWEBENCH_CACHE_DIR"] = str(root)
    os.environ.pop(eviction.BUDGET_ENV, None)
    with tempfile.TemporaryDirectory() as tmp, local_registry(Path(tmp) / "registry") as reg:
        reference = f"{reg.host}/bench/image:1"
        try:
            _, push = timed(lambda: reg.push(local, "bench/image:1"))
            subprocess.run(["docker", "image", "rm", local], capture_output=True)
            pulled, cold = timed(lambda: ensure_pulled(reference))
            _, warm = timed(lambda: ensure_pulled(reference))
            gb = pulled.size / 1e9
            print(
                f"image: {pulled.size / 1e6:.0f} MB unpacked, {pulled.layers} layers "
                f"(push {push:.1f} s)"
            )
            print(f"pull cold (local registry): {cold:.1f} s; cached: {warm:.2f} s (no-op)")
            tree, export = timed(lambda: tree_for_image(reference))
            _, again = timed(lambda: tree_for_image(reference))
            level = cache.read_level(tree.path.name)
            size = (level.tree_bytes or 0) / 1e9 if level else gb
            print(
                f"image-to-tree export cold: {export:.1f} s for {size:.2f} GB "
                f"({export / max(size, 1e-9):.0f} s/GB); cached: {again:.2f} s (no-op)"
            )
        finally:
            subprocess.run(["docker", "image", "rm", "--force", reference], capture_output=True)
            subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=False)


if __name__ == "__main__":
    main()
