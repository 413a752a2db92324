#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server on loopback for the tests and prints its URL:
#   scripts/pg-server.sh [DIR] [PORT]   (defaults: /tmp/agent-loop-pg, 55432)
# Installs Debian's postgresql when no server binaries are found (needs root and apt). As root,
# the server runs as the `postgres` user (it refuses to run as root). The cluster is made with
# `initdb --no-sync` and `fsync=off`: test data, not durable. The server is up when the pid in
# DIR/data/postmaster.pid is a postgres of DIR/data that accepts connections on PORT; a pid file
# left by a killed server (its pid dead, or reused by another process) is removed, with the
# socket's lock file, before the server starts. Debian does not put the server binaries on the
# PATH: the command that stops it, with pg_ctl's full path, is printed on stderr.
set -euo pipefail
dir="${1:-/tmp/agent-loop-pg}"
port="${2:-55432}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd -P)"
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
as_server_text=""
if [ "$(id -u)" = "0" ]; then as_server_text="runuser -u postgres -- "; fi
if [ "$(id -u)" = "0" ]; then chown postgres "$dir"; fi
if [ ! -f "$dir/data/PG_VERSION" ]; then
  as_server "$bin/initdb" --no-sync -A trust -U postgres -D "$dir/data" >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
fi
pidfile="$dir/data/postmaster.pid"
# Whether the pid file names a live postgres of this data directory (not only a live pid:
# after a restart the pid of a killed server may be another process's).
running() {
  [ -f "$pidfile" ] || return 1
  local pid
  pid="$(head -n 1 "$pidfile")"
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] &&
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "postgres -D $dir/data "
}
if ! running; then
  if [ -f "$pidfile" ]; then
    echo "removing $pidfile and $dir/.s.PGSQL.$port.lock, left by a server that is no longer running" >&2
    rm -f "$pidfile" "$dir/.s.PGSQL.$port.lock"
  fi
  as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
    start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
fi
# Running (or just started): it must answer on this port (it may have been started with another).
if ! "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -t 60; then
  echo "the server of $dir/data runs but does not answer on 127.0.0.1:$port (started with another port?); see $dir/server.log" >&2
  exit 1
fi
echo "stop it with: ${as_server_text}$bin/pg_ctl -D $dir/data stop" >&2
echo "postgres://postgres@127.0.0.1:$port/postgres"
