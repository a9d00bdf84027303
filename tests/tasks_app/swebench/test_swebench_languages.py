"""Every language the official swebench package grades (SWE-bench Multilingual's nine and the
JavaScript ones): import, eval script and grading, each against the package itself.

The logs are real output of each language's real test runner (``tests/data/
swebench_languages/README.md`` says how each was made); Go, PHP and Ruby are cheap enough to
run live too, and must still print what was recorded.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from swebench.harness import grading as official
from swebench.harness.constants import FAIL_ONLY_REPOS, MAP_REPO_TO_EXT, MAP_REPO_VERSION_TO_SPECS
from swebench.harness.log_parsers import MAP_REPO_TO_PARSER
from swebench.harness.test_spec.test_spec import make_test_spec

from tasks_app.swebench.dataset import Record
from tasks_app.swebench.errors import SwebenchInputError
from tasks_app.swebench.eval_script import eval_script, patch_apply_failed
from tasks_app.swebench.fields import check_instance, check_instances
from tasks_app.swebench.grading import grade_attempt_output
from tasks_app.swebench.languages import LANGUAGE_NAMES, language_of
from tasks_app.swebench.parsers import parse_test_output, parser_for
from tests.conftest import REPO_ROOT

DATA = REPO_ROOT / "tests" / "data" / "swebench_languages"
LOGS = DATA / "logs"
PROJECTS = DATA / "projects"
BASE = "0123456789abcdef0123456789abcdef01234567"
TEST_PATCH = (
    "diff --git a/tests/new_test.txt b/tests/new_test.txt\n"
    "new file mode 100644\n"
    "index 0000000..e69de29\n"
    "--- /dev/null\n"
    "+++ b/tests/new_test.txt\n"
    "@@ -0,0 +1 @@\n"
    "+x\n"
)


def row(repo: str, version: str, **changes: str) -> dict:
    """A SWE-bench Multilingual row (every value a string, as in the published dataset)."""
    owner, name = repo.split("/")
    return {
        "instance_id": f"{owner}__{name}-{version.replace('.', '')}",
        "repo": repo,
        "base_commit": BASE,
        "patch": "diff --git a/src/x b/src/x\n",
        "test_patch": TEST_PATCH,
        "problem_statement": "it is broken",
        "hints_text": "",
        "created_at": "2024-01-01T00:00:00Z",
        "version": version,
        "environment_setup_commit": BASE,
        "FAIL_TO_PASS": "[]",
        "PASS_TO_PASS": "[]",
        **changes,
    }


def first_version(repo: str) -> str:
    """Its first version with a test command (dbt-core lists none: its first)."""
    versions = MAP_REPO_VERSION_TO_SPECS[repo]
    return next((v for v, s in versions.items() if s.get("test_cmd")), next(iter(versions)))


# --- Import -----------------------------------------------------------------------------------


def test_every_repository_the_package_knows_imports_in_its_language():
    repos = sorted(MAP_REPO_TO_EXT)
    rows = [row(repo, first_version(repo)) for repo in repos]
    instances, problems = check_instances([Record(f"line {i}", r) for i, r in enumerate(rows)])

    assert problems == []
    assert len(instances) == len(rows) >= 60
    assert {language_of(r["repo"]) for r in rows} == set(LANGUAGE_NAMES)
    for instance in instances:
        fields = instance.task_fields()
        if language_of(instance.repo) != "py":
            # The specification's own test commands; no Python environment label or Pythons.
            test_cmd = MAP_REPO_VERSION_TO_SPECS[instance.repo][instance.row["version"]]
            commands = test_cmd["test_cmd"]
            assert fields["test_command"].split("; ")[0] == (
                commands if isinstance(commands, str) else commands[0]
            )
            assert not {"env-exact", "env-approximate"} & set(fields["labels"])
            assert instance.pythons() == ("", "")


def refused(data: dict) -> list[tuple[str, str]]:
    instance, problems = check_instance(Record("line 1", data))
    assert instance is None
    return [(p.field, str(p)) for p in problems]


def test_a_repository_the_package_does_not_know_is_refused_by_name():
    problems = refused(row("someone/unknown-lang", "1.0"))

    assert [field for field, _ in problems] == ["repo"]
    assert "does not know repository 'someone/unknown-lang'" in problems[0][1]
    assert problems[0][1].startswith("line 1, field repo: ")


def test_a_custom_dataset_naming_its_own_image_still_imports_as_python():
    instance, problems = check_instance(
        Record("line 1", row("someone/custom", "1.0", image_name="mirror/custom:1"))
    )

    assert problems == [] and instance is not None
    assert language_of(instance.repo) == "py"
    assert instance.task_fields()["docker_image"] == "mirror/custom:1"


def test_a_version_the_specification_does_not_list_is_refused_for_another_language():
    problems = refused(row("tokio-rs/tokio", "0.0.1"))

    assert [field for field, _ in problems] == ["version"]
    assert "tokio-rs/tokio (Rust) has no version '0.0.1'" in problems[0][1]


def test_an_instance_its_parser_cannot_read_is_refused_at_import():
    # jekyll's parser picks a runner by pull request; it raises for any other.
    problems = refused(row("jekyll/jekyll", "9141", instance_id="jekyll__jekyll-1"))

    assert [field for field, _ in problems] == ["instance_id"]
    assert "Unknown instance id: jekyll__jekyll-1" in problems[0][1]


@pytest.mark.django_db
def test_a_multilingual_file_imports_and_a_bad_row_stores_nothing(tmp_path):
    from tasks_app.models import Task
    from tasks_app.swebench.importer import swebench_import

    good = [row(repo, first_version(repo)) for repo in ("gin-gonic/gin", "sharkdp/bat")]
    path = tmp_path / "multilingual.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in good))

    report = swebench_import(source=path, suite_name="multi-langs")

    assert sorted(report.created) == sorted(r["instance_id"] for r in good)
    gin = Task.objects.get(task_id="gin-gonic__gin-4003")
    assert gin.test_command == 'go test . -v -run "TestMethodNotAllowedNoRoute"'

    path.write_text(json.dumps(row("nobody/nothing", "1")) + "\n")
    with pytest.raises(SwebenchInputError) as caught:
        swebench_import(source=path, suite_name="multi-langs-bad")
    assert [p.field for p in caught.value.problems] == ["repo"]
    assert not Task.objects.filter(suite__name="multi-langs-bad").exists()


# --- Eval scripts -----------------------------------------------------------------------------


def one_repo_per_language() -> list[str]:
    firsts: dict[str, str] = {}
    for repo, ext in sorted(MAP_REPO_TO_EXT.items()):
        if ext != "py":
            firsts.setdefault(ext, repo)
    return sorted(firsts.values())


@pytest.mark.parametrize("repo", one_repo_per_language())
def test_another_languages_eval_script_is_the_packages_own(repo):
    data = row(repo, first_version(repo))

    ours = eval_script(
        repo=repo,
        version=data["version"],
        base_commit=BASE,
        test_patch=TEST_PATCH,
        instance_id=data["instance_id"],
    )

    assert ours == make_test_spec(data).eval_script
    assert "conda activate" not in ours and "/opt/venv" not in ours


def test_every_other_repositorys_eval_script_is_the_packages_own():
    repos = [r for r, ext in MAP_REPO_TO_EXT.items() if ext != "py"]
    for repo in repos:
        data = row(repo, first_version(repo))
        ours = eval_script(
            repo=repo,
            version=data["version"],
            base_commit=BASE,
            test_patch=TEST_PATCH,
            instance_id=data["instance_id"],
        )
        assert ours == make_test_spec(data).eval_script, repo
    assert len(repos) >= 40


def test_a_rejected_test_patch_is_named_in_another_languages_output():
    output = (
        "+ git apply --verbose --reject - <<'EOF_114329324912'\n"
        "Checking patch tests/a.go...\nerror: while searching for:\nfoo\n"
        "error: patch failed: tests/a.go:3\n+ : '>>>>> Start Test Output'\n"
    )

    assert patch_apply_failed(output)
    assert not patch_apply_failed(output.replace("error:", "note:"))


# --- Grading ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    repo: str
    version: str
    log: str
    parser: str
    good: str
    bad: str
    instance_id: str = ""


CASES = [
    Case("gin-gonic/gin", "4003", "go", "parse_log_gotest", "TestAddGood", "TestAddBad"),
    Case("tokio-rs/tokio", "6724", "rust", "parse_log_cargo", "tests::add_good", "tests::add_bad"),
    Case(
        "briannesbitt/carbon",
        "3103",
        "php",
        "parse_log_phpunit",
        "None > Add good",
        "None > Add bad",
    ),
    Case(
        "faker-ruby/faker",
        "2970",
        "ruby_test_unit",
        "parse_log_ruby_unit",
        "test_add_good",
        "test_add_bad",
    ),
    Case(
        "jekyll/jekyll",
        "9141",
        "ruby_minitest",
        "parse_log_jekyll",
        "TestAdd#test_: add should be good",
        "TestAdd#test_: add should be bad",
        instance_id="jekyll__jekyll-9141",
    ),
    Case(
        "google/gson",
        "2158",
        "java",
        "parse_log_maven",
        "org.example.AddTest#testAddGood",
        "org.example.AddTest#testAddBad",
    ),
    Case("fmtlib/fmt", "3863", "c", "parse_log_googletest", "AddTest.Good", "AddTest.Bad"),
    Case("babel/babel", "14532", "js", "parse_log_jest", "adds good", "adds bad"),
    Case(
        "immutable-js/immutable-js",
        "2006",
        "js",
        "parse_log_immutable_js",
        "adds good",
        "adds bad",
        instance_id="immutable-js__immutable-js-2006",
    ),
    Case(
        "vuejs/core",
        "11899",
        "vitest",
        "parse_log_vitest",
        "add.test.js > add > adds good",
        "add.test.js > add > adds bad",
    ),
]
# (FAIL_TO_PASS, PASS_TO_PASS) by good and bad test, and the grade each must give.
LISTS = [
    (["good"], [], "FULL"),
    (["good", "bad"], [], "PARTIAL"),
    (["bad"], [], "NO"),
    (["good"], ["bad"], "NO"),
]


def test_the_cases_cover_every_language():
    assert {MAP_REPO_TO_EXT[case.repo] for case in CASES} == set(LANGUAGE_NAMES) - {"py"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.repo)
def test_each_language_is_graded_by_its_own_parser_as_the_package_grades(case, tmp_path):
    log = (LOGS / f"{case.log}.log").read_text()
    instance_id = case.instance_id or row(case.repo, case.version)["instance_id"]
    assert parser_for(case.repo) is MAP_REPO_TO_PARSER[case.repo]
    assert parser_for(case.repo).__name__ == case.parser
    statuses = parse_test_output(log, case.repo, instance_id=instance_id, version=case.version)
    assert statuses is not None
    assert (statuses[case.good], statuses[case.bad]) == ("PASSED", "FAILED")

    log_path = tmp_path / "test_output.txt"
    log_path.write_text(log)
    names = {"good": case.good, "bad": case.bad}
    for f2p, p2p, expected in LISTS:
        data = row(
            case.repo,
            case.version,
            instance_id=instance_id,
            FAIL_TO_PASS=json.dumps([names[n] for n in f2p]),
            PASS_TO_PASS=json.dumps([names[n] for n in p2p]),
        )
        spec = make_test_spec(data)
        prediction = {"instance_id": instance_id, "model_patch": "x", "model_name_or_path": "m"}
        report = official.get_eval_report(spec, prediction, str(log_path), True)[instance_id]
        theirs = official.get_resolution_status(report["tests_status"]).removeprefix("RESOLVED_")

        ours = grade_attempt_output(
            log,
            fail_to_pass=spec.FAIL_TO_PASS,
            pass_to_pass=spec.PASS_TO_PASS,
            repo=case.repo,
            instance_id=instance_id,
            version=case.version,
        )

        assert (ours.grade, theirs) == (expected, expected), (f2p, p2p)
        assert ours.resolved is report["resolved"] is (expected == "FULL")
        for name in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            assert ours.test_results[name] == report["tests_status"][name]


def test_a_fail_only_repository_is_graded_as_the_package_grades_it(tmp_path):
    repo = sorted(FAIL_ONLY_REPOS)[0]
    version = first_version(repo)
    log = "+ : '>>>>> Start Test Output'\n1) broken thing\n+ : '>>>>> End Test Output'\n"
    path = tmp_path / "test_output.txt"
    path.write_text(log)
    repo_parser = parser_for(repo)
    statuses = parse_test_output(log, repo)
    assert repo_parser is MAP_REPO_TO_PARSER[repo]
    if repo == "markedjs/marked":
        assert statuses == {"broken thing": "FAILED"}

    for f2p, p2p in ((["never printed"], []), (["broken thing"], []), (["a", "b"], ["c"])):
        data = row(repo, version, FAIL_TO_PASS=json.dumps(f2p), PASS_TO_PASS=json.dumps(p2p))
        spec = make_test_spec(data)
        prediction = {"instance_id": spec.instance_id, "model_patch": "x"}
        report = official.get_eval_report(spec, prediction, str(path), True)[spec.instance_id]

        ours = grade_attempt_output(log, fail_to_pass=f2p, pass_to_pass=p2p, repo=repo)

        assert ours.grade == official.get_resolution_status(report["tests_status"]).removeprefix(
            "RESOLVED_"
        )
        assert ours.resolved is report["resolved"]
    # Without a test section nothing was applied: unresolved, as the package reports it.
    cut = grade_attempt_output("no markers", fail_to_pass=["x"], pass_to_pass=[], repo=repo)
    assert cut.grade == "NO"


# --- The cheap runners, live ------------------------------------------------------------------

MARKED = "set -uxo pipefail; : '>>>>> Start Test Output'; {}; : '>>>>> End Test Output'"
LIVE = [
    ("gin-gonic/gin", "go", "go", "go test . -v -run 'TestAdd'"),
    ("briannesbitt/carbon", "php", "php", "phpunit --testdox --colors=never tests/AddTest.php"),
    ("faker-ruby/faker", "ruby", "ruby_test_unit", "ruby test_unit_add.rb -v"),
    ("jekyll/jekyll", "ruby", "ruby_minitest", "ruby -I . minitest_add.rb -v --seed 1"),
]


@pytest.mark.parametrize("repo, project, log, command", LIVE, ids=lambda v: str(v))
def test_the_cheap_runners_still_print_what_was_recorded(repo, project, log, command, tmp_path):
    work = tmp_path / project
    shutil.copytree(PROJECTS / project, work)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "GOFLAGS": "-mod=mod",
        # Go's build cache is safe to share between processes: warm after the first run.
        "GOCACHE": str(Path(tempfile.gettempdir()) / "agentbench-test-gocache"),
        "GOPATH": str(tmp_path / "gopath"),
        "GOTOOLCHAIN": "local",
    }
    ran = subprocess.run(
        ["bash", "-c", MARKED.format(command)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    live = ran.stdout + ran.stderr
    instance_id = "jekyll__jekyll-9141"

    recorded = parse_test_output((LOGS / f"{log}.log").read_text(), repo, instance_id=instance_id)
    assert recorded and "FAILED" in recorded.values() and "PASSED" in recorded.values()
    assert parse_test_output(live, repo, instance_id=instance_id) == recorded


# --- Through the pipeline ---------------------------------------------------------------------


def test_the_pipeline_runs_and_grades_a_jekyll_instance_the_packages_way():
    from runs.pipeline import swebench
    from runs.pipeline.plan import TaskPlan
    from runs.pipeline.stages import CommandRun, StageResult
    from runs.taxonomy import Stage

    case = next(c for c in CASES if c.repo == "jekyll/jekyll")
    plan = TaskPlan(
        task_id=case.instance_id,
        repo_url="https://github.com/jekyll/jekyll",
        commit=BASE,
        image="",
        workdir="/testbed",
        workspace_path="/testbed",
        test_command="",
        timeout_sec=60,
        is_swebench=True,
        fail_to_pass=(case.good,),
        pass_to_pass=(case.bad,),
        swebench_repo=case.repo,
        swebench_version=case.version,
        test_patch=TEST_PATCH,
    )
    data = row(case.repo, case.version, instance_id=case.instance_id)
    assert swebench.eval_script_for(plan) == make_test_spec(data).eval_script

    final = StageResult("final_test", Stage.FINAL_TEST)
    log = (LOGS / f"{case.log}.log").read_text()
    final.runs.append(CommandRun("bash eval.sh", 0, log, "", 1.0))
    grading = swebench.grade(final, plan, agent_patch="x")

    # The passing test is fixed, the failing one was kept passing: NO, as the package says.
    assert grading.test_results["FAIL_TO_PASS"] == {"success": [case.good], "failure": []}
    assert grading.test_results["PASS_TO_PASS"] == {"success": [], "failure": [case.bad]}
    assert (grading.grade, grading.resolved) == ("NO", False)
