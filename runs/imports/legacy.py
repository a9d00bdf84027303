"""Legacy (v1) SWE-bench harness reports: one JSON object of id lists per outcome.

AutoCodeRover's ``new_eval_results/report.json`` and the SWE-bench experiments repository's
``results/results.json`` hold ``no_generation, generated, with_logs, install_fail,
reset_failed, no_apply, applied, test_errored, test_timeout, resolved`` (lists of instance
ids; an id sits in several: ``generated`` and ``applied`` are stages it passed). Each
instance gets the first outcome below that lists it; the outcomes' reasons are in
``outcomes.KINDS`` and the README says which are the agent's and why.
"""

from __future__ import annotations

from typing import Any

from runs.imports.outcomes import InstanceResult, Kind
from runs.imports.reports import read_id_lists
from tasks_app.swebench.errors import Problem

# In the order that decides an id listed under several keys: the furthest stage reached.
LEGACY_LISTS: tuple[tuple[str, Kind], ...] = (
    ("resolved", Kind.RESOLVED),
    ("no_generation", Kind.NO_GENERATION),
    ("install_fail", Kind.INSTALL_FAIL),
    ("reset_failed", Kind.RESET_FAILED),
    ("no_apply", Kind.APPLY_FAILED),
    ("test_timeout", Kind.TEST_TIMEOUT),
    ("test_errored", Kind.TEST_ERRORED),
    # Applied, tests ran, not resolved.
    ("applied", Kind.UNRESOLVED),
    # A patch, but no evaluation log: submitted and never evaluated.
    ("with_logs", Kind.INCOMPLETE),
    ("generated", Kind.INCOMPLETE),
)
LEGACY_KEYS = frozenset(key for key, _ in LEGACY_LISTS)
# Keys the experiments repository adds beside them (no outcome of their own).
LEGACY_EXTRA_KEYS = frozenset({"no_logs"})


def is_legacy_report(data: Any) -> bool:
    """An object whose keys are (mostly) the legacy lists, ``resolved`` among them a list."""
    if not isinstance(data, dict) or not isinstance(data.get("resolved"), list):
        return False
    known = set(data) & LEGACY_KEYS
    return len(known) >= 2 and set(data) <= LEGACY_KEYS | LEGACY_EXTRA_KEYS


def read_legacy_report(
    data: dict[str, Any], where: str, problems: list[Problem]
) -> dict[str, InstanceResult]:
    """Outcomes by instance id; a key that is not a list of strings is a problem naming it."""
    return read_id_lists(data, where, problems, LEGACY_LISTS)
