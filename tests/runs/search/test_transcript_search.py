"""Search across every transcript (runs.search): what is indexed and when (an attempt's end, a
run import, ``ab search reindex``), the same hits and total on every surface (the page, the
API's JSON and CSV, ``ab search``'s table, JSON and CSV), the filters, read rights, and hostile
text in queries and in transcripts. Real mini-swe-agent trajectories (examples/, from
/work/shared). Runs on SQLite and, in .ci/test's PostgreSQL pass, on PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from django.db import connection
from django.urls import reverse

from runs.lifecycle import attempt_fail
from runs.models import Attempt, AttemptStatus
from runs.search.index import MARK_END, MARK_START, MAX_DOCUMENT_CHARS, attempts_index, clean
from runs.search.models import TranscriptDocument
from runs.search.query import SearchQuery, highlighted, transcript_search
from runs.taxonomy import Reason
from tasks_app.models import Task
from tests.conftest import REPO_ROOT
from tests.support.ab_cli import ab_main
from tests.support.pages_fixtures import (
    make_attempt,
    make_model,
    make_run,
    make_suite,
    write_artifact,
)

pytestmark = pytest.mark.django_db

MINI = REPO_ROOT / "examples" / "swebench" / "mini_swe_agent_run"
TRAJS = MINI / "trajs"
TRAJ = "trajectory.traj.json"
TRAJ_IDS = ("sympy__sympy-21612", "django__django-14155", "psf__requests-1142")
HOSTILE = [
    '"',
    '"unbalanced',
    "NEAR(a b)",
    "NEAR",
    "*",
    "astro*",
    "((",
    "a OR",
    "AND",
    "-",
    "-foo",
    "^x",
    "text:foo",
    "'",
    "\\",
    "a & b | !c",
    "<->",
    ":*",
    "'a':*",
    "{a b}",
    "%",
    "_",
    "\u00e9",
    "x" * 500,
    "one two three four five six seven eight nine ten eleven twelve 13 14 15 16 17 18",
]


@pytest.fixture(autouse=True)
def artifacts(settings, tmp_path) -> Path:
    root = tmp_path / "artifacts"
    settings.ARTIFACTS_ROOT = root
    settings.STORAGES = settings.STORAGES | {
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(root)},
        }
    }
    return root


def trajectory(instance_id: str, extra: list[dict] | None = None) -> bytes:
    data = json.loads((TRAJS / instance_id / f"{instance_id}.traj.json").read_bytes())
    data["messages"].extend(extra or [])
    return json.dumps(data).encode()


@pytest.fixture
def corpus():
    """Two suites; two models; three real trajectories, one with hostile text appended."""
    suite = make_suite("search-a", tasks=3)
    other = make_suite("search-b", tasks=1)
    tasks = list(Task.objects.for_suite(suite).order_by("task_id"))
    gpt, claude = make_model("gpt-x"), make_model("claude-y")
    first, second = make_run(suite, gpt), make_run(suite, claude)
    hostile = [
        {"role": "assistant", "content": "zebracorn <script>alert(1)</script> \ue000forged\ue001"},
        {"role": "user", "content": "tail " + "y " * MAX_DOCUMENT_CHARS + " lastwordqq"},
    ]
    made = {
        "resolved": make_attempt(first, tasks[0]),
        "failed": make_attempt(first, tasks[1], "TESTS_FAILED"),
        "other-model": make_attempt(second, tasks[0]),
        "other-suite": make_attempt(
            make_run(other, gpt), Task.objects.for_suite(other).get(), "TESTS_FAILED"
        ),
    }
    write_artifact(made["resolved"], TRAJ, trajectory("astropy__astropy-13398", hostile))
    write_artifact(made["failed"], TRAJ, trajectory("astropy__astropy-13033"))
    write_artifact(made["other-model"], TRAJ, trajectory("astropy__astropy-13398"))
    write_artifact(made["other-suite"], TRAJ, trajectory("astropy__astropy-13977"))
    attempts_index([a.pk for a in made.values()])
    return made


def api(client, auth, **params):
    return client.get(reverse("api:transcript_search"), params, **auth)


def hit_keys(hits) -> list[tuple[str, int, str]]:
    return [(h["attempt"], int(h["step"]), h["kind"]) for h in hits]


def test_it_indexes_messages_tool_calls_and_outputs_at_their_steps(corpus, client, bob):
    rows = TranscriptDocument.objects.filter(attempt=corpus["failed"])
    assert {r.kind for r in rows} == {"message", "tool_call", "tool_output"}
    found = transcript_search(SearchQuery(text="zebracorn"))
    assert found.total == 1
    (hit,) = found.hits
    assert hit.attempt == str(corpus["resolved"].public_id)
    assert hit.url == f"/attempts/{hit.attempt}/#turn-{hit.step}"
    assert hit.kind == "message" and hit.role == "assistant"
    client.force_login(bob)
    page = client.get(hit.url.split("#")[0]).content.decode()
    assert f'id="turn-{hit.step}"' in page  # the viewer's anchor the link lands on
    assert 'id="nav-search"' in page  # a reader finds the search in the top bar


def test_hits_come_newest_attempt_first_in_step_order(corpus):
    hits = transcript_search(SearchQuery(text="astropy", page_size=200)).hits
    attempts = list(dict.fromkeys(h.attempt for h in hits))
    newest = max(corpus.values(), key=lambda a: a.pk)
    assert attempts[0] == str(newest.public_id)
    for attempt in attempts:  # each attempt's hits together, its steps in order
        steps = [h.step for h in hits if h.attempt == attempt]
        assert steps == sorted(steps)
    assert len(attempts) == len({h.attempt for h in hits})
    runs = [i for i, h in enumerate(hits) if i == 0 or h.attempt != hits[i - 1].attempt]
    assert len(runs) == len(attempts)


def test_its_snippets_are_escaped_before_the_highlight(corpus):
    (hit,) = transcript_search(SearchQuery(text="zebracorn")).hits
    assert "<script" not in hit.snippet_html
    if "script" in hit.snippet:  # PostgreSQL's highlighter leaves tags out, FTS5's keeps them
        assert "&lt;script&gt;" in hit.snippet_html
    forged = highlighted(f"{MARK_START}a{MARK_END}<b>&")
    assert forged == "<mark>a</mark>&lt;b&gt;&amp;"
    assert "<mark>zebracorn</mark>" in hit.snippet_html
    # The transcript's own marker characters were taken out: "forged" is no highlight.
    assert "<mark>forged</mark>" not in hit.snippet_html
    assert MARK_START not in hit.snippet
    assert transcript_search(SearchQuery(text="forged")).total == 1


def test_a_long_output_keeps_its_head_and_tail(corpus):
    assert len(clean("z" * 100_000)) <= MAX_DOCUMENT_CHARS
    assert transcript_search(SearchQuery(text="lastwordqq")).total == 1


def test_every_surface_gives_the_same_hits_and_total(corpus, client, auth, bob):
    params = {"q": "astropy coordinates", "suite": "search-a", "page_size": "7"}
    service = transcript_search(SearchQuery(text=params["q"], suite="search-a", page_size=7))
    assert service.total > 7  # enough for a second page
    expected = [(h.attempt, h.step, h.kind) for h in service.hits]

    body = api(client, auth, **params).json()
    assert body["total"] == service.total and hit_keys(body["hits"]) == expected
    assert body["pages"] == service.pages

    client.force_login(bob)
    page = client.get(reverse("transcript-search"), params)
    assert page.status_code == 200
    html = page.content.decode()
    assert f"<strong>{service.total}</strong> hit" in html
    shown = re.findall(r'data-attempt="([0-9a-f-]+)" data-step="(\d+)"', html)
    assert shown == [(a, str(s)) for a, s, _ in expected]

    cli = ab_main("search", params["q"], "--suite", "search-a", "--page-size", "7", "--json")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["total"] == service.total
    assert hit_keys(json.loads(cli.stdout)["hits"]) == expected
    table = ab_main("search", params["q"], "--suite", "search-a", "--page-size", "7")
    assert table.stdout.startswith(f"{service.total} hits")

    api_csv = api(client, auth, **params, format="csv")
    assert api_csv.status_code == 200
    api_rows = list(csv.DictReader(io.StringIO(b"".join(api_csv.streaming_content).decode())))
    cli_csv = ab_main("search", params["q"], "--suite", "search-a", "--csv")
    assert list(csv.DictReader(io.StringIO(cli_csv.stdout))) == api_rows
    assert len(api_rows) == service.total
    assert [(r["attempt"], int(r["step"]), r["kind"]) for r in api_rows[:7]] == expected


def test_the_filters_narrow_the_hits(corpus, client, auth):
    everywhere = api(client, auth, q="astropy", page_size=200).json()
    attempts = {h["attempt"] for h in everywhere["hits"]}
    assert attempts == {str(a.public_id) for a in corpus.values()}
    run = corpus["failed"].run.public_id
    cases = {
        "suite": ({"suite": "search-b"}, {"other-suite"}),
        "model": ({"model": "claude-y"}, {"other-model"}),
        "outcome": ({"outcome": "failed", "suite": "search-a"}, {"failed"}),
        "run": ({"run": str(run)[:8]}, {"resolved", "failed"}),
        "task": ({"task": "task-001"}, {"failed"}),
    }
    for name, (params, names) in cases.items():
        body = api(client, auth, q="astropy", page_size=200, **params).json()
        got = {h["attempt"] for h in body["hits"]}
        assert got == {str(corpus[n].public_id) for n in names}, name


def test_a_filter_naming_nothing_is_refused_by_name(corpus, client, auth):
    assert api(client, auth, q="astropy", suite="nope").status_code == 404
    assert api(client, auth, q="astropy", model="nope").status_code == 404
    response = api(client, auth, q="astropy", outcome="won")
    assert response.status_code == 422
    assert api(client, auth, q="astropy", colour="red").status_code == 422
    assert api(client, auth, q="").status_code == 422
    cli = ab_main("search", "astropy", "--suite", "nope")
    assert cli.returncode != 0 and "nope" in cli.stderr


def test_the_page_names_a_bad_parameter_as_the_api_does(corpus, client, bob):
    client.force_login(bob)
    page = client.get(reverse("transcript-search"), {"q": "astropy", "suite": "nope"})
    assert page.status_code == 400 and "no suite named &#x27;nope&#x27;" in page.content.decode()
    page = client.get(reverse("transcript-search"), {"q": "astropy", "page_size": "9999"})
    assert page.status_code == 400 and "page_size: Input should be less than" in (
        page.content.decode()
    )
    assert client.get(reverse("transcript-search")).status_code == 200  # the empty form


def test_hostile_queries_never_fail(corpus, client, auth, bob):
    client.force_login(bob)
    for text in HOSTILE:
        response = api(client, auth, q=text)
        assert response.status_code == 200, (text, response.content[:300])
        page = client.get(reverse("transcript-search"), {"q": text})
        assert page.status_code == 200, text
        assert ab_main("search", "--", text).returncode == 0, text
    # Quotes make a phrase; the words of a phrase must be adjacent.
    assert api(client, auth, q='"astropy coordinates"').json()["total"] > 0
    assert api(client, auth, q='"coordinates astropy zebracorn"').json()["total"] == 0


def test_who_cannot_read_transcripts_sees_no_hit(corpus, client, dave):
    url = reverse("api:transcript_search")
    assert client.get(url, {"q": "astropy"}).status_code == 401
    page = client.get(reverse("transcript-search"), {"q": "astropy"})
    assert page.status_code == 302 and "login" in page["Location"]
    assert 'id="nav-search"' not in client.get(reverse("home")).content.decode()
    client.force_login(dave)
    response = client.get(url, {"q": "astropy"})
    assert response.status_code == 403 and "astropy" not in response.content.decode()
    assert client.get(reverse("transcript-search"), {"q": "astropy"}).status_code == 403


def test_an_attempt_is_indexed_when_it_ends(django_capture_on_commit_callbacks):
    suite = make_suite("search-end", tasks=1)
    attempt = make_attempt(
        make_run(suite, make_model("m")),
        Task.objects.for_suite(suite).get(),
        status=AttemptStatus.RUNNING,
    )
    write_artifact(attempt, TRAJ, trajectory("astropy__astropy-13033"))
    assert transcript_search(SearchQuery(text="astropy")).total == 0
    with django_capture_on_commit_callbacks(execute=True):
        attempt_fail(attempt, reason=Reason.TIMEOUT, text="stopped")
    assert Attempt.objects.get(pk=attempt.pk).status == AttemptStatus.FINISHED
    assert transcript_search(SearchQuery(text="astropy")).total > 0


def test_an_imported_run_is_indexed_and_reindex_rebuilds(
    tmp_path, django_capture_on_commit_callbacks
):
    from runs.imports.run_import import run_folder_import

    # Three instances of the real run, with their trajectories.
    folder = tmp_path / "run"
    suite = make_suite("verified-mini", tasks=0)
    for instance_id in TRAJ_IDS:
        Task.objects.create(suite=suite, task_id=instance_id, repo_url="https://example.org/r")
        shutil.copytree(TRAJS / instance_id, folder / "trajs" / instance_id)
    with django_capture_on_commit_callbacks(execute=True):
        report = run_folder_import(path=folder, suite_name="verified-mini", model_name="mini")
    indexed = TranscriptDocument.objects.values_list("attempt__task__task_id", flat=True)
    assert set(indexed) == set(TRAJ_IDS)
    found = transcript_search(SearchQuery(text="sympy", suite="verified-mini"))
    assert found.total > 0
    TranscriptDocument.objects.all().delete()
    assert transcript_search(SearchQuery(text="sympy")).total == 0
    result = ab_main("search", "reindex", "--run", report.run_id[:8])
    assert result.returncode == 0, result.stderr
    assert "3 attempts indexed" in result.stdout
    assert transcript_search(SearchQuery(text="sympy")).total == found.total


def test_an_import_through_a_web_door_is_indexed_apart_not_in_the_request(
    tmp_path, django_capture_on_commit_callbacks, monkeypatch, alice
):
    """Indexing reads each transcript back whole: a web worker at the import limits would
    take ~100 MB more (tests/runs/imports/test_security_imports.py, which also sees the
    process index it). A web door's import leaves it to ``ab search reindex --run``."""
    from benchsite.accounts.models import Door
    from runs.imports import actions

    folder = tmp_path / "run"
    suite = make_suite("verified-mini", tasks=0)
    for instance_id in TRAJ_IDS:
        Task.objects.create(suite=suite, task_id=instance_id, repo_url="https://example.org/r")
        shutil.copytree(TRAJS / instance_id, folder / "trajs" / instance_id)
    started: list[str] = []
    monkeypatch.setattr(actions, "imported_run_read_in_background", started.append)
    with django_capture_on_commit_callbacks(execute=True):
        report = actions.run_folder_import(
            actor=alice, door=Door.API, path=folder, suite_name="verified-mini", model_name="m"
        )

    assert not TranscriptDocument.objects.exists()  # nothing read back in the request
    assert started == [str(report.run_id)]
    result = ab_main("search", "reindex", "--run", started[0])  # what that process runs
    assert result.returncode == 0, result.stderr
    indexed = TranscriptDocument.objects.values_list("attempt__task__task_id", flat=True)
    assert set(indexed) == set(TRAJ_IDS)


def test_the_search_answers_from_the_full_text_index(corpus):
    from runs.search.query import _postgres, _sqlite

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            sql, params = _postgres(["astropy"])
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute(f"EXPLAIN SELECT count(*) {sql}", params)
            used = "runs_transcript_document_tsv"
        else:
            sql, params = _sqlite(["astropy"])
            cursor.execute(f"EXPLAIN QUERY PLAN SELECT count(*) {sql}", params)
            used = "VIRTUAL TABLE INDEX"
        plan = "\n".join(str(row) for row in cursor.fetchall())
    assert used in plan, plan


def test_a_deleted_run_leaves_no_hit(corpus):
    before = transcript_search(SearchQuery(text="astropy")).total
    theirs = transcript_search(SearchQuery(text="astropy", model="claude-y")).total
    gone = TranscriptDocument.objects.filter(attempt__run=corpus["other-model"].run).count()
    corpus["other-model"].run.delete()
    # The unfiltered count reads the full-text index alone: it must have forgotten them too.
    assert theirs and transcript_search(SearchQuery(text="astropy")).total == before - theirs
    rows = TranscriptDocument.objects.filter(attempt_id=corpus["other-model"].pk)
    assert gone and not rows.exists()
    hits = transcript_search(SearchQuery(text="astropy", page_size=200)).hits
    assert str(corpus["other-model"].public_id) not in {h.attempt for h in hits}
