"""Integrity flags: named, versioned rules over what the harness observed of an attempt (its
patch, its transcript's tool calls and commands, its baseline and final test counts, the
paths its task hides), never over what the agent says of itself.

- ``rules``: the rules, pure functions over an ``Evidence``;
- ``evidence``: the evidence gathered from an attempt's stored artifacts (untrusted input);
- ``services``: computing and storing flags (``AttemptFlag``), when an attempt ends and again
  with ``ab flags recompute`` when the rules change.

docs/integrity.md lists the rules; the leaderboard counts flagged successes
(``runs.results.scoring``).
"""
