"""What runs on the workers: Celery tasks, claims and heartbeats, the reaper, broker clean-up.

``tasks`` holds the Celery tasks (they call ``runs.services`` and ``bookkeeping``, never the
reverse: services enqueue through ``runs.services.attempts_enqueue``, the one place that imports
``tasks``); ``bookkeeping`` claims attempts, finishes runs and reaps stale ones; ``leftovers``
removes what finished attempts left; ``broker`` forgets a lost worker's messages;
``artifacts_sync`` publishes an attempt's folder to shared storage. May import the core and
``runs.pipeline``; never ``web``, ``api``, ``cli`` or ``demo``.
"""
