"""Attempt pages: one attempt (patch, logs, trajectory, tests), two side by side, downloads."""

from __future__ import annotations

import posixpath
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef
from django.db.models.functions import Length, Substr
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, render
from django.urls import reverse

from benchsite.accounts.access import can_read_artifacts
from runs import artifacts
from runs.integrity.services import attempt_flags
from runs.models import Attempt, AttemptFlag, AttemptStage, AttemptStatus, RunSource
from runs.transcript import SOURCE_TITLES
from runs.web.attempt_nav import NAV_PARAMS, navigation
from runs.web.attempt_tests import read_step_times, read_test_log
from runs.web.diffview import MAX_PARSE_CHARS, ParsedDiff, render_diff
from runs.web.page_cache import attempt_files, cached_blocks
from runs.web.query import unknown_params

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

# What each stage is, for people reading the logs.
STAGE_TITLES = {
    "git_clone": "Clone the repository",
    "git_checkout": "Check out the commit",
    "export_testbed": "Export the prepared repository",
    "setup": "Setup commands",
    "baseline_run": "Baseline tests (before the agent)",
    "baseline_rerun": "Baseline tests, second run",
    "condition_files": "The condition's files (added before the agent, not in the patch)",
    "agent_run": "Agent",
    "apply_test_patch": "Apply the test patch",
    "final_test": "Tests after the agent",
}


@dataclass
class StageLog:
    stage: AttemptStage
    title: str
    log: artifacts.LogTail | None
    download: str  # artifact path relative to the attempt, "" when absent
    failed: bool


def _attempt(public_id) -> Attempt:
    return get_object_or_404(
        Attempt.objects.select_related("task__suite", "model_config", "failure_reason", "run"),
        public_id=public_id,
    )


class _PatchColumns(TypedDict):
    patch_head: str
    patch_chars: int
    has_flags: bool


def _attempt_shown(public_id) -> WithAnnotations[Attempt, _PatchColumns]:
    """The attempt for its page: the final patch's first MAX_PARSE_CHARS only (``patch_head``)
    and its length (``patch_chars``), never the whole of a huge one (the download has it)."""
    return get_object_or_404(
        Attempt.objects.select_related("task__suite", "model_config", "failure_reason", "run")
        .defer("final_patch")
        .annotate(
            patch_head=Substr("final_patch", 1, MAX_PARSE_CHARS),
            patch_chars=Length("final_patch"),
            # Most attempts carry no integrity flag: the page reads them only when it has one.
            has_flags=Exists(AttemptFlag.objects.filter(attempt=OuterRef("pk"))),
        ),
        public_id=public_id,
    )


def _final_diff(attempt: WithAnnotations[Attempt, _PatchColumns]) -> ParsedDiff | None:
    if not attempt.patch_head:
        return None
    return render_diff(
        attempt.patch_head,
        total_chars=attempt.patch_chars,
        total_files=len(attempt.files_touched or []) or None,
    )


def _stage_logs(attempt: Attempt) -> list[StageLog]:
    logs = []
    for stage in attempt.stages.all():
        tail = artifacts.read_tail(attempt, stage.output_path) if stage.output_path else None
        logs.append(
            StageLog(
                stage=stage,
                title=STAGE_TITLES.get(stage.name, stage.name),
                log=tail,
                download=stage.output_path if tail is not None else "",
                failed=stage.name == attempt.failure_stage
                and attempt.failure_reason_id is not None,
            )
        )
    return logs


def _test_rows(test_results: dict) -> list[tuple[str, str, str]]:
    """(group, test, status) from the harness's success/failure lists or a name->status map."""
    rows: list[tuple[str, str, str]] = []
    # TESTS: a Harbor verifier's CTRF report (its metrics are shown apart: ``REWARD``).
    for group in ("FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL", "TESTS"):
        value = (test_results or {}).get(group)
        if isinstance(value, dict) and ("success" in value or "failure" in value):
            rows += [(group, str(t), "passed") for t in value.get("success", [])]
            rows += [(group, str(t), "failed") for t in value.get("failure", [])]
        elif isinstance(value, dict):
            rows += [(group, str(t), str(s).lower()) for t, s in value.items()]
    return rows


OTHERS_SHOWN = 30
# What the list shows: the outcome badge (Attempt.outcome) reads status, is_infra and the reason.
OTHER_FIELDS = (
    "public_id",
    "sample_index",
    "status",
    "is_infra",
    "failure_reason_id",
    "model_config__name",
)


def _others(attempt: Attempt) -> list[Attempt]:
    """Other finished attempts on the task, with their page and side-by-side URLs."""
    others = list(
        Attempt.objects.filter(task_id=attempt.task_id, status="finished")
        .exclude(id=attempt.id)
        .select_related("model_config")
        .only(*OTHER_FIELDS)
        .order_by("model_config__name", "sample_index")[:OTHERS_SHOWN]
    )
    # One reverse() each, not two per row: this list sits on every attempt page.
    zero = str(uuid.UUID(int=0))
    detail = reverse("attempt-detail", args=[zero])
    versus = reverse("attempt-vs", args=[attempt.public_id, zero])
    for other in others:
        # Attributes for the template only, not fields.
        other.url = detail.replace(zero, str(other.public_id))  # type: ignore[attr-defined]
        other.vs_url = versus.replace(zero, str(other.public_id))  # type: ignore[attr-defined]
    return others


@cached_blocks(attempt_files)
def attempt_detail(request: HttpRequest, public_id) -> HttpResponse:
    attempt = _attempt_shown(public_id)
    task = attempt.task
    allowed = can_read_artifacts(request.user)
    view = "split" if request.GET.get("view") == "split" else "unified"
    nav = navigation(request, attempt, read_errors=allowed)
    context = {
        "nav": nav,
        "notices": unknown_params(request, NAV_PARAMS),
        "attempt": attempt,
        "task": task,
        "reason": attempt.failure_reason,
        "can_read": allowed,
        "view": view,
        "stale": attempt.task_revision < task.revision,
        "others": _others(attempt),
        "flags": attempt_flags(attempt) if attempt.has_flags else [],
    }
    if allowed:
        test_rows = _test_rows(attempt.test_results)
        transcript = artifacts.read_transcript(attempt)
        stage_logs = _stage_logs(attempt)
        test_log = read_test_log(attempt, stage_logs, [name for _, name, _ in test_rows])
        context |= {
            "diff": _final_diff(attempt),
            "patch_not_shipped": _patch_not_shipped(attempt),
            "gold": render_diff(task.gold_patch) if task.gold_patch else None,
            "stage_logs": stage_logs,
            "trajectory": artifacts.read_trajectory(attempt),
            "transcript": transcript,
            "step_times": read_step_times(attempt, transcript),
            "source_title": SOURCE_TITLES.get(transcript.source, "") if transcript else "",
            "files": artifacts.list_artifacts(attempt),
            "test_rows": [
                (group, name, status, test_log.where.get(name) if test_log else None)
                for group, name, status in test_rows
            ],
            "test_log": test_log,
            # A Harbor verifier's metrics (reward.txt or every one of reward.json).
            "reward": (attempt.test_results or {}).get("REWARD") or {},
            "tests_failed": sum(1 for r in test_rows if r[2] not in ("passed", "xfail")),
        }
    return render(request, "runs/attempt_detail.html", context)


def attempt_vs(request: HttpRequest, a, b) -> HttpResponse:
    """Two attempts side by side: outcome, patch, each stage's log and the transcripts."""
    left, right = _attempt_shown(a), _attempt_shown(b)
    allowed = can_read_artifacts(request.user)
    sides = []
    for attempt in (left, right):
        side: dict = {"attempt": attempt}
        if allowed:
            transcript = artifacts.read_transcript(attempt)
            side |= {
                "diff": _final_diff(attempt),
                "logs": {log.stage.name: log for log in _stage_logs(attempt)},
                "transcript": transcript,
                "source_title": SOURCE_TITLES.get(transcript.source, "") if transcript else "",
            }
        sides.append(side)
    return render(
        request,
        "runs/attempt_vs.html",
        {
            "sides": sides,
            "stages": _paired_stages(sides) if allowed else [],
            "same_task": left.task_id == right.task_id,
            "can_read": allowed,
            "task": left.task,
        },
    )


def _paired_stages(sides: list[dict]) -> list[tuple[str, list[StageLog | None]]]:
    """(title, [left log, right log]) for every stage either attempt has, in pipeline order."""
    names = list(dict.fromkeys([*sides[0]["logs"], *sides[1]["logs"]]))
    order = list(STAGE_TITLES)
    names.sort(key=lambda n: order.index(n) if n in order else len(order))
    return [
        (STAGE_TITLES.get(n, n), [sides[0]["logs"].get(n), sides[1]["logs"].get(n)]) for n in names
    ]


def _refuse_non_readers(request: HttpRequest) -> HttpResponse | None:
    """None for a reader; the login page for a visitor; 403 for an account that is no reader
    (sending it to the login page, which sends signed-in users back, would loop)."""
    if can_read_artifacts(request.user):
        return None
    if request.user.is_authenticated:
        raise PermissionDenied("Patches, logs and trajectories need the readers group.")
    return redirect_to_login(request.get_full_path())


# What an imported report said of an instance whose patch existed (``error_fingerprint`` is
# the report's kind; "" for resolved): its patch was made and applied elsewhere.
_PATCHED_KINDS = frozenset({"", "unresolved", "apply_failed", "test_errored", "test_timeout"})


def _patch_not_shipped(attempt: WithAnnotations[Attempt, _PatchColumns]) -> bool:
    """An imported result with no patch file although its report says it had a patch (the
    folder shipped reports only): "No patch." would say the agent made none."""
    return (
        not attempt.patch_chars
        and attempt.run.source == RunSource.PUBLISHED
        and attempt.status == AttemptStatus.FINISHED
        and attempt.error_fingerprint in _PATCHED_KINDS
    )


def attempt_artifact(request: HttpRequest, public_id, path: str) -> HttpResponseBase:
    """Download one artifact file. Served as an attachment, so the browser never renders it."""
    attempt = _attempt(public_id)
    refused = _refuse_non_readers(request)
    if refused:
        return refused
    handle = artifacts.open_artifact(attempt, path)
    if handle is None:
        raise Http404("no such artifact")
    response = FileResponse(
        handle,
        as_attachment=True,
        filename=posixpath.basename(path),
        content_type=artifacts.download_content_type(path),
    )
    response["X-Content-Type-Options"] = "nosniff"
    return response


def attempt_atif(request: HttpRequest, public_id) -> HttpResponse:
    """The transcript as an ATIF trajectory (Harbor's format), a JSON download; readable with
    the same rights as the transcript (``runs.artifacts.attempt_atif``)."""
    attempt = _attempt(public_id)
    refused = _refuse_non_readers(request)
    if refused:
        return refused
    document = artifacts.attempt_atif(attempt)
    if document is None:
        raise Http404("this attempt has no readable transcript")
    response = JsonResponse(document, json_dumps_params={"ensure_ascii": False})
    response["Content-Disposition"] = f'attachment; filename="{artifacts.atif_file_name(attempt)}"'
    return response


def attempt_patch(request: HttpRequest, public_id, which: str) -> HttpResponse:
    """The agent's final patch, or the task's gold patch, as a .diff download."""
    if which not in ("final", "gold"):
        raise Http404("no such patch")
    attempt = _attempt(public_id)
    refused = _refuse_non_readers(request)
    if refused:
        return refused
    text = attempt.final_patch if which == "final" else attempt.task.gold_patch
    response = HttpResponse(text, content_type="text/x-diff; charset=utf-8")
    name = f"{attempt.task.task_id}.{which}.diff".replace('"', "")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
