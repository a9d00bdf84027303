"""Variant "import": a model configuration may name its agent class by import path."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0024_agent_cli_definitions"),
    ]

    operations = [
        migrations.AddField(
            model_name="modelconfig",
            name="agent_import_path",
            field=models.CharField(blank=True, max_length=300),
        ),
        migrations.AlterField(
            model_name="modelconfig",
            name="agent_variant",
            field=models.CharField(
                choices=[
                    ("scripted", "Scripted"),
                    ("oracle", "Oracle (gold patch)"),
                    ("nop", "No-op"),
                    ("baseline", "Baseline validation (no agent)"),
                    ("llm", "LLM (OpenAI-compatible)"),
                    ("cli", "Agent CLI"),
                    ("external", "External (imported)"),
                    ("import", "Agent by import path"),
                ],
                max_length=20,
            ),
        ),
    ]
