"""Request and response schemas of the runs API: explicit fields, nothing implied."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from decimal import Decimal
from typing import Annotated, Literal

from django.urls import reverse
from ninja import Field, FilterLookup, FilterSchema, Schema
from pydantic import AfterValidator

from benchsite.api.common import Text
from runs import artifacts
from runs.integrity.services import attempt_flags
from runs.models import AgentVariant, RunSource, RunStatus
from runs.queries import (  # noqa: F401  (the API's schemas, read by the pages too)
    LIST_NOTE,
    AttemptListQuery,
    CompareQuery,
    ListParam,
)

INT32 = 2**31 - 1
INT63 = 2**63 - 1
# Dates stop a day short of the calendar's end: a "to" date filter adds one day.


class FailureReasonOut(Schema):
    code: str
    description: str
    typical_cause: str
    precedence: int
    category: str


class FailureReasonFilter(FilterSchema):
    category: Literal["infrastructure", "agent"] | None = None


# --- Model configurations --------------------------------------------------------------------


class ModelConfigOut(Schema):
    public_id: uuid.UUID
    name: str
    slug: str
    description: str
    agent_variant: str
    model_name: str
    base_url: str
    api_key_env: str = Field(description="name of the environment variable holding the key")
    temperature: float | None
    top_p: float | None
    max_output_tokens: int | None
    seed: int | None
    extra_params: dict
    max_steps: int
    max_time_sec: int
    max_tokens: int | None
    max_cost_usd: float | None
    repeated_failure_threshold: int
    cli_agent: str = Field(description="variant cli: the agent CLI definition (ab agents)")
    max_model_calls: int | None
    agent_import_path: str = Field(description="variant import: the agent class's import path")
    strict_patch: bool
    log_llm_messages: bool
    price_input_per_mtok: float | None
    price_output_per_mtok: float | None
    workspace_files: dict[str, str] = Field(
        description="the condition: files added to the workspace before the agent starts"
    )
    condition: str = Field(description="the condition's name: its paths and a digest")
    created_at: dt.datetime


Price = Annotated[Decimal, Field(ge=0, max_digits=10, decimal_places=4)]
EXTRA_PARAMS_MAX_CHARS = 20_000


def _plain_json(value: dict) -> dict:
    # Stored in a JSONField and sent to the model's API: PostgreSQL's jsonb refuses NaN,
    # Infinity and NUL, so refuse them here with the field's name instead of failing there.
    try:
        text = json.dumps(value, allow_nan=False)
    except ValueError as exc:
        raise ValueError("must be plain JSON (no NaN or Infinity)") from exc
    if "\\u0000" in text:
        raise ValueError("must not contain NUL characters")
    if len(text) > EXTRA_PARAMS_MAX_CHARS:
        raise ValueError(f"must be at most {EXTRA_PARAMS_MAX_CHARS} characters of JSON")
    return value


PlainJson = Annotated[dict, AfterValidator(_plain_json)]


class ModelConfigIn(Schema):
    name: Text = Field(min_length=1, max_length=200)
    description: Text = ""
    agent_variant: AgentVariant
    model_name: Text = Field("", max_length=200)
    base_url: Text = Field("", max_length=500)
    api_key_env: Text = Field(
        "",
        max_length=100,
        pattern=r"^([A-Za-z_][A-Za-z0-9_]*)?$",
        description="the NAME of an environment variable; never the key itself",
    )
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    max_output_tokens: int | None = Field(None, ge=1, le=INT32)
    seed: int | None = Field(None, ge=-INT32 - 1, le=INT32)
    extra_params: PlainJson = {}
    max_steps: int = Field(30, ge=1, le=10_000)
    max_time_sec: int = Field(1800, ge=1, le=7 * 24 * 3600)
    max_tokens: int | None = Field(None, ge=1, le=INT63)
    max_cost_usd: Price | None = None
    repeated_failure_threshold: int = Field(3, ge=1, le=1000)
    cli_agent: Text = Field("", max_length=50, description="variant cli: see `ab agents`")
    max_model_calls: int | None = Field(None, ge=1, le=INT32)
    agent_import_path: Text = Field(
        "",
        max_length=300,
        description="variant import: 'package.module:ClassName' under AGENT_IMPORT_PATHS; it "
        "runs code on the worker, so setting it needs a superuser (like base_url)",
    )
    strict_patch: bool = False
    log_llm_messages: bool = True
    price_input_per_mtok: Price | None = None
    price_output_per_mtok: Price | None = None
    workspace_files: dict[str, str] = Field(
        {},
        description="the condition: {path relative to the repository: text} written into the "
        "workspace before the agent starts, kept out of the final patch (no '..', nothing in "
        ".git; CONDITION_FILES_MAX files, CONDITION_FILE_MAX_BYTES each, "
        "CONDITION_FILES_MAX_BYTES in all)",
    )


class ModelConfigFilter(FilterSchema):
    agent_variant: AgentVariant | None = None
    q: Annotated[Text | None, FilterLookup(["name__icontains", "model_name__icontains"])] = None


# --- Runs ------------------------------------------------------------------------------------


class ModelRefOut(Schema):
    public_id: uuid.UUID
    name: str
    slug: str


class RunOut(Schema):
    public_id: uuid.UUID
    suite: str = Field(alias="suite.name")
    model: ModelRefOut
    samples: int
    backend: str = Field(description="docker, bwrap, or empty: the worker's default")
    source: str
    status: str
    selection: dict
    totals: dict
    created_by: str | None
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    fail_fast_code: str
    fail_fast_reason: str
    harness_version: str
    git_revision: str
    notes: str
    date_source: str = Field(
        description="where finished_at comes from: harness, metadata, inspect, trajectories, "
        "given (--date) or unknown (an import without a date: finished_at is the import time)"
    )
    date_known: bool
    source_path: str = Field(description="the folder or file an imported run was read from")
    imported_at: dt.datetime | None
    imported_by: str | None
    url: str = Field(alias="get_absolute_url")

    @staticmethod
    def resolve_model(obj) -> ModelRefOut:
        return obj.model_config

    @staticmethod
    def resolve_created_by(obj) -> str | None:
        return obj.created_by.get_username() if obj.created_by_id else None

    @staticmethod
    def resolve_imported_by(obj) -> str | None:
        return obj.imported_by.get_username() if obj.imported_by_id else None


class RunFilter(FilterSchema):
    suite: Annotated[Text | None, FilterLookup("suite__name")] = None
    model: Text | None = Field(None, description="model configuration name, slug or public id")
    status: RunStatus | None = None
    source: RunSource | None = None


class RunLaunchIn(Schema):
    suite: Text = Field(min_length=1, max_length=100)
    model: Text = Field(
        min_length=1, max_length=200, description="model configuration name, slug or public id"
    )
    samples: int = Field(1, ge=1, le=100)
    labels: list[Text] = Field([], max_length=50, description="tasks carrying every label")
    task_ids: list[Text] | None = Field(None, max_length=10_000)
    include_flaky: bool = False
    backend: Literal["", "docker", "bwrap"] = Field(
        "", description="the sandbox its attempts use; empty: the worker's default"
    )


class RunActionOut(Schema):
    run: RunOut
    affected: int = Field(description="attempts cancelled or re-queued")


# --- Attempts --------------------------------------------------------------------------------


class AttemptOut(Schema):
    public_id: uuid.UUID
    run: uuid.UUID = Field(alias="run.public_id")
    suite: str = Field(alias="suite.name")
    task_id: str = Field(alias="task.task_id")
    model: str = Field(alias="model_config.name")
    sample_index: int
    task_revision: int
    status: str = Field(description="missing: never attempted (no outcome, reason or grade)")
    outcome: str = Field(
        description="how scores count it: resolved, failed, missing, infra, pending or "
        "not_evaluated (the pages' badge)"
    )
    resolved: bool
    failure_reason: str | None = Field(alias="failure_reason_id")
    failure_stage: str
    is_infra: bool
    is_timeout: bool
    is_empty_run: bool
    is_missing: bool
    exit_code: int | None
    agent_exit_code: int | None
    agent_signal: int | None
    duration_sec: float | None
    tokens_in: int | None = Field(description="null when unknown (a report without trajectory)")
    tokens_out: int | None
    cost_usd: float | None = Field(description="null when unknown")
    cost_basis: str | None = Field(
        description="priced (by class, from the price table), unknown (a price is missing: "
        "cost_usd null, cost_note says which), reported (an imported run's figure), or null "
        "(recorded before costs were broken down)"
    )
    cost_note: str | None
    cost_input_usd: float | None = Field(description="input not read from a cache")
    cost_cache_write_usd: float | None
    cost_cache_read_usd: float | None
    cost_output_usd: float | None
    tokens_cache_write: int | None = Field(description="input tokens written to the cache")
    tokens_cache_read: int | None = Field(description="input tokens read from the cache")
    tool_calls: int | None
    steps: int | None
    lines_changed: int
    grade: str
    image_digest: str = Field(
        description="the image the attempt ran on: the repository digest pulled, or the ID of "
        'an image built or loaded here ("" for the runner image and SWE-bench builds)'
    )
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    url: str = Field(alias="get_absolute_url")

    # Usage is a figure once the attempt ended: a queued or running attempt's zeros are null
    # (no cost yet), as on the pages and in the CSV: all read ``Attempt.usage``.
    @staticmethod
    def resolve_tokens_in(obj) -> int | None:
        return obj.usage.tokens_in

    @staticmethod
    def resolve_tokens_out(obj) -> int | None:
        return obj.usage.tokens_out

    @staticmethod
    def resolve_cost_usd(obj) -> float | None:
        return obj.usage.cost_usd

    @staticmethod
    def resolve_cost_basis(obj) -> str | None:
        return obj.usage.cost_record()["cost_basis"]

    @staticmethod
    def resolve_cost_note(obj) -> str | None:
        return obj.usage.cost_record()["cost_note"]

    @staticmethod
    def resolve_cost_input_usd(obj) -> float | None:
        return obj.usage.cost_breakdown["input"]

    @staticmethod
    def resolve_cost_cache_write_usd(obj) -> float | None:
        return obj.usage.cost_breakdown["cache_write"]

    @staticmethod
    def resolve_cost_cache_read_usd(obj) -> float | None:
        return obj.usage.cost_breakdown["cache_read"]

    @staticmethod
    def resolve_cost_output_usd(obj) -> float | None:
        return obj.usage.cost_breakdown["output"]

    @staticmethod
    def resolve_tokens_cache_write(obj) -> int | None:
        return obj.usage.tokens_cache_write

    @staticmethod
    def resolve_tokens_cache_read(obj) -> int | None:
        return obj.usage.tokens_cache_read

    @staticmethod
    def resolve_tool_calls(obj) -> int | None:
        return obj.usage.tool_calls

    @staticmethod
    def resolve_steps(obj) -> int | None:
        return obj.usage.steps


class ArtifactOut(Schema):
    name: str
    size: int
    kind: str = Field(description='"file", or "link": a link left in the workspace, never read')
    target: str | None = Field(None, description="a link's target, as written (not followed)")
    url: str | None = Field(description="the file's download; null for a link")


class StageOut(Schema):
    order: int
    name: str
    command: str
    exit_code: int | None
    duration_sec: float | None
    timed_out: bool
    output_truncated: bool
    output_path: str
    output_url: str | None


class FlagOut(Schema):
    rule: str
    version: int
    why: str
    detail: str = Field(description="what the rule found (a command, a path, the counts)")
    current: bool = Field(description="computed under the rule's current version")


class AttemptDetailOut(AttemptOut):
    error_text: str
    error_fingerprint: str
    error_kind: str
    stderr_tail: str
    final_patch: str
    files_touched: list
    test_results: dict
    schema_version: str
    stages: list[StageOut]
    artifacts: list[ArtifactOut]
    integrity_rules: str = Field(
        description="the rule set its flags were computed under (name:version, sorted); "
        "'' when never checked"
    )
    flags: list[FlagOut] = Field(
        description="integrity rules that fired on what the harness observed (docs/integrity.md)"
    )

    @staticmethod
    def resolve_flags(obj) -> list[dict]:
        return [dataclasses.asdict(f) for f in attempt_flags(obj)]

    @staticmethod
    def resolve_stages(obj) -> list[dict]:
        return [
            {
                "order": s.order,
                "name": s.name,
                "command": s.command,
                "exit_code": s.exit_code,
                "duration_sec": s.duration_sec,
                "timed_out": s.timed_out,
                "output_truncated": s.output_truncated,
                "output_path": s.output_path,
                "output_url": artifact_url(obj, s.output_path)
                if s.output_path and obj.artifacts_dir
                else None,
            }
            for s in obj.stages.order_by("order")
        ]

    @staticmethod
    def resolve_artifacts(obj) -> list[dict]:
        return [
            {
                "name": f.name,
                "size": f.size,
                "kind": f.kind,
                "target": f.target if f.is_link else None,
                "url": None if f.is_link else artifact_url(obj, f.name),
            }
            for f in artifacts.list_artifacts(obj)
        ]


def artifact_url(attempt, name: str) -> str:
    return reverse("api:attempt_artifact", kwargs={"public_id": attempt.public_id, "path": name})


class AttemptPageOut(Schema):
    items: list[AttemptOut]
    count: int


# --- Results: leaderboard, comparison, taxonomy ----------------------------------------------


class ScoreFields(Schema):
    """The figures of runs.results.scoring.Score (README: "How a score is computed")."""

    rate: float | None = Field(
        description="pass@1: mean over tasks of resolved / scored samples; published results "
        "over the whole suite (a task not attempted counts 0): the leaderboard's order"
    )
    resolved: float = Field(description="sum of the per-task shares (rate x tasks)")
    tasks: int = Field(description="the denominator: scored tasks, or the suite if published")
    ci_low: float | None = Field(description="95% Wilson, task-clustered effective n")
    ci_high: float | None
    k: int
    pass_at_k: float | None
    pass_hat_k: float | None = Field(
        description="pass^k: mean over tasks of C(c, k) / C(n, k), all k samples pass "
        "(null when k = 1); with its interval, as the rate's"
    )
    pass_hat_k_ci_low: float | None
    pass_hat_k_ci_high: float | None
    disagreeing_tasks: int = Field(
        description="tasks of the rate whose scored samples disagree (some resolved, some not)"
    )
    whole_suite: bool
    attempts: int
    scored: int
    resolved_attempts: int
    excluded: int = Field(description="infrastructure failures, skipped and cancelled")
    pending: int = Field(description="not final: queued, running, not evaluated")
    not_evaluated: int
    missing: int = Field(description="tasks of the denominator not attempted at all")
    attempted_rate: float | None = Field(
        description="the same mean over only the tasks attempted (a scored sample)"
    )
    attempted_resolved: float
    attempted_tasks: int
    attempted_ci_low: float | None
    attempted_ci_high: float | None
    missing_attempts: int = Field(description="attempts never made (status missing)")
    flagged: int = Field(description="successes carrying an integrity flag (docs/integrity.md)")
    flagged_counted_out: bool = Field(
        description="those successes were counted as failures (count_out_flagged)"
    )
    complete: bool = Field(description="no pending attempt: only then ranked, leader or tied")


class GroupScoreOut(Schema):
    tasks: int
    resolved: float
    rate: float | None
    # Over the group's tasks the row attempted (differs from the above for a partial row).
    attempted_tasks: int
    attempted_resolved: float
    attempted_rate: float | None


class RunRefOut(Schema):
    public_id: uuid.UUID
    created_at: dt.datetime
    finished_at: dt.datetime | None
    date_known: bool
    samples: int
    source: str
    status: str
    url: str


class LeaderboardRowOut(ScoreFields):
    key: str = Field(description="slug (a configuration) or slug@run-id (one run)")
    kind: Literal["run", "config"]
    rank: int | None
    status: str = Field(
        description="leader, tied, behind, partial (ranked, but it did not attempt every task of "
        "its denominator: no tie claimed; p_value_vs_leader is over the tasks both attempted), "
        "pending, reference or unscored"
    )
    model: ModelRefOut
    run: RunRefOut | None
    runs: list[uuid.UUID]
    date: dt.datetime | None = Field(description="null when no run of the row has a known date")
    imported_on: dt.datetime | None = Field(description="for a row of unknown date")
    agent_variant: str
    condition: str = Field(description="the files its configuration adds (a condition), or ''")
    is_published: bool
    is_reference: bool
    infra: int = Field(description="same as excluded")
    denominator: int = Field(description="same as tasks")
    resolved_pct: float | None = Field(description="rate x 100")
    pass_at_1: float | None
    mean_cost_usd: float | None = Field(
        description="per attempt that ran (missing instances apart); null when none recorded"
    )
    total_cost_usd: float | None
    mean_cost_input_usd: float | None = Field(
        description="the cost per attempt of input not read from a cache, over the attempts "
        "whose cost was broken down by class (null when none was)"
    )
    mean_cost_cache_write_usd: float | None
    mean_cost_cache_read_usd: float | None
    mean_cost_output_usd: float | None
    cost_unknown_attempts: int = Field(
        description="attempts whose cost is unknown (a price missing): left out of the means"
    )
    cost_reported_attempts: int = Field(
        description="attempts whose cost is the imported run's own figure (not priced here)"
    )
    cost_per_resolved_usd: float | None
    mean_tokens: float | None
    mean_calls: float | None = Field(
        description="model API calls (steps) per attempt that ran; null when none recorded"
    )
    mean_wall_sec: float | None
    is_leader: bool
    tied_with_leader: bool
    p_value_vs_leader: float | None = Field(
        description="paired test vs the leader over the tasks both attempted"
    )
    paired_vs_leader: int | None = Field(description="that test's n")
    coverage_differs_from_leader: bool
    by_repo: dict[str, GroupScoreOut]


class LeaderboardOut(Schema):
    suite: str
    view: str
    labels: list[str]
    date_from: dt.date | None
    date_to: dt.date | None
    rows: list[LeaderboardRowOut] = Field(description="competing rows, then the references")


class CompareEntryOut(Schema):
    key: str
    kind: Literal["run", "config"]
    label: str
    model: ModelRefOut
    condition: str = Field(description="the files its configuration adds to the workspace")
    run: uuid.UUID | None
    runs: list[uuid.UUID]


class CompareSummaryOut(CompareEntryOut, ScoreFields):
    pass


class ComparePairOut(Schema):
    a: CompareEntryOut
    b: CompareEntryOut
    same_agent: bool = Field(
        description="two conditions of one agent: the configurations differ only in the "
        "files they add to the workspace, so the delta is the condition's effect"
    )
    paired: int = Field(description="the tasks both rows attempted: the test's n")
    only_a: int = Field(description="tasks only a attempted (out of the test and buckets)")
    only_b: int
    coverage_differs: bool
    fixed_by_b: list[str] = Field(description="tasks where b's resolved share is higher")
    regressed: list[str]
    both: list[str] = Field(description="equal share above zero")
    neither: list[str]
    rate_a: float | None
    rate_b: float | None
    delta: float | None
    attempted_rate_a: float | None
    attempted_rate_b: float | None
    mean_paired_difference: float | None
    p_value: float = Field(description="paired sign-flip test (exact McNemar with k = 1)")
    exact: bool
    significant: bool
    complete: bool


class CompareCellOut(Schema):
    outcome: str
    reason: str
    resolved: int
    scored: int
    pending: int
    attempts: list[uuid.UUID]


class CompareRowOut(Schema):
    task_id: str
    labels: list[str]
    differs: bool
    cells: list[CompareCellOut]


class CompareOut(Schema):
    suite: str
    entries: list[CompareEntryOut]
    summaries: list[CompareSummaryOut]
    pairs: list[ComparePairOut]
    rows: list[CompareRowOut]


class TaxonomyModelOut(Schema):
    model: ModelRefOut
    resolved: int = Field(description="resolved attempts (the bar)")
    total: int
    infra: int
    missing: int = Field(description="instances never attempted: in no count, no bar")
    counts: dict[str, int]
    score: ScoreFields | None = Field(description="the configuration's leaderboard figures")


class TaxonomyPointOut(Schema):
    model: str
    run: uuid.UUID
    at: dt.datetime
    tasks: int
    resolved: float
    pending: int
    rate: float | None
    dated: bool


class TaxonomyOut(Schema):
    suite: str
    reasons: list[FailureReasonOut]
    models: list[TaxonomyModelOut]
    points: list[TaxonomyPointOut]
