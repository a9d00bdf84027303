"""The HTML pages of runs, attempts and suite results (views only; URLs in runs/urls.py).

May import the core (models, services, access, artifacts, transcript) and ``runs.results``;
never ``cli``, ``workers``, ``pipeline`` or ``demo``: pages send work through ``runs.services``.
"""
