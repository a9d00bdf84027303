"""The pure parts of the pipeline: setup normalization, patch stats, outcome and fingerprints."""

from __future__ import annotations

import pytest

from runs.agents.contract import AgentOutcome
from runs.pipeline.agent_stage import agent_stage_result
from runs.pipeline.outcome import decide, error_fingerprint, normalize_error
from runs.pipeline.stages import CommandRun, StageResult, normalize_setup_command
from runs.pipeline.workspace import patch_stats
from runs.taxonomy import Reason, Stage

SITE = "/workspace/site-packages"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("pip install requests", f"pip install --target {SITE} requests"),
        ("pip3 install -r req.txt", f"pip3 install --target {SITE} -r req.txt"),
        ("python -m pip install -e .", f"python -m pip install --target {SITE} -e ."),
        (
            "cd sub && python3.11 -m pip install a; pip install b",
            f"cd sub && python3.11 -m pip install --target {SITE} a; pip install --target {SITE} b",
        ),
        ("pip install --target /opt/x y", "pip install --target /opt/x y"),
        ("pip install -t /opt/x y", "pip install -t /opt/x y"),
        ("pip install --user y", "pip install --user y"),
        ("pip install --prefix=/opt y", "pip install --prefix=/opt y"),
        ("pip download y && pipx install z", "pip download y && pipx install z"),
        ("make build", "make build"),
    ],
)
def test_pip_installs_are_redirected_into_the_workspace(command, expected):
    assert normalize_setup_command(command, SITE) == expected


def test_patch_stats_count_added_and_removed_lines_per_file():
    patch = (
        "diff --git a/src/a.py b/src/a.py\n--- a/src/a.py\n+++ b/src/a.py\n"
        "@@ -1,2 +1,2 @@\n-x = 1\n+x = 2\n context\n"
        "diff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n"
        "@@ -0,0 +1,2 @@\n+one\n+two\n"
    )

    stats = patch_stats(patch)

    assert stats.lines_changed == 4
    assert stats.files_touched == ["src/a.py", "new.txt"]
    assert patch_stats("").lines_changed == 0


def stage(name, taxo, reason, *, code=1, note="", stderr="boom\n") -> StageResult:
    result = StageResult(name, taxo, reason=reason, note=note)
    result.runs.append(CommandRun(f"cmd-{name}", code, "", stderr, 0.5))
    return result


def test_the_earliest_precedence_wins_and_names_its_stage():
    stages = [
        stage("git_clone", Stage.GIT_CLONE, None, code=0),
        stage("agent_run", Stage.AGENT_RUN, Reason.AGENT_GAVE_UP, note="agent stopped"),
        stage("final_test", Stage.FINAL_TEST, Reason.TESTS_FAILED),
    ]

    verdict = decide(stages)

    assert verdict.reason is Reason.AGENT_GAVE_UP
    assert verdict.stage is Stage.AGENT_RUN
    assert verdict.is_infra is False
    assert verdict.error_text.startswith("AGENT_GAVE_UP in agent_run: agent stopped\nboom")


def test_a_pre_agent_failure_is_infrastructure_whatever_its_code():
    verdict = decide([stage("baseline_run", Stage.BASELINE_RUN, Reason.INTERNAL_ERROR, code=4)])

    assert verdict.is_infra is True
    assert verdict.exit_code == 4


def test_timeouts_and_empty_runs_are_tagged():
    timed_out = decide(
        [
            stage(
                "setup",
                Stage.SETUP,
                Reason.SETUP_TIMEOUT,
                code=124,
                note="[timeout] setup exceeded 3s",
            )
        ]
    )
    empty = decide([stage("agent_run", Stage.AGENT_RUN, Reason.LLM_ERROR)], empty_run=True)

    assert timed_out.is_timeout and timed_out.error_text.startswith("[timeout] SETUP_TIMEOUT")
    assert "[timeout] [timeout]" not in timed_out.error_text
    assert empty.is_empty_run and empty.error_text.startswith("[empty-run] LLM_ERROR")


def test_success_has_no_reason_and_no_error():
    verdict = decide([stage("final_test", Stage.FINAL_TEST, None, code=0)])

    assert verdict.success and verdict.error_text == "" and verdict.error_fingerprint == ""
    assert verdict.exit_code == 0


def test_counts_false_stages_do_not_decide():
    rerun = stage("baseline_rerun", Stage.BASELINE_RUN, Reason.BASELINE_NOT_FAILING, code=0)
    rerun.counts = False

    verdict = decide([stage("baseline_run", Stage.BASELINE_RUN, None), rerun])

    assert verdict.success
    rerun.counts = True
    assert decide([stage("baseline_run", Stage.BASELINE_RUN, None), rerun]).reason is (
        Reason.BASELINE_NOT_FAILING
    )


def test_the_same_failure_elsewhere_has_the_same_fingerprint():
    a = "SETUP_FAILED in setup: exit 1 at /tmp/ab-x1/workspace/repo/setup.py line 12 (0xdeadbeef)"
    b = "Setup_Failed in setup: exit 2 at /var/lib/w/other/setup.py line 904 (0x1234abcd)"

    assert error_fingerprint(a) == error_fingerprint(b)
    assert error_fingerprint(a) == normalize_error(a)[:200]
    assert error_fingerprint("x" * 500) == "x" * 200
    assert error_fingerprint("LLM_ERROR: 401") != error_fingerprint("SETUP_FAILED: 401")


def test_an_llm_agent_without_tokens_is_an_empty_run_but_a_scripted_one_is_not():
    def outcome() -> AgentOutcome:
        return AgentOutcome(reason=Reason.TESTS_FAILED, stop="gave_up", duration_sec=2.5)

    llm = agent_stage_result(outcome(), agent_name="llm", variant="llm", elapsed=2.5)
    scripted = agent_stage_result(outcome(), agent_name="s", variant="scripted", elapsed=2.5)
    quick = agent_stage_result(
        AgentOutcome(reason=None, stop="done", duration_sec=0.2),
        agent_name="llm",
        variant="llm",
        elapsed=0.2,
    )

    assert llm.reason is Reason.LLM_ERROR and llm.note.startswith("[empty-run]")
    assert scripted.reason is Reason.TESTS_FAILED
    assert quick.reason is None


def test_an_llm_agent_that_acted_is_not_an_empty_run_without_usage_figures():
    solved = AgentOutcome(reason=None, stop="tests_passed", duration_sec=5.0, tool_calls=3)
    tried = AgentOutcome(reason=Reason.TESTS_FAILED, stop="gave_up", duration_sec=5.0, tool_calls=2)

    for outcome in (solved, tried):
        result = agent_stage_result(outcome, agent_name="llm", variant="llm", elapsed=5.0)
        assert result.reason is outcome.reason
        assert not outcome.is_empty_run


def test_an_agent_timeout_is_a_tagged_timeout():
    outcome = AgentOutcome(
        reason=Reason.AGENT_GAVE_UP,
        stop="time_budget",
        is_timeout=True,
        tokens_in=5,
        duration_sec=30.0,
    )

    result = agent_stage_result(outcome, agent_name="llm", variant="llm", elapsed=30.0)
    verdict = decide([result])

    assert result.reason is Reason.TIMEOUT
    assert verdict.is_timeout and verdict.error_text.startswith("[timeout] TIMEOUT in agent_run")
    assert result.duration_sec == 30.0
