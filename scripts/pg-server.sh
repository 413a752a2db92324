#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server on loopback for the tests and prints its URL:
#   scripts/pg-server.sh [DIR] [PORT]   (defaults: /tmp/agent-loop-pg, 55432)
# Installs Debian's postgresql when no server binaries are found (needs root and apt). As root,
# the server runs as the `postgres` user (it refuses to run as root). The cluster is made with
# `initdb --no-sync` and `fsync=off`: test data, not durable. Stop it with
#   pg_ctl -D DIR/data stop   (as the same user).
set -euo pipefail
dir="${1:-/tmp/agent-loop-pg}"
port="${2:-55432}"
bin=""
for candidate in /usr/lib/postgresql/*/bin; do
  if [ -x "$candidate/initdb" ]; then bin="$candidate"; fi
done
if [ -z "$bin" ]; then
  echo "installing postgresql" >&2
  if ! out="$( { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql; } 2>&1 )"; then
    printf '%s\n' "$out" >&2
    exit 1
  fi
  for candidate in /usr/lib/postgresql/*/bin; do
    if [ -x "$candidate/initdb" ]; then bin="$candidate"; fi
  done
fi
as_server() {
  if [ "$(id -u)" = "0" ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
mkdir -p "$dir"
if [ "$(id -u)" = "0" ]; then chown postgres "$dir"; fi
if [ ! -f "$dir/data/PG_VERSION" ]; then
  as_server "$bin/initdb" --no-sync -A trust -U postgres -D "$dir/data" >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
fi
if ! as_server "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
  as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
    start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
fi
echo "postgres://postgres@127.0.0.1:$port/postgres"
