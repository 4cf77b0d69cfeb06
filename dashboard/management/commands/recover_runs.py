"""python manage.py recover_runs: one recovery pass (workers run it on their own every
RUN_RECOVERY_INTERVAL seconds; this is for operators)."""
from django.core.management.base import BaseCommand

from dashboard.services import tuning_recovery  # noqa: F401  (adds the tuning jobs' pass)
from dashboard.services.runs import recover_once


class Command(BaseCommand):
    help = "Queue again the runs whose worker died and re-send queued runs whose message was lost."

    def handle(self, *args, **opts):
        self.stdout.write(str(recover_once()))
