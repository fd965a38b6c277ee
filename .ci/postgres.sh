# Sourced by .ci/run: a PostgreSQL server for the integration tests, on loopback, in a temporary folder.
# postgres_start sets LOADING_POSTGRES_URL; postgres_stop stops the server and removes its folder.

postgres_bin() {
    ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1
}

# Runs a command as the postgres user when this script runs as root (the server refuses to run as root).
as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

postgres_start() {
    if [ -z "$(postgres_bin)" ]; then
        echo "PostgreSQL is missing: installing it"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    fi
    local bin
    bin=$(postgres_bin)
    POSTGRES_DIR=$(mktemp -d)
    [ "$(id -u)" = 0 ] && chown postgres "$POSTGRES_DIR"
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_postgres "$bin/initdb" -D "$POSTGRES_DIR/data" -A trust -U postgres -E UTF8 --no-locale >/dev/null
    as_postgres "$bin/pg_ctl" -D "$POSTGRES_DIR/data" -l "$POSTGRES_DIR/log" -w \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $POSTGRES_DIR" start >/dev/null
    as_postgres "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres loading_tests
    export LOADING_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/loading_tests"
    echo "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port, in $POSTGRES_DIR"
}

postgres_stop() {
    [ -n "${POSTGRES_DIR:-}" ] || return 0
    as_postgres "$(postgres_bin)/pg_ctl" -D "$POSTGRES_DIR/data" -m fast -w stop >/dev/null || true
    rm -rf "$POSTGRES_DIR"
    POSTGRES_DIR=
}
