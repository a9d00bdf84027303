"""Imports of results produced elsewhere: a run folder (trajectories, harness reports,
predictions, Inspect logs), published SWE-bench results and predictions to evaluate, each
recorded as a published run of an external model (they write ``runs`` models, so they live on
the run side). One package per concern with its doors: the services, their REST router
(``api``), the admin upload pages (``admin``) and the ``ab`` commands (``cli``).

- ``run_import``: the one import path (``ab import-run``); ``results``: ``ab import-results`` on
  it; ``predictions``: a run that evaluates each patch; ``uploads``: an uploaded run folder.
- ``run_folder`` recognises what a folder holds, reading ``trajectories``, ``reports``,
  ``legacy`` reports, ``inspect_log`` and ``jsonfile`` (pure readers); ``outcomes`` records
  finished attempts; ``bulk`` is one INSERT for many rows.

May import the core of ``runs``, ``runs.transcript``, ``tasks_app`` and ``benchsite.accounts``;
only ``predictions`` reaches ``runs.workers`` (one lazy import, allowed by name in
tests/architecture/test_import_cycles.py). Nothing in ``tasks_app`` imports it.
"""
