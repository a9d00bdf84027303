"""SWE-bench: dataset import, test commands, log parsers, grading, predictions and results.

Pure modules (no Django): ``fields``, ``dataset``, ``test_commands``, ``parsers``, ``grading``.
Services (database writes): ``importer``, ``predictions``, ``results``.
"""
