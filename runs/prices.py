"""The price table as data: one row per model name (or name prefix) and date range, edited in
the admin, shipped with the list prices of runs.pricing.LIST_PRICES (migration 0023).

Rows are read once per attempt (``price_rows``) and handed to the gateway, which prices each
call by the row in effect on the call's day (runs/pricing.py): a price that changes mid-run
applies from its date, and an old attempt's cost stays what it was billed. Two rows for one
name with overlapping dates would make the price of a day ambiguous: ``clean`` refuses them,
naming the field.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from runs.pricing import Price, PriceRow


def _usd(help_text: str, *, null: bool = False) -> models.DecimalField:
    return models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=null,
        blank=null,
        validators=[MinValueValidator(Decimal(0))],
        help_text=help_text,
    )


class PriceEntry(models.Model):
    """What one model's tokens cost, per class, in USD per million tokens, over a date range."""

    pattern = models.CharField(
        max_length=200,
        help_text="A model name, or the start of one: 'gpt-4o' prices 'gpt-4o-2024-08-06' "
        "(the longest matching name wins; a provider prefix such as 'openai/' is ignored).",
    )
    effective_from = models.DateField(help_text="The first day (UTC) this price applies.")
    effective_to = models.DateField(
        null=True,
        blank=True,
        help_text="The day it stops applying (not included); empty: still in effect.",
    )
    currency = models.CharField(max_length=3, default="USD", editable=False)
    input_per_mtok = _usd("Input not read from a cache.")
    output_per_mtok = _usd("Output (reasoning tokens included).")
    cache_write_per_mtok = _usd(
        "Input written to the prompt cache (Anthropic's 5-minute write; OpenAI bills it as "
        "input). Empty: not listed, such a call's cost is unknown.",
        null=True,
    )
    cache_write_1h_per_mtok = _usd("Anthropic's 1-hour cache write. Empty: not listed.", null=True)
    cache_read_per_mtok = _usd("Input read from the prompt cache. Empty: not listed.", null=True)
    source_url = models.URLField(max_length=500, blank=True, help_text="Where the price is listed.")
    note = models.CharField(max_length=300, blank=True, help_text="As listed on <date>, ...")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pattern", "effective_from"]
        verbose_name = "price"
        constraints = [
            models.UniqueConstraint(
                fields=["pattern", "effective_from"], name="price_entry_pattern_from"
            ),
            models.CheckConstraint(
                condition=Q(effective_to__isnull=True)
                | Q(effective_to__gt=models.F("effective_from")),
                name="price_entry_dates_in_order",
            ),
        ]

    def __str__(self) -> str:
        until = f" to {self.effective_to}" if self.effective_to else ""
        return f"{self.pattern} from {self.effective_from}{until}"

    def clean(self) -> None:
        self.pattern = (self.pattern or "").strip()
        if not self.pattern:
            raise ValidationError({"pattern": "name the model (or the start of its name)"})
        if self.effective_from and self.effective_to and self.effective_to <= self.effective_from:
            raise ValidationError(
                {"effective_to": "the end must come after effective_from (it is not included)"}
            )
        if not self.effective_from:
            return
        others = PriceEntry.objects.filter(pattern=self.pattern).exclude(pk=self.pk)
        end = self.effective_to or dt.date.max
        clash = (
            others.filter(effective_from__lt=end)
            .filter(Q(effective_to__isnull=True) | Q(effective_to__gt=self.effective_from))
            .first()
        )
        if clash is not None:
            field = (
                "effective_from" if clash.effective_from <= self.effective_from else "effective_to"
            )
            raise ValidationError(
                {
                    field: f"these dates overlap the price of {clash.pattern!r} in effect "
                    f"from {clash.effective_from}"
                    f"{f' to {clash.effective_to}' if clash.effective_to else ' on'}: end that "
                    "one first (set its effective_to), so each day has one price"
                }
            )

    def as_row(self) -> PriceRow:
        def num(value: Decimal | None) -> float | None:
            return None if value is None else float(value)

        return PriceRow(
            pattern=self.pattern,
            price=Price(
                float(self.input_per_mtok),
                float(self.output_per_mtok),
                num(self.cache_write_per_mtok),
                num(self.cache_read_per_mtok),
                num(self.cache_write_1h_per_mtok),
            ),
            effective_from=self.effective_from,
            effective_to=self.effective_to,
            source=self.source_url,
        )


def price_rows() -> tuple[PriceRow, ...]:
    """Every row of the table (a few hundred at most), for one attempt's gateway or agent."""
    return tuple(entry.as_row() for entry in PriceEntry.objects.all())


def prices_import(
    *, path: str, effective_from: dt.date, source_url: str = "", note: str = ""
) -> list[PriceEntry]:
    """The entries of a JSON price file (the old ``LLM_PRICE_TABLE`` format) as rows from
    ``effective_from``: a name's row in effect then is ended that day, so each day keeps one
    price. All or nothing: a malformed file (PriceTableError names the entry) changes no row."""
    from django.db import transaction

    from runs.pricing import read_price_file

    entries = read_price_file(path)
    made = []
    with transaction.atomic():
        for name, price in entries.items():
            current = PriceEntry.objects.filter(
                Q(effective_to__isnull=True) | Q(effective_to__gt=effective_from),
                pattern=name,
                effective_from__lt=effective_from,
            )
            current.update(effective_to=effective_from)

            def usd(value: float | None) -> Decimal | None:
                return None if value is None else Decimal(str(value))

            entry = PriceEntry(
                pattern=name,
                effective_from=effective_from,
                input_per_mtok=usd(price.input_per_mtok),
                output_per_mtok=usd(price.output_per_mtok),
                cache_write_per_mtok=usd(price.cache_write_per_mtok),
                cache_read_per_mtok=usd(price.cache_read_per_mtok),
                cache_write_1h_per_mtok=usd(price.cache_write_1h_per_mtok),
                source_url=source_url,
                note=note or f"imported from {Path(path).name}",
            )
            try:
                entry.full_clean()  # a row from that day already: nothing stored
            except ValidationError as exc:
                words = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
                raise ValidationError(f"{name}: {words}") from None
            entry.save()
            made.append(entry)
    return made
