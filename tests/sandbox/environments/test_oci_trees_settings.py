"""The choice between the engine and the registry for bubblewrap's image trees, and which
registries skopeo speaks to without TLS verification (sandbox/environments/oci_trees.py). No
engine needed: "no engine" is a Docker socket that does not exist. The pulls themselves are
tests/sandbox/environments/test_registry_images.py's (a real registry)."""

from __future__ import annotations

import pytest

from sandbox.environments import oci_trees


def test_auto_takes_the_registry_when_no_engine_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/oci-trees-test/docker.sock")
    monkeypatch.delenv(oci_trees.SOURCE_ENV, raising=False)
    assert oci_trees.from_registry_wanted()
    monkeypatch.setenv(oci_trees.SOURCE_ENV, "engine")
    assert not oci_trees.from_registry_wanted()
    monkeypatch.setenv(oci_trees.SOURCE_ENV, "registry")
    assert oci_trees.from_registry_wanted()


def test_a_bad_setting_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(oci_trees.SOURCE_ENV, "skopeo")
    with pytest.raises(ValueError, match="IMAGE_TREES_FROM='skopeo': expected one of auto"):
        oci_trees.from_registry_wanted()


def test_only_loopback_and_named_registries_skip_tls_verification(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(oci_trees.INSECURE_ENV, raising=False)
    for host in ("127.0.0.1:5000", "127.8.9.1", "localhost:5000", "[::1]:5000"):
        assert oci_trees.insecure(host), host
    for host in ("docker.io", "ghcr.io", "10.0.0.5:5000", "mirror.internal:5000"):
        assert not oci_trees.insecure(host), host
    monkeypatch.setenv(oci_trees.INSECURE_ENV, "mirror.internal:5000, 10.0.0.5:5000")
    assert oci_trees.insecure("mirror.internal:5000") and oci_trees.insecure("10.0.0.5:5000")
    assert not oci_trees.insecure("mirror.internal")
