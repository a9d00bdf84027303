"""The attempt page's test log beside its per-test table (``runs.final_tests``) and the step
times of its transcript (``runs.step_times``)."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from django.utils.safestring import SafeString, mark_safe

from runs import artifacts, final_tests, step_times
from runs.models import Attempt
from runs.transcript import Transcript

FINAL_STAGE = "final_test"


@dataclass
class FinalLog:
    log: final_tests.LogSection
    html: SafeString
    download: str  # the log's artifact path
    size: int
    partial: bool  # the file is larger than what was read

    @property
    def where(self) -> dict[str, int]:
        return self.log.where


def read_test_log(attempt: Attempt, stage_logs: list, names: list[str]) -> FinalLog | None:
    """The final test stage's log, its test section numbered, each test of ``names`` located;
    None when the attempt has no such log."""
    stage = next((s.stage for s in stage_logs if s.stage.name == FINAL_STAGE), None)
    if stage is None or not stage.output_path:
        return None
    data = artifacts.read_bytes(attempt, stage.output_path, final_tests.MAX_READ_BYTES + 1)
    if data is None:
        return None
    partial = len(data) > final_tests.MAX_READ_BYTES
    log = final_tests.read(data[: final_tests.MAX_READ_BYTES].decode("utf-8", errors="replace"))
    final_tests.locate(log, names)
    return FinalLog(
        log=log, html=_lines_html(log), download=stage.output_path, size=len(data), partial=partial
    )


def _lines_html(log: final_tests.LogSection) -> SafeString:
    """One element per line with its number as an anchor (``#tlog-N``), built here: a test log
    has thousands of lines. The text is escaped; a test's line is marked."""
    tested = set(log.where.values())
    out = []
    for number, text in log.lines:
        mark = " tested" if number in tested else ""
        out.append(
            f'<span class="tl{mark}" id="tlog-{number}"><a class="ln" href="#tlog-{number}">'
            f"{number}</a>{escape(text)}</span>"
        )
    # Each line is a block of its own (CSS): no newline between them.
    return mark_safe("".join(out))


def read_step_times(attempt: Attempt, transcript: Transcript | None) -> step_times.StepTimes | None:
    """The transcript's step times, from the file it was read from (None without times)."""
    if transcript is None:
        return None
    return step_times.load(
        lambda relative: artifacts.read_bytes(attempt, relative, step_times.MAX_FILE_BYTES + 1),
        transcript,
    )
