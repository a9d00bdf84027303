"""Full-text search over every attempt's transcript: messages, tool calls and tool outputs.

``models`` the index's rows, ``index`` what is indexed and when (an attempt's end, a run
import, ``ab search reindex``), ``query`` the one search service, ``api``, ``views`` and
``cli`` its three doors (``GET /api/search``, ``/search/``, ``ab search``). See docs/search.md.
"""
