#!/usr/bin/env bash
# The quote service's two instances (the store, the PostgreSQL level, the lease) when their database fails, on
# loopback: a proxy between the instances and PostgreSQL passes every message on, then delays each one by a second
# (slow), then passes none (hung), then is stopped (connections refused), then passes again; each phase under a
# steady load. Prints, per phase, the requests' latencies (the slowest is a cold key: its bound is the level read's,
# the lease call's and the save's timeouts plus the upstream's latency), the failures and the upstream's calls, with
# the machine's load average. Then a symbol the upstream does not know (a 404) is asked for 20 times, and one it never
# answers 40 times. Last, an instance is stopped (SIGTERM), then another killed (SIGKILL), while it holds a key's
# lease: how long the other takes to answer that key, and how many upstream calls it cost.
#
#   bash Integrations/Scripts/quote-faults.sh   # RATE=200 DURATION=10 LEVEL_TIMEOUT_MS=500 LEASE_WAIT_MS=30000
#
# Starts PostgreSQL as `.ci/run` does, in a temporary folder, and stops it. With CHECK=1 it fails when a request
# failed, the unknown or the hung symbol cost more than one upstream call, the stopped holder's key cost a second
# upstream call, or the killed holder's key was not answered before the waiter's `LEASE_WAIT_MS` (`.ci/full` runs it
# so).
set -euo pipefail
cd "$(dirname "$0")/../.."
source .ci/postgres.sh
source Integrations/Scripts/helpers.sh

RATE=${RATE:-200}
DURATION=${DURATION:-10}
KEYS=${KEYS:-100000}
SKEW=${SKEW:-8}
MAX_AGE=${MAX_AGE:-5}
LATENCY_MS=${LATENCY_MS:-20}
SLOW_LATENCY_MS=${SLOW_LATENCY_MS:-3000}  # the upstream's latency for the key whose holder is killed
LEVEL_TIMEOUT_MS=${LEVEL_TIMEOUT_MS:-500}
LEASE_WAIT_MS=${LEASE_WAIT_MS:-30000}  # longer than the lease's 10 s: a waiter must take a lapsed lease over
UPSTREAM_TIMEOUT_MS=${UPSTREAM_TIMEOUT_MS:-5000}  # past SLOW_LATENCY_MS, within LEASE_WAIT_MS: a waiter gets the timeout
CONFIGURATION=${CONFIGURATION:-release}
CHECK=${CHECK:-0}

build() { swift build -c "$CONFIGURATION" --package-path Integrations "$@"; }
build --product QuoteService
build --product QuoteBench
bin=$(build --show-bin-path)

pids=()
results=$(mktemp)
control=$(mktemp -u)
mkfifo "$control"
cleanup() {
    exec 3>&- 2>/dev/null || true
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    postgres_stop
    rm -f "$control" "$results"
}
trap cleanup EXIT

postgres_start
server_port=${LOADING_POSTGRES_URL##*:}
server_port=${server_port%%/*}
proxy_port=$(free_port)
proxied_url=${LOADING_POSTGRES_URL/:$server_port\//:$proxy_port/}

# The proxy reads what to do from the FIFO, which this script keeps open on descriptor 3.
start_proxy() {
    "$bin/QuoteBench" proxy --port "$proxy_port" --server-port "$server_port" <"$control" &
    proxy_pid=$!
    pids+=("$proxy_pid")
    exec 3>"$control"
}
stop_proxy() {
    kill -9 "$proxy_pid"
    wait "$proxy_pid" 2>/dev/null || true
    exec 3>&-
}
tell_proxy() { echo "$1" >&3; }

upstream_port=$(free_port)
"$bin/QuoteBench" upstream --port "$upstream_port" --latency-ms "$LATENCY_MS" --slow-latency-ms "$SLOW_LATENCY_MS" &
pids+=($!)
wait_for "http://127.0.0.1:$upstream_port/calls"
start_proxy

instance_pids=()
targets=()
# Starts instance `$1` (0 or 1) on a new port.
start_instance() {
    local port
    port=$(free_port)
    "$bin/QuoteService" --port "$port" --upstream "http://127.0.0.1:$upstream_port" --postgres "$proxied_url" \
        --mode store --events off --table quotes_faults --max-age "$MAX_AGE" --level-timeout "$LEVEL_TIMEOUT_MS" \
        --lease-wait "$LEASE_WAIT_MS" --upstream-timeout "$UPSTREAM_TIMEOUT_MS" &
    instance_pids[$1]=$!
    pids+=($!)
    targets[$1]="http://127.0.0.1:$port"
    wait_for "http://127.0.0.1:$port/health"
    curl -sf "${targets[$1]}/quotes/WARMUP" >/dev/null
}
start_instance 0
start_instance 1

echo "machine: $(nproc) cores, $(uname -m); load: $RATE requests/s for $DURATION s per phase over $KEYS symbols" \
    "(skew $SKEW), two instances, level timeout $LEVEL_TIMEOUT_MS ms, lease holding 10 s, waiting $LEASE_WAIT_MS ms," \
    "upstream latency $LATENCY_MS ms"
echo "a cold key's bound: 3 x $LEVEL_TIMEOUT_MS ms + $LATENCY_MS ms = $((3 * LEVEL_TIMEOUT_MS + LATENCY_MS)) ms"

phase() {
    echo "-- $1 (load average $(cut -d' ' -f1 /proc/loadavg))"
    "$bin/QuoteBench" load --targets "$(IFS=,; echo "${targets[*]}")" --pids "$(IFS=,; echo "${instance_pids[*]}")" \
        --upstream "http://127.0.0.1:$upstream_port" --rate "$RATE" --seconds "$DURATION" --keys "$KEYS" \
        --skew "$SKEW" --max-age "$MAX_AGE" --label "$1" | tee -a "$results" | grep -v '^RESULT'
}

phase healthy
tell_proxy "delay 1000"
phase "slow (each message 1 s late)"
stop_proxy  # its connections drop, with the messages still on their way
start_proxy
tell_proxy hang
phase "hung (no message answered)"
stop_proxy
phase "stopped (connections refused)"
start_proxy
phase "back"

upstream_calls() {
    curl -s "http://127.0.0.1:$upstream_port/calls" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["symbols"]))'
}
# Counts the statuses in file $1, one per line: "20 x 404".
count_statuses() { sort "$1" | uniq -c | awk '{printf "%s x %s ", $1, $2}'; }

# A symbol the upstream does not know (a 404), asked 20 times over both instances within one freshness window: the
# instance that asked leaves the failure on the lease for the window, and both answer it from there.
echo "-- an unknown symbol (load average $(cut -d' ' -f1 /proc/loadavg))"
upstream_calls >/dev/null
statuses=$(mktemp)
for request in $(seq 1 20); do
    curl -s -o /dev/null -w '%{http_code}\n' "${targets[$((request % 2))]}/quotes/UNKNOWN1" >>"$statuses"
done
unknown_calls=$(upstream_calls)
echo "20 requests answered $(count_statuses "$statuses")with $unknown_calls upstream calls (two instances)"

# A symbol the upstream never answers: 20 requests at once over both instances (one instance asks and times out after
# UPSTREAM_TIMEOUT_MS, leaving the timeout on the lease; the others wait for it), then 20 more in the same window.
echo "-- a hung upstream (load average $(cut -d' ' -f1 /proc/loadavg))"
: >"$statuses"
started=$(date +%s.%N)
for request in $(seq 1 20); do
    curl -s -o /dev/null -w '%{http_code}\n' --max-time 120 "${targets[$((request % 2))]}/quotes/HUNG1" >>"$statuses" &
done
while [ "$(wc -l <"$statuses")" -lt 20 ]; do sleep 0.1; done
finished=$(date +%s.%N)
for request in $(seq 1 20); do
    curl -s -o /dev/null -w '%{http_code}\n' "${targets[$((request % 2))]}/quotes/HUNG1" >>"$statuses"
done
hung_calls=$(upstream_calls)
echo "40 requests answered $(count_statuses "$statuses")with $hung_calls upstream calls (two instances);" \
    "the first 20 within $(python3 -c "print(f'{$finished - $started:.2f}')") s (upstream timeout $UPSTREAM_TIMEOUT_MS ms)"
rm -f "$statuses"

# Instance 1 stopped (SIGTERM) while it holds a key's lease and fetches it: it answers the request under way, saves,
# gives its leases back and ends; instance 2, asked for that key meanwhile, takes the value it saved.
echo "-- a holder stopped with SIGTERM (load average $(cut -d' ' -f1 /proc/loadavg))"
upstream_calls >/dev/null
curl -s -o /dev/null "${targets[0]}/quotes/SLOWSTOPPED" &
sleep 1  # instance 1 holds the lease and is fetching
kill -TERM "${instance_pids[0]}"
started=$(date +%s.%N)
curl -sf -o /dev/null --max-time 120 "${targets[1]}/quotes/SLOWSTOPPED"
finished=$(date +%s.%N)
wait "${instance_pids[0]}" 2>/dev/null || true
calls=$(upstream_calls)
stopped_calls=$calls
echo "instance 2 answered the key instance 1 held after $(python3 -c "print(f'{$finished - $started:.2f}')") s" \
    "(the holder's fetch had $((SLOW_LATENCY_MS - 1000)) ms to go); upstream calls: $calls"
start_instance 0

# An instance killed while it holds a key's lease (its fetch takes SLOW_LATENCY_MS): the other waits for that key
# until the lease lapses, then takes it over and fetches.
echo "-- a holder killed (load average $(cut -d' ' -f1 /proc/loadavg))"
upstream_calls >/dev/null
curl -s -o /dev/null "${targets[0]}/quotes/SLOWKILLED" &
sleep 1  # instance 1 holds the lease and is fetching
kill -9 "${instance_pids[0]}"
wait "${instance_pids[0]}" 2>/dev/null || true
started=$(date +%s.%N)
curl -sf -o /dev/null --max-time 120 "${targets[1]}/quotes/SLOWKILLED"
finished=$(date +%s.%N)
calls=$(upstream_calls)
took=$(python3 -c "print(f'{$finished - $started:.2f}')")
echo "instance 2 answered the key instance 1 held after $took s" \
    "(the lease lapses 10 s after it was taken, then the fetch takes $SLOW_LATENCY_MS ms); upstream calls: $calls"

failures=$(awk '/^RESULT/ { for (i = 1; i <= NF; i++) if ($i ~ /^failures=/) { sub("failures=", "", $i); n += $i } }
    END { print n + 0 }' "$results")
if [ "$CHECK" = 1 ]; then
    if [ "$failures" != 0 ] || [ "$stopped_calls" != 1 ] || [ "$unknown_calls" != 1 ] || [ "$hung_calls" != 1 ] ||
        python3 -c "import sys; sys.exit($took * 1000 < $LEASE_WAIT_MS)"; then
        echo "check failed: $failures failed requests; $unknown_calls upstream calls for an unknown symbol;" \
            "$hung_calls for a hung one;" \
            "$stopped_calls upstream calls for the stopped holder's key;" \
            "the killed holder's key answered after $took s"
        exit 1
    fi
fi
