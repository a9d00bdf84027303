"""Fill the FailureReason table with the 15 codes of failure-taxonomy.md."""

from django.db import migrations


def fill(apps, schema_editor):
    from runs.taxonomy import REASONS

    FailureReason = apps.get_model("runs", "FailureReason")
    for reason, info in REASONS.items():
        FailureReason.objects.update_or_create(
            code=reason.value,
            defaults={
                "description": info.description,
                "typical_cause": info.typical_cause,
                "precedence": info.precedence,
                "category": info.category.value,
            },
        )


def empty(apps, schema_editor):
    apps.get_model("runs", "FailureReason").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [("runs", "0001_initial")]
    operations = [migrations.RunPython(fill, empty)]
