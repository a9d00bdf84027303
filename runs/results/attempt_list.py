"""The attempt list's selection: filters, order, neighbours and outcome counts, in one place.

``/suites/<name>/attempts/`` (the page, its CSV/JSON export, an attempt page's previous / next)
and ``GET /api/attempts`` (JSON, CSV) all read attempts through ``attempt_selection``, so a
filter and an order mean the same rows in the same order everywhere. The names of the
filters are ``runs.results.params.ATTEMPTS``; ``AttemptFilters`` has a field for each.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from django.db.models import (
    Case,
    Count,
    F,
    IntegerField,
    OrderBy,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.functions import Substr

from runs.models import Attempt, AttemptStatus, FailureReason, ModelConfig, Run
from runs.results.selection import OUTCOMES, outcome_filter, repo_of
from runs.usage_fields import COST_DETAIL_FIELDS
from tasks_app.models import Suite, Task

# Each sort key: the expression ordered by, its direction when first clicked, and whether it
# can be NULL (unknown usage, unfinished attempts): NULLs come last whichever the direction.
SORTS: dict[str, tuple[str, str, bool]] = {
    "task": ("task__task_id", "asc", False),
    "model": ("model_config__name", "asc", False),
    "sample": ("sample_index", "asc", False),
    "outcome": ("_outcome", "asc", False),
    "reason": ("failure_reason_id", "asc", True),
    "cost": ("cost_usd", "desc", True),
    "tokens": ("_tokens", "desc", True),
    "wall": ("duration_sec", "desc", True),
    "finished": ("finished_at", "desc", True),
}
DEFAULT_SORT = "task"
# After the sort key, always: a total order, so paging and previous / next never skip a row.
TIE_BREAKERS = ("task__task_id", "model_config__name", "sample_index", "id")
# How outcomes sort (the badge's words); not_evaluated before pending, which includes it.
OUTCOME_ORDER = ("resolved", "failed", "infra", "missing", "not_evaluated", "pending")
ERROR_SHOWN_CHARS = 200  # the list shows (and exports) the error's start

PAGE_SIZES = (25, 50, 100, 200, 500)
DEFAULT_PAGE_SIZE = 100

# What the list reads of an attempt: no patch, logs or test results.
LIST_FIELDS = (
    "id",
    "public_id",
    "sample_index",
    "status",
    "is_infra",
    "failure_reason_id",
    "cost_usd",
    *COST_DETAIL_FIELDS,
    "tokens_in",
    "tokens_out",
    "steps",
    "tool_calls",
    "duration_sec",
    "grade",
    "finished_at",
    "run__public_id",
    "task__task_id",
    "task__suite_id",
    "model_config__name",
    "model_config__slug",
    "failure_reason__code",
    "failure_reason__description",
)


class FilterError(ValueError):
    """A filter value that cannot be used; ``field`` names the parameter."""

    def __init__(self, field: str, message: str, *, not_found: bool = False):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.not_found = not_found  # an unknown model or run: the API's 404


@dataclass(frozen=True)
class AttemptFilters:
    """One value per name of ``runs.results.params.ATTEMPT_FILTER``; empty means "any"."""

    models: tuple[str, ...] = ()  # configuration names, slugs or public ids
    runs: tuple[str, ...] = ()  # run id prefixes, 8+ characters
    labels: tuple[str, ...] = ()  # tasks carrying every label
    repo: str = ""  # the task's repository as the pages name it ("org/name")
    outcome: str = ""  # runs.results.selection.OUTCOMES
    reason: str = ""  # a failure reason code
    status: str = ""  # an AttemptStatus value
    task: str = ""  # one task id, exactly
    q: str = ""  # text in the task id or the error
    is_infra: bool | None = None
    resolved: bool | None = None
    # True: the attempts that were made (a partial run's "not attempted" stubs left out);
    # False: only those stubs.
    attempted: bool | None = None
    sort: str = DEFAULT_SORT
    order: str = ""  # asc | desc; "" = the sort key's own

    @property
    def direction(self) -> str:
        return self.order or SORTS[self.sort][1]

    def query(self, *, keep_default_sort: bool = False) -> list[tuple[str, str]]:
        """The filters as query parameters (canonical names), empty ones left out."""
        out: list[tuple[str, str]] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "sort":
                if keep_default_sort or value != DEFAULT_SORT or self.order:
                    out.append(("sort", value))
            elif f.name == "order":
                if keep_default_sort or value:
                    out.append(("order", self.direction))
            elif isinstance(value, tuple):
                if value:
                    out.append((f.name, ",".join(value)))
            elif isinstance(value, bool):
                out.append((f.name, "true" if value else "false"))
            elif value:
                out.append((f.name, str(value)))
        return out

    @property
    def active(self) -> bool:
        """Whether anything narrows the list (sort and order do not)."""
        return any(
            getattr(self, f.name) not in ((), "", None)
            for f in fields(self)
            if f.name not in ("sort", "order")
        )


def check(filters: AttemptFilters) -> None:
    """Raise ``FilterError`` for a value no attempt can have (an unknown outcome, status or
    reason code, a run id too short to name one run)."""
    if filters.outcome and filters.outcome not in OUTCOMES:
        raise FilterError(
            "outcome", f"expected one of {', '.join(OUTCOMES)}, got {filters.outcome!r}"
        )
    if filters.status and filters.status not in AttemptStatus.values:
        raise FilterError(
            "status", f"expected one of {', '.join(AttemptStatus.values)}, got {filters.status!r}"
        )
    if filters.sort not in SORTS:
        raise FilterError("sort", f"expected one of {', '.join(SORTS)}, got {filters.sort!r}")
    short = [r for r in filters.runs if len(r) < 8]
    if short:
        raise FilterError("runs", f"a run id needs 8 or more characters, got {short[0]!r}")


def attempt_selection(
    *, suite: Suite | None, filters: AttemptFilters, read_errors: bool
) -> QuerySet[Attempt]:
    """The attempts ``filters`` select (of ``suite``, or of every suite), in their order.
    Raises ``FilterError`` for a model, run or reason that is not there.

    ``read_errors``: whether the reader may read error texts (``benchsite.accounts.access``):
    the free text ``q`` then looks in them too, else in task ids only (a search must not reveal
    them)."""
    return ordered(filtered(suite=suite, filters=filters, read_errors=read_errors), filters)


def filtered(
    *, suite: Suite | None, filters: AttemptFilters, read_errors: bool
) -> QuerySet[Attempt]:
    """The attempts ``filters`` select, in no particular order (see ``attempt_selection``)."""
    check(filters)
    f = filters
    attempts = Attempt.objects.all()
    if suite is not None:
        attempts = attempts.filter(suite=suite)
    if f.models:
        attempts = attempts.filter(model_config_id__in=model_ids(f.models))
    if f.runs:
        attempts = attempts.filter(run_id__in=run_ids(f.runs, suite))
    if f.labels or f.repo:
        tasks = Task.objects.all() if suite is None else Task.objects.for_suite(suite)
        for label in f.labels:
            tasks = tasks.with_label(label)
        if f.repo:
            tasks = tasks.filter(repo_url__in=_repo_urls(f.repo, suite))
        attempts = attempts.filter(task__in=tasks.values("id"))
    if f.reason:
        if not FailureReason.objects.filter(code=f.reason).exists():
            raise FilterError("reason", f"no failure reason {f.reason!r}")
        attempts = attempts.filter(failure_reason_id=f.reason)
    if f.outcome:
        attempts = attempts.filter(outcome_filter(f.outcome))
    if f.status:
        attempts = attempts.filter(status=f.status)
    if f.task:
        attempts = attempts.filter(task__task_id=f.task)
    if f.q:
        text = Q(task__task_id__icontains=f.q)
        attempts = attempts.filter(text | Q(error_text__icontains=f.q) if read_errors else text)
    if f.is_infra is not None:
        attempts = attempts.filter(is_infra=f.is_infra)
    if f.resolved is not None:
        resolved = Q(status=AttemptStatus.FINISHED, is_infra=False, failure_reason__isnull=True)
        attempts = attempts.filter(resolved if f.resolved else ~resolved)
    if f.attempted is not None:
        missing = Q(status=AttemptStatus.MISSING)
        attempts = attempts.filter(~missing if f.attempted else missing)
    return attempts


def model_ids(refs: Iterable[str]) -> list[int]:
    """Configurations named by name, slug or public id; ``FilterError`` names one not found."""
    refs = list(refs)
    ids_of = {str(u): u for u in (_uuid(r) for r in refs) if u is not None}
    rows = ModelConfig.objects.filter(
        Q(name__in=refs) | Q(slug__in=refs) | Q(public_id__in=list(ids_of.values()))
    ).values_list("id", "name", "slug", "public_id")
    found: list[int] = []
    for ref in refs:
        match = next(
            (i for i, name, slug, public in rows if ref in (name, slug) or _uuid(ref) == public),
            None,
        )
        if match is None:
            raise FilterError("models", f"no model configuration {ref!r}", not_found=True)
        found.append(match)
    return found


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def run_ids(prefixes: Iterable[str], suite: Suite | None = None) -> list[int]:
    """Runs named by public-id prefixes (8+ characters), of ``suite`` when given."""
    runs = Run.objects.all() if suite is None else Run.objects.filter(suite=suite)
    found = []
    for prefix in prefixes:
        matches = list(
            runs.filter(public_id__startswith=prefix.lower()).values_list("id", flat=True)[:2]
        )
        if len(prefix) < 8 or len(matches) != 1:
            where = " on this suite" if suite is not None else ""
            raise FilterError("runs", f"no single run {prefix!r}{where}", not_found=True)
        found.append(matches[0])
    return found


def _repo_urls(repo: str, suite: Suite | None) -> list[str]:
    tasks = Task.objects.all() if suite is None else Task.objects.for_suite(suite)
    urls = tasks.order_by().values_list("repo_url", flat=True).distinct()
    return [u for u in urls if repo_of(u) == repo]


def suite_repos(suite: Suite) -> list[str]:
    """The repositories of a suite's tasks, as the filter names them."""
    urls = Task.objects.for_suite(suite).order_by().values_list("repo_url", flat=True).distinct()
    return sorted({repo_of(u) for u in urls})


def _outcome_rank() -> Case:
    return Case(
        *(When(outcome_filter(o), then=Value(i)) for i, o in enumerate(OUTCOME_ORDER)),
        default=Value(len(OUTCOME_ORDER)),
        output_field=IntegerField(),
    )


def ordered(attempts: QuerySet[Attempt], filters: AttemptFilters) -> QuerySet[Attempt]:
    """``attempts`` with the sort keys annotated and ordered by them."""
    annotations: dict[str, Any] = {}
    if filters.sort == "outcome":
        annotations["_outcome"] = _outcome_rank()
    if filters.sort == "tokens":
        annotations["_tokens"] = F("tokens_in") + F("tokens_out")
    if annotations:
        attempts = attempts.annotate(**annotations)
    return attempts.order_by(*order_by(filters))


def order_by(filters: AttemptFilters, *, reverse: bool = False) -> list[OrderBy]:
    """The ORDER BY of ``filters``: the sort key (NULLs last), then the tie-breakers;
    ``reverse`` is the same order backwards (for the previous attempt)."""
    out = []
    for name, descending, nullable in _keys(filters):
        if reverse:
            descending = not descending
        expression = F(name)
        if nullable:
            # Last going forwards, so first going backwards.
            out.append(
                expression.desc(nulls_last=not reverse or None, nulls_first=reverse or None)
                if descending
                else expression.asc(nulls_last=not reverse or None, nulls_first=reverse or None)
            )
        else:
            out.append(expression.desc() if descending else expression.asc())
    return out


def _keys(filters: AttemptFilters) -> list[tuple[str, bool, bool]]:
    name, _, nullable = SORTS[filters.sort]
    keys = [(name, filters.direction == "desc", nullable)]
    keys += [(k, False, False) for k in TIE_BREAKERS if k != name]
    return keys


def list_rows(attempts: QuerySet[Attempt], *, read_errors: bool) -> QuerySet[Attempt]:
    """What a list row shows, and no more (no patch, logs or test results); for a reader of
    error texts the start of the error as ``error_head``."""
    rows = attempts.select_related("task", "model_config", "failure_reason", "run").only(
        *LIST_FIELDS
    )
    if read_errors:
        rows = rows.annotate(error_head=Substr("error_text", 1, ERROR_SHOWN_CHARS))
    return rows


@dataclass(frozen=True)
class Neighbours:
    """Where an attempt sits in a filtered list: its position, the list's length, the
    attempts before and after it (None at either end)."""

    position: int
    total: int
    previous: uuid.UUID | None
    next: uuid.UUID | None


def neighbours(
    *, suite: Suite, filters: AttemptFilters, attempt: Attempt, read_errors: bool
) -> Neighbours | None:
    """The attempts before and after ``attempt`` in the list ``filters`` select, in its order;
    None when the attempt is not in that list. A few queries whatever the list's length."""
    attempts = attempt_selection(suite=suite, filters=filters, read_errors=read_errors)
    keys = _keys(filters)
    names = [name for name, _, _ in keys]
    current = attempts.filter(pk=attempt.pk).values_list(*names).first()
    if current is None:
        return None
    after = _beyond(keys, current, forwards=True)
    before = _beyond(keys, current, forwards=False)
    following = attempts.filter(after).values_list("public_id", flat=True).first()
    preceding = (
        attempts.filter(before)
        .order_by(*order_by(filters, reverse=True))
        .values_list("public_id", flat=True)
        .first()
    )
    counts = attempts.order_by().aggregate(total=Count("id"), before=Count("id", filter=before))
    return Neighbours(
        position=counts["before"] + 1, total=counts["total"], previous=preceding, next=following
    )


def _beyond(keys: list[tuple[str, bool, bool]], current: Sequence[Any], *, forwards: bool) -> Q:
    """Rows strictly after (``forwards``) or before ``current`` in the order of ``keys``: the
    keyset condition (a1 > v1) or (a1 = v1 and a2 > v2) or ..., NULLs being last."""
    result = Q(pk__in=[])
    equal = Q()
    for (name, descending, _), value in zip(keys, current, strict=True):
        result |= equal & _past(name, value, descending=descending, forwards=forwards)
        equal &= Q(**{f"{name}__isnull": True}) if value is None else Q(**{name: value})
    return result


def _past(name: str, value: Any, *, descending: bool, forwards: bool) -> Q:
    """One key strictly past ``value`` in the list's direction (NULLs after every value)."""
    if value is None:
        # Nothing comes after a NULL; every non-NULL comes before it.
        return Q(pk__in=[]) if forwards else Q(**{f"{name}__isnull": False})
    greater = descending != forwards  # asc & forwards or desc & backwards: the larger values
    q = Q(**{f"{name}__lt" if greater is False else f"{name}__gt": value})
    if forwards:
        q |= Q(**{f"{name}__isnull": True})
    return q


def outcome_counts(attempts: QuerySet[Attempt]) -> dict[str, int]:
    """How many of ``attempts`` have each outcome, in one query."""
    counts = attempts.order_by().aggregate(
        **{o: Count("id", filter=outcome_filter(o)) for o in OUTCOMES}
    )
    # not_evaluated attempts are pending too: counted once, as not evaluated.
    counts["pending"] -= counts["not_evaluated"]
    return counts


def counted(counts: dict[str, int], outcome: str) -> int:
    """How many attempts the list shows, from ``outcome_counts`` of its other filters: the
    outcomes split every attempt (not evaluated counted apart from pending), so the list's
    length is their sum, or the chosen outcome's count (pending including not evaluated)."""
    if not outcome:
        return sum(counts.values())
    if outcome == "pending":
        return counts["pending"] + counts["not_evaluated"]
    return counts[outcome]


def without(filters: AttemptFilters, *names: str) -> AttemptFilters:
    """``filters`` with ``names`` cleared (e.g. the outcome, for the outcome counts)."""
    blank = AttemptFilters()
    return replace(filters, **{n: getattr(blank, n) for n in names})


EXPORT_COLUMNS = (
    "task_id",
    "model",
    "run",
    "sample",
    "status",
    "outcome",
    "reason",
    "grade",
    "cost_usd",
    "cost_basis",
    "cost_note",
    "cost_input_usd",
    "cost_cache_write_usd",
    "cost_cache_read_usd",
    "cost_output_usd",
    "tokens_in",
    "tokens_cache_write",
    "tokens_cache_read",
    "tokens_out",
    "steps",
    "tool_calls",
    "duration_sec",
    "finished_at",
    "error",
    "attempt",
    "url",
)


def export_records(attempts: Iterable[Attempt], attempt_url: str) -> Iterable[dict]:
    """One record per attempt of a list (``list_rows``), the columns of ``EXPORT_COLUMNS``:
    what the row shows, unknown usage as None. ``attempt_url`` has ``{}`` for the id."""
    for a in attempts:
        usage = a.usage
        yield {
            "task_id": a.task.task_id,
            "model": a.model_config.name,
            "run": str(a.run.public_id),
            "sample": a.sample_index,
            "status": a.status,
            "outcome": a.outcome,
            "reason": a.failure_reason_id,
            "grade": a.grade or None,
            "cost_usd": usage.cost_usd,
            **usage.cost_record(),
            "tokens_in": usage.tokens_in,
            "tokens_out": usage.tokens_out,
            "steps": usage.steps,
            "tool_calls": usage.tool_calls,
            "duration_sec": a.duration_sec,
            "finished_at": a.finished_at.isoformat() if a.finished_at else None,
            "error": getattr(a, "error_head", "") or None,
            "attempt": str(a.public_id),
            "url": attempt_url.format(a.public_id),
        }
