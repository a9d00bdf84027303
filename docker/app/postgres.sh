#!/bin/sh
# The compose file's PostgreSQL: Debian's server, initialized on first start with the
# agentbench role and database (password from POSTGRES_PASSWORD), listening on the compose
# network only.
set -eu
DATA=/var/lib/postgresql/data
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
mkdir -p "$DATA" /run/postgresql
chown -R postgres:postgres "$DATA" /run/postgresql
if [ ! -s "$DATA/PG_VERSION" ]; then
  printf '%s\n' "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}" >/tmp/pwfile
  chown postgres /tmp/pwfile
  su postgres -s /bin/sh -c "$BIN/initdb -D $DATA -U postgres --pwfile=/tmp/pwfile --auth-local=peer --auth-host=scram-sha-256" >/dev/null
  rm -f /tmp/pwfile
  echo "host all all 0.0.0.0/0 scram-sha-256" >>"$DATA/pg_hba.conf"
  su postgres -s /bin/sh -c "$BIN/pg_ctl -D $DATA -o '-c listen_addresses=' -w start" >/dev/null
  su postgres -s /bin/sh -c "psql -q -c \"CREATE ROLE agentbench LOGIN PASSWORD '$POSTGRES_PASSWORD'\" -c 'CREATE DATABASE agentbench OWNER agentbench'"
  su postgres -s /bin/sh -c "$BIN/pg_ctl -D $DATA -m fast -w stop" >/dev/null
fi
# exec: the server is PID 1 and gets `docker stop`'s SIGTERM itself (a smart shutdown).
exec setpriv --reuid postgres --regid postgres --init-groups "$BIN/postgres" -D "$DATA" -c "listen_addresses=*"
