"""The figures: leaderboard, compare, taxonomy report, and the scoring and statistics under them.

``selection`` is the one place that reads results from the database (one grouped query, in
``tally_sql``; ``run_tallies`` keeps each run's aggregates until that run is written again, in
the process and, through ``tally_store``, in the database);
``scoring`` and ``stats`` are pure; ``leaderboard``, ``compare`` and ``taxonomy_report`` shape
them for every surface (pages, API, CSV, CLI), so a selection shows the same figure everywhere.
May import ``runs.models``, ``runs.taxonomy``, ``runs.data_version`` (the stamps) and
``tasks_app.models`` only.
"""
