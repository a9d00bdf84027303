"""Access-control models (API tokens, audit log) live here; see the REST API issue."""
