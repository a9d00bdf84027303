"""Number formatting for results pages."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def pct(value, digits: int = 1) -> str:
    """A fraction as a percentage: 0.523 -> "52.3%"; None -> "—"."""
    if value is None or value == "":
        return "—"
    return f"{100 * float(value):.{int(digits)}f}%"


@register.filter
def pp(value, digits: int = 1) -> str:
    """A difference of two rates (fractions) in percentage points, signed: 0.58 -> "+58.0 pp";
    None -> "—". Never "%": a rate going from 20% to 78% rose 58 points, not 58 percent."""
    if value is None or value == "":
        return "—"
    points = 100 * float(value)
    sign = "+" if points > 0 else "\u2212" if points < 0 else "\u00b1"
    return f"{sign}{abs(points):.{int(digits)}f} pp"


@register.filter
def usd(value) -> str:
    if value is None or value == "":
        return "—"
    value = float(value)
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


@register.filter
def cost(usage) -> str:
    """An attempt's cost (``ShownUsage``): "unknown" when a price is missing, never $0."""
    return "unknown" if usage.cost_unknown else usd(usage.cost_usd)


@register.filter
def secs(value) -> str:
    if value is None or value == "":
        return "—"
    value = float(value)
    if value >= 3600:
        return f"{value / 3600:.1f} h"
    if value >= 60:
        return f"{value / 60:.1f} min"
    return f"{value:.1f} s"


@register.filter
def kilo(value) -> str:
    if value is None or value == "":
        return "—"
    value = float(value)
    if value >= 1_000_000:
        return f"{value / 1_000_000:.2f}M"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return f"{value:.0f}"


@register.filter
def tenths(value) -> str:
    """A mean count to one decimal (calls per attempt); "—" for none."""
    if value is None or value == "":
        return "—"
    return f"{float(value):.1f}"


@register.filter
def pvalue(value) -> str:
    """A p-value with its relation: "p < 0.001" or "p = 0.042"."""
    if value is None:
        return "—"
    return "p < 0.001" if value < 0.001 else f"p = {value:.3f}"


@register.filter
def filesize(value) -> str:
    value = float(value or 0)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


@register.filter
def get_item(mapping, key):
    return mapping.get(key) if mapping else None
