"""Agent CLIs as data: Claude Code, Codex CLI, mini-swe-agent and any other coding-agent program.

``definitions/*.yaml`` describe each CLI (``definition``: loading and validation, pure);
``install`` builds a pinned package once into the content-keyed cache under
``/var/lib/agentbench/agents/`` (mounted read-only into sandboxes); ``agent`` runs one in an
attempt's sandbox with its model calls through the model gateway (``runs.gateway``) and maps
what happened (exit code, signal, the gateway's summary) to an outcome; ``summaries`` reads a
CLI's own usage report; ``msa_driver``/``bridge`` run mini-swe-agent on the worker with its
commands executed in the sandbox.

May import ``runs.agents`` (contract, events), ``runs.gateway``, ``runs.taxonomy``,
``runs.transcript`` (pure: the tool calls of the gateway's record) and ``sandbox``; no Django
models.
"""
