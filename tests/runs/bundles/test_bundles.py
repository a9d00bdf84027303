"""A run you can take elsewhere: a run exported as a bundle (``ab export-run``) and imported
into an empty database (``ab import-run``) shows the same leaderboard row, compare answer and
per-task outcomes; a bundle holds no key or token; a changed, oversized or secret-holding
bundle is refused, naming the file, with nothing stored."""

from __future__ import annotations

import io
import json
import tarfile
from decimal import Decimal

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages

from benchsite.accounts.models import Action, AuditEvent
from runs.bundles.manifest import manifest_bytes
from runs.models import AgentVariant, Attempt, AttemptStage, ModelConfig, Run
from tasks_app.models import GoldValidation, GoldValidationStatus, Suite, Task
from tests.support.ab_cli import ab_main
from tests.support.pages_fixtures import make_attempt, make_run, make_suite, write_artifact

pytestmark = pytest.mark.django_db

KEY_ENV = "BUNDLE_TEST_UPSTREAM_KEY"
REAL_KEY = "sk-bundle-test-REALKEY-0123456789abcdef"
TOKEN = "abgw-Zq3xY1_bundleTokenValue0123456789abcdEFGH"
F, I = "TESTS_FAILED", "SANDBOX_ERROR"  # noqa: E741
IDS = [f"org__repo-{100 + i}" for i in range(5)]


def model_calls() -> bytes:
    """A gateway record with the key and the token where a leaky upstream or agent puts them."""
    lines = [
        {
            "request": {
                "headers": {"authorization": f"Bearer {TOKEN}", "x-api-key": REAL_KEY},
                "body": {"model": "m", "messages": [{"role": "user", "content": "fix it"}]},
            },
            "response": {"status": 200, "headers": {"x-echo": REAL_KEY}, "body": "ok"},
        }
    ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


@pytest.fixture
def two_runs(artifacts_root, monkeypatch, settings):
    """Two configurations on one suite (k = 2 and k = 1), with infrastructure failures, a
    missing instance, an invalid task, usage, stages and files holding planted secrets."""
    monkeypatch.setenv(KEY_ENV, REAL_KEY)
    suite = make_suite("bundle-suite", tasks=5)
    tasks = list(Task.objects.for_suite(suite).order_by("task_id"))
    for task, instance_id in zip(tasks, IDS, strict=True):  # SWE-bench shaped, for its layout
        task.task_id = instance_id
        task.save(update_fields=["task_id"])
    GoldValidation.objects.create(
        task=tasks[4], backend="docker", status=GoldValidationStatus.INVALID
    )
    llm = ModelConfig.objects.create(
        name="bundle-llm",
        agent_variant=AgentVariant.LLM,
        model_name="gpt-x",
        temperature=0.2,
        seed=7,
        extra_params={"reasoning": "low"},
    )
    other = ModelConfig.objects.create(name="bundle-oracle", agent_variant=AgentVariant.ORACLE)
    first = make_run(suite, llm, samples=2)
    plan = [[None, F], [F, F], [I, None], [None, None], [F, None]]
    for task, reasons in zip(tasks, plan, strict=True):
        for k, reason in enumerate(reasons):
            attempt = make_attempt(
                first,
                task,
                reason,
                sample=k,
                cost_usd=Decimal("0.123456"),
                steps=3 + k,
                final_patch=f"diff --git a/{task.task_id} b/{task.task_id}\n",
                test_results={"FAIL_TO_PASS": {"success": ["t1"], "failure": []}},
                grade="FULL" if reason is None else "NO",
            )
            write_artifact(attempt, "patch.diff", attempt.final_patch.encode())
            write_artifact(attempt, "logs/final_test.txt", b"collected 1 item\nPASSED t1\n")
            write_artifact(attempt, "model_calls.jsonl", model_calls())
            write_artifact(attempt, "logs/agent.txt", f"env: {KEY_ENV}={REAL_KEY}\n".encode())
            AttemptStage.objects.create(
                attempt=attempt,
                name="final_test",
                order=5,
                exit_code=0,
                output_path="logs/final_test.txt",
                duration_sec=1.5,
            )
    second = make_run(suite, other)
    for task, reason in zip(tasks[:4], [None, None, F, I], strict=True):
        make_attempt(second, task, reason)
    make_attempt(second, tasks[4], None, missing=True)
    return suite, first, second


def board(client, suite: str) -> dict:
    response = client.get("/api/leaderboard", {"suite": suite})
    assert response.status_code == 200, response.content
    return response.json()


def comparison(client, suite: str) -> dict:
    response = client.get("/api/compare", {"suite": suite, "models": "bundle-llm,bundle-oracle"})
    assert response.status_code == 200, response.content
    return response.json()


def per_task() -> list[tuple]:
    return sorted(
        Attempt.objects.values_list(
            "public_id",
            "run__public_id",
            "task__task_id",
            "sample_index",
            "status",
            "failure_reason_id",
            "is_infra",
            "grade",
            "test_results",
            "final_patch",
            "cost_usd",
            "tokens_in",
            "tokens_out",
            "steps",
            "duration_sec",
            "finished_at",
        ),
        key=str,
    )


def members(path) -> dict[str, bytes]:
    with tarfile.open(path) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive if m.isfile()}


def empty_the_database() -> None:
    Run.objects.all().delete()
    ModelConfig.objects.all().delete()
    Suite.objects.all().delete()
    assert not Task.objects.exists() and not Attempt.objects.exists()


def test_it_reproduces_the_leaderboard_row_compare_and_outcomes_in_an_empty_database(
    two_runs, client, tmp_path, settings
):
    suite, first, second = two_runs
    before = (board(client, suite.name), comparison(client, suite.name), per_task())
    assert before[0]["rows"] and before[1]["pairs"]
    bundles = []
    for run in (first, second):
        path = tmp_path / f"{run.public_id}.tar.gz"
        done = ab_main("export-run", str(run.public_id), "--out", str(path))
        assert done.returncode == 0, done.stderr
        bundles.append(path)

    empty_the_database()
    settings.ARTIFACTS_ROOT = tmp_path / "elsewhere"  # files come from the bundle alone
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "elsewhere")},
        },
    }
    for path in bundles:
        done = ab_main("import-run", str(path))
        assert done.returncode == 0, done.stderr
        assert "environment  repository https://example.org/repo" in done.stdout

    after = (board(client, suite.name), comparison(client, suite.name), per_task())
    assert after[0] == before[0]
    assert after[1] == before[1]
    assert after[2] == before[2]
    attempt = Attempt.objects.get(
        run__public_id=first.public_id, task__task_id=IDS[0], sample_index=0
    )
    stored = storages["artifacts"].open(f"{attempt.artifacts_dir}/patch.diff").read()
    assert stored == attempt.final_patch.encode()
    assert attempt.stages.get().duration_sec == 1.5
    assert AuditEvent.objects.filter(action=Action.RUN_IMPORT).count() == 2
    # A second import of the same bundle is refused, naming the run.
    again = ab_main("import-run", str(bundles[0]))
    assert again.returncode != 0 and f"run {first.public_id} is already" in again.stderr


# A key of no recognisable shape, in a variable of no secret-like name: only its configuration
# naming the variable (api_key_env) tells the export to look for its value.
PLAIN_ENV, PLAIN_KEY = "BUNDLE_UPSTREAM_CRED", "plain-credential-Q7w9e2r4t6"


def test_a_bundle_holds_the_configuration_agent_environments_and_no_secret(
    two_runs, tmp_path, monkeypatch, settings
):
    _, first, _ = two_runs
    settings.GATEWAY_API_KEY_ENVS = [PLAIN_ENV]
    monkeypatch.setenv(PLAIN_ENV, PLAIN_KEY)
    config = first.model_config
    config.api_key_env = PLAIN_ENV
    config.extra_params = {"reasoning": "low", "extra_headers": {"x-api-key": REAL_KEY}}
    config.save()
    Run.objects.filter(pk=first.pk).update(
        config_snapshot={"env": {PLAIN_ENV: PLAIN_KEY}, "headers": {"Authorization": TOKEN}}
    )
    attempt = Attempt.objects.filter(run=first).first()
    write_artifact(attempt, "logs/setup.txt", f"upstream said: {PLAIN_KEY}\n".encode())
    path = tmp_path / "b.tar.gz"
    assert ab_main("export-run", str(first.public_id)[:8], "--out", str(path)).returncode == 0

    files = members(path)
    for name, data in files.items():  # every file, every byte
        for secret in (REAL_KEY, TOKEN, PLAIN_KEY, "abgw-Zq3", "REALKEY"):
            assert secret.encode() not in data, (name, secret)
    head = json.loads(files["run.json"])
    assert head["model_config"]["name"] == "bundle-llm"
    assert head["model_config"]["api_key_env"] == PLAIN_ENV  # the variable's name, not its value
    assert head["sampling"] == {
        "temperature": 0.2,
        "seed": 7,
        "reasoning": "low",
        "extra_headers": {"x-api-key": "[redacted]"},
    }
    assert head["run"]["config_snapshot"]["env"] == {PLAIN_ENV: "[redacted]"}
    assert head["agent"]["variant"] == "llm" and head["agent"]["prompt_version"]
    assert len(json.loads(files["environments.json"])) == 5
    manifest = json.loads(files["manifest.json"])
    assert set(manifest["files"]) == set(files) - {"manifest.json"}
    calls = [n for n in files if n.endswith("/model_calls.jsonl")]
    assert len(calls) == 10 and b"[redacted]" in files[calls[0]]


def rewrite(path, changes: dict[str, bytes], *, fix_manifest: bool) -> None:
    files = members(path)
    manifest = json.loads(files.pop("manifest.json"))
    files.update(changes)
    meta = {k: v for k, v in manifest.items() if k not in ("files", "format", "version")}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        head = manifest_bytes(files, meta) if fix_manifest else json.dumps(manifest).encode()
        for name, data in [("manifest.json", head), *files.items()]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    path.write_bytes(out.getvalue())


@pytest.fixture
def exported(two_runs, tmp_path):
    _, first, _ = two_runs
    path = tmp_path / "b.tar.gz"
    assert ab_main("export-run", str(first.public_id), "--out", str(path)).returncode == 0
    empty_the_database()
    return path


def test_it_refuses_a_changed_bundle_naming_the_file(exported):
    name = next(n for n in members(exported) if n.endswith("/patch.diff"))
    rewrite(exported, {name: b"diff --git a/evil b/evil\n"}, fix_manifest=False)

    done = ab_main("import-run", str(exported))

    assert done.returncode != 0
    assert f"{name}: checksum differs" in done.stderr
    assert not Run.objects.exists() and not Suite.objects.exists()


def test_it_refuses_a_bundle_holding_a_token(exported):
    rewrite(
        exported,
        {"attempts.jsonl": members(exported)["attempts.jsonl"] + f'{{"x": "{TOKEN}"}}\n'.encode()},
        fix_manifest=True,
    )

    done = ab_main("import-run", str(exported))

    assert done.returncode != 0 and "attempts.jsonl: holds a key or token" in done.stderr
    assert not Run.objects.exists()


def test_it_refuses_a_bundle_over_the_upload_caps(exported, settings):
    settings.API_ARCHIVE_MEMBER_MAX_BYTES = 200

    done = ab_main("import-run", str(exported))

    assert done.returncode != 0 and "API_ARCHIVE_MEMBER_MAX_BYTES" in done.stderr
    assert not Run.objects.exists()


def test_the_api_exports_for_readers_and_imports_with_the_import_right(
    two_runs, client, auth, staff_auth, tmp_path
):
    _, first, _ = two_runs
    url = f"/api/runs/{first.public_id}/export"
    assert client.get(url).status_code in (401, 403)
    response = client.get(url, **auth)
    assert response.status_code == 200
    data = b"".join(response.streaming_content)
    assert client.get(url, {"format": "swebench"}, **auth).status_code == 200
    empty_the_database()
    upload = ContentFile(data, name="run.tar.gz")
    refused = client.post("/api/imports/bundle", {"file": upload}, **auth)
    assert refused.status_code == 403
    upload = ContentFile(data, name="run.tar.gz")
    done = client.post("/api/imports/bundle", {"file": upload}, **staff_auth)
    assert done.status_code == 200, done.content
    assert done.json()["run"] == str(first.public_id) and done.json()["attempts"] == 10


def test_the_run_page_offers_the_exports_to_readers_only(two_runs, client, bob):
    _, first, _ = two_runs
    page = f"/runs/{first.public_id}/"
    assert 'id="run-export"' not in client.get(page).content.decode()
    client.force_login(bob)
    shown = client.get(page).content.decode()
    assert f'href="/api/runs/{first.public_id}/export"' in shown
    assert "format=swebench" in shown  # make_suite's suites are SWE-bench suites
    # The link works with the page's session, as the reader's browser follows it.
    download = client.get(f"/api/runs/{first.public_id}/export")
    assert download.status_code == 200 and download["Content-Type"] == "application/gzip"


def test_it_refuses_to_export_a_run_still_running(two_runs, tmp_path):
    _, first, _ = two_runs
    Attempt.objects.filter(run=first, task__task_id=IDS[1]).update(status="running")

    done = ab_main("export-run", str(first.public_id), "--out", str(tmp_path / "b.tar.gz"))

    assert done.returncode != 0
    assert "has 2 attempt(s) queued or running: export it once they end" in done.stderr
    assert not (tmp_path / "b.tar.gz").exists()


def test_it_refuses_an_export_over_the_import_caps_naming_the_file(two_runs, tmp_path, settings):
    _, first, _ = two_runs
    settings.API_ARCHIVE_MEMBER_MAX_BYTES = 300

    done = ab_main("export-run", str(first.public_id), "--out", str(tmp_path / "b.tar.gz"))

    assert done.returncode != 0 and "over API_ARCHIVE_MEMBER_MAX_BYTES" in done.stderr
    assert not list(tmp_path.glob("*b.tar.gz*"))


def test_the_swebench_layout_reads_back_through_the_run_folder_import(two_runs, tmp_path):
    suite, first, _ = two_runs
    out = tmp_path / "20261127_bundle-llm"
    done = ab_main("export-run", str(first.public_id), "--format", "swebench", "--out", str(out))
    assert done.returncode == 0, done.stderr

    preds = (out / "all_preds.jsonl").read_text().splitlines()
    assert len(preds) == 5  # sample 0 of each task
    assert not (out / "logs" / IDS[2] / "report.json").exists()  # infrastructure: no report
    for path in out.rglob("*"):
        if path.is_file():
            assert REAL_KEY.encode() not in path.read_bytes(), path
    back = ab_main("import-run", str(out), "--suite", suite.name, "--model", "reimported")
    assert back.returncode == 0, back.stdout + back.stderr
    ours = {
        a.task.task_id: a.resolved
        for a in Attempt.objects.filter(run=first, sample_index=0).exclude(task__task_id=IDS[2])
    }
    theirs = {
        a.task.task_id: a.resolved
        for a in Attempt.objects.filter(model_config__name="reimported").exclude(
            task__task_id=IDS[2]
        )
    }
    assert theirs == ours and sum(ours.values()) == 2


def test_a_configuration_name_taken_with_other_settings_is_refused_or_renamed(exported):
    ModelConfig.objects.create(name="bundle-llm", agent_variant=AgentVariant.SCRIPTED)

    refused = ab_main("import-run", str(exported))
    renamed = ab_main("import-run", str(exported), "--model", "bundle-llm-there")

    assert refused.returncode != 0
    assert "'bundle-llm' exists here with other settings (agent_variant" in refused.stderr
    assert renamed.returncode == 0, renamed.stderr
    run = Run.objects.get()
    assert run.model_config.name == "bundle-llm-there" and run.model_config.temperature == 0.2


def test_it_refuses_a_malformed_record_naming_its_line(exported, settings):
    lines = members(exported)["attempts.jsonl"].splitlines(keepends=True)
    broken = json.loads(lines[1])
    broken["public_id"] = "not-a-uuid"
    lines[1] = json.dumps(broken).encode() + b"\n"
    rewrite(exported, {"attempts.jsonl": b"".join(lines)}, fix_manifest=True)

    done = ab_main("import-run", str(exported))

    assert done.returncode != 0 and "attempts.jsonl line 2: malformed record" in done.stderr
    assert not Run.objects.exists() and not Suite.objects.exists()
    # The first attempt's files were written before the second failed: removed again.
    left = [p for p in (settings.ARTIFACTS_ROOT / "bundles").rglob("*") if p.is_file()]
    assert left == []
