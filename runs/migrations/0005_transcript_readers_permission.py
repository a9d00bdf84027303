from django.db import migrations


def create_readers_group(apps, schema_editor):
    """The "readers" group with runs.read_artifacts. The permission row is normally made after
    migrating (post_migrate); it is made here so the group holds it from the start."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    content_type, _ = ContentType.objects.get_or_create(app_label="runs", model="attempt")
    permission, _ = Permission.objects.get_or_create(
        content_type=content_type,
        codename="read_artifacts",
        defaults={"name": "Can read patches, logs and trajectories"},
    )
    group, _ = Group.objects.get_or_create(name="readers")
    group.permissions.add(permission)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0004_pages_results_index"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="attempt",
            options={
                "ordering": ["run", "task__task_id", "sample_index"],
                "permissions": [("read_artifacts", "Can read patches, logs and trajectories")],
            },
        ),
        migrations.RunPython(create_readers_group, migrations.RunPython.noop),
    ]
