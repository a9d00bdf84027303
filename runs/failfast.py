"""Fail-fast: stop a run when its attempts keep failing the same way.

The pure part (no Django): ``ConsecutiveFailureTracker`` and ``find_breach`` reproduce the
reference's "Consecutive-Failure Tracker": N consecutive case-level failures with the same
normalized fingerprint breach the threshold; a success resets the count.

What counts, in this harness's terms (an attempt is one "case"):

* a **failure** is an attempt that ended in one of the systemic reasons
  (``FAIL_FAST_REASONS``: LLM, sandbox and unexpected errors by default), or any attempt whose
  error is classified permanent. These say nothing about the task and everything about the set-up,
  so repeating them wastes the rest of the run;
* a **success** (resets the count) is an attempt in which the agent ran and the harness worked:
  success, or an agent outcome (tests failed, gave up, tool error, internal error);
* anything else (a task-specific infrastructure outcome such as SETUP_FAILED or
  BASELINE_NOT_FAILING) is **neutral**: it neither counts nor resets, because it tells nothing
  about the model configuration.

Attempts run concurrently on several workers, so "consecutive" is the order in which they
finished (``finished_at``, then id) within one run; the service (``run_check_fail_fast``)
computes it from the database while holding the run's row lock.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from runs.taxonomy import Category, Reason

DEFAULT_THRESHOLD: Final = 3
DEFAULT_REASONS: Final = (Reason.LLM_ERROR, Reason.SANDBOX_ERROR, Reason.UNKNOWN)
FINGERPRINT_CHARS: Final = 200

PERMANENT: Final = "permanent"
TRANSIENT: Final = "transient"

# The reference's classification. Transient patterns are checked first: a false "permanent"
# stops every run of the model configuration, a false "transient" only this one.
_TRANSIENT_RE = re.compile(
    r"overloaded_error|\b529\b|rate[_ ]limit|\b429\b|\bapi_error\b|\b5\d\d\b|econnrefused|"
    r"enotfound|etimedout|timed? ?out|connection (?:error|refused|reset)|\[empty-run\]",
    re.IGNORECASE,
)
_PERMANENT_RE = re.compile(
    r"authentication_error|\b401\b|permission_error|\b403\b|invalid_request_error|\b400\b|"
    r"not_found_error|\b404\b|request_too_large|\b413\b|unknown option|invalid flag|"
    r"unrecognized argument|invalid api key|incorrect api key|model_not_found|"
    r"does not exist|no such image|harness misconfigur",
    re.IGNORECASE,
)
# How the agents mark a classified model error in an attempt's error text.
_LLM_MARKER_RE = re.compile(r"\[llm-(?:permanent|transient)\]")
_UUID_RE = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_HEX_RE = re.compile(r"\b(?:0x)?[0-9a-f]{12,}\b", re.IGNORECASE)
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")
_SPACE_RE = re.compile(r"\s+")


def normalize_fingerprint(text: str) -> str:
    """The first 200 characters of an error with ids, numbers and spacing made uniform.

    Used when an attempt has no stored fingerprint, so that "took 3.2s" and "took 4.1s"
    compare equal while "401 Unauthorized" and "429 Too Many Requests" stay apart
    (HTTP status codes are kept: they are the most telling part of an LLM error).
    """
    text = _UUID_RE.sub("<id>", text)
    text = _HEX_RE.sub("<hex>", text)
    text = _NUMBER_RE.sub(lambda m: m.group(0) if _is_status_code(m.group(0)) else "<n>", text)
    return _SPACE_RE.sub(" ", text).strip()[:FINGERPRINT_CHARS]


def _is_status_code(token: str) -> bool:
    return len(token) == 3 and token.isdigit() and token[0] in "45"


def classify_error_text(text: str) -> str:
    """``"permanent"``, ``"transient"`` or ``""`` (unknown, treated as transient)."""
    if not text:
        return ""
    if _TRANSIENT_RE.search(text):
        return TRANSIENT
    if _PERMANENT_RE.search(text):
        return PERMANENT
    return ""


class Verdict(enum.Enum):
    FAILURE = "failure"
    SUCCESS = "success"
    NEUTRAL = "neutral"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What fail-fast needs to know about one finished attempt."""

    attempt_id: int
    reason: str | None  # a Reason code; None = resolved
    fingerprint: str = ""
    error_kind: str = ""  # permanent | transient | ""
    error_text: str = ""

    @property
    def kind(self) -> str:
        return self.error_kind or classify_error_text(self.error_text)

    @property
    def key(self) -> str:
        """What "the same failure" means. A classified LLM error is keyed by that error alone:
        the same 429 reads "[empty-run] ... no output (2.1s): [llm-transient] ..." when the
        agent stage took over a second and "... [llm-transient] ..." when it did not, and
        the stored fingerprint (the first 200 characters) may not even reach the error."""
        first_line = self.error_text.split("\n", 1)[0]
        markers = list(_LLM_MARKER_RE.finditer(first_line))
        if markers:
            return normalize_fingerprint(first_line[markers[-1].start() :])
        return self.fingerprint or normalize_fingerprint(self.error_text) or str(self.reason)


def verdict(outcome: Outcome, counted: Iterable[str] = DEFAULT_REASONS) -> Verdict:
    if outcome.reason is None:
        return Verdict.SUCCESS
    if outcome.reason in {str(code) for code in counted} or outcome.error_kind == PERMANENT:
        return Verdict.FAILURE
    try:
        category = Reason(outcome.reason).info.category
    except ValueError:
        # A code this version does not know: count nothing rather than crash the worker.
        return Verdict.NEUTRAL
    return Verdict.SUCCESS if category is Category.AGENT else Verdict.NEUTRAL


class ConsecutiveFailureTracker:
    """N consecutive failures with the same fingerprint breach; a success resets.

    A failure with a different fingerprint starts a new streak of one. A threshold below 1
    disables the tracker (it never breaches).
    """

    def __init__(self, threshold: int = DEFAULT_THRESHOLD):
        self.threshold = threshold
        self.fingerprint: str | None = None
        self.count = 0

    def record_failure(self, fingerprint: str) -> bool:
        if fingerprint == self.fingerprint:
            self.count += 1
        else:
            self.fingerprint, self.count = fingerprint, 1
        return self.breached

    def record_success(self) -> None:
        self.fingerprint, self.count = None, 0

    @property
    def breached(self) -> bool:
        return self.threshold >= 1 and self.count >= self.threshold


@dataclass(frozen=True, slots=True)
class Breach:
    """The streak that breached: the attempt that completed it and what it says."""

    attempt_id: int
    reason: str
    fingerprint: str
    count: int
    permanent: bool
    error_text: str

    def describe(self) -> str:
        kind = "permanent" if self.permanent else "transient"
        return (
            f"{self.count} consecutive attempts failed with {self.reason} ({kind}): "
            f"{self.fingerprint}"
        )


def find_breach(
    outcomes: Iterable[Outcome],
    *,
    threshold: int = DEFAULT_THRESHOLD,
    counted: Iterable[str] = DEFAULT_REASONS,
) -> Breach | None:
    """Replay outcomes in finish order; return the first breach, or None."""
    counted = tuple(counted)
    tracker = ConsecutiveFailureTracker(threshold)
    for outcome in outcomes:
        match verdict(outcome, counted):
            case Verdict.SUCCESS:
                tracker.record_success()
            case Verdict.NEUTRAL:
                continue
            case Verdict.FAILURE:
                if tracker.record_failure(outcome.key):
                    return Breach(
                        attempt_id=outcome.attempt_id,
                        reason=str(outcome.reason),
                        fingerprint=outcome.key,
                        count=tracker.count,
                        permanent=outcome.kind == PERMANENT,
                        error_text=outcome.error_text,
                    )
    return None


# --- The service: the database side, called by run bookkeeping with the run locked. -----------


def failfast_settings() -> tuple[int, tuple[str, ...]]:
    """The threshold and counted reasons; a missing or empty setting falls back to the default."""
    from django.conf import settings

    threshold = getattr(settings, "FAIL_FAST_THRESHOLD", None)
    reasons = getattr(settings, "FAIL_FAST_REASONS", None) or DEFAULT_REASONS
    return (DEFAULT_THRESHOLD if threshold is None else int(threshold)), tuple(reasons)
