"""Each run's stamp behind ``runs.results.run_tallies`` (``runs.data_version`` says how the
triggers keep it); the triggers are installed after every migrate (``data_version.install``)."""

from django.db import migrations

from runs import data_version


def drop_run_triggers(apps, schema_editor):
    connection = schema_editor.connection
    for table, name in data_version.installed_triggers(connection.alias):
        if table == data_version.RUN_TABLE_OF and "_run_" in name:
            on = f' ON "{table}"' if connection.vendor == "postgresql" else ""
            schema_editor.execute(f'DROP TRIGGER IF EXISTS "{name}"{on}')
    if connection.vendor == "postgresql":
        schema_editor.execute(data_version.PG_DROP_RUN_FUNCTION)


class Migration(migrations.Migration):
    dependencies = [("runs", "0015_merge_partial_runs")]

    operations = [
        migrations.RunSQL(data_version.CREATE_RUN_TABLE, data_version.DROP_RUN_TABLE),
        migrations.RunPython(migrations.RunPython.noop, drop_run_triggers),
    ]
