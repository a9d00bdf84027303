"""The figures: leaderboard, compare, taxonomy report, and the scoring and statistics under them.

``selection`` is the one place that reads results from the database (one grouped query);
``scoring`` and ``stats`` are pure; ``leaderboard``, ``compare`` and ``taxonomy_report`` shape
them for every surface (pages, API, CSV, CLI), so a selection shows the same figure everywhere.
May import ``runs.models``, ``runs.taxonomy`` and ``tasks_app.models`` only.
"""
