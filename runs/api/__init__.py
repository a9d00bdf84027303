"""The REST API routers for runs, attempts and results (mounted by benchsite/api/site.py).

``runs`` launches and reads runs and attempts, ``results`` serves the leaderboard, compare and
taxonomy figures, ``schemas`` holds the request and response shapes, ``transcript`` the attempt
transcript. May import the core and ``runs.results``; never ``web``, ``cli``, ``workers``,
``pipeline`` or ``demo``.
"""
