"""Conda specifications as the pip install an offline env level runs (no conda here).

One table, ``CONDA_TO_PIP``, says for every conda package name that is not simply the same
project on PyPI what becomes of it, with why: another PyPI name, nothing (what the venv or a
wheel already brings), or "not on PyPI" (left out, named in the build's note and in any
failure). A name not in the table is taken to be the same project on PyPI; if it is not, pip
says so and the build fails naming it. Channels (``-c conda-forge``, ``channels:``) and build
strings (``numpy=1.23=py310h...``) have no pip meaning and are dropped, with a note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

PIP = "pip"  # install this PyPI project instead
SKIP = "skip"  # nothing to install: the venv or the wheels of other packages bring it
MISSING = "missing"  # cannot be had from PyPI: left out

# conda name -> (what, PyPI name or "", reason). Debian packages a conda package brought along
# (its C libraries) are in CONDA_APT.
CONDA_TO_PIP: dict[str, tuple[str, str, str]] = {
    "python": (SKIP, "", "the interpreter is the level's own (see envspec.interpreter_for)"),
    "pip": (SKIP, "", "the venv has pip"),
    "setuptools": (PIP, "setuptools", "same project"),
    "matplotlib-base": (
        PIP,
        "matplotlib",
        "conda splits off the GUI backends; one project on PyPI",
    ),
    "dask-core": (PIP, "dask", "conda's dask without extras is PyPI's dask"),
    "iris": (PIP, "scitools-iris", "Iris is published on PyPI as scitools-iris"),
    "netcdf4": (PIP, "netCDF4", "same project, PyPI spells it netCDF4"),
    "pytables": (PIP, "tables", "PyTables is published on PyPI as tables"),
    "pytorch": (PIP, "torch", "PyTorch is published on PyPI as torch"),
    "pyqt": (PIP, "PyQt5", "conda's pyqt is Qt 5's bindings"),
    "typing_extensions": (PIP, "typing-extensions", "same project"),
    "hdf5": (SKIP, "", "a C library: the h5py, netCDF4 and tables wheels carry their own"),
    "libnetcdf": (SKIP, "", "a C library: the netCDF4 wheels carry their own"),
    "ffmpeg": (SKIP, "", "a program, installed from Debian (CONDA_APT) when named"),
    "graphviz": (SKIP, "", "a program, installed from Debian (CONDA_APT) when named"),
    "cdms2": (MISSING, "", "not on PyPI: published on conda-forge only (and retired in 2023)"),
}
# Debian packages the conda package brought with it (C libraries its PyPI build needs).
CONDA_APT: dict[str, tuple[str, ...]] = {
    # cartopy before 0.22 has no wheels: its sdist builds against GEOS and PROJ.
    "cartopy": ("libgeos-dev", "libproj-dev", "proj-data", "proj-bin"),
    # cfgrib reads GRIB through the ecCodes C library (conda-forge's eccodes).
    "cfgrib": ("libeccodes0",),
    "ffmpeg": ("ffmpeg",),
    "graphviz": ("graphviz",),
}


@dataclass
class Translation:
    """What the pip install of a conda specification is."""

    requirements: list[str] = field(default_factory=list)  # for ``pip install``
    pip_section: list[str] = field(default_factory=list)  # the yml's own ``pip:`` list
    apt: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # "name (reason)"
    notes: list[str] = field(default_factory=list)

    def note(self) -> str:
        parts = []
        if self.missing:
            parts.append("conda packages left out (not on PyPI): " + "; ".join(self.missing))
        parts += self.notes
        return ". ".join(parts)


_SPEC = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$")


def translate_names(specs: list[str], translation: Translation | None = None) -> Translation:
    """Conda match specs (``numpy``, ``numpy=1.23``, ``numpy>=1.20,<2``, ``numpy 1.23 py310_0``,
    ``conda-forge::numpy``) as pip requirements, through ``CONDA_TO_PIP``."""
    out = translation or Translation()
    for raw in specs:
        spec = raw.split("#", 1)[0].strip()
        if not spec:
            continue
        if "::" in spec:
            spec = spec.split("::", 1)[1]
            _add_note(out, "channels named in package specs are dropped (PyPI has none)")
        match = _SPEC.match(spec)
        if not match:
            out.missing.append(f"{raw} (not a conda package spec)")
            continue
        name, rest = match.group(1), match.group(2).strip()
        version = _pip_version(rest, out)
        what, pip_name, reason = CONDA_TO_PIP.get(name.lower(), (PIP, name, ""))
        out.apt += [p for p in CONDA_APT.get(name.lower(), ()) if p not in out.apt]
        if what == SKIP:
            continue
        if what == MISSING:
            out.missing.append(f"{name} ({reason})")
            continue
        out.requirements.append(pip_name + version)
    return out


def _pip_version(rest: str, out: Translation) -> str:
    """A conda version constraint as pip's: ``=1.23`` is ``==1.23.*``, a build string after
    the version (``=1.23=py310h``, ``1.23 py310_0``) is dropped."""
    if not rest:
        return ""
    parts = rest.split()
    if len(parts) > 1:
        _add_note(out, "conda build strings are dropped (no pip meaning)")
    version = parts[0]
    if version.count("=") >= 2 and not version.startswith(("==", ">=", "<=", "!=")):
        version = version.rsplit("=", 1)[0]  # name=1.23=build
        _add_note(out, "conda build strings are dropped (no pip meaning)")
    if version.startswith(("==", "<", ">", "!", "~")):
        return version
    # conda's "=1.23" and "1.23" are fuzzy: any 1.23.x
    version = version.lstrip("=").rstrip("*").rstrip(".")
    return f"=={version}.*"
    return version


def _add_note(out: Translation, note: str) -> None:
    if note not in out.notes:
        out.notes.append(note)


def translate_environment_yml(text: str, *, source: str = "environment.yml") -> Translation:
    """An ``environment.yml`` as a pip install: its ``dependencies`` through the table, its
    ``pip:`` list as it is (with the official harness's replacements of yanked packages)."""
    from swebench.harness.test_spec.python import REPLACE_REQ_PACKAGES

    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"{source}: not YAML: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("dependencies"), list):
        raise ValueError(f"{source}: no list of dependencies")
    out = Translation()
    if data.get("channels"):
        _add_note(out, f"channels {', '.join(map(str, data['channels']))} dropped (PyPI has none)")
    names = []
    for dep in data["dependencies"]:
        if isinstance(dep, dict) and "pip" in dep:
            for line in dep["pip"] or []:
                line = str(line)
                for old, new in REPLACE_REQ_PACKAGES:
                    if line.split("=")[0].split("<")[0].split(">")[0].strip() == old:
                        line = new + line[len(old) :] if new else ""
                if line:
                    out.pip_section.append(line)
        elif isinstance(dep, str):
            names.append(dep)
        else:
            raise ValueError(f"{source}: dependency {dep!r} is neither a name nor a pip: list")
    return translate_names(names, out)
