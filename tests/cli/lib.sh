# lib.sh - shared by the CLI tests (tests/cli/tNNNN-*.sh): each test sources
# this, then calls check/expect_* for each assertion. A failed assertion
# prints what was expected and what came, and the test exits 1 at the end.
# Environment from run-checks.sh: KVCHAT, MKMODEL, TOP.
set -u
: "${KVCHAT:?}" "${TOP:?}"
T=$(mktemp -d "${TMPDIR:-/tmp}/kvchat-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
export KVCHAT_HOME="$T/home" XDG_CONFIG_HOME="$T/config" XDG_STATE_HOME="$T/state" NO_COLOR=1
n_fail=0 n_ok=0

ok() { n_ok=$((n_ok + 1)); echo "ok: $*"; }
not_ok() { n_fail=$((n_fail + 1)); echo "NOT OK: $*"; }

# run CMD...: runs it, keeping stdout in $T/out, stderr in $T/err, status in $rc
run() {
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    echo "\$ $* -> $rc"
}

expect_rc() { [ "$rc" = "$1" ] && ok "exit $1" || { not_ok "exit $rc, wanted $1"; sed 's/^/  stderr: /' "$T/err"; }; }
expect_out() { grep -q -e "$1" "$T/out" && ok "stdout has '$1'" || { not_ok "stdout lacks '$1'"; sed 's/^/  stdout: /' "$T/out"; }; }
expect_err() { grep -q -e "$1" "$T/err" && ok "stderr has '$1'" || { not_ok "stderr lacks '$1'"; sed 's/^/  stderr: /' "$T/err"; }; }
expect_out_empty() { [ ! -s "$T/out" ] && ok "stdout empty" || { not_ok "stdout not empty"; sed 's/^/  stdout: /' "$T/out"; }; }

. "$TOP/tests/cli/logits-lib.sh"

finish() {
    echo "$n_ok passed, $n_fail failed"
    [ "$n_fail" -eq 0 ]
}
