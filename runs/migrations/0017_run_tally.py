"""Each run's aggregates stored under its stamp (``runs.results.tally_store``)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0016_run_results_stamp"),
    ]

    operations = [
        migrations.CreateModel(
            name="RunTally",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("kind", models.CharField(max_length=20)),
                ("stamp", models.BigIntegerField()),
                ("payload", models.BinaryField()),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="runs.run"
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("run", "kind"), name="run_tally_kind")
                ],
            },
        ),
    ]
