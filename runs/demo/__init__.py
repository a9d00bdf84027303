"""The demo data behind ``ab setup-demo``: suites, runs and attempts with artifacts, generated.

``seed`` makes the rows, ``artifacts`` the files each attempt shows. May import the core and
``tasks_app``; never ``web``, ``api``, ``cli``, ``workers`` or ``pipeline``.
"""
