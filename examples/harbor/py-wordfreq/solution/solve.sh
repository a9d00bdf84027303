#!/bin/bash
# The oracle: compare words in lower case.
set -e
cd /app
python3 - <<'PY'
from pathlib import Path

path = Path("wordfreq.py")
text = path.read_text()
text = text.replace('re.findall(r"[A-Za-z]+", text)', 're.findall(r"[a-z]+", text.lower())')
path.write_text(text)
PY
