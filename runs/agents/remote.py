"""The helper program the tools run INSIDE the sandbox (``python3 -I -c SCRIPT op args``).

Every file operation happens in the sandbox, never through host paths: a symlink the agent
planted in the workspace then resolves in the sandbox's own view, and the path checks below
(``realpath`` must stay under the workspace) hold whatever the backend. The program prints one
JSON object on stdout. It uses only the standard library of the runner image's Python.
"""

from __future__ import annotations

SCRIPT = r"""
import difflib, fnmatch, json, os, subprocess, sys

op, args = sys.argv[1], json.loads(sys.argv[2])
ROOT = os.path.realpath(args["root"])
WORKDIR = args["workdir"]
SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "venv", ".tox", ".mypy_cache",
             ".pytest_cache", ".ruff_cache", "site-packages"}


def out(**data):
    print(json.dumps(data))
    sys.exit(0)


def inside(path):
    real = os.path.realpath(path)
    return real == ROOT or real.startswith(ROOT + os.sep)


def resolve(path):
    full = os.path.normpath(os.path.join(WORKDIR, path))
    if not inside(full):
        out(ok=False, error=f"path escapes the workspace: {path!r}")
    return full


def walk(top, limit):
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in SKIP_DIRS
                             and not os.path.islink(os.path.join(dirpath, d)))
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            if name.startswith(".") and name not in (".gitignore", ".env.example"):
                continue
            if os.path.islink(full) and not inside(full):
                continue
            found.append(os.path.relpath(full, WORKDIR))
            if len(found) >= limit:
                return found, True
    return found, False


def matches(rel, pattern):
    if not pattern:
        return True
    if "/" not in pattern:
        return fnmatch.fnmatch(os.path.basename(rel), pattern)
    return fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(rel, pattern.replace("**/", ""))


if op == "list":
    top = resolve(args["dir"])
    if not os.path.isdir(top):
        out(ok=False, error=f"not a directory: {args['dir']!r}")
    files, truncated = walk(top, 200000)
    files = [f for f in files if matches(f, args.get("glob"))]
    limit = args["limit"]
    out(ok=True, files=files[:limit], truncated=truncated or len(files) > limit,
        total=len(files))

if op == "read":
    full = resolve(args["path"])
    if os.path.isdir(full):
        entries = sorted(os.listdir(full))[:500]
        out(ok=True, directory=True, entries=[e + ("/" if os.path.isdir(os.path.join(full, e))
                                                   else "") for e in entries])
    if not os.path.isfile(full):
        files, _ = walk(WORKDIR, 20000)
        base = os.path.basename(args["path"])
        same = [f for f in files if os.path.basename(f) == base]
        close = difflib.get_close_matches(args["path"], files, n=5, cutoff=0.5)
        out(ok=False, error=f"no such file: {args['path']!r}",
            suggestions=list(dict.fromkeys(same + close))[:8])
    with open(full, "rb") as handle:
        data = handle.read(args["max_bytes"] + 1)
    if b"\0" in data[:8192]:
        out(ok=False, error=f"binary file: {args['path']!r}")
    text = data[: args["max_bytes"]].decode("utf-8", errors="replace")
    out(ok=True, directory=False, text=text, cut_bytes=len(data) > args["max_bytes"],
        size=os.path.getsize(full))

# realpath resolves every existing component, so a symlinked parent directory that points out
# of the workspace is caught even when the file itself does not exist yet.
if op == "apply":
    refused = sorted({p for p in args["paths"] if not inside(os.path.join(WORKDIR, p))})
    if refused:
        out(ok=False, flags=[], output="", refused=refused,
            error="path escapes the workspace through a symbolic link: " + ", ".join(refused))
    patch = "".join(os.environ.get(f"AB_PATCH_{i}", "") for i in range(args["chunks"]))
    tmp = "/tmp/agentbench-patch-%d.diff" % os.getpid()
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(patch)
    base = ["git", "apply", "-p%d" % args["strip"], "--verbose"]
    attempts = [[]] if args["strict"] else [[], ["--recount"], ["--recount", "-C1",
                                                                "--ignore-whitespace"]]
    errors = []
    for extra in attempts:
        check = subprocess.run(base + extra + ["--check", tmp], capture_output=True, text=True)
        if check.returncode == 0:
            done = subprocess.run(base + extra + [tmp], capture_output=True, text=True)
            os.unlink(tmp)
            out(ok=done.returncode == 0, flags=extra, output=done.stdout + done.stderr,
                error="" if done.returncode == 0 else done.stderr)
        errors.append(check.stderr.strip())
    os.unlink(tmp)
    out(ok=False, flags=[], output="", error=errors[0] if errors else "git apply failed")

out(ok=False, error=f"unknown operation {op!r}")
"""
