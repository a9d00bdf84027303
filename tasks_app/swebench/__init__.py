"""SWE-bench datasets and grading: dataset import, test commands, log parsers, grading.

Pure modules (no Django): ``errors``, ``fields``, ``dataset``, ``test_commands``,
``eval_script``, ``parsers``, ``grading`` (the last three use the official ``swebench``
package, imported when first needed). Service (database writes): ``importer``.
The offline builds of the instances' environments are in ``sandbox.environments``.
"""
