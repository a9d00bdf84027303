"""A bundle of a run already stored, made importable as a run of its own: the same content
under new public ids (a bundle of a run that is here is refused)."""

from __future__ import annotations

import io
import json
import re
import uuid

from runs.bundles.bundle import run_bundle_write
from runs.bundles.manifest import MANIFEST, read_bundle, write_bundle
from tasks_app.uploads.archives import ArchiveLimits

UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def fresh_bundle(run) -> bytes:
    out = io.BytesIO()
    run_bundle_write(run=run, out=out)
    out.seek(0)
    manifest, files = read_bundle(out, ArchiveLimits(10_000, 1 << 30, 1 << 30))
    ids = {str(run.public_id)} | {
        json.loads(line)["public_id"] for line in files["attempts.jsonl"].splitlines()
    }
    new = {old.encode(): str(uuid.uuid4()).encode() for old in ids}

    def swap(data: bytes) -> bytes:
        return UUID.sub(lambda m: new.get(m.group(0), m.group(0)), data)

    renamed = {swap(name.encode()).decode(): swap(data) for name, data in files.items()}
    meta = {k: v for k, v in manifest.items() if k not in ("files", "format", "version")}
    again = io.BytesIO()
    write_bundle(again, renamed, meta)
    assert MANIFEST not in renamed
    return again.getvalue()
