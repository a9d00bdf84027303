"""Runs: models, attempts, and everything that runs, scores and shows them.

Django's files sit here as Django expects (``models.py``, ``admin.py``, ``apps.py``, ``urls.py``,
``migrations/``, ``templatetags/``, ``management/``), with the core every role shares:
``taxonomy`` (the ordered failure reasons), ``services`` (writes: launch, cancel, retry,
enqueue), ``failfast``, ``llm_errors`` and ``pricing`` (what the LLM agent and the gateway
share: which upstream errors are permanent, what tokens cost), ``artifacts`` and ``transcript``
(reading an attempt's stored files; ``artifact_storage``, the local storage that never follows
a link), ``model_configs``, ``conditions`` (the files a configuration adds to the workspace),
``data_version`` (the stamp every write bumps, for the page cache). The roles are folders:
``web/`` pages, ``api/`` REST routers, ``cli/`` ``ab`` commands, ``results/`` figures,
``pipeline/`` one attempt's stages, ``agents/``, ``gateway/`` the model gateway of CLI
agents, ``workers/`` Celery and worker bookkeeping,
``demo/`` the demo data. Which role may import which is checked by
tests/architecture/test_import_cycles.py.
"""
