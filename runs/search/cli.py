"""``ab search``: the transcript search on the command line (``runs.search.query``), and
``ab search reindex`` to index attempts that ended before the index existed."""

from __future__ import annotations

import argparse
import json
import sys

from benchsite.cli.main import CommandError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "search",
        help="search every transcript (messages, tool calls, outputs); `reindex` rebuilds",
        description='Words and "quoted phrases", all of which must match: the search page\'s '
        "hits and total. `ab search reindex [--run ID]` indexes the stored transcripts again "
        "(to search for the word itself, quote it: ab search '\"reindex\"').",
    )
    p.add_argument("words", nargs="+", help='the text: words and "quoted phrases"')
    p.add_argument("--suite", default="", help="a suite's name")
    p.add_argument("--run", default="", help="a run id (8+ characters)")
    p.add_argument("--model", default="", help="a model configuration's name or slug")
    p.add_argument("--outcome", default="", help="resolved, failed, infra, missing, pending...")
    p.add_argument("--task", default="", help="a task id, exactly")
    p.add_argument("--page", type=int, default=1)
    p.add_argument("--page-size", type=int, default=None, help="hits a page (default 50)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="the API's JSON")
    out.add_argument("--csv", action="store_true", help="every hit as the API's CSV")
    p.set_defaults(handler=cmd_search)


def cmd_search(args: argparse.Namespace) -> int:
    if args.words == ["reindex"]:
        return _reindex(args.run)
    from dataclasses import asdict

    from runs.search.query import (
        DEFAULT_PAGE_SIZE,
        EXPORT_COLUMNS,
        SearchError,
        SearchQuery,
        export_records,
        transcript_search,
    )

    query = SearchQuery(
        text=" ".join(args.words),
        suite=args.suite,
        run=args.run,
        model=args.model,
        outcome=args.outcome,
        task=args.task,
        page=args.page,
        page_size=args.page_size or DEFAULT_PAGE_SIZE,
    )
    try:
        found = transcript_search(query)
        if args.csv:
            from runs.exports import _csv_lines

            for chunk in _csv_lines(EXPORT_COLUMNS, export_records(query)):
                sys.stdout.write(chunk)
            return 0
    except SearchError as exc:
        raise CommandError(str(exc)) from None
    if args.json:
        body = {
            "total": found.total,
            "page": query.page,
            "page_size": query.page_size,
            "pages": found.pages,
            "terms": found.terms,
            "hits": [asdict(h) for h in found.hits],
        }
        print(json.dumps(body, ensure_ascii=False))
        return 0
    print(f"{found.total} hit{'s' if found.total != 1 else ''}, page {query.page} of {found.pages}")
    for h in found.hits:
        snippet = " ".join(h.snippet.split())
        print(f"{h.task}  {h.model}  {h.outcome}  #{h.step} {h.kind}  {h.url}\n    {snippet}")
    return 0


def _reindex(run: str) -> int:
    from runs.models import Attempt
    from runs.results.attempt_list import FilterError, run_ids
    from runs.search.index import attempts_index

    attempts = Attempt.objects.exclude(artifacts_dir="")
    if run:
        try:
            attempts = attempts.filter(run_id__in=run_ids([run]))
        except FilterError as exc:
            raise CommandError(str(exc)) from None
    ids = list(attempts.order_by("id").values_list("id", flat=True))
    rows = 0
    for start in range(0, len(ids), 500):
        rows += attempts_index(ids[start : start + 500])
        print(f"indexed {min(start + 500, len(ids))} of {len(ids)} attempts", file=sys.stderr)
    print(f"{len(ids)} attempts indexed: {rows} documents")
    return 0
