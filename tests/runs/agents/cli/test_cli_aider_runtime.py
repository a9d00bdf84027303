"""aider's own Python (runs/agents/cli/debian_root.py): the definition's ``debian`` runtime is
checked like any install section, its PyPI install is keyed by it, and in the sandbox, on both
backends, the real root and site (from the shared install cache) run aider: its native
extensions load, the git it starts is the image's (the root's libraries are not inherited),
and it writes nowhere but the workspace and its HOME."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from runs.agents.cli import debian_root
from runs.agents.cli.agent import SANDBOX_HOME, CliResources
from runs.agents.cli.definition import DefinitionError, get_definition, load_definition, render
from runs.agents.cli.install import ensure_install
from sandbox import open_sandbox
from sandbox.base import SandboxConfig
from tests.runs.agents.cli.test_cli_agent_definitions import write_definition

AIDER = get_definition("aider")
ROOT = AIDER.spec.runtime.model_dump() if AIDER.spec.runtime else {}


def test_a_debian_runtime_is_checked_naming_each_field(tmp_path: Path):
    bad = dict(ROOT, suite="", package="bash", keep=[])
    path = write_definition(tmp_path, "badroot", runtime=bad)
    with pytest.raises(DefinitionError) as caught:
        load_definition(path)
    text = str(caught.value)
    assert f"{path}: runtime.suite: name the Debian suite" in text
    assert f"{path}: runtime.package: a Debian root is made for python3.X" in text
    assert f"{path}: runtime.keep: name the files of the root to keep" in text
    path = write_definition(tmp_path, "outroot", runtime=dict(ROOT, keep=["/etc/shadow"]))
    with pytest.raises(DefinitionError, match=r"runtime\.keep: .*must be a path inside the"):
        load_definition(path)
    path = write_definition(tmp_path, "rootinstall", install=ROOT)
    with pytest.raises(DefinitionError, match=r"install\.kind: a Debian root is a runtime"):
        load_definition(path)


def test_a_pypi_install_runs_in_the_sandbox_only_on_a_debian_runtime(tmp_path: Path):
    raw = yaml.safe_load(AIDER.text)
    raw.pop("runtime")
    raw["command"] = ["{install}/site/x"]
    path = tmp_path / "noroot.yaml"
    path.write_text(yaml.safe_dump(raw | {"name": "noroot"}))
    with pytest.raises(DefinitionError, match=r"noroot.yaml: runs_in: a PyPI install runs on"):
        load_definition(path)
    # The site is built for the root's Python: another root is another install.
    raw = yaml.safe_load(AIDER.text)
    raw["runtime"]["version"] = "3.11.2-6+deb12u99"
    path = tmp_path / "aider.yaml"
    path.write_text(yaml.safe_dump(raw))
    other = load_definition(path)
    assert other.on_runtime and other.install_key != AIDER.install_key
    assert other.runtime_part().install_key != AIDER.runtime_part().install_key


def test_links_out_of_the_root_are_dropped_and_versions_read(tmp_path: Path):
    lib = tmp_path / "usr/lib/python3.11"
    lib.mkdir(parents=True)
    (lib / "os.py").write_text("")
    (lib / "inside.py").symlink_to("os.py")
    (lib / "sitecustomize.py").symlink_to("/etc/python3.11/sitecustomize.py")
    (lib / "climbs.py").symlink_to("../../../../outside.py")
    dropped = debian_root._drop_links_out(tmp_path, "usr/lib/python3.11")
    assert sorted(dropped) == [
        "usr/lib/python3.11/climbs.py",
        "usr/lib/python3.11/sitecustomize.py",
    ]
    assert (lib / "inside.py").is_symlink()
    status = tmp_path / "status"
    status.write_text(
        "Package: python3.11\nStatus: install ok installed\nVersion: 3.11.2-6+deb12u8\n\n"
        "Package: gone\nStatus: deinstall ok config-files\nVersion: 1\n"
    )
    assert debian_root.installed_versions(status) == {"python3.11": "3.11.2-6+deb12u8"}


def test_a_mirror_that_moved_on_fails_the_build_naming_both_versions(tmp_path: Path):
    """The mirror's current version is what it is here: debootstrap's part (making the tree)
    is stood in for by a function writing the tree's package list with another version."""
    if os.geteuid() != 0:
        pytest.skip("building a root needs root")

    def debootstrap(argv, **_):
        status = Path(argv[-2]) / "var/lib/dpkg/status"
        status.parent.mkdir(parents=True)
        status.write_text("Package: python3.11\nStatus: install ok installed\nVersion: 3.11.9\n")
        return ""

    spec = AIDER.spec.runtime
    assert spec is not None
    staging = tmp_path / "staging"
    staging.mkdir()
    with pytest.raises(debian_root.RootError) as caught:
        debian_root.build_root("aider runtime", spec, staging, debootstrap)
    assert str(caught.value) == (
        "aider runtime: bookworm has python3.11 3.11.9, the definition pins "
        f"{spec.version} (the mirror moved on: pin the new version)"
    )
    assert not (staging / ".root").exists()  # the scratch tree is gone


@pytest.fixture(scope="session")
def aider_installs() -> tuple[Path, Path]:
    """aider's site and its Debian root from the shared cache (built the first time: about
    a minute and a half)."""
    runtime = AIDER.runtime_part()
    assert runtime is not None
    return ensure_install(AIDER).path, ensure_install(runtime).path


PROBE = """
import json, os, shutil, subprocess, sys
import numpy, scipy.sparse, tiktoken, PIL.Image, psutil
from grep_ast.tsl import get_parser
tree = get_parser("python").parse(b"def mean(values):\\n    return 1\\n")
import git
child = subprocess.run(["sh", "-c", "cat /proc/self/maps"], capture_output=True, text=True)
print(json.dumps({
    "python": sys.version.split()[0],
    "tree": tree.root_node.type,
    "git": shutil.which("git"),
    "git_version": git.Git(".").version(),
    "child_maps": child.stdout,
    "ld_library_path": os.environ.get("LD_LIBRARY_PATH"),
}))
"""


def test_aider_runs_on_its_root_in_the_sandbox_with_the_images_git(
    aider_installs, backend, tmp_path: Path
):
    install, runtime = aider_installs
    res = CliResources("aider", AIDER, install, SimpleNamespace(), runtime=runtime)
    fields = res.sandbox_fields()
    values = {"install": res.mount_target, "runtime": res.runtime_target, "home": SANDBOX_HOME}
    python = [render(t, values) for t in AIDER.spec.command[:5]]  # the loader and python
    assert python[-1] == f"{res.runtime_target}/usr/bin/python3.11"
    repo = tmp_path / "ws" / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "calc.py").write_text("def mean(values):\n    return sum(values)\n")
    # A task's own package named like a module aider imports (the standard library's json,
    # after aider's site on sys.path): never imported in its place.
    (repo / "json").mkdir()
    (repo / "json" / "__init__.py").write_text("raise SystemExit('the workspace shadowed json')\n")
    config = SandboxConfig(
        name=f"test-aider-{tmp_path.name[-12:]}",
        workspace=tmp_path / "ws",
        memory_mb=1024,
        pids_limit=128,
        **fields,
    )
    with open_sandbox(config, backend) as sb:
        assert sb.exec("python3 --version", timeout=30).stdout.startswith("Python 3.")
        setup = sb.exec(
            "git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm base"
            f" && mkdir -p {SANDBOX_HOME}/.aider && touch /workspace/before && sleep 1",
            timeout=60,
            cwd="repo",
        )
        assert setup.exit_code == 0, setup.stderr
        probe = sb.exec(
            [
                *python,
                "-I",
                "-c",
                f"import sys; sys.path[:0] = ['{res.mount_target}/site']\n" + PROBE,
            ],
            timeout=120,
            cwd="repo",
        )
        assert probe.exit_code == 0, probe.stderr
        found = json.loads(probe.stdout)
        assert (found["python"], found["tree"]) == ("3.11.2", "module")
        # The image's git, on the image's loader: nothing of the root in a child's memory.
        assert found["git"] == "/usr/bin/git" and found["git_version"]
        assert found["ld_library_path"] is None
        assert "/lib/x86_64-linux-gnu/libc.so.6" in found["child_maps"]
        assert res.runtime_target not in found["child_maps"]
        # aider itself, as the definition starts it, building its repo map (tree-sitter, git
        # ls-files) without a model call; then what it wrote, outside /proc and the like.
        values |= {"model": "gpt-4o", "prompt_file": "/dev/null"}
        argv = [render(t, values) for t in AIDER.spec.command]
        shown = sb.exec(
            shlex.join([*argv, "--show-repo-map"]),
            timeout=120,
            cwd="repo",
            env={"HOME": SANDBOX_HOME}
            | {
                k: render(v, values | {"base_url": "http://127.0.0.1:9", "token": "x"})
                for k, v in AIDER.spec.env.items()
            },
        )
        assert shown.exit_code == 0, shown.stdout + shown.stderr
        assert "src/calc.py" in shown.stdout and "def mean" in shown.stdout, shown.stdout
        written = sb.exec(
            "find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune"
            " -o -newer /workspace/before \\( -type f -o -type l \\) -print",
            timeout=120,
        )
        planted = sb.exec(f"touch {res.runtime_target}/usr/bin/planted", timeout=30)
        assert planted.exit_code != 0 and "Read-only file system" in planted.stderr
    paths = sorted(written.stdout.split())
    outside = [p for p in paths if not p.startswith(("/workspace/", f"{SANDBOX_HOME}/"))]
    assert outside == [], paths
    assert any(p.startswith("/workspace/repo/.aider.tags.cache.v") for p in paths), paths
    assert not (runtime / "usr/bin/planted").exists()
