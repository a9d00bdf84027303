"""The HTML pages: home, suites and tasks with their runs and attempts (``suites``), runs,
attempts and suite results (views only; URLs in runs/urls.py).

May import the core (models, services, access, artifacts, transcript) and ``runs.results``;
never ``cli``, ``workers``, ``pipeline`` or ``demo``: pages send work through ``runs.services``.
"""
