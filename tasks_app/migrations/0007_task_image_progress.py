from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("tasks_app", "0006_task_image_pull")]

    operations = [
        migrations.AddField(
            model_name="task",
            name="image_progress",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
