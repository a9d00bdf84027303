"""Infrastructure failures get their own outcome: an engine that goes away and a container
that vanishes are SANDBOX_ERROR with the engine's error, an OOM kill is SANDBOX_ERROR [oom], a
kill by us INTERRUPTED, and only a real timeout is a timeout (exit 137 alone is not). The
reaper removes what finished attempts left behind.

The engine test stops a private Docker engine (tests/support/private_dockerd.py), never the shared
one.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from pathlib import Path

import docker
import pytest

from runs.pipeline.stages import CommandRun, command_reason
from runs.taxonomy import Reason, Stage
from sandbox import open_sandbox
from sandbox.base import SandboxConfig
from sandbox.docker_exec_client import Finished
from sandbox.errors import SandboxClosed, SandboxError
from sandbox.output import CappedOutput
from tests.support.backends import backend_params
from tests.support.pipeline_fixtures import git_repo, import_tasks, write_task
from tests.support.private_dockerd import PrivateDockerd


def config(tmp_path: Path, **overrides) -> SandboxConfig:
    fields: dict = {
        "name": f"test-{uuid.uuid4().hex[:12]}",
        "workspace": tmp_path / "ws",
        "memory_mb": 256,
        "pids_limit": 64,
        "allow_network": False,
        "labels": {"agentbench.test": "infra-outcomes"},
    }
    fields.update(overrides)
    return SandboxConfig(**fields)


def in_background(call) -> tuple[threading.Thread, list]:
    """Run ``call`` in a thread; the list gets its result or its exception."""
    outcome: list = []

    def target() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def wait_for(predicate, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def reason_of(result, stage: Stage = Stage.FINAL_TEST) -> tuple[Reason | None, str]:
    return command_reason(stage, CommandRun.of("the command", result))


# -- each kind of ending, from real commands ------------------------------------------------


@pytest.mark.parametrize("backend", backend_params())
def test_each_kind_of_kill_maps_to_its_own_outcome(backend: str, tmp_path: Path) -> None:
    with open_sandbox(config(tmp_path), backend) as sb:
        timeout = sb.exec("sleep 30", timeout=1)
        oom = sb.exec(
            ["python3", "-c", "b = []\nwhile True: b.append(bytearray(2**24))"], timeout=30
        )
        own_kill = sb.exec("kill -9 $$", timeout=30)
    assert reason_of(timeout) == (Reason.TIMEOUT, "")
    assert reason_of(timeout, Stage.SETUP)[0] is Reason.SETUP_TIMEOUT
    reason, note = reason_of(oom)
    assert (reason, note.split()[0]) == (Reason.SANDBOX_ERROR, "[oom]")
    # 137 without a timeout of ours: not a timeout, in any stage.
    assert own_kill.exit_code == 137 and not own_kill.timed_out
    assert reason_of(own_kill)[0] is Reason.UNKNOWN
    assert reason_of(own_kill, Stage.SETUP)[0] is Reason.SETUP_FAILED
    assert "not a timeout" in reason_of(own_kill, Stage.SETUP)[1]


@pytest.mark.parametrize("backend", backend_params())
def test_a_kill_by_us_is_a_closed_sandbox_not_a_result(backend: str, tmp_path: Path) -> None:
    sb = open_sandbox(config(tmp_path), backend)
    with sb:
        thread, outcome = in_background(lambda: sb.exec("sleep 30", timeout=60))
        time.sleep(1.5)
        sb.close()
        thread.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], SandboxClosed), outcome
    assert str(outcome[0]).startswith("[killed]")


@pytest.mark.docker
def test_a_vanished_container_is_a_sandbox_error_with_the_engines_words(tmp_path: Path) -> None:
    with open_sandbox(config(tmp_path), "docker") as sb:
        thread, outcome = in_background(lambda: sb.exec("sleep 30", timeout=60))
        time.sleep(1.5)
        engine = docker.from_env()
        try:
            engine.containers.get(f"ab-{sb.config.name}").remove(force=True)
        finally:
            engine.close()
        thread.join(30)
        assert len(outcome) == 1 and type(outcome[0]) is SandboxError, outcome
        message = str(outcome[0])
        assert message.startswith("[container-gone]")
        assert "No such container" in message or "stopped" in message


# What the engine answered (exit 126) to an exec started while `docker rm -f` removed the
# container, in a loop of both at once on this machine (about one race in four).
REFUSED_WHILE_REMOVED = (
    "OCI runtime exec failed: exec failed: unable to start container process: error writing "
    "config to pipe: write init-p: broken pipe: unknown"
)


@pytest.mark.docker
@pytest.mark.parametrize("removed", [True, False], ids=["removed", "alive"])
def test_an_exec_the_runtime_refuses_is_the_commands_only_in_a_living_container(
    removed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel removes the container from another process; an exec starting meanwhile gets
    exit 126 from runc. That is the removal's doing ([container-gone], which a cancelled run
    records as INTERRUPTED), not a command that exited 126 (a baseline "not failing")."""
    with open_sandbox(config(tmp_path), "docker") as sb:
        if removed:
            engine = docker.from_env()
            try:
                engine.containers.get(f"ab-{sb.config.name}").remove(force=True)
            finally:
                engine.close()

        def refused(argv, **_kwargs) -> Finished:
            output = CappedOutput(4096)
            output.feed("stderr", REFUSED_WHILE_REMOVED.encode())
            return Finished(output=output, exit_code=126, duration_sec=0.01, stuck=False)

        monkeypatch.setattr(sb, "_server", None)  # straight to docker exec, as after ServerGone
        monkeypatch.setattr(sb, "_docker_exec", refused)
        if removed:
            with pytest.raises(SandboxError) as caught:
                sb.exec("true", timeout=10)
            assert type(caught.value) is SandboxError
            assert str(caught.value).startswith("[container-gone]"), caught.value
        else:
            result = sb.exec("true", timeout=10)
            assert (result.exit_code, result.stderr) == (126, REFUSED_WHILE_REMOVED)


# -- the engine goes away mid-attempt --------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.docker
@pytest.mark.parametrize(
    "sig",
    # SIGTERM: the engine stops its containers and exits. SIGKILL (with its containerd): the
    # container lives on (the exec server needs no engine) and the attempt fails when the
    # engine is needed again, at the latest to remove the container.
    [signal.SIGTERM, signal.SIGKILL],
    ids=["stopped", "killed"],
)
def test_an_engine_gone_mid_attempt_is_a_sandbox_error_and_leaves_no_container(
    private_dockerd: PrivateDockerd,
    artifacts_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sig: signal.Signals,
) -> None:
    from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
    from runs.pipeline.execute import attempt_execute
    from runs.workers.leftovers import leftovers_remove
    from tasks_app.models import Task

    commit = git_repo(tmp_path / "repo", {"test_x.py": "def test_x():\n    assert False\n"})
    write_task(
        tmp_path / "tasks",
        "engine_goes",
        f"""
        repo: {{url: {tmp_path / "repo"}, commit: {commit}}}
        environment: {{docker_image: agentbench/py-runner:0.1.0, workdir: /workspace,
                       timeout_sec: 60}}
        setup: {{commands: ["sleep 20"], network: false, timeout_sec: 120}}
        run: {{command: "python3 -m pytest -q test_x.py"}}
        """,
    )
    import_tasks(tmp_path / "tasks", also=[tmp_path])
    task = Task.objects.get(task_id="engine_goes")
    attempt = attempt_create_adhoc(task=task, model_config=model_config_for_variant("baseline"))
    monkeypatch.setenv("DOCKER_HOST", private_dockerd.url)
    label = f"agentbench.attempt={attempt.public_id}"

    def containers() -> list:
        client = private_dockerd.client()
        try:
            return client.containers.list(all=True, filters={"label": label}, ignore_removed=True)
        finally:
            client.close()

    def stop_the_engine_during_setup() -> None:
        wait_for(lambda: any(c.status == "running" for c in containers()), timeout=120)
        time.sleep(2)  # setup's `sleep 20` is running (a loaded machine may be slow to see it)
        private_dockerd.stop(sig)

    stopper, stopped = in_background(stop_the_engine_during_setup)
    started = time.monotonic()
    attempt = attempt_execute(attempt, backend="docker")
    stopper.join(90)
    assert stopped == [None], f"the engine was not stopped during the attempt: {stopped}"
    assert attempt.failure_reason_id == Reason.SANDBOX_ERROR.value, (
        attempt.status,
        attempt.failure_stage,
        attempt.error_text,
    )
    assert attempt.is_infra and not attempt.is_timeout
    text = attempt.error_text
    if sig == signal.SIGTERM:
        assert attempt.failure_stage == Stage.SETUP.value
        assert text.startswith(("[engine-gone]", "[container-gone]")), text
    else:
        assert text.startswith("[engine-gone]"), text
    assert "exceeded" not in text and time.monotonic() - started < 60

    private_dockerd.start()
    assert containers() != []  # it outlived the engine's restart...
    report = leftovers_remove()
    assert report.containers == [str(attempt.public_id)]  # ...until the reaper's pass
    assert containers() == []


@pytest.mark.django_db
def test_the_reaper_removes_workspaces_of_finished_attempts_only(
    artifacts_root: Path, tmp_path: Path
) -> None:
    from django.utils import timezone

    from runs.models import Attempt, AttemptStatus
    from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
    from runs.workers.leftovers import KEEP_MARKER, leftovers_remove

    commit = git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    write_task(
        tmp_path / "tasks",
        "leftover_ws",
        f"""
        repo: {{url: {tmp_path / "repo"}, commit: {commit}}}
        environment: {{docker_image: agentbench/py-runner:0.1.0, workdir: /workspace,
                       timeout_sec: 60}}
        run: {{command: "false"}}
        """,
    )
    import_tasks(tmp_path / "tasks", also=[tmp_path])
    from tasks_app.models import Task

    task = Task.objects.get(task_id="leftover_ws")
    config = model_config_for_variant("baseline")
    workspaces = {}
    for name, status in [
        ("finished", AttemptStatus.FINISHED),
        ("kept", AttemptStatus.FINISHED),
        ("running", AttemptStatus.RUNNING),
    ]:
        attempt = attempt_create_adhoc(task=task, model_config=config)
        folder = artifacts_root / f"run-{name}" / "leftover_ws__0"
        (folder / "workspace" / "repo").mkdir(parents=True)
        if name == "kept":
            (folder / KEEP_MARKER).touch()
        Attempt.objects.filter(pk=attempt.pk).update(
            status=status,
            artifacts_dir=f"run-{name}/leftover_ws__0",
            finished_at=timezone.now() if status == AttemptStatus.FINISHED else None,
        )
        workspaces[name] = folder / "workspace"

    report = leftovers_remove()

    assert report.workspaces == ["run-finished/leftover_ws__0"]
    assert not workspaces["finished"].exists()
    assert workspaces["kept"].exists() and workspaces["running"].exists()


@pytest.mark.django_db
def test_the_reaper_removes_gateway_sockets_only_of_finished_tries_with_no_gateway(
    request, monkeypatch
) -> None:
    """A gateway's socket folder is ``<attempt public id>.<random>``; a worker killed
    mid-attempt leaves it with a socket nobody listens on. The reaper removes such a folder
    once its attempt is final, never while it runs, never one a gateway still answers on, and
    one no attempt here owns only once it is old."""
    import os
    import shutil
    import socket as sockets

    from django.utils import timezone

    from runs.gateway import GatewayConfig, open_gateway
    from runs.models import Attempt, AttemptStatus
    from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
    from runs.workers.leftovers import UNOWNED_SOCKET_MIN_AGE_SEC, leftovers_remove
    from sandbox.gateway_mount import SOCKET_NAME, make_socket_dir

    # A root of this test's own (Unix socket paths are short: not under tmp_path).
    root = Path(f"/run/agentbench/gateway-test-{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("GATEWAY_SOCKET_ROOT", str(root))
    request.addfinalizer(lambda: shutil.rmtree(root, ignore_errors=True))
    import_tasks()
    from tasks_app.models import Task

    task = Task.objects.get(task_id="toy_fail_pytest")
    config = model_config_for_variant("baseline")
    ended = timezone.now()

    def attempt(status: str) -> str:
        made = attempt_create_adhoc(task=task, model_config=config)
        final = status == AttemptStatus.FINISHED
        Attempt.objects.filter(pk=made.pk).update(
            status=status, finished_at=ended if final else None
        )
        return str(made.public_id)

    def dead_gateway(owner: str = "", age: float = 60.0) -> Path:
        """What a killed worker leaves: the folder, the socket file, nobody listening."""
        folder = make_socket_dir(owner)
        with sockets.socket(sockets.AF_UNIX) as listener:
            listener.bind(str(folder / SOCKET_NAME))
            listener.listen(1)
        then = ended.timestamp() - age
        os.utime(folder, (then, then))
        return folder

    finished, running = attempt(AttemptStatus.FINISHED), attempt(AttemptStatus.RUNNING)
    left = {
        "finished": dead_gateway(finished),
        # A killed try of an attempt requeued and running again: never, however old.
        "running": dead_gateway(running, age=UNOWNED_SOCKET_MIN_AGE_SEC + 60),
        # Made after the attempt ended: a try of a retry, not the old one.
        "retried": dead_gateway(finished, age=-60),
        "unowned, young": dead_gateway(),
        "unowned, old": dead_gateway(age=UNOWNED_SOCKET_MIN_AGE_SEC + 60),
    }
    upstream = "http://127.0.0.1:9/v1"
    with (
        open_gateway(GatewayConfig(upstream, "sk-x", owner=finished)) as live,
        open_gateway(GatewayConfig(upstream, "sk-x")) as live_unowned,
    ):
        for gw in (live, live_unowned):  # serving, however old their folder looks
            old = ended.timestamp() - UNOWNED_SOCKET_MIN_AGE_SEC - 60
            os.utime(gw.socket_path.parent, (old, old))
        report = leftovers_remove()
        assert live.socket_path.exists() and live_unowned.socket_path.exists()

    gone = {name for name, folder in left.items() if not folder.exists()}
    assert gone == {"finished", "unowned, old"}
    assert sorted(report.gateway_sockets) == sorted(
        left[name].name for name in ("finished", "unowned, old")
    )
    assert left["finished"].name.startswith(finished + ".")
