"""The search index's rows: one searchable piece of an attempt's transcript each.

A row is a message, a tool call (its name and arguments) or a tool call's output, at the turn
(``step``) the transcript viewer anchors as ``#turn-<step>``. The text is what the transcript
reader gave, capped (``runs.search.index``). The full-text index over ``text`` is the
database's own, made by migration ``0022_transcript_search``: an FTS5 table kept in step by
triggers on SQLite, a GIN index over ``to_tsvector('simple', text)`` on PostgreSQL.
"""

from __future__ import annotations

from django.db import models

# PostgreSQL's parser reads "astropy/coordinates" or "a.b.c" as one token (a path, a host),
# where FTS5's unicode61 reads two or three words. Each punctuation character is set apart
# with a private-use character (a blank to the parser, taken out of snippets) first, so both
# databases find "coordinates" there. The GIN index (migration 0022, which copies this text)
# is over exactly this expression: a query must write it the same to use the index.
PG_SPLIT = "\ue002"
PG_SPACED = "regexp_replace({}, '([^[:alnum:][:space:]])', '\ue002\\1\ue002', 'g')"
PG_DOCUMENT = "to_tsvector('simple', " + PG_SPACED.format("text") + ")"


class DocumentKind(models.TextChoices):
    MESSAGE = "message"
    TOOL_CALL = "tool_call"
    TOOL_OUTPUT = "tool_output"


class TranscriptDocument(models.Model):
    attempt = models.ForeignKey("runs.Attempt", on_delete=models.CASCADE, related_name="+")
    step = models.PositiveIntegerField()  # the turn's index: the viewer's #turn-<step>
    kind = models.CharField(max_length=16, choices=DocumentKind.choices)
    role = models.CharField(max_length=16, blank=True)  # system, user, assistant, tool, event
    text = models.TextField()

    class Meta:
        app_label = "runs"
        db_table = "runs_transcript_document"
        # Reindexing an attempt deletes its rows; hits are ordered by attempt, then step.
        indexes = [models.Index(fields=["attempt", "step"], name="transcript_doc_attempt_step")]

    def __str__(self) -> str:
        return f"{self.kind} at step {self.step} of attempt {self.attempt_id}"
