#!/bin/bash
# The verifier: pytest over the hidden tests, then reward.json with every metric.
cd /app
python3 -m pytest -q -p no:cacheprovider --junitxml=/logs/verifier/junit.xml /tests/test_wordfreq.py
python3 /tests/reward.py /logs/verifier/junit.xml /logs/verifier
