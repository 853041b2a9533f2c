#!/bin/sh
# What PostgreSQL's official image does at its start (docker-entrypoint.sh), with Debian's
# PostgreSQL of this machine: make $PGDATA with $POSTGRES_USER, $POSTGRES_PASSWORD and
# $POSTGRES_DB on the first start, accept password logins from the network, then run the
# server as the pod's user (its securityContext's runAsUser, $RUN_AS_UID:$RUN_AS_GID).
set -eu
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
uid=${RUN_AS_UID:-999}
gid=${RUN_AS_GID:-$uid}
as_user() { setpriv --reuid="$uid" --regid="$gid" --clear-groups "$@"; }
# The image has its postgres account; here /etc is the container's own (an overlay).
grep -q "^[^:]*:[^:]*:$uid:" /etc/passwd || echo "postgres:x:$uid:$gid::/var/lib/postgresql:/bin/sh" >> /etc/passwd
grep -q "^[^:]*:[^:]*:$gid:" /etc/group || echo "postgres:x:$gid:" >> /etc/group
mkdir -p "$PGDATA" /run/postgresql
chown -R "$uid:$gid" "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  printf '%s\n' "$POSTGRES_PASSWORD" > /run/postgresql/pwfile
  chown "$uid:$gid" /run/postgresql/pwfile
  as_user "$BIN/initdb" -D "$PGDATA" -U "$POSTGRES_USER" --pwfile=/run/postgresql/pwfile \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f /run/postgresql/pwfile
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  as_user "$BIN/pg_ctl" -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  as_user "$BIN/psql" -q -U "$POSTGRES_USER" -d postgres -c "CREATE DATABASE \"${POSTGRES_DB:-$POSTGRES_USER}\";"
  as_user "$BIN/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec setpriv --reuid="$uid" --regid="$gid" --clear-groups "$BIN/postgres" -D "$PGDATA" -c listen_addresses='*' "$@"
