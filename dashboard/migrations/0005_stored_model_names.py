"""The stored policy, message and archive entry models are named apart from the engine's
``Policy``, ``Message`` and ``ArchiveEntry`` (tables renamed; rows, keys and constraints kept)."""
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("dashboard", "0004_model_connections"),
    ]

    operations = [
        migrations.RenameModel(old_name="Policy", new_name="StoredPolicy"),
        migrations.RenameModel(old_name="Message", new_name="StoredMessage"),
        migrations.RenameModel(old_name="ArchiveEntry", new_name="StoredArchiveEntry"),
    ]
