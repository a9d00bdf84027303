"""Turns pytest's JUnit XML into Harbor's reward.json (several metrics) and a CTRF report."""

import json
import sys
import xml.etree.ElementTree as ET

junit, logs = sys.argv[1], sys.argv[2]
tests = []
for case in ET.parse(junit).getroot().iter("testcase"):
    failed = case.find("failure") is not None or case.find("error") is not None
    skipped = case.find("skipped") is not None
    status = "failed" if failed else ("skipped" if skipped else "passed")
    tests.append({"name": f"{case.get('classname')}::{case.get('name')}", "status": status})
passed = sum(1 for t in tests if t["status"] == "passed")
total = len(tests)
reward = {
    "reward": 1 if total and passed == total else 0,
    "tests_passed": passed,
    "tests_total": total,
    "pass_fraction": round(passed / total, 4) if total else 0.0,
}
with open(f"{logs}/reward.json", "w") as out:
    json.dump(reward, out)
summary = {"tests": total, "passed": passed, "failed": total - passed}
with open(f"{logs}/ctrf.json", "w") as out:
    json.dump({"results": {"tool": {"name": "pytest"}, "summary": summary, "tests": tests}}, out)
