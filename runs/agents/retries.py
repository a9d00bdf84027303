"""The retry policy of model calls, from the settings: the LLM agent's own calls and a CLI
agent's gateway retry transient upstream failures the same way.

Its own module so that ``registry`` (which agent runs) and ``cli.agent`` (a CLI agent behind
the gateway) both import it one way: ``registry`` imports ``cli.agent``, never the reverse."""

from __future__ import annotations

from django.conf import settings

from runs.llm_errors import RetryPolicy


def retry_policy() -> RetryPolicy:
    return RetryPolicy(
        max_attempts=settings.LLM_RETRY_MAX_ATTEMPTS,
        base_delay_sec=settings.LLM_RETRY_BASE_DELAY_SEC,
        max_delay_sec=settings.LLM_RETRY_MAX_DELAY_SEC,
    )
