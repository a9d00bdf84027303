"""The attempt pipeline: clone, setup, baseline, agent, final test, grade, record.

Entry points: ``execute.attempt_execute`` (one claimed attempt), ``adhoc.attempt_create_adhoc``
(a one-attempt run for the CLI) and ``suite_validation.suite_validate`` (baseline validation
of a whole suite). The pure parts (``workspace``, ``stages``, ``outcome``) import no Django.
"""
