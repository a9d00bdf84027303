"""The env level's ``.pth`` hook (sandbox/environments/venv_links.py) tells an interpreter started
through a link to the venv's python from the plain interpreter, whatever the chain of links.

It is run for real, in built instances on both backends, by
tests/runs/pipeline/test_swebench_network.py (``tox --current-env``'s link imports the env's
pytest)."""

from __future__ import annotations

from pathlib import Path

from sandbox.environments import envspec, venv_links


def chain(tmp_path: Path) -> tuple[Path, Path]:
    """A fake root: /usr/bin/python3.9, venv/bin/python -> python3.9 -> /usr/bin/python3.9."""
    real = tmp_path / "usr" / "bin" / "python3.9"
    real.parent.mkdir(parents=True)
    real.write_text("")
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python3.9").symlink_to(real)
    (venv_bin / "python").symlink_to("python3.9")  # relative, as venv makes it
    return real, venv_bin


def test_a_link_to_the_venvs_python_is_through_the_venv(tmp_path):
    _, venv_bin = chain(tmp_path)
    tox_bin = tmp_path / "testbed" / ".tox" / "py39" / "bin"
    tox_bin.mkdir(parents=True)
    (tox_bin / "python").symlink_to(venv_bin / "python")
    (tox_bin / "python3").symlink_to("python")  # a link to the link
    for started in (tox_bin / "python", tox_bin / "python3", venv_bin / "python"):
        assert venv_links.through_venv(str(started), str(venv_bin)), started


def test_the_plain_interpreter_and_other_links_are_not(tmp_path):
    real, venv_bin = chain(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "python").symlink_to(real)
    (other / "loop").symlink_to(other / "loop")  # a loop ends, it does not hang
    for started in (real, other / "python", other / "loop", tmp_path / "missing"):
        assert not venv_links.through_venv(str(started), str(venv_bin)), started


def test_the_env_level_writes_the_hook_for_its_interpreter():
    steps = "\n".join(envspec.venv_link_hook("3.11"))
    site_dir = "/usr/local/lib/python3.11/dist-packages"
    assert f"cat > {site_dir}/_agentbench_venv.py <<" in steps
    assert Path(venv_links.__file__).read_text() in steps
    assert f"echo 'import _agentbench_venv' > {site_dir}/_agentbench_venv.pth" in steps
