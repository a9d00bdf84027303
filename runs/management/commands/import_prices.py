"""``python manage.py import_prices FILE [--from DATE] [--source URL]``: a JSON price file (the
old ``LLM_PRICE_TABLE`` format) into the price table, from a date (today by default)."""

from __future__ import annotations

import datetime as dt

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from runs.prices import prices_import
from runs.pricing import PriceTableError


class Command(BaseCommand):
    help = "Load a JSON price file into the price table, in effect from --from (today)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("path")
        parser.add_argument("--from", dest="effective_from", type=dt.date.fromisoformat)
        parser.add_argument("--source", default="", help="where the prices are listed")

    def handle(self, *args, **options) -> None:
        day = options["effective_from"] or dt.datetime.now(dt.UTC).date()
        try:
            made = prices_import(
                path=options["path"], effective_from=day, source_url=options["source"]
            )
        except PriceTableError as exc:
            raise CommandError(str(exc)) from None
        except ValidationError as exc:
            raise CommandError(f"{options['path']}: {' '.join(exc.messages)}") from None
        self.stdout.write(f"prices: {len(made)} rows in effect from {day}")
