#!/bin/bash
# The verifier: the hidden Go tests beside the package, reward 1 when they all pass.
cp /tests/stats_test.go /app/stats_test.go
cd /app
if go test ./... 2>&1 | tee /logs/verifier/go-test.txt; test "${PIPESTATUS[0]}" -eq 0; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
rm -f /app/stats_test.go
