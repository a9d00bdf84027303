"""What a Harbor verifier's files say: the reward, its metrics and per-test results. Pure.

Harbor's verifier (``tests/test.sh``) writes ``/logs/verifier/reward.txt`` (one number) or
``reward.json`` (several named numbers); Harbor reads the text file first. Here:

- the **reward** decides: 1 (or more) is success; below 1 is the tests failing
  (``TESTS_FAILED``, the agent's); ``reward.json``'s deciding metric is ``reward`` when it has
  one, else its first metric, and every metric is kept on the attempt;
- a verifier that wrote no reward, or one that is not a number, is an infrastructure outcome
  (``NO_TESTS_COLLECTED`` with ``[verifier-no-reward]`` / ``[verifier-bad-reward]``) and a
  verifier over its time ``TIMEOUT`` ``[timeout]``: never counted against the agent;
- ``ctrf.json`` (the Common Test Report Format), when the verifier leaves one, gives each
  test's status.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from runs.taxonomy import Reason

NO_REWARD_TAG = "[verifier-no-reward]"
BAD_REWARD_TAG = "[verifier-bad-reward]"
REWARD_TXT = "reward.txt"
REWARD_JSON = "reward.json"
CTRF_JSON = "ctrf.json"


@dataclass
class Reward:
    """The verifier's verdict: ``value`` decides, ``metrics`` are all it reported."""

    value: float | None
    metrics: dict[str, float] = field(default_factory=dict)
    source: str = ""  # the file it came from
    problem: str = ""  # why there is no value

    @property
    def grade(self) -> str:
        if self.value is None:
            return ""
        return "FULL" if self.value >= 1 else ("NO" if self.value <= 0 else "PARTIAL")


def read_reward(txt: str | None, js: str | None) -> Reward:
    """The reward from the two files' text (None: the file is absent), as Harbor reads them:
    ``reward.txt`` first."""
    if txt is not None:
        try:
            value = float(txt.strip())
        except ValueError:
            shown = txt.strip()[:80]
            return Reward(
                None, source=REWARD_TXT, problem=f"{REWARD_TXT} is not a number: {shown!r}"
            )
        if not math.isfinite(value):
            return Reward(None, source=REWARD_TXT, problem=f"{REWARD_TXT} is {txt.strip()!r}")
        return Reward(value, {"reward": value}, source=REWARD_TXT)
    if js is not None:
        try:
            data = json.loads(js)
        except ValueError as exc:
            return Reward(None, source=REWARD_JSON, problem=f"{REWARD_JSON} is not JSON: {exc}")
        if not isinstance(data, dict) or not data:
            return Reward(
                None,
                source=REWARD_JSON,
                problem=f"{REWARD_JSON} must be an object of named numbers",
            )
        metrics: dict[str, float] = {}
        for name, value in data.items():
            number = (
                value if isinstance(value, int | float) and not isinstance(value, bool) else None
            )
            if number is None or not math.isfinite(number):
                return Reward(
                    None,
                    source=REWARD_JSON,
                    problem=f"{REWARD_JSON}: metric {name!r} is not a number: {value!r}",
                )
            metrics[str(name)] = float(number)
        deciding = metrics.get("reward", next(iter(metrics.values())))
        return Reward(deciding, metrics, source=REWARD_JSON)
    return Reward(None, problem=f"neither /logs/verifier/{REWARD_TXT} nor {REWARD_JSON} written")


def read_ctrf(text: str | None) -> dict[str, str]:
    """Test name -> status from a CTRF report ({} when absent or unreadable)."""
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    tests = ((data or {}).get("results") or {}).get("tests") if isinstance(data, dict) else None
    if not isinstance(tests, list):
        return {}
    found: dict[str, str] = {}
    for test in tests:
        if isinstance(test, dict) and isinstance(test.get("name"), str):
            found[test["name"]] = str(test.get("status") or "other").lower()
    return found


def verifier_reason(
    reward: Reward, *, exit_code: int, timed_out: bool, timeout_sec: float
) -> tuple[Reason | None, str]:
    """The final stage's reason and note from what the verifier did."""
    shown = ", ".join(f"{k}={v:g}" for k, v in reward.metrics.items())
    if timed_out:
        return Reason.TIMEOUT, (
            f"[timeout] the verifier (tests/test.sh) ran over verifier.timeout_sec={timeout_sec:g}"
        )
    if reward.value is None:
        tag = BAD_REWARD_TAG if reward.source else NO_REWARD_TAG
        return Reason.NO_TESTS_COLLECTED, (
            f"{tag} the verifier (tests/test.sh, exit {exit_code}) gave no reward: {reward.problem}"
        )
    if reward.value >= 1:
        return None, f"reward {reward.value:g} ({shown})"
    return Reason.TESTS_FAILED, f"reward {reward.value:g} < 1 ({shown}; from {reward.source})"


def test_results(reward: Reward, tests: dict[str, str]) -> dict:
    """What the attempt keeps: every metric, and each test's status when there is a report."""
    results: dict = {"REWARD": {name: f"{value:g}" for name, value in reward.metrics.items()}}
    if tests:
        results["TESTS"] = tests
    return results
