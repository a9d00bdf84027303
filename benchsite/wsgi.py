import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
application = get_wsgi_application()


def _load_urls() -> None:
    """Import the URLconf (every view module and the API's schemas) and build its reverse
    index now, at process start, rather than inside the first request of each process: that
    was ~0.4 s of CPU added to a first leaderboard request (issue 29). ``ab serve`` preloads
    this module in gunicorn's master (``preload_app``), so its forked processes start with it.
    No database connection is left open across the fork."""
    from django.db import connections
    from django.urls import get_resolver

    get_resolver().reverse_dict  # noqa: B018 - the property builds the index
    connections.close_all()


_load_urls()
