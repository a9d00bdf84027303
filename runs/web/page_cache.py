"""The results pages' data-heavy HTML, rendered once per data version and reused.

A leaderboard, compare or attempt page costs 10-15 ms of Python to compute and render (the
grouped queries, the scoring, thousands of template nodes), and its result only changes when
the data does. ``cached_blocks`` keeps the blocks a page's template fills in (title, content,
scripts...: captured by ``{% capture %}`` in base.html) under a key made of:

* the data version (``runs.data_version``: changes with every committed write to the tables
  the pages read, ``queryset.update()`` and raw SQL included), so live pages stay live;
* the page (view, full path with its query string);
* what the visitor may see: signed in or not, staff or not, leaderboards and artifacts
  readable or not (``benchsite.accounts.access``): two visitors share an entry only when
  those agree;
* for an attempt page whose artifacts are shown, its artifact files (name, size, mtime):
  logs grow while an attempt runs without a database write;
* the code (templates and modules), for caches that outlive a deploy (Redis).

A hit renders only base.html around the cached blocks, with the per-request parts rendered
fresh: the login state and staff links in the top bar, messages, the logout form's CSRF
token. Blocks that hold a CSRF token are never cached. Only 200 and 400 pages are; redirects,
404s and downloads always run the view.

``PAGE_CACHE=false`` turns it off; ``ab serve --dev`` does unless PAGE_CACHE is set, so the
development server shows what a page really costs (and bench/load.py prints gunicorn with
and without the cache next to it).
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe

from benchsite.accounts.access import can_read_artifacts, can_read_leaderboards
from runs import data_version
from runs.templatetags.capture import CAPTURE_ATTR

CACHE_ALIAS = "pages"
TIMEOUT_SEC = 3600  # an entry of a data version still current; older ones are never asked for
MAX_BYTES = 2 * 1024 * 1024  # a bigger page (a huge compare) is rendered every time
CACHEABLE_STATUS = (200, 400)
SHELL = "runs/_cached_page.html"

# Part of a key beside the page: what else it depends on, or None for "do not cache".
KeyPart = Callable[..., object]


def audience(request: HttpRequest) -> tuple[bool, bool, bool, bool]:
    """What decides what a visitor sees on the results pages."""
    user = request.user
    return (
        bool(user.is_authenticated),
        bool(user.is_staff),
        can_read_leaderboards(user),
        can_read_artifacts(user),
    )


@functools.lru_cache(maxsize=1)
def code_stamp() -> str:
    """Names, sizes and mtimes of the templates and app modules: a deploy starts new keys."""
    digest = hashlib.sha1()
    base = Path(settings.BASE_DIR)
    for folder in ("templates", "runs", "tasks_app", "benchsite"):
        for root, dirs, files in os.walk(base / folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".html")):
                    stat = os.stat(os.path.join(root, name))
                    digest.update(f"{root}/{name}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()[:12]


def enabled() -> bool:
    return bool(getattr(settings, "PAGE_CACHE", False))


def cached_blocks(extra: KeyPart | None = None):
    """Decorate a results page view: its template's blocks are kept per data version.

    ``extra(request, *args, **kwargs)``: more the page depends on beyond the data version,
    the path and ``audience``; None skips the cache for this request. The view still runs on
    a miss, and its response is returned as it is."""

    def decorate(view):
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if not enabled() or request.method not in ("GET", "HEAD"):
                return view(request, *args, **kwargs)
            version = data_version.current()
            more = extra(request, *args, **kwargs) if extra else ()
            if version is None or more is None:
                return view(request, *args, **kwargs)
            key = _key(view, request, version, more)
            store = caches[CACHE_ALIAS]
            hit = store.get(key)
            if hit is not None:
                status, blocks = hit
                # Rendered (and escaped) by the view's template on the miss that stored them.
                safe = {name: mark_safe(text) for name, text in blocks.items()}
                return render(request, SHELL, {"blocks": safe}, status=status)
            setattr(request, CAPTURE_ATTR, {})
            response = view(request, *args, **kwargs)
            blocks = getattr(request, CAPTURE_ATTR)
            delattr(request, CAPTURE_ATTR)
            if _cacheable(response, blocks):
                store.set(key, (response.status_code, blocks), TIMEOUT_SEC)
            return response

        return wrapper

    return decorate


def _key(view, request: HttpRequest, version: int, more: object) -> str:
    page = repr((view.__module__, view.__qualname__, request.get_full_path(), more))
    page += repr(audience(request))
    digest = hashlib.sha256(page.encode()).hexdigest()[:32]
    return f"{code_stamp()}:{version}:{digest}"


def _cacheable(response: HttpResponse, blocks: dict[str, str]) -> bool:
    if response.status_code not in CACHEABLE_STATUS or "content" not in blocks:
        return False
    if getattr(response, "streaming", False) or not response.get("Content-Type", "").startswith(
        "text/html"
    ):
        return False
    if response.has_header("Set-Cookie") or response.cookies:
        return False
    size = sum(len(text) for text in blocks.values())
    # A CSRF token is the visitor's own: a block that holds one is rendered every time.
    return size <= MAX_BYTES and not any("csrfmiddlewaretoken" in t for t in blocks.values())


def attempt_files(request: HttpRequest, public_id, *args, **kwargs) -> object:
    """The attempt page's files beyond the database, for a visitor who is shown them: every
    file under the attempt's folder with its size and mtime (a log still growing, a folder
    synced after the last write). None (no caching) when the storage is not a local folder."""
    if not can_read_artifacts(request.user):
        return ()
    from runs import artifacts
    from runs.models import Attempt

    row = Attempt.objects.filter(public_id=public_id).values_list("artifacts_dir").first()
    if row is None:
        return ()  # the view answers 404, which is never cached
    store = artifacts.storage()
    root = artifacts.attempt_root(Attempt(artifacts_dir=row[0]))
    if not root:
        return ()
    try:
        folder = store.path(root)
    except NotImplementedError:
        return None
    found = []
    for path, dirs, files in os.walk(folder):  # never into a folder through a link
        dirs.sort()
        # Links (to folders too) as the listing shows them: the link itself, never its target.
        links = [d for d in dirs if os.path.islink(os.path.join(path, d))]
        for name in sorted(files + links):
            try:
                stat = os.lstat(os.path.join(path, name))
            except OSError:
                continue
            found.append((path, name, stat.st_size, stat.st_mtime_ns))
    return tuple(found)
