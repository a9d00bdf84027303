"""Tasks and suites: ``task.yaml`` specs (``spec``, pure), their models and services, pages
(``views``), the REST router (``api``), ``cli/`` (``ab`` commands), ``uploads/`` (streamed uploads
and capped archive unpacking) and ``swebench/`` (SWE-bench datasets, builds, grading, imports).
"""
