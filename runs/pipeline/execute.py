"""Run one claimed attempt from clone to final state. ``attempt_execute`` never leaves an
attempt without a final state and never raises for attempt-level failures."""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from billiard.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from runs import conditions
from runs.agents.contract import AgentOutcome
from runs.integrity.services import attempt_flags_compute_safely
from runs.lifecycle import attempt_finish
from runs.models import AgentVariant, Attempt
from runs.pipeline import (
    artifacts,
    change_set,
    condition_files,
    images,
    persist,
    stages,
    swebench,
    workspace,
)
from runs.pipeline.agent_stage import cli_resources_for, run_agent_stage
from runs.pipeline.outcome import decide
from runs.pipeline.plan import TaskPlan, plan_for_task
from runs.pipeline.record import BaselineRecord, attempt_record
from runs.pipeline.stages import StageResult
from runs.taxonomy import Reason, Stage
from sandbox.base import SandboxConfig
from sandbox.errors import SandboxClosed, SandboxError

if TYPE_CHECKING:
    from runs.agents.cli.agent import CliResources

log = logging.getLogger(__name__)


def attempt_execute(
    attempt: Attempt,
    *,
    heartbeat: Callable[[], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    backend: str | None = None,
    keep_workspace: bool = False,
    skip_baseline: bool = False,
) -> Attempt:
    """Run everything for an attempt that is already claimed (status running).

    Leaves it finished (with the stage-aware FailureReason, or none on success) or cancelled
    (INTERRUPTED) when ``should_cancel()`` turns true between stages. ``heartbeat`` is called
    between stages and, from a helper thread, every ATTEMPT_HEARTBEAT_SEC during long commands.
    A KeyboardInterrupt is recorded (INTERRUPTED) and then re-raised.
    """
    execution = Execution(
        attempt,
        heartbeat=heartbeat,
        should_cancel=should_cancel,
        backend=backend or settings.SANDBOX_BACKEND,
        keep_workspace=keep_workspace,
        skip_baseline=skip_baseline,
    )
    return execution.run()


class _Cancelled(Exception):
    pass


class Execution:
    def __init__(
        self,
        attempt: Attempt,
        *,
        heartbeat: Callable[[], None] | None,
        should_cancel: Callable[[], bool] | None,
        backend: str,
        keep_workspace: bool,
        skip_baseline: bool = False,
    ):
        self.attempt = attempt
        self.heartbeat = heartbeat
        self.should_cancel = should_cancel
        self.backend = backend
        self.keep_workspace = keep_workspace
        # ab run-agent --skip-baseline: the agent starts right after setup.
        self.skip_baseline = skip_baseline
        self.stages: list[tuple[StageResult, str]] = []
        self.baseline = BaselineRecord()
        self.agent_outcome: AgentOutcome | None = None
        self.final_patch: str | None = None
        # The commit the workspace was checked out at, as an id: resolved before any sandboxed
        # code ran, since the git folder is the sandbox's to rewrite afterwards (its refs too).
        self.base_commit = ""
        self.grading: swebench.Grading | None = None
        self.cancelled = False
        self.current: tuple[str, Stage] = ("git_clone", Stage.GIT_CLONE)
        self.sandbox_info: dict[str, Any] = {"backend": backend}
        self.folder: Path | None = None
        self.started = time.monotonic()

    # --- the run -----------------------------------------------------------------------

    def run(self) -> Attempt:
        interrupt: KeyboardInterrupt | None = None
        try:
            self.folder = self._attempt_folder()
            self._pipeline(plan_for_task(self.attempt.task, default_image=settings.SANDBOX_IMAGE))
        except _Cancelled:
            self.cancelled = True
            self._fail(Reason.INTERRUPTED, "cancelled before this stage started")
        except KeyboardInterrupt as exc:
            self.cancelled = True
            self._fail(Reason.INTERRUPTED, "interrupted (Ctrl+C)")
            interrupt = exc
        except SandboxClosed as exc:  # a kill by us (cancel, shutdown), not a broken sandbox
            self.cancelled = True
            self._fail(Reason.INTERRUPTED, f"{type(exc).__name__}: {exc}")
        except SandboxError as exc:  # the engine's own error is in the message
            self._fail(Reason.SANDBOX_ERROR, f"{type(exc).__name__}: {exc}")
        except SoftTimeLimitExceeded:
            self._fail(
                Reason.TIMEOUT,
                "[timeout] the attempt exceeded its overall time budget (worker time limit)",
            )
        except Exception as exc:
            self._fail(Reason.UNKNOWN, f"{type(exc).__name__}: {exc}", traceback.format_exc())
        finally:
            self._remove_workspace()
        finished = self._finish()
        if interrupt is not None:
            raise interrupt
        return finished

    def _pipeline(self, plan: TaskPlan) -> None:
        if plan.is_harbor:
            from runs.pipeline import harbor

            return harbor.run(self, plan)
        if plan.dockerfile_context:
            return self._dockerfile_stages(plan)
        if not plan.is_swebench:
            # A task's own image: pulled when missing, leased for the attempt, on bubblewrap
            # run from its tree. A failure there is the environment's, as opening the sandbox
            # on a missing image was (stage "setup"), before any clone.
            self.current = ("image", Stage.SETUP)
            with images.task_image(
                plan,
                task=self.attempt.task,
                backend=self.backend,
                default_image=settings.SANDBOX_IMAGE,
            ) as (ready, digest):
                if digest:
                    self._record_image(digest)
                return self._stages(ready)
        # The instance's level stays leased (never evicted) until the attempt is done with it.
        with swebench.local_build(plan, backend=self.backend) as built:
            if built.image_digest:  # its official image
                self._record_image(built.image_digest)
            return self._stages(built)

    def _dockerfile_stages(self, plan: TaskPlan) -> None:
        """A task.yaml's (or a SWE-bench instance's own) Dockerfile environment: built (a
        no-op when its context is unchanged), held for the attempt, then the usual stages on
        that image."""
        from runs.pipeline import environment_build

        assert self.folder is not None
        self.checkpoint(environment_build.STAGE_NAME, Stage.SETUP)
        if plan.dockerfile_key:  # a SWE-bench instance's folder, as it was imported
            from tasks_app.swebench.own_dockerfile import changed_since_import

            changed = changed_since_import(Path(plan.dockerfile_context), plan.dockerfile_key)
            if changed:
                name = environment_build.STAGE_NAME
                self.record_stage(
                    StageResult(name, Stage.SETUP, reason=Reason.SETUP_FAILED, note=changed)
                )
                return
        stage, image, log = environment_build.task_yaml_stage(
            Path(plan.dockerfile_context), timeout_sec=plan.build_timeout_sec
        )
        environment_build.keep_log(self.folder, image, log)
        if self.record_stage(stage).reason is not None or image is None:
            return
        self.sandbox_info["environment"] = {
            "dockerfile_key": image.key,
            "image": image.tag,
            "reused": image.reused,
        }
        built = dataclasses.replace(plan, image=image.tag, dockerfile_context="")
        with images.built_image(built, key=image.key, backend=self.backend) as ready:
            if ready.is_swebench and ready.image_tree:
                # On bubblewrap the testbed is copied out of the image's tree, as for an
                # instance on its official image (images.official_plan).
                ready = dataclasses.replace(ready, rootfs=ready.image_tree)
            return self._stages(ready)

    def _record_image(self, digest: str) -> None:
        """The image this attempt runs on, kept on the attempt and in its run.json."""
        self.attempt.image_digest = digest
        Attempt.objects.filter(pk=self.attempt.pk).update(image_digest=digest)
        self.sandbox_info["image_digest"] = digest

    def _stages(self, plan: TaskPlan) -> None:
        assert self.folder is not None
        ws = self.folder / artifacts.WORKSPACE_DIR
        if ws.exists():  # a requeued attempt starts from a fresh copy
            shutil.rmtree(ws)
        repo_dir = ws / plan.repo_rel if plan.repo_rel else ws
        excludes = workspace.excludes_for(repo_dir, [ws / "site-packages", ws / ".pyuser"])
        # A testbed built here is copied once, straight into the started sandbox's workspace
        # (onto its disk quota when it has one), instead of into the host folder and then again
        # onto the quota at start; the host folder stays an empty mount point, quick to remove.
        # Everything else (a clone, a published image's export) comes first, as the sandbox
        # copies what is in the workspace when it starts.
        code_inside = plan.is_swebench and bool(plan.rootfs)
        if not code_inside and not self._get_code(plan, ws, repo_dir):
            return
        self.checkpoint("setup", Stage.SETUP)
        # An agent CLI's install and gateway must exist before its sandbox (both are mounted).
        cli = cli_resources_for(
            self.attempt.model_config,
            artifacts_dir=self.folder,
            task_max_steps=self.attempt.task.max_steps,
            owner=str(self.attempt.public_id),
        )
        with cli as cli_res:
            self._sandboxed(plan, ws, repo_dir, excludes, code_inside, cli_res)

    def _sandboxed(
        self,
        plan: TaskPlan,
        ws: Path,
        repo_dir: Path,
        excludes: list[str],
        code_inside: bool,
        cli: CliResources | None,
    ) -> None:
        assert self.folder is not None
        config = self.sandbox_config(plan, ws)
        if cli is not None:
            config = dataclasses.replace(config, **cli.sandbox_fields())
        from sandbox import open_sandbox

        rootfs = Path(plan.rootfs or plan.image_tree) if plan.rootfs or plan.image_tree else None
        with open_sandbox(config, backend=self.backend, bwrap_rootfs=rootfs) as sandbox:
            self.sandbox_info |= {
                "backend": sandbox.backend,
                "image": config.image,
                "name": config.name,
                "workspace_path": config.workspace_path,
                "workdir": plan.workdir,
                "disk_quota": sandbox.disk_quota,
                # What the tests could size themselves from (SWE-bench: the host's CPUs).
                "cpus": config.cpus,
                "memory_mb": config.memory_mb,
            }
            if code_inside:
                if not self._get_code(plan, ws, repo_dir):
                    return
                self.checkpoint("setup", Stage.SETUP)
            if not self._setup(sandbox, plan, repo_dir, excludes):
                return
            baseline = not plan.is_swebench and not self.skip_baseline
            if baseline and not self._baseline(sandbox, plan):
                return
            if self.attempt.model_config.agent_variant == AgentVariant.BASELINE:
                return
            files = self.attempt.model_config.workspace_files or {}
            if files:
                # The condition: its files are the agent's input, written after the baseline
                # (which tests the task as it is) and kept out of the final patch.
                self.checkpoint(condition_files.STAGE_NAME, Stage.SETUP)
                written = condition_files.write_condition_files(sandbox, plan, files)
                if self.record_stage(written).reason is not None:
                    return
                excludes = excludes + conditions.diff_excludes(files)
            self.checkpoint("agent_run", Stage.AGENT_RUN)
            with stages.ticking(self.heartbeat, settings.ATTEMPT_HEARTBEAT_SEC):
                agent_stage, self.agent_outcome = run_agent_stage(
                    sandbox=sandbox,
                    plan=plan,
                    config=self.attempt.model_config,
                    task_max_steps=self.attempt.task.max_steps,
                    artifacts_dir=self.folder,
                    prediction_patch=self.prediction(),
                    cli=cli,
                )
            if agent_stage is not None:
                self.record_stage(agent_stage)
            # Reading the tree back costs the host per file: not past the sandbox's limit.
            over = change_set.file_limit_stage(ws, settings.SANDBOX_MAX_FILES)
            if over is not None:
                self.record_stage(over)
                return
            self._take_patch(plan, repo_dir, excludes)
            self.checkpoint("final_test", Stage.FINAL_TEST)
            if plan.is_swebench:
                final = self._swebench_final_test(sandbox, plan)
            else:
                final = stages.tests_stage(
                    sandbox,
                    plan,
                    name="final_test",
                    stage=Stage.FINAL_TEST,
                    heartbeat=self.heartbeat,
                    heartbeat_sec=settings.ATTEMPT_HEARTBEAT_SEC,
                )
            if final.reason is None and agent_stage is not None:
                # The agent never decides the result: passing final tests are a success
                # whatever the agent said when it stopped.
                agent_stage.counts = False
            self.record_stage(final)

    def _swebench_final_test(self, sandbox, plan: TaskPlan) -> StageResult:
        """The official eval script (kept as eval.sh beside the logs), then its grade."""
        assert self.folder is not None
        script = swebench.eval_script_for(plan)
        artifacts.write_text(self.folder, artifacts.EVAL_SCRIPT, script)
        final = swebench.final_test_stage(
            sandbox,
            plan,
            script,
            heartbeat=self.heartbeat,
            heartbeat_sec=settings.ATTEMPT_HEARTBEAT_SEC,
        )
        self.grading = swebench.grade(final, plan, agent_patch=self.final_patch or "")
        return final

    def _get_code(self, plan: TaskPlan, ws: Path, repo_dir: Path) -> bool:
        self.checkpoint("git_clone", Stage.GIT_CLONE)
        timeout = settings.GIT_CLONE_TIMEOUT_SEC
        if plan.is_swebench:
            self.current = ("export_testbed", Stage.GIT_CLONE)
            quota = settings.SANDBOX_DISK_MB * 1024 * 1024 or None
            return (
                self.record_stage(swebench.export_stage(plan, ws, max_bytes=quota)).reason is None
            )
        if (
            self.record_stage(stages.clone_stage(plan, repo_dir, timeout=timeout)).reason
            is not None
        ):
            return False
        self.checkpoint("git_checkout", Stage.GIT_CHECKOUT)
        checkout = stages.checkout_stage(plan, repo_dir, timeout=timeout)
        if self.record_stage(checkout).reason is not None:
            return False
        self.base_commit = workspace.head_commit(repo_dir)
        return True

    def _setup(self, sandbox, plan: TaskPlan, repo_dir: Path, excludes: list[str]) -> bool:
        if not plan.setup_commands:
            return True
        setup = stages.setup_stage(
            sandbox, plan, heartbeat=self.heartbeat, heartbeat_sec=settings.ATTEMPT_HEARTBEAT_SEC
        )
        if setup.reason is None and plan.validation.enforce_clean_setup and not plan.is_swebench:
            stages.clean_tree_check(setup, repo_dir, self.base_commit or plan.commit, excludes)
        return self.record_stage(setup).reason is None

    def _baseline(self, sandbox, plan: TaskPlan) -> bool:
        """Tests must fail before any fix. The validation run (no agent) repeats them once,
        when the first run left time to, to flag a flaky baseline."""
        self.checkpoint("baseline_run", Stage.BASELINE_RUN)
        first = self._tests(sandbox, plan, "baseline_run")
        stages.judge_baseline(first, plan)
        self.record_stage(first)
        self.baseline.ran = True
        self.baseline.exit_codes.append(first.exit_code if first.exit_code is not None else -1)
        self.baseline.valid = first.reason is None
        self.baseline.note = first.note
        wants_rerun = (
            self.attempt.model_config.agent_variant == AgentVariant.BASELINE
            and plan.validation.check_flaky
            and first.reason in (None, Reason.BASELINE_NOT_FAILING)
            and not first.timed_out
            and first.duration_sec * 2 <= plan.timeout_sec
        )
        if wants_rerun:
            self.checkpoint("baseline_rerun", Stage.BASELINE_RUN)
            second = self._tests(sandbox, plan, "baseline_rerun")
            stages.judge_baseline(second, plan)
            second.counts = False
            self.baseline.reruns = 1
            self.baseline.exit_codes.append(
                second.exit_code if second.exit_code is not None else -1
            )
            if stages.baselines_disagree(first, second):
                self.baseline.flaky_baseline = True
                second.note = (
                    f"flaky baseline: first run {first.reason or 'valid'} "
                    f"(exit {first.exit_code}), second {second.reason or 'valid'} "
                    f"(exit {second.exit_code})"
                )
            self.record_stage(second)
        return first.reason is None

    def _tests(self, sandbox, plan: TaskPlan, name: str) -> StageResult:
        return stages.tests_stage(
            sandbox,
            plan,
            name=name,
            stage=Stage.BASELINE_RUN,
            heartbeat=self.heartbeat,
            heartbeat_sec=settings.ATTEMPT_HEARTBEAT_SEC,
        )

    def _take_patch(self, plan: TaskPlan, repo_dir: Path, excludes: list[str]) -> None:
        diff = workspace.diff_against(repo_dir, self.base_commit or plan.commit, excludes=excludes)
        if not diff.ok:
            raise RuntimeError(f"could not diff the workspace: {diff.stderr.strip()}")
        self.final_patch = diff.stdout
        assert self.folder is not None
        artifacts.write_text(self.folder, artifacts.FINAL_PATCH, diff.stdout)

    def prediction(self) -> str | None:
        if self.attempt.model_config.agent_variant == AgentVariant.EXTERNAL:
            return self.attempt.final_patch
        return None

    # --- bookkeeping -------------------------------------------------------------------

    def _attempt_folder(self) -> Path:
        base = artifacts.run_dir(self.attempt.run) / artifacts.attempt_folder_name(self.attempt)
        folder, number = base, 1
        # A retried attempt (requeued by the reaper, or retried after an infrastructure
        # failure) keeps the logs of its earlier tries: each try gets its own folder, even
        # when the earlier one is empty (a try killed before it wrote a log, its workspace
        # removed by the reaper) so that no two tries ever share one.
        while folder.exists():
            number += 1
            folder = base.with_name(f"{base.name}__try{number}")
        folder.mkdir(parents=True, exist_ok=True)
        persist.attempt_set_artifacts_dir(
            attempt=self.attempt, artifacts_dir=artifacts.relative(folder)
        )
        return folder

    def sandbox_config(self, plan: TaskPlan, ws: Path) -> SandboxConfig:
        public_id = str(self.attempt.public_id)
        return SandboxConfig(
            name=f"attempt-{public_id}",  # each backend prefixes it with "ab-"
            workspace=ws,
            image=plan.image,
            workspace_path=plan.workspace_path,
            memory_mb=settings.SANDBOX_MEMORY_MB,
            cpus=plan.cpus or settings.SANDBOX_CPUS,  # the task's source may name its own
            pids_limit=settings.SANDBOX_PIDS_LIMIT,
            output_cap_bytes=(
                max(settings.SANDBOX_OUTPUT_CAP_BYTES, settings.SWEBENCH_OUTPUT_CAP_BYTES)
                if plan.is_swebench
                else settings.SANDBOX_OUTPUT_CAP_BYTES
            ),
            disk_mb=settings.SANDBOX_DISK_MB or None,
            disk_files=settings.SANDBOX_MAX_FILES or None,
            # The workspace is deleted after the attempt unless kept: no need to copy it back.
            disk_copy_back=self.keep_workspace,
            # Only setup may use the network, and only when the task says so; otherwise the
            # sandbox gets none at all.
            allow_network=plan.setup_network and bool(plan.setup_commands),
            labels={
                "agentbench.attempt": public_id,
                "agentbench.run": str(self.attempt.run.public_id),
            },
            # Lets an operator (and the tests) find every process of an attempt on the host.
            # A SWE-bench instance built here: its venv first on PATH for every command, the
            # agent's included.
            env=images.env_of(plan)
            | {"AGENTBENCH_ATTEMPT": public_id}
            | {k: v for k, v in plan.sandbox_env().items() if k in ("PATH", "VIRTUAL_ENV")},
        )

    def checkpoint(self, name: str, stage: Stage) -> None:
        self.current = (name, stage)
        if self.heartbeat is not None:
            self.heartbeat()
        if self.should_cancel is not None and self.should_cancel():
            raise _Cancelled

    def record_stage(self, stage: StageResult) -> StageResult:
        """Write the stage's log and its AttemptStage row."""
        output_path = ""
        if self.folder is not None:
            output_path = artifacts.write_stage_log(self.folder, stage)
        persist.attempt_stage_add(
            attempt=self.attempt, stage=stage, order=len(self.stages), output_path=output_path
        )
        self.stages.append((stage, output_path))
        return stage

    def _fail(self, reason: Reason, note: str, trace: str = "") -> None:
        """Record an exception or a cancel as a stage of its own, in the stage it hit."""
        name, stage = self.current
        if any(s.name == name for s, _ in self.stages):  # keep the finished stage's own log
            name = f"{name}_error"
        result = StageResult(name, stage, reason=reason, note=note, traceback=trace)
        try:
            self.record_stage(result)
        except Exception:  # the database or the disk is what failed: keep the verdict anyway
            log.exception("could not record the failing stage of %s", self.attempt)
            self.stages.append((result, ""))

    def _remove_workspace(self) -> None:
        if self.folder is None:
            return
        # Tells the reaper's clean-up (runs/workers/leftovers.py) to keep it.
        if self.keep_workspace:
            (self.folder / "workspace.kept").touch()
            return
        shutil.rmtree(self.folder / artifacts.WORKSPACE_DIR, ignore_errors=True)

    def _finish(self) -> Attempt:
        verdict = decide(
            [s for s, _ in self.stages],
            empty_run=bool(self.agent_outcome and self.agent_outcome.is_empty_run),
        )
        stats = workspace.patch_stats(self.final_patch or "")
        result = persist.AttemptResult(
            verdict=verdict,
            cancelled=self.cancelled,
            duration_sec=time.monotonic() - self.started,
            agent=self.agent_outcome,
            final_patch=self.final_patch,
            lines_changed=stats.lines_changed,
            files_touched=stats.files_touched,
            grade=self.grading.grade if self.grading else "",
            test_results=self.grading.test_results if self.grading else {},
        )
        attempt = attempt_finish(attempt=self.attempt, result=result)
        if self.folder is not None:
            record = attempt_record(
                attempt=attempt,
                stages=self.stages,
                baseline=self.baseline,
                sandbox=self.sandbox_info,
                final_patch_path=artifacts.FINAL_PATCH if self.final_patch is not None else "",
            )
            artifacts.write_json(self.folder, artifacts.RUN_JSON, record.to_dict())
        # Once its outcome and files are stored: the integrity rules read both.
        attempt_flags_compute_safely(attempt=attempt)
        return attempt
