"""The one-row counter behind ``runs.data_version``; its triggers are installed after every
migrate (``runs.data_version.install``), so a table rebuilt by a later migration gets them
back."""

from django.db import migrations

from runs import data_version


def create_function(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(data_version.PG_FUNCTION)


def drop_triggers(apps, schema_editor):
    connection = schema_editor.connection
    for table, name in data_version.installed_triggers(connection.alias):
        if connection.vendor == "sqlite":
            schema_editor.execute(f'DROP TRIGGER IF EXISTS "{name}"')
        else:
            schema_editor.execute(f'DROP TRIGGER IF EXISTS "{name}" ON "{table}"')
    if connection.vendor == "postgresql":
        schema_editor.execute(data_version.PG_DROP_FUNCTION)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0010_integ2_reason_counts_index"),
        ("tasks_app", "0002_swebuild_gold_validation"),
    ]

    operations = [
        migrations.RunSQL(data_version.CREATE_TABLE, data_version.DROP_TABLE),
        migrations.RunPython(create_function, drop_triggers),
    ]
