"""Dockerfile environments (sandbox/environments/dockerfile.py) built by the real engine:
keyed by the content of their build context, a second build is a no-op, and each way a build
can fail ends with its named reason (the log's tail for a failed build), never a traceback.

Each test has a cache root of its own (``SWEBENCH_CACHE_DIR``) and a context no other test
builds, and removes its images: the shared cache and the other workers' images are left alone.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from sandbox.environments import dockerfile

pytestmark = pytest.mark.docker
BASE = "agentbench/py-runner:0.1.0"


@pytest.fixture
def own_cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("SWEBENCH_CACHE_DIR", str(root))
    monkeypatch.delenv("SWEBENCH_CACHE_MAX_GB", raising=False)
    return root


@pytest.fixture
def context(tmp_path) -> Path:
    folder = tmp_path / "context"
    folder.mkdir()
    marker = uuid.uuid4().hex
    (folder / "hello.txt").write_text(f"hello {marker}\n")
    (folder / "Dockerfile").write_text(f"FROM {BASE}\nCOPY hello.txt /opt/hello.txt\n")
    yield folder
    for tag in _tags_built_from(folder):
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True)


def _tags_built_from(folder: Path) -> list[str]:
    try:
        key = dockerfile.context_key(folder, dockerfile_text=dockerfile.dockerfile_text(folder))
    except dockerfile.DockerfileBuildError:
        return []
    return [dockerfile.tag_for(key)]


def test_a_second_build_of_the_same_context_is_a_no_op(own_cache, context):
    first = dockerfile.build(context, timeout_sec=300)
    second = dockerfile.build(context, timeout_sec=300)

    assert first.reused is False and second.reused is True
    assert second.image_id == first.image_id and second.tag == first.tag
    assert second.build_seconds == first.build_seconds  # the cold build's, from its record
    log = Path(first.log_path).read_text()
    assert "COPY hello.txt /opt/hello.txt" in log and "Successfully tagged" in log
    shown = subprocess.run(
        ["docker", "run", "--rm", first.tag, "cat", "/opt/hello.txt"],
        capture_output=True,
        text=True,
    )
    assert shown.stdout == (context / "hello.txt").read_text()


def test_a_changed_file_is_a_new_image(own_cache, context):
    first = dockerfile.build(context, timeout_sec=300)
    (context / "hello.txt").write_text("changed\n")

    second = dockerfile.build(context, timeout_sec=300)

    assert second.reused is False
    assert second.key != first.key
    subprocess.run(["docker", "image", "rm", "-f", first.tag], capture_output=True)


def test_a_failing_build_names_its_reason_and_shows_the_log_tail(own_cache, context):
    (context / "Dockerfile").write_text(
        f"FROM {BASE}\nRUN echo the-step-that-breaks >&2 && exit 7\n"
    )

    with pytest.raises(dockerfile.DockerfileBuildError) as caught:
        dockerfile.build(context, timeout_sec=300)

    assert caught.value.reason == dockerfile.BUILD_FAILED
    assert "the-step-that-breaks" in str(caught.value)  # the log's tail, in the message
    assert caught.value.log_path is not None and caught.value.log_path.is_file()


def test_a_build_over_its_timeout_is_killed_and_named(own_cache, context):
    (context / "Dockerfile").write_text(f"FROM {BASE}\nRUN sleep 120\n")

    with pytest.raises(dockerfile.DockerfileBuildError) as caught:
        dockerfile.build(context, timeout_sec=3)

    assert caught.value.reason == dockerfile.BUILD_TIMEOUT
    assert "within 3 s" in str(caught.value)
    assert "[build-timeout]" in caught.value.log_path.read_text()


def test_an_image_bigger_than_the_whole_budget_is_refused_and_removed(
    own_cache, context, monkeypatch
):
    monkeypatch.setenv("SWEBENCH_CACHE_MAX_GB", "0.001")  # 1 MB: the base image alone is more

    with pytest.raises(dockerfile.DockerfileBuildError) as caught:
        dockerfile.build(context, timeout_sec=300, max_bytes=1_000_000)

    assert caught.value.reason == dockerfile.OVER_BUDGET
    (tag,) = _tags_built_from(context)
    assert subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode


def test_a_context_without_a_dockerfile_is_a_bad_context(own_cache, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()

    with pytest.raises(dockerfile.DockerfileBuildError) as caught:
        dockerfile.build(empty, timeout_sec=30)

    assert caught.value.reason == dockerfile.BAD_CONTEXT
    assert "no Dockerfile" in str(caught.value)


def test_dockerfile_build_network_none_gives_the_build_no_network(own_cache, context, monkeypatch):
    monkeypatch.setenv("DOCKERFILE_BUILD_NETWORK", "none")
    (context / "Dockerfile").write_text(
        f'FROM {BASE}\nRUN python3 -c "import socket; print(sorted(i[1] for i in '
        f'socket.if_nameindex()))" && ip -o link 2>/dev/null; '
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)\"\n"
    )

    with pytest.raises(dockerfile.DockerfileBuildError) as caught:
        dockerfile.build(context, timeout_sec=300)

    assert caught.value.reason == dockerfile.BUILD_FAILED
    log = caught.value.log_path.read_text()
    assert "--network none" in log.splitlines()[0]
    assert "['lo']" in log  # loopback only
