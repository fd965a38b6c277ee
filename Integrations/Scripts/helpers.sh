# Sourced by the quote service's scripts: a free loopback port, and a wait for a URL to answer.

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits until `$1` answers (for a minute at most: a watchdog).
wait_for() {
    for _ in $(seq 1 1200); do
        if curl -sf "$1" >/dev/null 2>&1; then return 0; fi
        sleep 0.05
    done
    echo "$1 did not answer" >&2
    return 1
}
