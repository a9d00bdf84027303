"""Issue 28, degraded item: a tampered cached CLI install was used without a check (the manifest
recorded sizes, nothing read them). Now the manifest records each file's sha256, and a cached
install is checked before use (mounted into a sandbox, or run on the worker): a changed,
missing or added file, or a manifest from before the hashes, gets it rebuilt from the pinned
package; a rebuild that fails is an InstallError naming what was wrong.

Real installs: ``ab agents --install`` builds the tiny npm package of
tests/runs/agents/cli/test_cli_agent_definitions.py from the registry into a cache folder of the
test's own (the shared /var/lib/agentbench/agents serves other sessions' sandboxes: never tampered
here).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from runs.agents.cli import definition as definitions
from runs.agents.cli import install
from runs.agents.cli.definition import get_definition
from runs.agents.cli.install import InstallError, ensure_install
from tests.runs.agents.cli.test_cli_agent_definitions import write_definition
from tests.support.ab_cli import ab_main


@pytest.fixture
def built(tmp_path: Path, monkeypatch, db):  # ab agents lists the added CLIs too: a database
    """The tiny CLI's install, built by ``ab agents --install tiny`` into the test's cache."""
    folder = tmp_path / "definitions"
    folder.mkdir()
    write_definition(folder, "tiny")
    monkeypatch.setattr(definitions, "DEFINITIONS_DIR", folder)
    monkeypatch.setenv("AGENT_INSTALL_ROOT", str(tmp_path / "agents"))
    done = ab_main("agents", "--install", "tiny")
    assert done.returncode == 0, done
    definition = get_definition("tiny")
    path = install.cached_install(definition)
    assert path is not None
    return definition, path


def test_the_manifest_records_each_files_sha256(built):
    definition, path = built
    manifest = json.loads((path / "manifest.json").read_text())
    index = (path / "package/index.js").read_bytes()

    assert manifest["sha256"] == {"package/index.js": hashlib.sha256(index).hexdigest()}
    again = ensure_install(definition)
    assert not again.built and not again.repaired


def test_a_file_changed_in_place_same_size_and_mtime_is_caught_and_rebuilt(built):
    _, path = built
    target = path / "package/index.js"
    original = target.read_bytes()
    before = target.stat()
    # Same length, same mtime: only the content (and the ctime no one can set) differs.
    target.write_bytes(original.replace(b"return", b"RETURN", 1))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert target.stat().st_size == before.st_size
    done = ab_main("agents", "--install", "tiny")
    assert done.returncode == 0
    printed = done.stdout
    assert "rebuilt: the cached one failed its check: package/index.js does not match" in printed
    assert target.read_bytes() == original


@pytest.mark.parametrize("damage", ["missing", "added", "old manifest", "other key"])
def test_a_missing_or_added_file_or_an_unhashed_manifest_is_rebuilt(built, damage):
    definition, path = built
    manifest_path = path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    if damage == "missing":
        (path / "package/index.js").unlink()
        words = "package/index.js is missing"
    elif damage == "added":
        (path / "package/preload.js").write_text("steal()")
        words = "package/preload.js is not in the manifest"
    elif damage == "old manifest":
        del manifest["sha256"]
        manifest_path.write_text(json.dumps(manifest))
        words = "records no sha256"
    else:
        manifest_path.write_text(json.dumps(manifest | {"key": "0" * 64}))
        words = "is of another install"
    repaired = ensure_install(definition)
    assert repaired.built and words in repaired.repaired, repaired.repaired
    assert sorted(p.name for p in (path / "package").iterdir()) == ["index.js"]
    assert install.install_problem(definition, path) is None


def test_a_tampered_install_that_cannot_be_rebuilt_is_a_named_failure_and_is_gone(
    built, monkeypatch
):
    definition, path = built
    (path / "package/index.js").write_text("steal()")
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:9/")  # nothing listens
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    monkeypatch.setenv("npm_config_cache", str(path.parent / "empty-npm-cache"))
    with pytest.raises(InstallError) as refused:
        ensure_install(definition)
    message = str(refused.value)
    assert "failed its check (package/index.js does not match its sha256" in message
    assert "rebuilding it failed" in message
    assert install.cached_install(definition) is None  # never mounted again as it was


def test_a_process_hashes_an_install_once_then_only_compares_stats(built, monkeypatch):
    definition, path = built
    hashed: list[Path] = []
    real = install._sha256
    monkeypatch.setattr(install, "_sha256", lambda p: hashed.append(p) or real(p))
    install._VERIFIED.clear()  # a fresh worker process
    for _ in range(3):
        assert install.install_problem(definition, path) is None
    assert hashed == [path / "package/index.js"]
    (path / "package/index.js").touch()  # a stat change: hashed again (and still right)
    assert install.install_problem(definition, path) is None
    assert len(hashed) == 2


def test_a_venv_install_refuses_an_added_pth_file_but_not_pythons_own_caches(
    tmp_path: Path, monkeypatch
):
    """A PyPI install (a venv run on the worker, like mini-swe-agent's): a ``.pth`` file added
    to site-packages would run code in every process of that venv."""
    folder = tmp_path / "definitions"
    folder.mkdir()
    install_section = {"kind": "pypi", "package": "six", "version": "1.17.0"}
    write_definition(
        folder,
        "tinypy",
        install=install_section,
        runs_in="worker",
        command=["{install}/venv/bin/python", "-c", "import six"],
    )
    monkeypatch.setattr(definitions, "DEFINITIONS_DIR", folder)
    monkeypatch.setenv("AGENT_INSTALL_ROOT", str(tmp_path / "agents"))
    definition = get_definition("tinypy")
    path = ensure_install(definition).path
    (site,) = (path / "venv/lib").glob("python3*/site-packages")
    assert any(
        name.endswith("six.py")
        for name in json.loads((path / "manifest.json").read_text())["sha256"]
    )
    # Python writing its caches at run time is no tampering.
    (site / "__pycache__").mkdir(exist_ok=True)
    (site / "__pycache__" / "late.cpython-311.pyc").write_bytes(b"cache")
    assert install.install_problem(definition, path) is None
    (site / "evil.pth").write_text("import os; os.system('steal')\n")
    repaired = ensure_install(definition)
    assert repaired.built and "evil.pth is not in the manifest" in repaired.repaired
    assert not (site / "evil.pth").exists()
