"""Building many instances at once (``ab swebench build --jobs N``), with the progress by level.

N threads share one ``Builder``: every level is built under its own lock (a ``flock``, so
also against other processes), so an env level several instances need is built once while
the others wait for it. To keep the threads busy rather than waiting, each takes the next
instance whose levels no other thread is building, when there is one.

``BuildProgress`` counts levels, not instances: those missing when the run started (left),
being built (running) and finished (done), and estimates the time left from how long the
levels of each kind took so far (before any finished: from their cold times in the cache).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sandbox.environments import cache
from sandbox.environments.build import Builder, BuildOutcome, LevelEvent
from sandbox.environments.envspec import NotBuildable
from sandbox.environments.repos import RepoError

# Seconds a level of each kind is assumed to take before one was timed (Lite dev, cold).
DEFAULT_SECONDS = {"base": 90.0, "env": 60.0, "instance": 30.0}


@dataclass
class BuildProgress:
    """Levels of a build run: done, running and left, and an estimate of the time left."""

    jobs: int
    left: dict[str, str] = field(default_factory=dict)  # name -> kind, still to build
    running: dict[str, tuple[str, float]] = field(default_factory=dict)  # name -> kind, start
    # name -> kind, seconds (None: another process built it meanwhile).
    done: dict[str, tuple[str, float | None]] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)
    typical: dict[str, float] = field(default_factory=dict)  # kind -> seconds, from the cache

    def on_event(self, event: LevelEvent) -> None:
        if event.state == "start":
            self.left.pop(event.name, None)
            self.running[event.name] = (event.kind, time.monotonic())
            return
        self.running.pop(event.name, None)
        self.left.pop(event.name, None)
        if event.state == "done":
            self.done[event.name] = (event.kind, event.seconds)
        else:
            self.failed.add(event.name)

    def found(self, names: tuple[str, ...]) -> None:
        """Levels an instance's build found there although they were missing at the start
        (another process built them meanwhile)."""
        for name in names:
            if self.left.pop(name, None) is not None:
                self.done[name] = (name.split("-", 1)[0], None)

    def drop(self, names: list[str]) -> None:
        """Levels that will not be built after all (their instance failed below them)."""
        for name in names:
            self.left.pop(name, None)

    def seconds_for(self, kind: str) -> float:
        timed = [seconds for k, seconds in self.done.values() if k == kind and seconds is not None]
        if timed:
            return sum(timed) / len(timed)
        return self.typical.get(kind) or DEFAULT_SECONDS[kind]

    def eta(self) -> float:
        """Seconds left: the work left and the rest of the running levels, over the jobs."""
        now = time.monotonic()
        work = sum(self.seconds_for(kind) for kind in self.left.values())
        work += sum(
            max(self.seconds_for(kind) - (now - start), 0) for kind, start in self.running.values()
        )
        return work / max(self.jobs, 1)

    def line(self) -> str:
        running = ", ".join(f"{kind} {name}" for name, (kind, _) in sorted(self.running.items()))
        text = f"levels: {len(self.done)} done, {len(self.running)} running, {len(self.left)} left"
        if self.failed:
            text += f", {len(self.failed)} failed"
        if self.left or self.running:
            text += f"; about {_duration(self.eta())} left"
        return text + (f" ({running})" if running else "")


def _duration(seconds: float) -> str:
    if seconds >= 90:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def typical_seconds() -> dict[str, float]:
    """The median cold build time of each kind of level in the cache (what levels took here)."""
    by_kind: dict[str, list[float]] = {}
    for level in cache.all_levels():
        if level.seconds:
            by_kind.setdefault(level.kind, []).append(level.seconds)
    return {kind: sorted(values)[len(values) // 2] for kind, values in by_kind.items()}


def next_index(
    pending: list[str], levels: dict[str, tuple[str, ...]], claimed: set[str], missing: set[str]
) -> int:
    """Which of the ``pending`` instances (ids, in order) to build next: one none of whose
    ``missing`` levels another build has ``claimed`` (else the first: it waits for them) and,
    of those, the one whose missing env level the most other pending instances stand on (the
    critical path first), the earliest on a tie. ``levels``: each instance's (base, env,
    instance) level names."""

    def waiting_on_env(instance_id: str) -> int:
        names = levels[instance_id]
        if len(names) < 2 or names[1] not in missing:
            return 0
        return sum(names[1] in levels[other] for other in pending if other != instance_id)

    free = [
        index
        for index, instance_id in enumerate(pending)
        if not claimed.intersection(n for n in levels[instance_id] if n in missing)
    ]
    return max(free, key=lambda i: (waiting_on_env(pending[i]), -i), default=0)


def build_all(
    builder: Builder,
    instances: list[dict[str, Any]],
    *,
    jobs: int,
    on_outcome: Callable[[int, BuildOutcome], None] | None = None,
    on_progress: Callable[[BuildProgress], None] | None = None,
    slots: threading.Semaphore | None = None,
) -> dict[str, BuildOutcome]:
    """Build ``instances`` with ``jobs`` threads; returns each instance's outcome by id.
    ``on_outcome(n, outcome)`` hears the n-th instance to finish; ``on_progress`` every change
    of the level counts. Both are called one at a time.

    ``slots``: build in the order given, taking a slot before each instance; the caller gives
    it back when it is done with the instance (gold validation: once its attempts ended), so
    the builds run at most that many instances ahead of it."""
    jobs = max(1, jobs)
    progress = BuildProgress(jobs=jobs, typical=typical_seconds())
    levels: dict[str, tuple[str, ...]] = {}
    for instance in instances:
        names: tuple[str, ...]
        try:
            names = builder.keys(instance)
        except (NotBuildable, RepoError):
            names = ()  # build() says why at once
        levels[instance["instance_id"]] = names
        for kind, name in zip(("base", "env", "instance"), names, strict=False):
            if name not in progress.left and not builder.cached(name):
                progress.left[name] = kind
    lock = threading.Lock()
    pending = list(instances)
    claimed: set[str] = set()  # levels a thread is working towards
    outcomes: dict[str, BuildOutcome] = {}

    def report_progress() -> None:
        if on_progress is not None:
            on_progress(progress)

    def events(event: LevelEvent) -> None:
        with lock:
            progress.on_event(event)
            report_progress()

    def take() -> dict[str, Any] | None:
        """The next instance, preferring one whose missing levels nobody is building and, of
        those, one whose missing env level the most pending instances share (with ``slots``:
        the next in order, once a slot is free)."""
        if slots is not None:
            slots.acquire()
            with lock:
                if not pending:
                    slots.release()
                    return None
                return pending.pop(0)
        with lock:
            if not pending:
                return None
            ids = [candidate["instance_id"] for candidate in pending]
            instance = pending.pop(next_index(ids, levels, claimed, set(progress.left)))
            claimed.update(levels[instance["instance_id"]])
            return instance

    def work() -> None:
        while (instance := take()) is not None:
            instance_id = instance["instance_id"]
            outcome = builder.build(instance)
            with lock:
                claimed.difference_update(levels[instance_id])
                if outcome.ok:
                    progress.found(levels[instance_id])
                else:
                    # What this instance alone needed and never reached stays unbuilt.
                    others = {
                        n
                        for i, names in levels.items()
                        if i != instance_id and i not in outcomes
                        for n in names
                    }
                    progress.drop([n for n in levels[instance_id] if n not in others])
                outcomes[instance_id] = outcome
                if on_outcome is not None:
                    on_outcome(len(outcomes), outcome)
                report_progress()

    previous = builder.events
    builder.events = events
    try:
        report_progress()
        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="swebench-build") as pool:
            futures = [pool.submit(work) for _ in range(min(jobs, len(instances)) or 1)]
            for future in futures:
                future.result()
    finally:
        builder.events = previous
    return outcomes
