"""What runs on the workers: Celery tasks, claims and heartbeats, the reaper, broker clean-up.

``tasks`` holds the Celery tasks (they call ``runs.services`` and ``bookkeeping``, never the
reverse: services enqueue through ``runs.services.attempts_enqueue``, the one place that imports
``tasks``); ``bookkeeping`` claims attempts, finishes runs and reaps stale ones; ``reaper``
runs that pass on a timer in every ``ab worker``, one process at a time under a lease;
``leftovers`` removes what finished attempts and dead workers left on this machine; ``broker``
forgets a lost worker's messages;
``artifacts_sync`` publishes an attempt's folder to shared storage. May import the core and
``runs.pipeline``; never ``web``, ``api``, ``cli`` or ``demo``.
"""
