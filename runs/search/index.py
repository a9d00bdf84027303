"""What the search index holds of an attempt, and writing it.

``documents`` (pure) turns a transcript into rows: each turn's text (with its reasoning) is a
``message``, each tool call's name and arguments a ``tool_call``, each call's result a
``tool_output``, all at the turn's index (the viewer's ``#turn-<step>`` anchor). Texts are
capped so one huge tool output or one endless attempt cannot grow the index without bound:
a document keeps its head and tail (``MAX_DOCUMENT_CHARS``: a traceback's last line is often
what one searches for), and an attempt stops at ``MAX_ATTEMPT_CHARS``.

``attempt_index`` replaces an attempt's rows; the lifecycle calls ``attempt_index_on_commit``
when an attempt ends, the run import when it stored trajectories, ``ab search reindex`` for
what existed before.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from django.db import transaction

from runs.search.models import DocumentKind, TranscriptDocument
from runs.transcript import Transcript

log = logging.getLogger(__name__)

# One document's text: its first HEAD and last TAIL characters past this.
MAX_DOCUMENT_CHARS = 8_000
DOCUMENT_TAIL_CHARS = 2_000
# One attempt's documents together; the rest of a longer transcript is not indexed.
MAX_ATTEMPT_CHARS = 400_000
CUT_MARK = "\n[…]\n"
# The highlighter's markers (``runs.search.query``): private-use characters, taken out of
# indexed text so a transcript cannot forge a highlight.
MARK_START, MARK_END = "\ue000", "\ue001"
_DROPPED = str.maketrans({"\x00": " ", MARK_START: " ", MARK_END: " ", "\ue002": " "})


@dataclass(frozen=True, slots=True)
class Document:
    step: int
    kind: str
    role: str
    text: str


def clean(text: str) -> str:
    """Text as indexed: no NUL (PostgreSQL refuses it), no highlight markers, capped."""
    text = text.translate(_DROPPED)
    if len(text) <= MAX_DOCUMENT_CHARS:
        return text
    head = MAX_DOCUMENT_CHARS - DOCUMENT_TAIL_CHARS - len(CUT_MARK)
    return text[:head] + CUT_MARK + text[-DOCUMENT_TAIL_CHARS:]


def documents(transcript: Transcript) -> list[Document]:
    """The rows of ``transcript``, in step order, within ``MAX_ATTEMPT_CHARS``."""
    out: list[Document] = []
    left = MAX_ATTEMPT_CHARS
    for doc in _all_documents(transcript):
        if not doc.text.strip():
            continue
        if len(doc.text) > left:
            break
        left -= len(doc.text)
        out.append(doc)
    return out


def _all_documents(transcript: Transcript) -> Iterator[Document]:
    for turn in transcript.turns:
        parts = [turn.reasoning.text if turn.reasoning else "", turn.text.text]
        text = "\n\n".join(p for p in parts if p)
        if turn.role == "event" and turn.title:
            text = f"{turn.title}\n{text}"
        yield Document(turn.index, DocumentKind.MESSAGE, turn.role, clean(text))
        for call in turn.tool_calls:
            call_text = f"{call.name}\n{call.arguments.text}"
            yield Document(turn.index, DocumentKind.TOOL_CALL, turn.role, clean(call_text))
            if call.result is not None:
                output = clean(call.result.text)
                yield Document(turn.index, DocumentKind.TOOL_OUTPUT, "tool", output)


def attempt_index(attempt) -> int:
    """Replace the index rows of ``attempt`` with its transcript's; the number of rows.
    An attempt without a transcript (or with an unreadable one) has none."""
    from runs import artifacts

    found = artifacts.read_transcript(attempt)
    docs = documents(found) if found is not None and not found.error else []
    with transaction.atomic():
        TranscriptDocument.objects.filter(attempt_id=attempt.pk).delete()
        # Last document first: hits come in descending row id (the newest attempt first,
        # read straight off the full-text index), which is then each attempt's step order.
        TranscriptDocument.objects.bulk_create(
            [
                TranscriptDocument(
                    attempt_id=attempt.pk, step=d.step, kind=d.kind, role=d.role, text=d.text
                )
                for d in reversed(docs)
            ],
            batch_size=500,
        )
    return len(docs)


def attempts_index(attempt_ids: Iterable[int]) -> int:
    """Index each attempt, logging (not raising) one that fails: a search index must never
    fail the attempt's end or the import that called it. The rows written."""
    from runs.models import Attempt

    ids = list(attempt_ids)
    rows = 0
    for start in range(0, len(ids), 200):
        # One commit a batch (each attempt in a savepoint of its own): a commit a file was
        # most of the time on a busy disk.
        with transaction.atomic():
            for attempt in Attempt.objects.filter(id__in=ids[start : start + 200]).order_by("id"):
                try:
                    rows += attempt_index(attempt)
                except Exception:
                    log.exception("search: indexing attempt %s failed", attempt.public_id)
    return rows


def attempt_index_on_commit(attempt_id: int) -> None:
    """Index the attempt once the transaction that ended it commits (at once outside one)."""
    attempts_index_on_commit([attempt_id])


def attempts_index_on_commit(attempt_ids: list[int]) -> None:
    """Index these attempts once the current transaction commits (at once outside one); inside
    ``indexed_elsewhere(send)``, hand their ids to ``send`` then instead."""
    if attempt_ids:
        send = _SENDER.get()
        if send is None:
            transaction.on_commit(lambda: attempts_index(attempt_ids))
        else:
            transaction.on_commit(lambda: send(attempt_ids))


_SENDER: contextvars.ContextVar[Callable[[list[int]], None] | None] = contextvars.ContextVar(
    "search_index_sender", default=None
)


@contextlib.contextmanager
def indexed_elsewhere(send: Callable[[list[int]], None]) -> Iterator[None]:
    """Attempts committed by the block are indexed by ``send`` (their ids), not here: an import
    through the web leaves them to a process of its own
    (``runs.services.imported_run_read_in_background``), since indexing reads each transcript
    back whole, which at the import limits would take the web worker ~100 MB past what the
    streamed import itself needs."""
    token = _SENDER.set(send)
    try:
        yield
    finally:
        _SENDER.reset(token)
