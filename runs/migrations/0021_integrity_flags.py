# Integrity flags (runs.integrity): the rule set an attempt was checked under, its flags.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0019_attempt_image_digest"),
    ]

    operations = [
        migrations.AddField(
            model_name="attempt",
            name="integrity_rules",
            field=models.CharField(blank=True, max_length=500),
        ),
        migrations.CreateModel(
            name="AttemptFlag",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("rule", models.CharField(max_length=40)),
                ("rule_version", models.PositiveSmallIntegerField()),
                ("detail", models.TextField(blank=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "attempt",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="flags",
                        to="runs.attempt",
                    ),
                ),
            ],
            options={
                "ordering": ["attempt", "rule"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("attempt", "rule"), name="attempt_flag_unique_rule"
                    )
                ],
            },
        ),
    ]
