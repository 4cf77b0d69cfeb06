from django.apps import AppConfig
from django.db.backends.signals import connection_created

from compaction.redaction import register_secrets

_wal_set: set[str] = set()


def _sqlite_wal(sender, connection, **kwargs):
    """Write-ahead logging lets readers run while a worker writes. The mode is kept in the
    database file, so once per database per process is enough."""
    if connection.vendor != "sqlite" or connection.settings_dict["NAME"] in _wal_set:
        return
    with connection.cursor() as cur:
        cur.execute("PRAGMA journal_mode=WAL")
    _wal_set.add(connection.settings_dict["NAME"])


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Compaction studio"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        connection_created.connect(_sqlite_wal, dispatch_uid="dashboard-sqlite-wal")
        # Register the Celery tasks in every process (web, worker, commands, tests): the
        # services enqueue and run them by name; and the startup checks. Both use the
        # models, so not before now. Then the secrets settings name, which upstream text is
        # cleaned of wherever it is stored, logged or returned (compaction.redaction).
        from . import checks, tasks  # noqa: F401, PLC0415
        from .services.connections import configured_secrets  # noqa: PLC0415 - reads settings connections, not before now
        register_secrets(configured_secrets())
