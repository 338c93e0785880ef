#!/bin/sh
# Makes a cluster in an empty PGDATA (password auth for TCP, the POSTGRES_DB
# database), then runs the command as the postgres user.
set -eu

if [ "${1#-}" != "$1" ]; then
    set -- postgres "$@"
fi

if [ "$1" = postgres ] && [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA"
    chown postgres:postgres "$PGDATA"
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ "$1" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "${POSTGRES_PASSWORD:-}" ]; then
        echo "postgres: set POSTGRES_PASSWORD (the superuser's password)" >&2
        exit 1
    fi
    user="${POSTGRES_USER:-postgres}"
    password_file="$(mktemp)"
    printf '%s' "$POSTGRES_PASSWORD" > "$password_file"
    initdb --username="$user" --pwfile="$password_file" --auth-local=trust \
        --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 -D "$PGDATA" >/dev/null
    rm -f "$password_file"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
    database="${POSTGRES_DB:-$user}"
    if [ "$database" != postgres ]; then
        # On the socket only, so nothing connects before the database exists.
        pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w -t 60 start >/dev/null
        createdb --username="$user" "$database"
        pg_ctl -D "$PGDATA" -m fast -w -t 60 stop >/dev/null
    fi
fi

exec "$@"
