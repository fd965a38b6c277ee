# Sourced by .ci/run (the landing gate) and .ci/full (everything): the stages of CI, each a function, and `stage`,
# which runs one, prints its duration, and stops CI on its failure. `finish` prints every stage's duration and the
# total. The stages share builds where they can: the build stage compiles the library and its tests with the flags
# the README's test command uses, so that command compiles nothing again.

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

ci_started=$(date +%s)
ci_durations=()

# Runs stage function `$1` under the title `$2`, timed; on its failure, prints the stages so far and exits with it.
stage() {
    local function=$1 title=$2 began status
    began=$(date +%s)
    printf '\n==> %s\n' "$title"
    # In a subshell of its own, so that the stage stops at its first failing command and CI still reports it.
    set +e
    (
        set -e
        "$function"
    )
    status=$?
    set -e
    local took=$(($(date +%s) - began)) outcome=""
    [ "$status" -eq 0 ] || outcome=" FAILED (exit status $status)"
    ci_durations+=("$(printf '%4dm%02ds  %s%s' $((took / 60)) $((took % 60)) "$title" "$outcome")")
    printf -- '--- %s: %dm%02ds%s\n' "$title" $((took / 60)) $((took % 60)) "$outcome"
    if [ "$status" -ne 0 ]; then
        finish
        exit "$status"
    fi
}

# Prints each stage's duration, the total and the machine's load.
finish() {
    local total=$(($(date +%s) - ci_started))
    printf '\n==> Stages\n'
    printf '%s\n' "${ci_durations[@]}"
    printf 'Total %dm%02ds; load average %s\n' $((total / 60)) $((total % 60)) "$(cut -d' ' -f1-3 /proc/loadavg)"
}

lint() {
    local findings
    findings=$(swift format lint --strict --recursive Sources Tests Examples/Sources Examples/Tests \
        Benchmarks/Sources Integrations/Sources Integrations/Tests Package.swift Examples/Package.swift \
        Benchmarks/Package.swift Integrations/Package.swift 2>&1 || true)
    if [ -n "$findings" ]; then
        printf '%s\n' "$findings"
        echo "swift format lint: $(printf '%s\n' "$findings" | wc -l) findings"
        return 1
    fi
}

# Lines carrying each attribute in Sources/Loading, as `grep -c` counts them: @inlinable at most 150,
# @usableFromInline at most 100, and none of the attributes that turn a check off (Benchmarks/README.md).
attribute_budget() {
    count() { { grep -rc -- "$1" Sources/Loading || true; } | awk -F: '{ total += $2 } END { print total + 0 }'; }
    local inlinable usable banned
    inlinable=$(count "@inlinable") usable=$(count "@usableFromInline")
    banned=$(($(count "@exclusivity(unchecked)") + $(count "unsafeDowncast") + $(count "_isConcrete")))
    echo "@inlinable ${inlinable} (budget 150), @usableFromInline ${usable} (budget 100), banned ${banned}"
    if [ "$inlinable" -gt 150 ] || [ "$usable" -gt 100 ] || [ "$banned" -ne 0 ]; then
        echo "Over the attribute budget."
        return 1
    fi
}

# A test never depends on how fast the machine is (Docs/Contributing.md): at most 8 lines in Tests/ sleep or wait a
# fixed time (a watchdog, a pace, a proof of absence), each saying why in a comment on it or just above it; no
# deadline shorter than the watchdog. A virtual clock's `func sleep(until:tolerance:)` moves the clock and is not one.
test_waits_budget() {
    local waits
    waits=$(grep -rnE "sleep|asyncAfter|run\(until: Date\(\)\.addingTimeInterval\(0\.[0-9]*[1-9]" Tests \
        | grep -v "func sleep(until" | grep -vE "addingTimeInterval\(0\.00[0-9]\)" || true)
    local count=0 uncommented=""
    while IFS= read -r hit; do
        [ -n "$hit" ] || continue
        count=$((count + 1))
        local file=${hit%%:*} rest=${hit#*:}
        local line=${rest%%:*}
        if ! sed -n "$((line > 1 ? line - 1 : 1)),${line}p" "$file" | grep -qE '//|#'; then
            uncommented+="$hit"$'\n'
        fi
    done <<<"$waits"
    printf '%s\n' "$waits"
    echo "fixed waits in Tests/: ${count} (budget 8)"
    local short
    short=$(grep -rnE "timeout: *[0-9]+(\.[0-9]+)?\b" Tests | grep -vE "timeout: *(6[0-9]|[7-9][0-9]|[1-9][0-9]{2,})\b" || true)
    if [ -n "$short" ]; then
        printf 'A deadline shorter than the watchdog (60 s):\n%s\n' "$short"
        return 1
    fi
    if [ -n "$uncommented" ]; then
        printf 'A fixed wait that does not say why:\n%s' "$uncommented"
        return 1
    fi
    [ "$count" -le 8 ] || { echo "Over the budget of fixed waits."; return 1; }
}

# The library and its tests, and the examples, with every warning an error: a fresh build prints every warning, so
# the build fails on any. The flags are the README's test command's, which then builds nothing again.
build_without_warnings() {
    local log
    log=$(mktemp)
    swift build --build-tests "$@" 2>&1 | tee "$log"
    local status=${PIPESTATUS[0]}
    local warnings
    warnings=$(grep -E "^/.*: warning: " "$log" | sort -u || true)
    rm -f "$log"
    [ "$status" -eq 0 ] || return "$status"
    if [ -n "$warnings" ]; then
        printf '\nWarnings (CI builds with none):\n%s\n' "$warnings"
        return 1
    fi
}

build() { build_without_warnings; }
build_examples() { build_without_warnings --package-path Examples; }

documentation() {
    local graphs
    graphs=$(mktemp -d)
    swift package dump-symbol-graph >/dev/null
    cp .build/*/symbolgraph/Loading.symbols.json "$graphs/"
    docc convert Sources/Loading/Loading.docc --additional-symbol-graph-dir "$graphs" \
        --fallback-display-name Loading --fallback-bundle-identifier loading \
        --output-path "$graphs/Loading.doccarchive" --warnings-as-errors
    rm -rf "$graphs"
}

# The README's test command, as the README shows it: the line after `swift build` in its "Building and testing".
readme_tests() {
    local command
    command=$(awk '/^## Building and testing/ { section = 1 } section && /^swift build/ { getline; print; exit }' \
        README.md | sed -E 's/[[:space:]]+#.*$//')
    [ -n "$command" ] || { echo "The README shows no test command after swift build."; return 1; }
    echo "$command"
    eval "$command"
}

integrations() {
    bash .ci/integration-tests
}

# The quote service's fault runs (a slow, hung and stopped PostgreSQL, a lease holder killed), short, on the debug
# build: no failed request, and the killed holder's key taken over before the waiter's own deadline.
fault_runs() {
    CONFIGURATION=debug CHECK=1 RATE=50 DURATION=4 bash Integrations/Scripts/quote-faults.sh
}

# The suites where races live, under the thread sanitizer: the store and its parts, the mutation queue and items
# created offline, sharing between processes, shared entities, and the model check (its CI budget).
race_suites='StoreTests|StoreRaceTests|StoreKeysTests|StoreStateTests|StoreEngine|StoreMachine|StoreSaving|StoreFlush'
race_suites+='|MutationQueue|MutationLedger|MutationSending|OfflineCreation|NamedItems|SharedEntities|ExternalChanges'
race_suites+='|SharedMutations|ChangeJournal|JournalingLevel|FetchLease|StoreModelCheckTests|PagedStoreTests'
race_suites+='|SubjectTests|StreamConcurrencyTests|FriendsOfflineTests|LiveUpdatesDuringReadTests|SingleSourceOfTruth'
race_suites+='|StoreShutdown|BackgroundSave|CoordinationEvents|RememberedFailures|SharedFailures'

# A quarter of each heavy test and of the model check's histories: the sanitizer runs them some ten times slower, and
# the gate's other stages run them whole.
thread_sanitizer_race_suites() {
    TSAN_OPTIONS="halt_on_error=1" LOADING_TEST_SCALE=0.25 LOADING_MODEL_HISTORIES=250 \
        Scripts/test --sanitize=thread --scratch-path .build-tsan --filter "$race_suites"
}

thread_sanitizer_everything() {
    TSAN_OPTIONS="halt_on_error=1" Scripts/test --sanitize=thread --scratch-path .build-tsan
}

# The whole suite in release, where inlinable code runs specialized, four times bigger.
release_everything() {
    LOADING_TEST_SCALE=4 Scripts/test -c release -Xswiftc -enable-testing --scratch-path .build-release
}

demos() {
    swift run --package-path Examples friends-demo --quiet
    swift run --package-path Examples example-keyed-store
    swift run --package-path Examples example-fresh-lists
}

# Counted with valgrind on a stripped copy: fails when a recorded figure is more than 10% worse.
benchmark_regression_gate() {
    swift run -c release --package-path Benchmarks Benchmarks --counts --quick \
        --only 2.,4.,5a.,5b.,7.,8.,11.,12a.,12b.,14.,15.,16.,17.,18.,19.,20.,22a.,22b.,23a.,23b.,24a.,24b.,24c.,25a.,25b.,26.,27. \
        --gate Benchmarks/README.md
}

# Every benchmark once (proves they build and run; no timing is asserted).
benchmarks_quick() {
    swift run -c release --package-path Benchmarks Benchmarks --quick
}

# Scenario 21: an operation's cost stays flat from 1,000 to 100,000.
benchmark_growth_gate() {
    swift run -c release --package-path Benchmarks Benchmarks --growth-gate
}

# The store, the paged store, the queue and concurrent histories against the model, two minutes each (in release),
# from a seed of the day.
model_soak() {
    LOADING_MODEL_SOAK_SECONDS=${LOADING_MODEL_SOAK_SECONDS:-120} LOADING_MODEL_SEED=${LOADING_MODEL_SEED:-$(date +%j)} \
        swift test --disable-swift-testing -c release -Xswiftc -enable-testing --scratch-path .build-release \
        --filter 'StoreModelCheckTests.test_random|StoreModelCheckTests.test_concurrent'
}
