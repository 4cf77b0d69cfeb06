import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("dashboard", "0009_context_tail"),
    ]

    operations = [
        migrations.CreateModel(
            name="WorkerBeat",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(help_text="Celery node name (worker@host).", max_length=255, unique=True)),
                ("pid", models.PositiveIntegerField()),
                ("started_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("seen_at", models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
            ],
        ),
    ]
