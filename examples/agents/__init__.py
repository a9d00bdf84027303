"""Example agents named by import path (docs/agents.md, "Your own agent by import path").

With the repository's root on the worker's ``PYTHONPATH`` and ``examples.agents`` listed in
``AGENTBENCH_AGENT_IMPORT_PATHS``, a model configuration of variant ``import`` may name
``examples.agents.division_fixer:DivisionFixer``.
"""
