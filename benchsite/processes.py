"""The child processes of ``ab serve`` and ``ab worker``: started, watched, stopped together.

Each child runs in its own session, so a terminal's Ctrl+C reaches only ``ab``, which then
stops the children in order (one SIGTERM each: gunicorn finishes its requests, Celery its
running attempts), and gets ``PR_SET_PDEATHSIG``, so even a SIGKILL to ``ab`` stops them
(Celery with SIGKILL: a warm stop with no supervisor left would run attempts unwatched).
``ab`` installs its own SIGINT/SIGTERM handlers: a shell starts background jobs with SIGINT
ignored, and Python would otherwise keep it ignored (Ctrl+C or ``kill -INT`` did nothing).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int, parent: int) -> None:
    """Have the kernel send ``sig`` to this process when its parent (``parent``, its pid)
    dies; if the parent is already gone (it died before this ran), send it now."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def _child_setup(death_signal: int, parent: int) -> None:
    """In the child, before exec: ``death_signal`` when ``ab`` dies; default signal
    dispositions."""
    die_with_parent(death_signal, parent)
    # A background job inherits SIGINT ignored; the children must see signals as usual.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class Child:
    name: str
    proc: subprocess.Popen
    terminated: bool = False

    def terminate(self) -> None:
        """SIGTERM to the child's main process, once (a second one means "hurry" to some)."""
        if not self.terminated and self.running:
            self.terminated = True
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the child's whole process group (it leads its own session)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def group_alive(self) -> bool:
        """Whether any process of the child's group is left (pool processes included)."""
        try:
            os.killpg(self.proc.pid, 0)
        except ProcessLookupError:
            return False
        return True


@dataclass
class Supervisor:
    """Starts children, turns SIGINT/SIGTERM into a flag, and stops everything in order."""

    children: list[Child] = field(default_factory=list)
    signals: list[int] = field(default_factory=list)

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.signals.append(signum)

    def start(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        *,
        death_signal: int = signal.SIGTERM,
    ) -> Child:
        """Start a child in its own session; it gets ``death_signal`` if ``ab`` dies without
        stopping it (SIGTERM: its own warm stop; SIGKILL: nothing of it may run on)."""
        setup = functools.partial(_child_setup, death_signal, os.getpid())
        proc = subprocess.Popen(argv, env=env, start_new_session=True, preexec_fn=setup)
        child = Child(name, proc)
        self.children.append(child)
        return child

    def exited(self) -> Child | None:
        """A child that stopped on its own (a crash, a port in use), if any."""
        return next((c for c in self.children if not c.running), None)

    def wait(self, poll: float = 0.2) -> Child | None:
        """Sleep until a signal arrives (returns None) or a child exits (returns it)."""
        while not self.signals:
            gone = self.exited()
            if gone is not None:
                return gone
            time.sleep(poll)
        return None

    def wait_until(self, ready: Callable[[], bool], *, timeout: float, poll: float = 0.2) -> str:
        """Poll ``ready`` until it is true: "ready", "signal", "exited" or "timeout"."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.signals:
                return "signal"
            if self.exited() is not None:
                return "exited"
            if ready():
                return "ready"
            time.sleep(poll)
        return "timeout"

    def stop(
        self,
        child: Child,
        *,
        grace: float,
        on_wait: Callable[[], None] | None = None,
        poll: float = 0.2,
    ) -> bool:
        """SIGTERM to the child (unless sent already), then wait up to ``grace`` seconds for
        its whole group.

        A further SIGINT/SIGTERM to ``ab`` cuts the wait short. Whatever is left then gets
        SIGKILL. Returns True when it stopped within the grace period.
        """
        seen = len(self.signals)
        if child.running:
            child.terminate()
            if on_wait is not None:
                on_wait()
        deadline = time.monotonic() + grace
        while child.group_alive() or child.running:
            if time.monotonic() > deadline or len(self.signals) > seen:
                self.kill(child)
                return False
            # Reap the main process as soon as it exits (a zombie still counts in its group).
            child.proc.poll()
            time.sleep(poll)
        return True

    def kill(self, child: Child) -> None:
        child.signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.proc.wait(timeout=10)

    def terminate_all(self) -> None:
        """SIGTERM to every child at once, so they stop in parallel; then ``stop`` each."""
        for child in self.children:
            child.terminate()
