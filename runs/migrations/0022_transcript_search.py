"""The transcript search index (``runs.search``): its rows, and the database's full-text index
over them, one per vendor. SQLite: an FTS5 table reading its text from the rows
(external content), kept in step by triggers. PostgreSQL: a GIN index over the rows'
``to_tsvector('simple', text)`` (punctuation set apart first) (``simple``: no stemming and no stop words, as FTS5's
``unicode61``, so both read a query alike)."""

from django.db import migrations, models
import django.db.models.deletion

SQLITE_FORWARD = [
    "CREATE VIRTUAL TABLE runs_transcript_fts USING fts5(text, content='runs_transcript_document', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER runs_transcript_fts_ai AFTER INSERT ON runs_transcript_document BEGIN "
    "INSERT INTO runs_transcript_fts(rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER runs_transcript_fts_ad AFTER DELETE ON runs_transcript_document BEGIN "
    "INSERT INTO runs_transcript_fts(runs_transcript_fts, rowid, text) "
    "VALUES ('delete', old.id, old.text); END",
    "CREATE TRIGGER runs_transcript_fts_au AFTER UPDATE ON runs_transcript_document BEGIN "
    "INSERT INTO runs_transcript_fts(runs_transcript_fts, rowid, text) "
    "VALUES ('delete', old.id, old.text); "
    "INSERT INTO runs_transcript_fts(rowid, text) VALUES (new.id, new.text); END",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS runs_transcript_fts_au",
    "DROP TRIGGER IF EXISTS runs_transcript_fts_ad",
    "DROP TRIGGER IF EXISTS runs_transcript_fts_ai",
    "DROP TABLE IF EXISTS runs_transcript_fts",
]
# runs.search.models.PG_DOCUMENT as it was written here (a query must match it to use it).
POSTGRES_FORWARD = [
    "CREATE INDEX runs_transcript_document_tsv ON runs_transcript_document USING GIN "
    "(to_tsvector('simple', regexp_replace(text, '([^[:alnum:][:space:]])', '\ue002\\1\ue002', 'g')))",
]
POSTGRES_BACKWARD = ["DROP INDEX IF EXISTS runs_transcript_document_tsv"]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0021_integrity_flags"),
    ]

    operations = [
        migrations.CreateModel(
            name="TranscriptDocument",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("step", models.PositiveIntegerField()),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("message", "Message"),
                            ("tool_call", "Tool Call"),
                            ("tool_output", "Tool Output"),
                        ],
                        max_length=16,
                    ),
                ),
                ("role", models.CharField(blank=True, max_length=16)),
                ("text", models.TextField()),
                (
                    "attempt",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="runs.attempt",
                    ),
                ),
            ],
            options={
                "db_table": "runs_transcript_document",
                "indexes": [
                    models.Index(fields=["attempt", "step"], name="transcript_doc_attempt_step")
                ],
            },
        ),
        # A RunPython reading the vendor: RunSQL alone cannot say which database it is on.
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        ),
    ]
