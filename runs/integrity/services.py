"""Computing and storing an attempt's integrity flags, once when it ends and again when the
rules change (``ab flags recompute``).

Flags never change an attempt's status or outcome (``runs.lifecycle`` alone writes those):
they are rows of their own (``AttemptFlag``) and the rule set they were computed under
(``Attempt.integrity_rules``), written together in one transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction

from runs.integrity import evidence as evidence_module
from runs.integrity.rules import RULES, Finding, evaluate
from runs.models import FINAL_STATES, Attempt, AttemptFlag, AttemptStatus

log = logging.getLogger(__name__)


def rules_signature() -> str:
    """The current rule set as stored on an attempt: ``name:version`` pairs, sorted."""
    return ",".join(sorted(f"{r.name}:{r.version}" for r in RULES))


def attempt_flags_compute(*, attempt: Attempt) -> list[Finding]:
    """Check ``attempt`` against every rule and store what fired (replacing earlier flags).

    Only an attempt that finished (not infrastructure, not imported without a run here) has
    evidence to judge; any other final attempt gets no flag, only the signature."""
    findings: list[Finding] = []
    if attempt.status == AttemptStatus.FINISHED and not attempt.is_infra:
        findings = evaluate(evidence_module.gather(attempt))
    with transaction.atomic():
        AttemptFlag.objects.filter(attempt=attempt).delete()
        AttemptFlag.objects.bulk_create(
            AttemptFlag(attempt=attempt, rule=f.rule, rule_version=f.version, detail=f.detail)
            for f in findings
        )
        attempt.integrity_rules = rules_signature()
        Attempt.objects.filter(pk=attempt.pk).update(integrity_rules=attempt.integrity_rules)
    return findings


def attempt_flags_compute_safely(*, attempt: Attempt) -> None:
    """``attempt_flags_compute`` for the pipeline's end: a failure to judge is logged, never
    the attempt's failure (``ab flags recompute`` finds it again: no signature stored)."""
    try:
        attempt_flags_compute(attempt=attempt)
    except Exception:
        log.exception("integrity flags of attempt %s could not be computed", attempt.pk)


@dataclass
class RecomputeReport:
    checked: int = 0
    flagged: int = 0  # attempts with at least one flag after the pass
    flags: int = 0


def flags_recompute(
    *,
    everything: bool = False,
    suite_ids: Iterable[int] | None = None,
    run_ids: Iterable[int] | None = None,
) -> RecomputeReport:
    """Recompute the flags of final attempts checked under another rule set than today's
    (never checked included), or of every final attempt with ``everything``; only those of
    ``suite_ids`` / ``run_ids`` when given (an import checks the run it made)."""
    attempts = Attempt.objects.filter(status__in=FINAL_STATES).select_related(
        "task", "run", "model_config"
    )
    if suite_ids is not None:
        attempts = attempts.filter(suite_id__in=list(suite_ids))
    if run_ids is not None:
        attempts = attempts.filter(run_id__in=list(run_ids))
    if not everything:
        attempts = attempts.exclude(integrity_rules=rules_signature())
    report = RecomputeReport()
    for attempt in attempts.order_by("id").iterator(chunk_size=200):
        found = attempt_flags_compute(attempt=attempt)
        report.checked += 1
        report.flagged += bool(found)
        report.flags += len(found)
    return report


@dataclass(frozen=True)
class ShownFlag:
    """A flag as the attempt page and the API show it: the rule, its version, why, what."""

    rule: str
    version: int
    why: str
    detail: str
    current: bool  # computed under the rule's current version


def attempt_flags(attempt: Attempt) -> list[ShownFlag]:
    """The attempt's stored flags, each with its rule's one-line why (one query)."""
    from runs.integrity.rules import RULES_BY_NAME

    out = []
    for flag in AttemptFlag.objects.filter(attempt=attempt).order_by("rule"):
        rule = RULES_BY_NAME.get(flag.rule)
        out.append(
            ShownFlag(
                rule=flag.rule,
                version=flag.rule_version,
                why=rule.why if rule else "a rule no longer in the rule set",
                detail=flag.detail,
                current=rule is not None and rule.version == flag.rule_version,
            )
        )
    return out
