"""``ab swebench build --source image|auto``: SWE-bench instances on their official images
(sandbox/environments/official_images.py), pulled with progress and recorded per instance and
on the task; on bubblewrap each image is also exported into its tree, so the first attempt
starts at once. ``auto`` builds offline what could not be pulled."""

from __future__ import annotations

import argparse
import sys

SOURCES = ("offline", "image", "auto")


def source_args(p: argparse.ArgumentParser) -> None:
    from sandbox.environments.official_images import DEFAULT_NAMESPACE, DEFAULT_TAG

    p.add_argument(
        "--source",
        choices=SOURCES,
        default="offline",
        help="offline: build the environment here (default); image: the official instance "
        "image from its registry (REGISTRY_MIRRORS applies); auto: the official image when "
        "the registry gives it, else the offline build",
    )
    p.add_argument(
        "--namespace",
        default=DEFAULT_NAMESPACE,
        help="the official images' namespace (default: %(default)s)",
    )
    p.add_argument(
        "--tag", default=DEFAULT_TAG, help="the official images' tag (default: %(default)s)"
    )


def pull_official(args: argparse.Namespace, tasks: list, backend: str) -> tuple[list, list]:
    """Pull each task's official image; returns (tasks done, (task, PullError) failed)."""
    from sandbox.environments.image_trees import ImageTreeError, tree_for_image
    from sandbox.environments.official_images import official_image_name, record_official
    from sandbox.environments.registry import PullError
    from tasks_app.cli.images import _Progress
    from tasks_app.images import task_image_pull

    done, failed = [], []
    for index, task in enumerate(tasks, start=1):
        name = official_image_name(task.task_id, namespace=args.namespace, tag=args.tag)
        show = _Progress(f"[{index}/{len(tasks)}] {task.task_id}")
        try:
            pulled = task_image_pull(task=task, reference=name, progress=show)
            if backend == "bwrap":
                tree_for_image(pulled.image_id)
        except (PullError, ImageTreeError) as exc:
            show.end()
            failed.append((task, exc))
            print(f"[{index}/{len(tasks)}] {task.task_id}: image {name}: {exc}", file=sys.stderr)
            continue
        show.end()
        record_official(task.task_id, name, pulled)
        done.append(task)
        how = f"pulled from {pulled.source}" if pulled.layers else "on the engine"
        print(
            f"[{index}/{len(tasks)}] {task.task_id}: image {name} -> "
            f"{pulled.repo_digest or pulled.image_id} ({how})",
            flush=True,
        )
    return done, failed
