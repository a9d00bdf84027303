"""Uploads: size limits applied while a body streams in (``files``) and caps on what opening an
archive may cost (``archives``), and an archive of tasks imported (``tasks``: the service the
API endpoint and the admin page share, audited). May import ``tasks_app.services``,
``benchsite.accounts``, ``tasks_app.swebench`` and ``benchsite.api.errors``;
never ``runs`` (an uploaded run folder is imported by ``runs.imports.uploads``).
"""
