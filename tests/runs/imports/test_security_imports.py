"""Imported run folders that attack the site, through gunicorn as they arrived (issue 28).

Each reproduction goes through ``POST /api/imports/run`` on a real WSGI server (one sync
worker, tests/support/gunicorn_fixtures.py): an ATIF trajectory whose ``total_cost_usd`` is 1e308 or
negative, an integer too large for the database, a deeply nested document, and a 39 KB zip
holding a 40 MB JSON array. Each is refused with a 400 naming the file and the field, leaves
nothing in the database (no model configuration, suite or run) and no unpacked upload, and the
worker's peak resident size (VmHWM) stays under 300 MB; a valid file near the limits imports
under the same bound. ``ab import-run`` refuses the same file with the same words.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from runs.integrity.services import rules_signature
from tests.support.ab_cli import ab
from tests.support.gunicorn_fixtures import Server, serve
from tests.support.swebench_fixtures import LITE_DEV, rows
from tests.tasks_app.uploads.test_upload_limits import LIMIT_MB, peak_rss_mb

# A refused import may grow the worker by at most the larger budget it is read under.
REQUEST_GROWTH_MB = 48
# What a worker holds once it imported a dataset grew this round (every language's parsers of
# the swebench package, the search, integrity and bundle modules): 250-290 MB resident after
# the near-the-limits import, against ~220 before; the absolute bound moves with it, and the
# growth bound above is what holds each refused request to its budget.
WORKER_GREW_MB = 60

INSTANCE = rows(LITE_DEV)[0]
TASK = INSTANCE["instance_id"]
FORM = {"suite": "lite-one", "model": "imported-agent"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    var = tmp_path_factory.mktemp("imports-server")
    with serve(var, ARTIFACTS_ROOT=str(var / "artifacts")) as running:
        yield running


def trajectory(**final_metrics: object) -> dict:
    """A valid ATIF trajectory of two steps; ``final_metrics`` as given."""
    return {
        "schema_version": "ATIF-v1.6",
        "session_id": "session-1",
        "agent": {"name": "claude-code", "version": "2.0.31", "model_name": "claude-sonnet-4-5"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "Fix the bug."},
            {
                "step_id": 2,
                "source": "agent",
                "message": "Fixed.",
                "metrics": {"prompt_tokens": 1000, "completion_tokens": 50, "cost_usd": 0.01},
            },
        ],
        "final_metrics": final_metrics,
    }


def run_zip(document: bytes | str, name: str = f"{TASK}.atif.json") -> bytes:
    """A run folder as a zip: the suite's one instance (instances.jsonl) and the trajectory."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("run/instances.jsonl", json.dumps(INSTANCE) + "\n")
        archive.writestr(f"run/{name}", document)
    return buffer.getvalue()


def post_run(server: Server, content: bytes, filename: str = "run.zip"):
    """The answer to the upload, with what the database held before it (``response.before``)."""
    before = stored(server)
    reset_peak_rss(server.worker_pid())
    resident = rss_mb(server.worker_pid())
    response = server.post("/api/imports/run", data=FORM, files={"file": (filename, content)})
    response.before, response.resident_before = before, resident
    return response


def reset_peak_rss(pid: int) -> None:
    """Start the worker's VmHWM again from its resident size now (Linux: clear_refs 5), so
    each import's figure is its own (what earlier imports left resident still counts)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def stored(server: Server) -> dict[str, int]:
    """What the server's database holds of imports."""
    with sqlite3.connect(server.uploads.parent / "db.sqlite3") as db:
        return {
            table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("runs_modelconfig", "tasks_app_suite", "runs_run", "runs_attempt")
        }


def assert_refused_and_gone(server: Server, response, *said: str) -> None:
    assert response.status_code == 400, response.text
    text = response.text
    for words in said:
        assert words in text, (words, text)
    assert stored(server) == response.before  # no model configuration, suite, run, attempt
    uploads = server.uploads / "runs"
    assert not uploads.exists() or not any(uploads.iterdir()), list(uploads.iterdir())
    peak = peak_rss_mb(server.worker_pid())
    grew = peak - response.resident_before
    resident = rss_mb(server.worker_pid())
    print(f"worker peak RSS {peak:.0f} MB (+{grew:.0f}), resident {resident:.0f} MB")
    # What the refused request itself took: at most the larger import budget
    # (IMPORT_JSON_MAX_MEMORY_MB, 48), whatever the worker held before it.
    assert grew < REQUEST_GROWTH_MB
    assert peak < LIMIT_MB + WORKER_GREW_MB


def test_a_cost_of_1e308_is_refused_naming_the_file_and_field(server: Server) -> None:
    document = json.dumps(trajectory(total_cost_usd=1e308, total_prompt_tokens=1000))
    assert "1e+308" in document
    response = post_run(server, run_zip(document))
    assert_refused_and_gone(
        server,
        response,
        f"run/{TASK}.atif.json",
        "field final_metrics.total_cost_usd",
        "1e+308 is not a cost in USD",
    )
    # The pages that answered 500 for everyone answer.
    for page in ("/api/attempts", "/admin/runs/attempt/", "/api/model-configs"):
        assert server.get(page).status_code == 200, page


def test_a_negative_cost_is_refused(server: Server) -> None:
    response = post_run(server, run_zip(json.dumps(trajectory(total_cost_usd=-5000))))
    assert_refused_and_gone(
        server, response, "field final_metrics.total_cost_usd", "-5,000 is not a cost in USD"
    )


def test_a_step_cost_out_of_range_names_the_step(server: Server) -> None:
    document = trajectory()
    document["steps"][1]["metrics"]["cost_usd"] = -0.5
    response = post_run(server, run_zip(json.dumps(document)))
    assert_refused_and_gone(server, response, "field steps[1].metrics.cost_usd", "-0.5")


@pytest.mark.parametrize(
    ("tokens", "said"),
    [
        # Past a 64-bit integer: refused by the parser, naming the file.
        (10**30, "integer overflow"),
        # Fits the database's column, but no attempt reads 10^18 tokens.
        (10**18, "field final_metrics.total_prompt_tokens"),
        (12.5, "final_metrics.total_prompt_tokens"),  # the ATIF check says it first
    ],
)
def test_an_oversized_or_fractional_token_count_is_refused_and_creates_nothing(
    server: Server, tokens: float, said: str
) -> None:
    document = json.dumps(trajectory(total_prompt_tokens=tokens, total_cost_usd=0.5))
    response = post_run(server, run_zip(document))
    assert_refused_and_gone(server, response, f"run/{TASK}.atif.json", said)


def test_a_deeply_nested_document_is_refused(server: Server) -> None:
    document = '{"schema_version": "ATIF-v1.7", "steps": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = post_run(server, run_zip(document))
    assert_refused_and_gone(
        server, response, f"run/{TASK}.atif.json", "nested deeper than 100 levels"
    )


def test_a_valid_file_near_the_limits_imports_in_bounded_memory(server: Server) -> None:
    """8 MB of message text of 4-byte characters (32 MB once built) and 20,000 steps: under
    the limits, imported, with the worker under 300 MB (the first dataset import also loads
    the swebench harness's modules: about 130 MB of the figure). Indexing the attempt for
    search reads its transcript back whole: a worker does it, not the web worker
    (runs.search.index.indexed_elsewhere; 305-370 MB here when it was done in the request)."""
    document = trajectory(total_prompt_tokens=2000, total_cost_usd=0.25)
    text = "x" * (1024 * 1024) + "\U0001f600"
    document["steps"] += [
        {"step_id": n, "source": "agent", "message": text if n < 11 else "m"}
        for n in range(3, 20_000)
    ]
    response = post_run(server, run_zip(json.dumps(document, ensure_ascii=False)))
    assert response.status_code == 200, response.text
    assert response.json()["added"] == 1
    peak = peak_rss_mb(server.worker_pid())
    print(f"worker peak RSS {peak:.0f} MB")
    assert peak < LIMIT_MB
    uploads = server.uploads / "runs"
    assert not any(uploads.iterdir())
    attempts = server.get("/api/attempts?suite=lite-one").json()["items"]
    assert [(a["task_id"], a["cost_usd"], a["tokens_in"]) for a in attempts] == [(TASK, 0.25, 2000)]
    # Its transcript is indexed for search by a process of its own, not by the web worker.
    for _ in range(120):
        found = server.get("/api/search?q=Fixed&suite=lite-one").json()
        if found.get("total"):
            break
        time.sleep(0.5)
    assert found["total"] >= 1, found
    # And that process checks it for integrity flags after (runs.services).
    detail = f"/api/attempts/{attempts[0]['public_id']}"
    for _ in range(120):
        checked = server.get(detail).json()
        if checked["integrity_rules"]:
            break
        time.sleep(0.5)
    assert checked["integrity_rules"] == rules_signature(), checked
    assert peak_rss_mb(server.worker_pid()) < LIMIT_MB


@pytest.mark.parametrize(
    ("megabytes", "said"),
    [
        (40, "larger than IMPORT_FILE_MAX_BYTES"),  # the issue's
        (15, "more than 200,000 JSON values"),  # under the file size: the values' count
    ],
)
def test_a_zip_of_a_large_array_is_refused_in_bounded_memory(
    server: Server, megabytes: int, said: str
) -> None:
    """The issue's bomb: ``{"schema_version":"ATIF-v1.7","steps":[0,0,...]}``, 40 MB in a
    39 KB zip; it took the worker past 10 GB and left its upload folder."""
    zeros = megabytes * 1024 * 1024 // 2
    document = '{"schema_version":"ATIF-v1.7","steps":[' + "0," * zeros + "0]}"
    content = run_zip(document, "trajectory.atif.json")
    assert len(content) < 100 * 1024 and len(document) > megabytes * 1024 * 1024
    response = post_run(server, content)
    assert_refused_and_gone(server, response, "run/trajectory.atif.json", said)


def test_a_file_whose_strings_would_fill_the_memory_is_refused(server: Server) -> None:
    """One emoji makes CPython store every character of a string in 4 bytes: 14 MB of text
    (under IMPORT_FILE_MAX_BYTES) would be 56 MB once read, over IMPORT_JSON_MAX_MEMORY_MB."""
    document = trajectory()
    document["steps"][1]["message"] = "x" * (14 * 1024 * 1024) + "\U0001f600"
    response = post_run(server, run_zip(json.dumps(document, ensure_ascii=False)))
    assert_refused_and_gone(
        server, response, "could take 56 MB in memory", "more than 48 MB (IMPORT_JSON_MAX"
    )


def test_a_folder_of_large_patches_is_refused_past_the_import_budget(server: Server) -> None:
    """Each patch.diff is under IMPORT_FILE_MAX_BYTES; all are kept until the write, so the
    folder's together are bounded (IMPORT_PATCHES_MAX_MB, 16 MB)."""
    buffer = io.BytesIO()
    patch = "+" + "x" * (12 * 1024 * 1024) + "\n"
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for n in range(3):
            archive.writestr(f"run/repo__repo-{n}/patch.diff", patch)
    response = post_run(server, buffer.getvalue())
    assert_refused_and_gone(
        server, response, "run/repo__repo-1/patch.diff", "pass IMPORT_PATCHES_MAX_MB (16 MB)"
    )


def test_an_upload_folder_a_killed_worker_left_is_removed_by_the_next_upload(
    server: Server,
) -> None:
    left = server.uploads / "runs" / "0123456789abcdef"
    (left / "run").mkdir(parents=True)
    (left / "run" / "trajectory.atif.json").write_bytes(b"0" * 1024)
    hours_ago = time.time() - 7 * 3600
    os.utime(left, (hours_ago, hours_ago))
    recent = server.uploads / "runs" / "fedcba9876543210"
    recent.mkdir()  # an import going on now in another worker: kept
    response = post_run(server, run_zip(json.dumps(trajectory(total_cost_usd=-1))))
    assert response.status_code == 400
    assert not left.exists() and recent.exists()
    recent.rmdir()


def test_a_large_results_upload_is_read_from_disk_not_memory(server: Server, tmp_path) -> None:
    """POST /api/imports/results read the whole upload into memory (up to 200 MB) before
    unpacking it; it is read from where Django spooled it."""
    archive = tmp_path / "results.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as out:
        for part in range(2):  # two members of 60 MB: each under the member cap
            with out.open(f"results/notes-{part}.txt", "w") as member:
                for _ in range(60):
                    member.write(bytes(1024 * 1024))
    pid = server.worker_pid()
    before = rss_mb(pid)
    reset_peak_rss(pid)
    with archive.open("rb") as handle:
        response = server.post(
            "/api/imports/results", data=FORM, files={"file": ("results.zip", handle)}
        )
    assert response.status_code == 400 and "nothing to import" in response.text, response.text
    grown = peak_rss_mb(pid) - before
    print(f"worker grew {grown:.0f} MB for a 120 MB upload")
    assert grown < 60


def test_ab_import_run_refuses_the_file_naming_the_field(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "instances.jsonl").write_text(json.dumps(INSTANCE) + "\n")
    (folder / f"{TASK}.atif.json").write_text(json.dumps(trajectory(total_cost_usd=1e308)))
    done = ab("import-run", str(folder), "--suite", "s", "--model", "m", var_dir=tmp_path / "var")
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert f"{TASK}.atif.json" in said and "final_metrics.total_cost_usd" in said, said
    assert "is not a cost in USD" in said and "Traceback" not in said


@pytest.mark.django_db
def test_the_admin_upload_lists_the_refusal_and_stores_nothing(client, alice, settings, tmp_path):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from runs.models import ModelConfig, Run
    from tasks_app.models import Suite

    settings.API_UPLOADS_ROOT = tmp_path / "uploads"
    client.force_login(alice)
    document = json.dumps(trajectory(total_cost_usd=1e308))
    response = client.post(
        "/admin/swebench/run/",
        {"file": SimpleUploadedFile("run.zip", run_zip(document)), **FORM},
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert f"run/{TASK}.atif.json, field final_metrics.total_cost_usd" in body
    assert "1e+308 is not a cost in USD" in body
    assert not (ModelConfig.objects.exists() or Run.objects.exists() or Suite.objects.exists())
    assert not any((tmp_path / "uploads" / "runs").iterdir())


@pytest.mark.django_db
def test_a_write_that_fails_leaves_no_model_configuration_or_artifacts(
    monkeypatch, settings, tmp_path
):
    """The issue's oversized integer failed the insert after the model configuration was
    created; whatever fails in the write now takes the configuration and the copied files
    with it (one transaction)."""
    from runs.imports import run_import
    from runs.models import Attempt, ModelConfig, Run
    from tasks_app.models import Suite, Task

    artifacts = tmp_path / "artifacts"
    settings.ARTIFACTS_ROOT = artifacts
    settings.STORAGES = settings.STORAGES | {
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(artifacts)},
        }
    }
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "instances.jsonl").write_text(json.dumps(INSTANCE) + "\n")
    (folder / f"{TASK}.atif.json").write_text(json.dumps(trajectory(total_cost_usd=0.5)))

    def failing_insert(rows):
        raise OverflowError("Python int too large to convert to SQLite INTEGER")

    monkeypatch.setattr(run_import, "insert_rows", failing_insert)
    with pytest.raises(OverflowError):
        run_import.run_folder_import(path=folder, suite_name="lite-one", model_name="ext")
    assert not (ModelConfig.objects.exists() or Run.objects.exists() or Attempt.objects.exists())
    assert not (Suite.objects.exists() or Task.objects.exists())  # the folder's dataset's
    assert [p for p in artifacts.rglob("*") if p.is_file()] == []
