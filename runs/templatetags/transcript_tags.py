"""Template helpers for the transcript viewer (``templates/runs/_transcript.html``)."""

from __future__ import annotations

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

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
