# pg_cluster.bash - a throwaway PostgreSQL cluster for a test (sourced after serve_common.bash): Debian's
# server binaries, initdb in a temp folder, a free loopback port, trust auth for the user `kiln`, stopped and
# removed on exit. initdb refuses to run as root, so as root the cluster belongs to `nobody`.
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
PGDIR=""
PGPORT=""
PG_URI=""

pg_as() { if [ "$(id -u)" -eq 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi; }

pg_start() {
  [ -x "$PGBIN/initdb" ] || { echo "FAIL: PostgreSQL server binaries not found (apt-get install postgresql)"; exit 1; }
  PGDIR=$(mktemp -d /tmp/kiln-pg.XXXXXX)
  chmod 755 "$PGDIR"
  [ "$(id -u)" -eq 0 ] && chown nobody "$PGDIR"
  PGPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  pg_as "$PGBIN/initdb" -D "$PGDIR/data" -U kiln --auth=trust -E UTF8 >"$PGDIR/initdb.log" 2>&1 \
    || { cat "$PGDIR/initdb.log"; echo "FAIL: initdb"; exit 1; }
  pg_as "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/server.log" -w -t 60 \
    -o "-p $PGPORT -k $PGDIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start \
    >/dev/null || { cat "$PGDIR/server.log"; echo "FAIL: pg_ctl start"; exit 1; }
  PG_URI="postgresql://kiln@127.0.0.1:$PGPORT/postgres"
}

pg_stop() {
  if [ -n "$PGDIR" ] && [ -d "$PGDIR/data" ]; then
    pg_as "$PGBIN/pg_ctl" -D "$PGDIR/data" -m immediate stop >/dev/null 2>&1 || true
  fi
  [ -n "$PGDIR" ] && rm -rf "$PGDIR"
  PGDIR=""
}

# psql as the test's user: pg_sql "SELECT ..." prints unaligned rows
pg_sql() { "$PGBIN/psql" -X -q -t -A "$PG_URI" -c "$1"; }
