"""``ab`` commands that run the pipeline: run-task, validate-suite, doctor."""

from __future__ import annotations

import argparse
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from django.conf import settings

from benchsite.cli.main import CommandError

BACKENDS = ("auto", "docker", "bwrap")
SMOKE_TASK = Path("custom-dev") / "toy_fail_pytest" / "task.yaml"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run-task",
        help="import a task.yaml and run its clone, setup and baseline tests in a sandbox",
    )
    p.add_argument("task_file", type=Path, metavar="TASK.yaml")
    p.add_argument(
        "--out", type=Path, default=None, help="artifacts folder (default: ARTIFACTS_ROOT)"
    )
    _backend_arg(p)
    p.add_argument(
        "--keep-workspace", action="store_true", help="keep the cloned workspace in the folder"
    )
    p.set_defaults(handler=cmd_run_task)

    p = sub.add_parser(
        "validate-suite", help="check that every task of a suite has a failing baseline"
    )
    p.add_argument("suite")
    p.add_argument("--tasks", type=Path, default=None, help="tasks folder (default: tasks/)")
    p.add_argument("--include-flaky", action="store_true", help="also run tasks labelled flaky")
    p.add_argument(
        "--out", type=Path, default=None, help="artifacts folder (default: ARTIFACTS_ROOT)"
    )
    _backend_arg(p)
    p.add_argument(
        "--variant",
        choices=("baseline", "oracle"),
        default="baseline",
        help="baseline: task.yaml tasks must fail before a fix; oracle: an imported SWE-bench "
        "suite is built, then each instance must grade FULL with its gold patch and NO "
        "with no patch (a Harbor or task.yaml suite: its solve.sh or reference solution must "
        "succeed and the no-op agent fail)",
    )
    from tasks_app.cli.swebench_build import instance_args, jobs_arg

    instance_args(p)
    jobs_arg(p)
    workers_args(p, what="the gold and empty attempts (oracle)")
    p.set_defaults(handler=cmd_validate_suite)

    p = sub.add_parser(
        "doctor",
        help="check the Docker engine, runner image, network isolation, bubblewrap, smoke task",
    )
    p.add_argument("--tasks", type=Path, default=None, help="tasks folder (default: tasks/)")
    p.set_defaults(handler=cmd_doctor)


def workers_args(p: argparse.ArgumentParser, *, what: str) -> None:
    """--enqueue / --worker / --concurrency / --poll: run ``what`` through the workers."""
    p.add_argument(
        "--enqueue",
        action="store_true",
        help=f"send {what} to the workers (ab worker, ab serve) and wait for them",
    )
    p.add_argument(
        "--worker",
        action="store_true",
        help="start a local worker for the duration of the command (implies --enqueue)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=None,
        metavar="N",
        help="attempts the --worker runs at once (default: CELERY_WORKER_CONCURRENCY)",
    )
    p.add_argument("--poll", type=float, default=5.0, help="seconds between progress lines")


def wait_for_attempts(ids: list[int], *, poll: float, quiet: bool = False) -> None:
    """Return once every attempt in ``ids`` is final, printing progress unless ``quiet``."""
    import time

    from runs.models import FINAL_STATES, Attempt

    last = ""
    while True:
        statuses = list(Attempt.objects.filter(id__in=ids).values_list("status", flat=True))
        done = sum(1 for s in statuses if s in FINAL_STATES)
        running = statuses.count("running")
        line = f"attempts: {done}/{len(ids)} done, {running} running"
        if line != last and not quiet:
            print(line, flush=True)
            last = line
        if done >= len(ids):
            return
        time.sleep(poll)


def _out_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out", type=Path, default=None, help="artifacts folder (default: ARTIFACTS_ROOT)"
    )


def _backend_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default=None,
        help="sandbox backend (default: SANDBOX_BACKEND; auto = Docker if it works, else bwrap)",
    )


# --- run-task --------------------------------------------------------------------------


def cmd_run_task(args: argparse.Namespace) -> int:
    attempt = run_task_baseline(
        args.task_file, out=args.out, backend=args.backend, keep_workspace=args.keep_workspace
    )
    _print_attempt(attempt)
    return 0 if attempt.resolved else 1


def run_task_baseline(
    task_file: Path, *, out: Path | None, backend: str | None, keep_workspace: bool = False
):
    """Import one task file and run its baseline attempt; returns the finished attempt."""
    from runs.models import AgentVariant, RunSource, RunStatus
    from runs.pipeline import artifacts
    from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant, run_close
    from runs.pipeline.execute import attempt_execute
    from tasks_app.models import Task
    from tasks_app.services import local_path_rules, tasks_import
    from tasks_app.spec import TaskSpecError, load_task_file

    if not task_file.is_file():
        raise CommandError(f"no such task file: {task_file}")
    try:
        loaded = load_task_file(task_file, rules=local_path_rules(task_file))
        tasks_import(directory=task_file)
    except TaskSpecError as exc:
        raise CommandError(f"invalid task file:\n{exc}") from exc
    task = Task.objects.select_related("suite").get(
        suite__name=loaded.spec.suite, task_id=loaded.spec.id
    )
    config = model_config_for_variant(AgentVariant.BASELINE)
    with artifacts.root_override(out):
        attempt = attempt_create_adhoc(task=task, model_config=config, source=RunSource.VALIDATION)
        status = RunStatus.FINISHED
        try:
            attempt = attempt_execute(attempt, backend=backend, keep_workspace=keep_workspace)
        except KeyboardInterrupt:
            status = RunStatus.CANCELLED
            raise
        finally:
            run_close(run=attempt.run, status=status)
    return attempt


def _print_attempt(attempt) -> None:
    from runs.pipeline import artifacts

    print(f"task {attempt.suite.name}/{attempt.task.task_id}  (attempt {attempt.public_id})")
    rows = [
        (
            s.name,
            "" if s.exit_code is None else str(s.exit_code),
            f"{s.duration_sec or 0:.2f}s",
            s.output_path,
        )
        for s in attempt.stages.order_by("order")
    ]
    _table(("stage", "exit", "time", "log"), rows)
    if attempt.resolved:
        print("result: OK (valid baseline: the tests fail before any fix)")
    else:
        kind = "infrastructure" if attempt.is_infra else "agent"
        print(f"result: {attempt.failure_reason_id} in {attempt.failure_stage} ({kind})")
        if attempt.error_text:
            print("  " + attempt.error_text.splitlines()[0])
    print(f"artifacts: {artifacts.folder_of(attempt.artifacts_dir)}")


# --- validate-suite --------------------------------------------------------------------


def cmd_validate_suite(args: argparse.Namespace) -> int:
    from runs.pipeline.suite_validation import ProgressEvent, SuiteNotFound, suite_validate
    from tasks_app.spec import TaskSpecError

    if args.variant == "oracle":
        from runs.pipeline.harbor_validation import is_harbor_suite

        if is_harbor_suite(args.suite):
            return _validate_harbor_gold(args)
        return _validate_swebench_gold(args)

    tasks_dir = args.tasks or settings.AB_TASKS_DIR
    if not Path(tasks_dir).exists():
        raise CommandError(f"no such tasks folder: {tasks_dir}")

    def progress(event: ProgressEvent) -> None:
        prefix = f"[{event.index}/{event.total}] {event.task_id}"
        if event.row is None:
            print(f"{prefix} ...", flush=True)
        else:
            print(f"{prefix}: {event.row.verdict} ({event.row.duration_sec:.1f}s)", flush=True)

    try:
        report = suite_validate(
            suite=args.suite,
            tasks_dir=Path(tasks_dir),
            include_flaky=args.include_flaky,
            out=args.out,
            progress=progress,
            backend=args.backend,
        )
    except TaskSpecError as exc:
        raise CommandError(f"invalid task files, nothing run:\n{exc}") from exc
    except SuiteNotFound as exc:
        raise CommandError(str(exc)) from exc
    print()
    _table(
        ("task", "result", "stage", "flaky", "time", "why"),
        [
            (
                r.task_id,
                r.verdict,
                r.stage,
                "yes" if r.flaky_baseline else "",
                f"{r.duration_sec:.1f}s",
                r.note[:140] if not r.valid else "",
            )
            for r in report.rows
        ],
    )
    print(report.summary())
    print(f"run folder: {report.run_dir}")
    return 0


def _validate_swebench_gold(args: argparse.Namespace) -> int:
    from benchsite.processes import Supervisor
    from runs.cli.worker import LocalWorker
    from runs.pipeline.swebench_validation import Event, gold_validate, summary_table
    from tasks_app.cli.swebench_build import build_line, make_builder, resolve_backend
    from tasks_app.swebench.suites import NotSwebenchSuite

    if args.jobs < 1:
        raise CommandError(f"--jobs must be at least 1, got {args.jobs}")
    backend = resolve_backend(args.backend)
    builder = make_builder(args, backend)
    through_workers = args.enqueue or args.worker
    if through_workers and args.out:
        raise CommandError("--out is for attempts run here; workers write to their ARTIFACTS_ROOT")

    def progress(event: Event) -> None:
        if event.build is not None:
            print("build " + build_line(event.index, event.total, event.build), flush=True)
            if event.build.log_tail:
                print("    " + event.build.log_tail.replace("\n", "\n    "), flush=True)
        elif event.row is not None:
            row = event.row
            why = f": {row.reason}" if row.reason else ""
            print(f"[{event.index}/{event.total}] {row.instance_id}: {row.status}{why}", flush=True)

    worker = None

    def through(ids: list[int]) -> None:
        nonlocal worker
        if args.worker and worker is None:
            # Its attempts run on the backend asked for, whatever SANDBOX_BACKEND says.
            worker = LocalWorker(
                Supervisor(),
                concurrency=args.concurrency,
                env={"SANDBOX_BACKEND": backend},
            )
        wait_for_attempts(ids, poll=args.poll, quiet=True)

    try:
        report = gold_validate(
            suite_name=args.suite,
            builder=builder,
            backend=backend,
            instance_ids=args.instance,
            out=args.out,
            progress=progress,
            jobs=args.jobs,
            workers=through if through_workers else None,
            # Instances in flight at once: enough to keep every worker process busy.
            window=2 * (args.concurrency or settings.CELERY_WORKER_CONCURRENCY),
        )
    except NotSwebenchSuite as exc:
        raise CommandError(str(exc)) from exc
    finally:
        builder.close()  # the dated index it served
        if worker is not None:
            worker.shutdown()
    print()
    _table(
        ("instance", "verdict", "python", "gold", "empty", "time", "reason"),
        [
            (
                r.instance_id,
                r.verdict,
                _python(r),
                r.gold_grade or "-",
                r.empty_grade or "-",
                f"{r.seconds:.0f}s",
                r.reason[:160],
            )
            for r in report.rows
        ],
    )
    print()
    print("\n".join(summary_table(report)))
    print(report.summary())
    for folder in report.run_dirs:
        print(f"run folder: {folder}")
    return 0


def _validate_harbor_gold(args: argparse.Namespace) -> int:
    """Harbor and task.yaml tasks: the oracle (solve.sh, the reference solution) must succeed
    and the no-op agent fail."""
    from runs.pipeline.harbor_validation import harbor_validate
    from tasks_app.cli.swebench_build import resolve_backend

    if args.enqueue or args.worker:
        raise CommandError(
            "a Harbor or task.yaml suite is validated here (no --enqueue / --worker yet)"
        )
    backend = resolve_backend(args.backend)

    def progress(index: int, total: int, row) -> None:
        why = f": {row.reason}" if row.reason else ""
        print(f"[{index}/{total}] {row.task_id}: {row.status}{why}", flush=True)

    report = harbor_validate(
        suite_name=args.suite,
        backend=backend,
        task_ids=args.instance,
        out=args.out,
        progress=progress,
    )
    print()
    _table(
        ("task", "verdict", "oracle", "nop", "time", "reason"),
        [
            (
                r.task_id,
                r.status,
                r.oracle or "-",
                r.nop or "-",
                f"{r.seconds:.0f}s",
                r.reason[:160],
            )
            for r in report.rows
        ],
    )
    print()
    print("\n".join(report.summary_table()))
    print(report.summary())
    for folder in report.run_dirs:
        print(f"run folder: {folder}")
    return 0


def _python(row) -> str:
    """The Python used, "3.11 for 3.10 (approx.)" on an approximate environment."""
    if not row.python_used:
        return "-"
    return (
        f"{row.python_used} for {row.python_asked} (approx.)"
        if row.approximate
        else row.python_used
    )


# --- doctor ----------------------------------------------------------------------------


def cmd_doctor(args: argparse.Namespace) -> int:
    checks: list[tuple[str, Callable[[], str]]] = [
        ("Docker engine reachable", _check_docker_engine),
        (f"runner image {settings.SANDBOX_IMAGE} present", _check_runner_image),
        ("bubblewrap works", _check_bwrap),
        ("sandbox user has no host account", _check_sandbox_user),
        ("sandbox disk quota can be made", _check_disk_quota),
        ("network isolation holds", _check_network_isolation),
        ("smoke task toy_fail_pytest baseline", lambda: _check_smoke(args.tasks)),
    ]
    failed = 0
    for label, check in checks:
        try:
            detail = check()
        except _CheckFailed as exc:
            failed += 1
            print(f"FAIL  {label}: {exc}", flush=True)
            continue
        except Exception as exc:  # a broken check is a failed check, reported on one line
            failed += 1
            print(f"FAIL  {label}: unexpected {type(exc).__name__}: {exc}", flush=True)
            continue
        print(f"OK    {label}" + (f" ({detail})" if detail else ""), flush=True)
    print("all checks passed" if not failed else f"{failed} check(s) failed")
    return 1 if failed else 0


class _CheckFailed(Exception):
    pass


def _check_docker_engine() -> str:
    import docker

    try:
        client = docker.from_env(timeout=10)
        version = client.version().get("Version", "?")
    except Exception as exc:
        raise _CheckFailed(
            f"{type(exc).__name__}: {exc}. Start the engine: `source .ci/lib.sh; start_dockerd` "
            "(or `systemctl start docker`); the bwrap backend works without it"
        ) from exc
    return f"engine {version}"


def _check_runner_image() -> str:
    import docker

    try:
        image = docker.from_env(timeout=10).images.get(settings.SANDBOX_IMAGE)
    except Exception as exc:
        raise _CheckFailed(
            f"{type(exc).__name__}: {exc}. Build it offline: "
            f"`bash docker/py-runner/build-offline.sh {settings.SANDBOX_IMAGE}`"
        ) from exc
    return image.short_id


def _check_bwrap() -> str:
    if shutil.which("bwrap") is None:
        raise _CheckFailed("bwrap not found: `apt-get install bubblewrap`")
    result = _sandbox_exec("bwrap", "true", network=False)
    if result.exit_code != 0:
        raise _CheckFailed(
            f"a bwrap sandbox could not run `true` (exit {result.exit_code}): "
            f"{result.stderr.strip()[:300]}. Unprivileged user namespaces may be disabled "
            "(sysctl kernel.unprivileged_userns_clone=1)"
        )
    version = subprocess.run(["bwrap", "--version"], capture_output=True, text=True, check=False)
    return version.stdout.strip()


def _check_sandbox_user() -> str:
    from sandbox.accounts import check_no_host_account
    from sandbox.base import AGENT_UID
    from sandbox.errors import SandboxUnavailable

    try:
        check_no_host_account()
    except SandboxUnavailable as exc:
        raise _CheckFailed(str(exc)) from exc
    return f"uid {AGENT_UID}"


def _check_disk_quota() -> str:
    from sandbox.disk import SandboxDisk

    if not settings.SANDBOX_DISK_MB:
        return "off: SANDBOX_DISK_MB=0, sandboxes may fill the host's disk"
    with tempfile.TemporaryDirectory(prefix="ab-doctor-") as tmp:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        disk = SandboxDisk(f"ab-doctor-{uuid.uuid4().hex[:12]}", 16)
        try:
            disk.create(workspace)
        except OSError as exc:
            raise _CheckFailed(
                f"{exc}. Sandboxes run without one (the workspace unbounded): run as root with "
                "loop devices and e2fsprogs, or set SANDBOX_DISK_MB=0 to accept that"
            ) from exc
        finally:
            disk.remove(workspace=workspace)
    return f"{settings.SANDBOX_DISK_MB} MiB per sandbox under {disk.root}"


# Lists the network interfaces a sandboxed process sees: with no network, only loopback.
_INTERFACES = "python3 -c \"import socket; print(' '.join(n for _, n in socket.if_nameindex()))\""


def _check_network_isolation() -> str:
    """Per backend: a command without network sees only loopback, and a networked one cannot
    connect to a listener on any address of this host."""
    from sandbox import available_backends

    backends = [name for name, why in available_backends().items() if why is None]
    if not backends:
        raise _CheckFailed("no sandbox backend works here (see the checks above)")
    seen = []
    for backend in backends:
        result = _sandbox_exec(backend, _INTERFACES, network=False)
        names = result.stdout.split()
        if result.exit_code != 0 or names != ["lo"]:
            raise _CheckFailed(
                f"{backend}: a sandbox without network sees interfaces {names or '?'} "
                f"(exit {result.exit_code}, {result.stderr.strip()[:200]}); expected only lo"
            )
        seen.append(f"{backend}: only lo, host unreachable with network")
        _check_host_unreachable(backend)
    return ", ".join(seen)


def _check_host_unreachable(backend: str) -> None:
    from sandbox.host_fence import host_ipv4_addresses

    with socket.socket() as listener:
        listener.bind(("0.0.0.0", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        addresses = host_ipv4_addresses()
        probe = (
            "import socket, sys\n"
            "for host in sys.argv[2:]:\n"
            "    try:\n"
            "        socket.create_connection((host, int(sys.argv[1])), timeout=2).close()\n"
            "        print('reached', host)\n"
            "    except OSError:\n"
            "        pass\n"
        )
        command = shlex.join(["python3", "-c", probe, str(port), *addresses])
        result = _sandbox_exec(backend, command, network=True)
        try:
            listener.accept()[0].close()
            accepted = True
        except BlockingIOError:
            accepted = False
    reached = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("reached")]
    if result.exit_code != 0 or reached or accepted:
        raise _CheckFailed(
            f"{backend}: a networked sandbox reached the host at {', '.join(reached) or '?'} "
            f"(exit {result.exit_code}, {result.stderr.strip()[:200]}); see sandbox/host_fence.py"
        )


def _check_smoke(tasks_dir: Path | None) -> str:
    task_file = Path(tasks_dir or settings.AB_TASKS_DIR) / SMOKE_TASK
    try:
        attempt = run_task_baseline(task_file, out=None, backend=None)
    except CommandError as exc:
        raise _CheckFailed(str(exc)) from exc
    if not attempt.resolved:
        raise _CheckFailed(
            f"{attempt.failure_reason_id} in {attempt.failure_stage}: "
            f"{(attempt.error_text or '').splitlines()[0] if attempt.error_text else ''} "
            f"(logs: {attempt.artifacts_dir})"
        )
    return f"valid baseline in {attempt.duration_sec:.1f}s"


def _sandbox_exec(backend: str, command: str, *, network: bool):
    from sandbox import open_sandbox
    from sandbox.base import SandboxConfig
    from sandbox.errors import SandboxError

    with tempfile.TemporaryDirectory(prefix="ab-doctor-") as tmp:
        # The sandbox user (not root) must be able to reach the workspace through its parent.
        Path(tmp).chmod(0o755)
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        config = SandboxConfig(
            name=f"ab-doctor-{uuid.uuid4().hex[:12]}",
            workspace=workspace,
            image=settings.SANDBOX_IMAGE,
            labels={"agentbench.doctor": "1"},
        )
        try:
            with open_sandbox(config, backend=backend) as sandbox:
                return sandbox.exec(command, timeout=60, network=network)
        except SandboxError as exc:
            raise _CheckFailed(f"{backend}: {type(exc).__name__}: {exc}") from exc


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    print(line.format(*header).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line.format(*row).rstrip())
    sys.stdout.flush()
