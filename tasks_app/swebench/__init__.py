"""SWE-bench: dataset import, test commands, log parsers, grading, predictions and results.

Pure modules (no Django): ``fields``, ``dataset``, ``test_commands``, ``eval_script``,
``parsers``, ``grading`` (the last three use the official ``swebench`` package, imported when
first needed).
Services (database writes): ``importer``, ``predictions``, ``results``.
"""
