"""Tasks and suites: ``task.yaml`` specs (``spec``, pure), their models and services, the REST
router (``api``), ``cli/`` (``ab`` commands), ``uploads/`` (streamed uploads and capped archive
unpacking) and ``swebench/`` (SWE-bench datasets, test commands, parsers and grading).

May import ``sandbox`` (``sandbox.environments``: how an instance's environment is built),
``benchsite.accounts`` and ``benchsite.api``; never ``runs``, which imports it: the suite and
task pages (they show runs) are ``runs.web.suites``, the imports of results produced elsewhere
are ``runs.imports``.
"""
