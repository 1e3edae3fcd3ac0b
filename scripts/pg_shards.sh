#!/usr/bin/env bash
# Extra PostgreSQL 15 servers for the shard tests and benchmark (docs/scale.md): clusters mlshard1..N on ports
# 5433.. (trust auth on 127.0.0.1, like CI's main server). Idempotent: existing clusters are started, not recreated.
# Usage: bash scripts/pg_shards.sh [N]      (default 3; needs root, or sudo, for pg_createcluster/pg_ctlcluster)
# Prints one DSN per line. Stop them with: pg_ctlcluster 15 mlshardK stop
set -euo pipefail
N="${1:-3}"
VER="$(ls /etc/postgresql 2>/dev/null | sort -n | tail -1)"
if [ -z "$VER" ] || ! command -v pg_createcluster >/dev/null 2>&1; then
  echo "pg_shards.sh: PostgreSQL's cluster tools (postgresql-common) are not installed" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else echo "pg_shards.sh: needs root or sudo" >&2; exit 1; fi
fi
for i in $(seq 1 "$N"); do
  name="mlshard$i"; port=$((5432 + i))
  if ! [ -d "/etc/postgresql/$VER/$name" ]; then
    # small servers: they share the machine with the main one and the tests
    $SUDO pg_createcluster "$VER" "$name" --port "$port" -- --auth-local=trust --auth-host=trust >/dev/null
    $SUDO tee -a "/etc/postgresql/$VER/$name/conf.d/memledger.conf" >/dev/null <<CONF
shared_buffers = 64MB
max_connections = 60
fsync = on
CONF
  fi
  if ! pg_isready -h 127.0.0.1 -p "$port" >/dev/null 2>&1; then
    $SUDO pg_ctlcluster --skip-systemctl-redirect "$VER" "$name" start
  fi
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p "$port" >/dev/null 2>&1 && break; sleep 1; done
  echo "postgresql://postgres@127.0.0.1:$port/postgres"
done
