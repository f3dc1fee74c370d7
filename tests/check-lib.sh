# check-lib.sh - what the two check runners share (tests/run-checks.sh,
# `make check`; tests/arm64/check.sh, `make check-arm64`): run one check
# with its log, counted; the summary line and the exit status at the end.
# Sourced after out= (the folder of the logs); sets pass, fail, failed.
pass=0 fail=0 failed=

check_run() { # name, log, command...
    name=$1 log=$2
    shift 2
    if "$@" >"$log" 2>&1; then
        pass=$((pass + 1)); echo "PASS $name"
    else
        fail=$((fail + 1)); failed="$failed [$name]"; echo "FAIL $name (log: $log)"
        tail -n 30 "$log" | sed 's/^/    /'
    fi
}

check_summary() { # [PREFIX]: "N passed, N failed"; exit 1 if any failed
    echo "${1:-}$pass passed, $fail failed"
    [ "$fail" -eq 0 ] || { echo "failed:$failed"; exit 1; }
}
