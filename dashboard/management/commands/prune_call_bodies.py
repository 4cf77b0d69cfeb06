"""python manage.py prune_call_bodies

Deletes the gateway call bodies older than GATEWAY_CALL_BODY_DAYS now, with the message
texts no kept body needs (a gateway call does it too, at most every
GATEWAY_CALL_BODY_SWEEP seconds per process). The calls' figures stay."""
from __future__ import annotations

from django.core.management.base import BaseCommand

from dashboard.services.call_bodies import sweep_expired


class Command(BaseCommand):
    help = "Delete gateway call bodies older than GATEWAY_CALL_BODY_DAYS (the call inspector's records)."

    def handle(self, *args, **opts):
        bodies, pieces = sweep_expired()
        self.stdout.write(f"deleted {bodies} call bodies and {pieces} pieces no kept body uses")
