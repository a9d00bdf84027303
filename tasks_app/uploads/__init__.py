"""Uploads: size limits applied while a body streams in (``files``) and caps on what opening an
archive may cost (``archives``). May import ``tasks_app.swebench`` and ``benchsite.api.errors``;
never ``runs`` (an uploaded run folder is imported by ``runs.imports.uploads``).
"""
