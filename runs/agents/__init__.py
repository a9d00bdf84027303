"""The agents: scripted, oracle, nop, external predictions, and the tool-using LLM agent.

``registry`` maps a variant to its agent; ``loop``, ``tools`` and ``llm`` make the LLM agent.
May import ``runs.taxonomy``, ``runs.llm_errors``, ``runs.pricing``, ``runs.gateway`` (CLI agents
run through it) and ``sandbox``; no Django models. The gateway imports nothing of it.
"""
