"""Template helpers for the transcript viewer (``templates/runs/_transcript.html``)."""

from __future__ import annotations

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from runs.step_times import duration_text

register = template.Library()

_LINE_CLASSES = {"+": "add", "-": "del", "@": "hunk"}


@register.filter
def patch_html(text: str) -> SafeString:
    """A unified diff as escaped lines, each in a span classed add / del / hunk / ctx.

    One string built here rather than a template loop per line: a transcript can hold many
    patches and the page must stay fast."""
    out = []
    for line in (text or "").splitlines():
        kind = _LINE_CLASSES.get(line[:1], "ctx")
        if line.startswith(("+++", "---")):
            kind = "file"
        out.append(f'<span class="{kind}">{escape(line)}</span>')
    return mark_safe("\n".join(out))


@register.filter
def step_of(turn, times):
    """The ``runs.step_times.StepTime`` of a transcript turn, or None."""
    return times.by_turn.get(turn.index) if times else None


@register.filter
def duration(seconds: float | None) -> str:
    """A step's or a transcript's duration ("—" when unknown)."""
    return duration_text(seconds)
