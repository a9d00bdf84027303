"""Uploads: size limits applied while a body streams in (``files``), caps on what opening an
archive may cost (``archives``), and an uploaded run folder imported like ``ab import-run``
(``runs``). May import ``tasks_app.swebench`` and ``benchsite.api.errors``; never ``runs``.
"""
