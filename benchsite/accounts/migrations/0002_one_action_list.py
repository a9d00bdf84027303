"""One list of actions (``Action``, the rights' and the log's) and of doors (``Door``).

Choices only: every stored value stays what it was ("run.launch", "api", ...), the old
rights' names were already the log's, so no row needs rewriting (no data migration).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_api_tokens_and_audit"),
    ]

    operations = [
        migrations.AlterField(
            model_name="auditevent",
            name="action",
            field=models.CharField(
                choices=[
                    ("run.launch", "Launched a run"),
                    ("run.cancel", "Cancelled a run"),
                    ("run.retry", "Retried a run's infrastructure failures"),
                    ("run.resume", "Re-sent a run's queued attempts"),
                    ("run.evaluate", "Queued a run's not-evaluated attempts"),
                    ("model_config.create", "Created a model configuration"),
                    ("model_config.upstream", "Set a model configuration's upstream"),
                    ("tasks.import", "Imported tasks"),
                    ("swebench.import", "Imported a SWE-bench dataset"),
                    ("predictions.import", "Imported predictions"),
                    ("results.import", "Imported published results"),
                    ("run.import", "Imported a run folder"),
                    ("token.create", "Created an API token"),
                    ("token.revoke", "Revoked an API token"),
                    ("access.denied", "Was refused a write"),
                ],
                max_length=40,
            ),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="via",
            field=models.CharField(
                choices=[
                    ("api", "REST API"),
                    ("page", "Site page"),
                    ("admin", "Staff admin"),
                    ("cli", "ab command"),
                ],
                default="api",
                max_length=10,
            ),
        ),
    ]
