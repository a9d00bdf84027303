"""Environments to run tasks in, built offline: SWE-bench instances as layered rootfs trees
and Docker images, their cache and its disk budget. Django-free, like the rest of ``sandbox``:
``ab swebench build``, the attempt pipeline and the task pages call it with plain values, and
``tests/architecture/test_import_cycles.py`` checks that importing it loads no Django.

May import: the standard library, ``yaml``, ``packaging``, the official ``swebench`` package
(its specifications, imported when first needed) and ``sandbox.environments`` itself; never
``tasks_app``, ``runs``, ``benchsite`` or Django.

- ``repos``: offline git copies of the repositories (archives unpacked once, within a limit).
- ``envspec``: what the official harness installs for an instance, as steps this machine runs;
  ``conda`` (conda specifications as pip installs), ``venv_links`` (the env level's ``.pth``
  hook), ``dated_index`` (a package index as of a date).
- ``build``: the levels (base, env, instance) and the builder; ``parallel``: many at once.
- ``trees``: rootfs trees and the steps run in them; ``docker_images`` and ``image_layers``:
  Docker images made from the trees, one layer per level.
- ``cache``: the levels on disk, their records and use leases; ``eviction``: the disk budget.
- ``inventory``: every cached environment of every kind (levels, pulled images and trees,
  Dockerfile images: ``dockerfile_store``, fetched commits), for ``du`` and ``prune``.
- ``handles``: the environment of a task whatever its source, leased while an attempt uses it.
"""
