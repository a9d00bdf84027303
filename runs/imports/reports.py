"""Reading the SWE-bench harness's report formats (no database access, no I/O).

* a per-instance ``report.json``, wrapped ``{instance_id: {...}}`` or not (then the id comes
  from its path: ``<id>.report.json``, ``<id>.json`` or ``<id>/report.json``);
* a harness run report ``<model>.<run_id>.json`` (``resolved_ids``, ``unresolved_ids``,
  ``error_ids``, ``empty_patch_ids``, ... ``schema_version`` 2, maybe ``infra_failure_ids``);
* predictions (``instance_id``, ``model_patch``) as a list or an object keyed by id.

``runs.imports.run_folder`` calls these for each file of a folder; legacy (v1) reports
are in ``legacy``.
"""

from __future__ import annotations

import math
import posixpath
from typing import Any

from runs.imports.outcomes import InstanceResult, Kind
from runs.usage_fields import COST_MAX_USD, COUNT_MAX
from tasks_app.swebench.dataset import kind_of
from tasks_app.swebench.errors import Problem

# Run-report lists, in the order that decides an id listed twice.
RUN_REPORT_LISTS: tuple[tuple[str, Kind], ...] = (
    ("resolved_ids", Kind.RESOLVED),
    ("infra_failure_ids", Kind.INFRA),
    ("error_ids", Kind.ERROR),
    ("empty_patch_ids", Kind.EMPTY_PATCH),
    ("unresolved_ids", Kind.UNRESOLVED),
    ("incomplete_ids", Kind.INCOMPLETE),
)
REPORT_KEYS = ("resolved", "tests_status", "patch_is_None", "patch_exists")
# A published per-instance entry (swebench.com's bash-only submissions) may say what it cost
# and how many model calls it made beside "resolved", with no harness keys at all.
USAGE_KEYS = ("cost", "api_calls")


def id_from_path(path: str) -> str:
    """The instance id a report's path names: ``<id>/report.json`` (the folder, also when the
    path is absolute), ``<id>.report.json`` or ``<id>.json``."""
    name = posixpath.basename(path)
    if name == "report.json":
        return posixpath.basename(posixpath.dirname(path))
    return name.removesuffix(".json").removesuffix(".report")


def is_report(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and "resolved" in value
        and any(k in value for k in (*REPORT_KEYS, *USAGE_KEYS))
    )


def is_run_report(value: Any) -> bool:
    return isinstance(value, dict) and ("resolved_ids" in value or "schema_version" in value)


def read_instance_report(
    instance_id: str, report: dict[str, Any], where: str, problems: list[Problem]
) -> InstanceResult | None:
    """One instance's outcome; None (with the problems listed) when a field is wrong."""
    bad = False
    for key in ("resolved", "patch_is_None", "patch_exists", "patch_successfully_applied"):
        if key in report and not isinstance(report[key], bool):
            got = kind_of(report[key])
            problems.append(Problem(where, f"must be true or false, got {got}", key))
            bad = True
    tests_status = report.get("tests_status")
    if tests_status is not None and not _valid_tests_status(tests_status):
        problems.append(
            Problem(
                where, "must map FAIL_TO_PASS/PASS_TO_PASS to success/failure lists", "tests_status"
            )
        )
        bad = True
    cost = report.get("cost")
    if cost is not None and not _is_amount(cost, float(COST_MAX_USD)):
        problems.append(Problem(where, f"must be a cost in USD >= 0, got {kind_of(cost)}", "cost"))
        bad = True
    calls = report.get("api_calls")
    if calls is not None and not (_is_amount(calls, COUNT_MAX) and isinstance(calls, int)):
        got = kind_of(calls)
        problems.append(Problem(where, f"must be a whole number >= 0, got {got}", "api_calls"))
        bad = True
    if bad:
        return None
    if report.get("resolved"):
        kind = Kind.RESOLVED
    elif report.get("patch_is_None") or report.get("patch_exists") is False:
        kind = Kind.EMPTY_PATCH
    elif report.get("patch_successfully_applied") is False:
        kind = Kind.APPLY_FAILED
    else:
        kind = Kind.UNRESOLVED
    return InstanceResult(
        instance_id,
        kind,
        where,
        tests_status=tests_status,
        cost_usd=None if cost is None else float(cost),
        api_calls=calls,
    )


def _is_amount(value: Any, top: float) -> bool:
    """A finite number in [0, top] (a bool is no number)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= top
    )


def _valid_tests_status(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    for lists in value.values():
        if not isinstance(lists, dict):
            return False
        for name in ("success", "failure"):
            items = lists.get(name, [])
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                return False
    return True


def read_run_report(
    data: dict[str, Any], where: str, problems: list[Problem]
) -> dict[str, InstanceResult]:
    return read_id_lists(data, where, problems, RUN_REPORT_LISTS)


def read_id_lists(
    data: dict[str, Any],
    where: str,
    problems: list[Problem],
    lists: tuple[tuple[str, Kind], ...],
) -> dict[str, InstanceResult]:
    """Outcomes by instance id from ``data``'s lists of ids (``lists``: key -> kind, first
    wins); a key that is not a list of strings is a problem naming it."""
    found: dict[str, InstanceResult] = {}
    for key, kind in lists:
        ids = data.get(key, [])
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            problems.append(Problem(where, "must be a list of instance ids", key))
            continue
        for instance_id in ids:
            found.setdefault(instance_id, InstanceResult(instance_id, kind, f"{where} {key}"))
    return found


def read_predictions(
    data: Any, where: str, problems: list[Problem]
) -> dict[str, str | None] | None:
    """Patches by id when ``data`` looks like predictions, else None."""
    if (
        isinstance(data, dict)
        and data
        and all(isinstance(v, dict) and "model_patch" in v for v in data.values())
    ):
        rows = [(f"key {k}", {"instance_id": k, **v}) for k, v in data.items()]
    elif (
        isinstance(data, list)
        and data
        and all(isinstance(v, dict) and "model_patch" in v for v in data)
    ):
        rows = [(f"index {i}", v) for i, v in enumerate(data)]
    else:
        return None
    patches: dict[str, str | None] = {}
    for row_where, row in rows:
        instance_id, patch = row.get("instance_id"), row.get("model_patch")
        if not isinstance(instance_id, str):
            problems.append(Problem(f"{where} {row_where}", "must be a string", "instance_id"))
        elif patch is not None and not isinstance(patch, str):
            problems.append(
                Problem(f"{where} {row_where}", "must be a string or null", "model_patch")
            )
        else:
            patches[instance_id] = patch
    return patches
