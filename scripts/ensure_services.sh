#!/usr/bin/env bash
# Start (or install) what the full test suite talks to: PostgreSQL, Redis, Chromium.
# Idempotent; safe to run on a developer machine. Missing pieces are reported, and
# the tests that need them skip with a reason (or fail when CI=true).
set -u

log() { printf '[services] %s\n' "$*"; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if ! port_open 6379; then
  if command -v redis-server >/dev/null 2>&1; then
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log >/dev/null 2>&1 \
      || redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null 2>&1 || true
    for _ in $(seq 1 50); do port_open 6379 && break; sleep 0.1; done
  fi
  port_open 6379 && log "redis started" || log "redis unavailable"
else
  log "redis running"
fi

if ! port_open 5432; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    for v in $(ls /etc/postgresql); do
      pg_ctlcluster --skip-systemctl-redirect "$v" main start >/dev/null 2>&1 || true
    done
    for _ in $(seq 1 100); do port_open 5432 && break; sleep 0.1; done
  fi
  port_open 5432 && log "postgresql started" || log "postgresql unavailable"
else
  log "postgresql running"
fi

if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  log "installing chromium from Debian packages"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk >/dev/null) \
    || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || log "chromium install failed"
fi
command -v chromium >/dev/null 2>&1 && log "chromium: $(command -v chromium)" || log "chromium unavailable"
exit 0
