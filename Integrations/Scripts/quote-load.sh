#!/usr/bin/env bash
# Two instances of the quote service against one PostgreSQL and one fake upstream, on loopback, under a steady load
# from a process of its own: written by hand (`--mode plain`), with the store (`--mode store`), and with the store
# telling its events to swift-metrics and swift-log (`--events on`), in turn, `ROUNDS` times. Prints, per run,
# latencies, CPU per request of the two instances together, and the upstream's calls per symbol per freshness window;
# then the store's CPU per request against the hand-written one.
#
#   bash Integrations/Scripts/quote-load.sh   # RATE=1000 DURATION=20 KEYS=100000 SKEW=8 MAX_AGE=5 ROUNDS=2
#
# Starts PostgreSQL as `.ci/run` does (installing it if it is missing), in a temporary folder, and stops it. With
# CHECK=1 it fails when a request failed or the store made more than one upstream call for a symbol within a freshness
# window (`.ci/run` runs it so, briefly, on the debug build: CONFIGURATION=debug).
set -euo pipefail
cd "$(dirname "$0")/../.."
source .ci/postgres.sh
source Integrations/Scripts/helpers.sh

RATE=${RATE:-1000}
DURATION=${DURATION:-20}
KEYS=${KEYS:-100000}
SKEW=${SKEW:-8}
MAX_AGE=${MAX_AGE:-5}
ROUNDS=${ROUNDS:-2}
LATENCY_MS=${LATENCY_MS:-20}
LEVEL_TIMEOUT_MS=${LEVEL_TIMEOUT_MS:-500}  # what a PostgreSQL operation is given
LEASE_WAIT_MS=${LEASE_WAIT_MS:-2000}      # how long an instance waits for the lease holder's value
CONFIGURATION=${CONFIGURATION:-release}
BUILD_FLAGS=${BUILD_FLAGS:-}  # the flags of a build to reuse
CHECK=${CHECK:-0}

# shellcheck disable=SC2086 # the flags are words
build() { swift build -c "$CONFIGURATION" $BUILD_FLAGS --package-path Integrations "$@"; }
build --product QuoteService
build --product QuoteBench
bin=$(build --show-bin-path)

pids=()
results=$(mktemp)
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    postgres_stop
    rm -f "$results"
}
trap cleanup EXIT

postgres_start
upstream_port=$(free_port)
"$bin/QuoteBench" upstream --port "$upstream_port" --latency-ms "$LATENCY_MS" &
pids+=($!)
wait_for "http://127.0.0.1:$upstream_port/calls"
echo "machine: $(nproc) cores, $(uname -m), $(swift --version 2>/dev/null | head -1)"
echo "load: $RATE requests/s for $DURATION s over $KEYS symbols (skew $SKEW), two instances, maxAge $MAX_AGE s," \
    "upstream latency $LATENCY_MS ms"

variants=(plain store store+events)
for round in $(seq 1 "$ROUNDS"); do
    # Each round in another order, so that no variant always runs first (on a database just started) or last.
    shift=$(((round - 1) % ${#variants[@]}))
    for variant in "${variants[@]:$shift}" "${variants[@]:0:$shift}"; do
        mode=${variant%+events}
        events=$([ "$variant" = store+events ] && echo on || echo off)
        table="quotes_${mode}_${events}_${round}"
        instance_pids=()
        targets=()
        for _ in 1 2; do
            port=$(free_port)
            "$bin/QuoteService" --port "$port" --upstream "http://127.0.0.1:$upstream_port" \
                --postgres "$LOADING_POSTGRES_URL" --mode "$mode" --events "$events" --table "$table" \
                --max-age "$MAX_AGE" --level-timeout "$LEVEL_TIMEOUT_MS" --lease-wait "$LEASE_WAIT_MS" &
            instance_pids+=($!)
            pids+=($!)
            targets+=("http://127.0.0.1:$port")
            wait_for "http://127.0.0.1:$port/health"
        done
        # One request each first, so that both have created the tables and connected before the load begins.
        curl -sf "${targets[0]}/quotes/WARMUP" >/dev/null
        curl -sf "${targets[1]}/quotes/WARMUP" >/dev/null
        "$bin/QuoteBench" load --targets "$(IFS=,; echo "${targets[*]}")" --pids "$(IFS=,; echo "${instance_pids[*]}")" \
            --upstream "http://127.0.0.1:$upstream_port" --rate "$RATE" --seconds "$DURATION" --keys "$KEYS" \
            --skew "$SKEW" --max-age "$MAX_AGE" --label "$variant" | tee -a "$results" | grep -v '^RESULT'
        for pid in "${instance_pids[@]}"; do kill "$pid"; wait "$pid" 2>/dev/null || true; done
    done
done

# A failed check shows what the database reported too (its log goes with its folder).
python3 - "$results" "$CHECK" <<'PY' || { status=$?; grep -E "ERROR|FATAL|PANIC" "$POSTGRES_DIR/log" | tail -20; exit $status; }
import sys
runs = {}
for line in open(sys.argv[1]):
    if line.startswith("RESULT "):
        fields = dict(part.split("=", 1) for part in line.split()[1:])
        runs.setdefault(fields["label"], []).append(fields)
cpu = lambda label: sorted(float(r["cpu_us"]) for r in runs[label])
mean = lambda label: sum(cpu(label)) / len(cpu(label))
for label in runs:
    print(f"{label}: CPU per request {mean(label):.1f} µs (runs {', '.join(f'{c:.1f}' for c in cpu(label))}),"
          f" {mean(label) / mean('plain'):.3f}x by hand")
most = max(int(r["most_per_window"]) for label in ("store", "store+events") for r in runs[label])
print(f"most upstream calls per symbol per freshness window, store: {most}")
failures = sum(int(r["failures"]) for label in runs for r in runs[label])
if sys.argv[2] == "1" and (most > 1 or failures > 0):
    sys.exit(f"check failed: {failures} failed requests, {most} upstream calls for a symbol in one window")
PY
