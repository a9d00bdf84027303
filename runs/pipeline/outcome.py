"""From stage results to the attempt's one outcome. Pure: no Django, no I/O.

The primary reason is the lowest-precedence reason among the stages (earlier failures
dominate), recorded with the stage that produced it; timeouts and empty runs are tagged the way
``data-quality-empty-runs-and-timeouts.md`` asks, so reports can exclude them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runs.pipeline.stages import StageResult
from runs.taxonomy import Reason, Stage, is_infrastructure, primary_reason

TIMEOUT_TAG = "[timeout]"
EMPTY_RUN_TAG = "[empty-run]"
STDERR_TAIL_CHARS = 4000
_ERROR_TAIL_LINES = 15
FINGERPRINT_CHARS = 200


@dataclass(frozen=True, slots=True)
class Verdict:
    reason: Reason | None
    stage: Stage | None
    stage_name: str
    is_infra: bool
    is_timeout: bool
    is_empty_run: bool
    exit_code: int | None
    error_text: str
    error_fingerprint: str
    stderr_tail: str

    @property
    def success(self) -> bool:
        return self.reason is None


def decide(stages: list[StageResult], *, empty_run: bool = False) -> Verdict:
    """The attempt's outcome from its stages (in order). ``empty_run`` marks the agent stage's
    LLM_ERROR as an empty run. Stages kept only for the record (``counts`` false) never decide."""
    stages = [s for s in stages if s.counts]
    reason = primary_reason([s.reason for s in stages])
    deciding = next((s for s in stages if s.reason is reason), None) if reason else None
    last = deciding or (stages[-1] if stages else None)
    if reason is None or deciding is None:
        return Verdict(
            reason=None,
            stage=None,
            stage_name="",
            is_infra=False,
            is_timeout=False,
            is_empty_run=False,
            exit_code=last.exit_code if last else None,
            error_text="",
            error_fingerprint="",
            stderr_tail=_tail(last) if last else "",
        )
    is_timeout = reason in (Reason.TIMEOUT, Reason.SETUP_TIMEOUT)
    is_empty = empty_run and reason is Reason.LLM_ERROR
    text = error_text(reason, deciding, is_timeout=is_timeout, is_empty_run=is_empty)
    return Verdict(
        reason=reason,
        stage=deciding.stage,
        stage_name=deciding.name,
        is_infra=is_infrastructure(reason, deciding.stage),
        is_timeout=is_timeout,
        is_empty_run=is_empty,
        exit_code=deciding.exit_code,
        error_text=text,
        error_fingerprint=error_fingerprint(text),
        stderr_tail=_tail(deciding),
    )


def error_text(
    reason: Reason, stage: StageResult, *, is_timeout: bool = False, is_empty_run: bool = False
) -> str:
    """``[tag] REASON in stage: why`` and the last lines of the stage's error output."""
    why = stage.note or (
        f"exit {stage.exit_code}: {stage.runs[-1].command}" if stage.runs else "no detail"
    )
    for tag in (TIMEOUT_TAG, EMPTY_RUN_TAG):
        why = why.removeprefix(tag).strip()
    tag = TIMEOUT_TAG + " " if is_timeout else EMPTY_RUN_TAG + " " if is_empty_run else ""
    # The sandbox's own failures lead the text like [timeout] does, whether the note or the
    # exception's message carried the tag (other tags stay where their stage put them).
    if not tag and (leading := _LEADING_TAG.match(why)) and leading.group(2) in SANDBOX_TAGS:
        tag, why = leading.group(2) + " ", ((leading.group(1) or "") + leading.group(3)).strip()
    head = f"{tag}{reason.value} in {stage.name}: {why}"
    if stage.traceback:
        return f"{head}\n{stage.traceback.rstrip()}"
    detail = (stage.stderr.strip() or stage.output.strip()).splitlines()[-_ERROR_TAIL_LINES:]
    return head + ("\n" + "\n".join(detail) if detail else "")


SANDBOX_TAGS = frozenset(
    {
        "[oom]",
        "[disk-quota]",
        "[file-limit]",
        "[engine-gone]",
        "[container-gone]",
        "[killed]",
        "[image]",
    }
)
# "[tag] rest" or "SandboxError: [tag] rest".
_LEADING_TAG = re.compile(r"^(?:(\w+: ))?(\[[a-z-]+\]) ?(.*)$", re.DOTALL)
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_PATH = re.compile(r"(?:[a-z]:)?(?:/[\w.@+\-]+){2,}/?|(?:\.{1,2}/)(?:[\w.@+\-]+/?)+")
# Hex words with at least one digit and one letter (commit ids, addresses), or 0x...
_HEX = re.compile(
    r"\b(?:0x[0-9a-f]+|[0-9a-f]*\d[0-9a-f]*[a-f][0-9a-f]*|[0-9a-f]*[a-f][0-9a-f]*\d[0-9a-f]*)\b"
)
_NUM = re.compile(r"\d+(?:\.\d+)?")


def normalize_error(text: str) -> str:
    """Lowercase, with ids, hex, paths and numbers collapsed, so the same failure on another
    task, container or time reads the same."""
    out = text.lower()
    out = _UUID.sub("<id>", out)
    out = _PATH.sub("<path>", out)
    out = _HEX.sub(lambda m: "<hex>" if len(m.group(0)) >= 6 else m.group(0), out)
    out = _NUM.sub("<n>", out)
    return re.sub(r"\s+", " ", out).strip()


def error_fingerprint(text: str) -> str:
    """The first 200 characters of the normalized error: what fail-fast groups by."""
    return normalize_error(text)[:FINGERPRINT_CHARS]


def _tail(stage: StageResult) -> str:
    text = stage.stderr or stage.output
    return text[-STDERR_TAIL_CHARS:]
