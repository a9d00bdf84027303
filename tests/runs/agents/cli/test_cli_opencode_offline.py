"""OpenCode reaches nothing but its model's address: run as its definition runs it, in a network
namespace of its own whose only server is the scripted provider, every name it looks up is
recorded by a DNS server there (its resolver pointed at it), and it must look up none.

Why a test of its own: OpenCode is the one CLI here that fetches things by default (the models
catalogue from models.dev, hourly; its plugin package from the npm registry, at every start, in
the background). In the sandbox there is no network, so a lookup fails at once there, but the
definition must switch them off rather than count on that, and a run must not wait on one. The
control run, without those switches, shows the recorder sees what OpenCode asks for.

Needs root (a network and a mount namespace: ``unshare``) and ``ip``; the install comes from the
cache (built on first use, as in the end-to-end tests).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runs.agents.cli.definition import get_definition
from runs.agents.cli.install import ensure_install
from tests.conftest import REPO_ROOT

pytestmark = [pytest.mark.slow]

# Runs inside the namespaces: loopback up, /etc/resolv.conf pointed at a recording DNS server
# on 127.0.0.1:53 (answering "no such name"), the scripted provider, then OpenCode.
CHILD = r"""
import json, socket, subprocess, sys, threading
sys.path.insert(0, sys.argv[1])
from tests.support.fake_provider_plans import fix_plan, plan_provider

args = json.loads(sys.argv[2])
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
subprocess.run(["mount", "--bind", args["resolv"], "/etc/resolv.conf"], check=True)
names = []
dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
dns.bind(("127.0.0.1", 53))

def answer():
    while True:
        data, peer = dns.recvfrom(4096)
        i, labels = 12, []
        while i < len(data) and data[i]:
            labels.append(data[i + 1 : i + 1 + data[i]].decode(errors="replace"))
            i += 1 + data[i]
        names.append(".".join(labels))
        flags = b"\x81\x83"  # a response, recursion available, NXDOMAIN
        dns.sendto(data[:2] + flags + data[4:6] + bytes(6) + data[12 : i + 5], peer)

threading.Thread(target=answer, daemon=True).start()
plan = fix_plan(workdir=args["repo"], path="calc.py", old="// 2", new="/ 2",
                test_command="python3 calc.py")
with plan_provider(plan) as upstream:
    values = dict(args["values"], base_url=upstream.url("/v1"))
    argv = [t.format(**values) for t in args["command"]]
    env = {k: v.format(**values) for k, v in args["env"].items()}
    env |= {"HOME": args["home"], "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    with open(args["prompt"]) as stdin:
        done = subprocess.run(argv, stdin=stdin, capture_output=True, text=True, env=env,
                              cwd=args["repo"], timeout=240)
    paths = [r.path for r in upstream.requests]
print(json.dumps({"exit": done.returncode, "stdout": done.stdout, "stderr": done.stderr[-3000:],
                  "names": sorted(set(names)), "paths": paths}))
"""


def run_isolated(tmp_path: Path, *, without: tuple[str, ...] = ()) -> dict:
    """OpenCode's definition run on a tiny repository in namespaces of its own (``without``:
    environment variables of the definition left out), and what it reached."""
    definition = get_definition("opencode")
    install = ensure_install(definition).path
    run_dir = tmp_path / ("control" if without else "shipped")
    repo, home = run_dir / "repo", run_dir / "home"
    repo.mkdir(parents=True)
    (repo / "calc.py").write_text("print(3 // 2)\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@x.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "calc"], check=True)
    for folder in definition.spec.writable:
        (home / folder).mkdir(parents=True)
    (run_dir / "resolv.conf").write_text("nameserver 127.0.0.1\n")
    (run_dir / "prompt.txt").write_text("calc.py should print 1.5: fix it.\n")
    args = {
        "repo": str(repo),
        "home": str(home),
        "resolv": str(run_dir / "resolv.conf"),
        "prompt": str(run_dir / "prompt.txt"),
        "command": definition.spec.command,
        "env": {k: v for k, v in definition.spec.env.items() if k not in without},
        "values": {"install": str(install), "model": "gpt-4o", "token": "tok", "max_turns": 20},
    }
    unshare = ["unshare", "--net", "--mount", sys.executable, "-c", CHILD]
    done = subprocess.run(
        [*unshare, str(REPO_ROOT), json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    report["patched"] = (repo / "calc.py").read_text()
    return report


def test_opencode_reaches_only_its_model_and_looks_up_no_name(tmp_path):
    shipped = run_isolated(tmp_path)
    assert shipped["exit"] == 0, shipped["stderr"]
    assert shipped["patched"] == "print(3 / 2)\n"  # it worked: read, ran, fixed, finished
    assert shipped["paths"] and set(shipped["paths"]) == {"/v1/chat/completions"}
    assert shipped["names"] == []  # no models catalogue, no npm registry, no update check
    # The control: without its offline switches, the recorder sees what OpenCode asks for.
    control = run_isolated(
        tmp_path, without=("npm_config_offline", "OPENCODE_DISABLE_MODELS_FETCH")
    )
    assert control["exit"] == 0, control["stderr"]
    assert "registry.npmjs.org" in control["names"], control["names"]
    assert any("models" in name for name in control["names"]), control["names"]
