"""A ``.pth`` hook for the env level's interpreter: started through a link to ``/opt/venv``'s
python, it is that venv's python.

The official images' ``testbed`` environment is a conda prefix: its python is a real binary
that finds its packages from wherever it is linked. Ours is a venv, whose python finds its
packages only through the ``pyvenv.cfg`` beside the path it was started by. A tool that links
to the venv's python from elsewhere (``tox --current-env``: ``.tox/py39/bin/python ->
/opt/venv/bin/python``, sphinx 5.x's test command) then gets the bare Debian interpreter,
"No module named pytest", where the official run passes.

``envspec.env_recipe`` writes this file's text into the interpreter's
``/usr/local/lib/pythonX.Y/dist-packages`` with a ``.pth`` that imports it: Debian's ``site``
runs it for every interpreter outside a venv, and it adds the venv's site-packages (and their
``.pth`` files: the editable /testbed) only when the interpreter was started through a chain of
links that passes through the venv's ``bin``. Plain ``python3.X`` and the venv itself are left
as they were. Standard library only: it runs inside the build trees and images.
"""

import os
import site
import sys

VENV = "/opt/venv"
MODULE = "_agentbench_venv"  # the name it is written under in the image
MAX_LINKS = 40  # the kernel's own limit on a chain of symbolic links


def through_venv(path: str, venv_bin: str = VENV + "/bin") -> bool:
    """Whether ``path`` reaches the interpreter through a link in ``venv_bin``."""
    for _ in range(MAX_LINKS):
        if not os.path.islink(path):
            return False
        path = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
        if os.path.dirname(path) == venv_bin:
            return True
    return False


def enter_venv() -> bool:
    """Make this interpreter the venv's when it was started through a link to it."""
    if sys.prefix != sys.base_prefix or not through_venv(os.path.abspath(sys.executable)):
        return False
    sys.prefix = sys.exec_prefix = VENV
    site.addsitedir(f"{VENV}/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages")
    return True


if __name__ == MODULE:  # imported by the .pth in the image (never when imported as a module here)
    enter_venv()
