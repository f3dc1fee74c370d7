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

# expect_interrupted PID LABEL: Ctrl-C (SIGINT) to the background command
# PID, which must then exit 130 (its status stays in $rc)
expect_interrupted() {
    kill -INT "$1"
    wait "$1"
    rc=$?
    [ "$rc" = 130 ] && ok "$2: exit 130" || not_ok "$2: exit $rc, wanted 130"
}

# info_says FILE LINE...: `kvchat models info FILE` succeeds and its
# stdout has each LINE (a grep pattern, as expect_out's)
info_says() {
    run "$KVCHAT" models info "$1"
    expect_rc 0
    shift
    for _l; do expect_out "$_l"; done
}

# qwen2_tiny FILE [OPTION...]: the small qwen2 most tests chat with, made by
# mkmodel: 2 layers of dim 64, the real qwen2 vocabulary (so text round-trips),
# tied embeddings, weights scaled 0.2; OPTIONs are added (a later one wins)
qwen2_tiny() {
    _file=$1
    shift
    "$MKMODEL" "$_file" --arch qwen2 --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 64 --layers 2 \
        --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 "$@" >/dev/null
}

. "$TOP/tests/cli/logits-lib.sh"

# ==== sessions: turns resumed from disk answer as --no-cache (t0602, t0604, t0621) ====

# field NAME: that field of the `run --json` answer in $T/out
field() { jq -r ".$1" "$T/out"; }

# turn_msg I BASE WORD: turn I's message, "Question I about" and BASE + I * 7
# % 23 words WORDn: a different length every turn
turn_msg() {
    i=$1 w="Question $1 about"
    j=0
    while [ $j -lt $((i * 7 % 23 + $2)) ]; do w="$w $3$((j * i % 97))"; j=$((j + 1)); done
    echo "$w?"
}

# six_turns R SESSION BASE WORD: six turns of turn_msg (BASE, WORD) by R (a
# `run ... --json` command) in session SESSION, each first with --no-cache,
# then resumed: the resumed answer and prompt as --no-cache's, and from the
# second turn on the whole history cached. Differences are counted in $bad
# (each said); $total is the history's tokens after; $T/msgs.txt holds the
# messages and $T/resumed.txt the answers. $TURN_HOOK, if set, is run after
# each turn's checks (with i, p, total as they are then) to check more.
six_turns() {
    bad=0 total=0
    : >"$T/resumed.txt"
    : >"$T/msgs.txt"
    for i in 1 2 3 4 5 6; do
        m=$(turn_msg "$i" "$3" "$4")
        echo "$m" >>"$T/msgs.txt"
        run sh -c "$1 -s $2 --no-cache '$m' </dev/null"
        a=$(field answer) p=$(field prompt_tokens)
        run sh -c "$1 -s $2 '$m' </dev/null"
        [ "$rc" = 0 ] || { not_ok "$2: turn $i failed: $(cat "$T/err")"; break; }
        [ "$(field answer)" = "$a" ] && [ "$(field prompt_tokens)" = "$p" ] ||
            { bad=$((bad + 1)); echo "  turn $i: --no-cache '$a', resumed '$(field answer)'"; }
        if [ "$i" -gt 1 ]; then
            [ "$(field cached_tokens)" = "$total" ] ||
                { bad=$((bad + 1)); echo "  turn $i: cached $(field cached_tokens), want $total"; }
        fi
        ${TURN_HOOK:-:}
        printf '%s\n' "$(field answer)" >>"$T/resumed.txt"
        total=$(( $(field prompt_tokens) + $(field generated_tokens) ))
    done
}

# think_turns R SESSION TURN...: each TURN ("on|off MESSAGE") by R with
# --think in SESSION, first with --no-cache, then resumed: the same answer
# (differences counted in $bad). $TURN_HOOK as six_turns'; answers in
# $T/resumed.txt; $total the history's tokens
think_turns() {
    r=$1 s=$2
    shift 2
    bad=0 i=0 total=0
    : >"$T/resumed.txt"
    for turn in "$@"; do
        set -- $turn
        i=$((i + 1))
        run sh -c "$r -s $s --think $1 --no-cache '$2' </dev/null"
        want=$(field answer)
        run sh -c "$r -s $s --think $1 '$2' </dev/null"
        [ "$rc" = 0 ] || { not_ok "turn $i failed: $(cat "$T/err")"; break; }
        [ "$(field answer)" = "$want" ] || { bad=$((bad + 1)); echo "  turn $i: '$(field answer)', --no-cache '$want'"; }
        ${TURN_HOOK:-:}
        printf '%s\n' "$(field answer)" >>"$T/resumed.txt"
        total=$(( $(field prompt_tokens) + $(field generated_tokens) ))
    done
}

# export_is SESSION FILTER WHAT: the session's export (left in $T/out)
# passes the jq FILTER: ok WHAT, or not ok with its parameters and last
# message
export_is() {
    run "$KVCHAT" sessions export "$1"
    jq -e "$2" "$T/out" >/dev/null && ok "$3" || not_ok "$3: $(jq -c '[.params, .messages[-1]]' "$T/out")"
}

# snapshot_rerun LABEL MODEL PROMPT [fresh]: the same prompt run twice with
# no session (hybrid models): the second answers as the first, resumed from
# a snapshot with only the last token computed; with "fresh" (nothing of it
# stored before), the first stores the turn's KV blocks
snapshot_rerun() {
    run "$KVCHAT" run -m "$2" -n 8 --temp 0 --json "$3"
    expect_rc 0
    a1=$(jq -r .answer "$T/out")
    if [ "${4:-}" = fresh ]; then
        [ "$(jq .blocks_written "$T/out")" -gt 0 ] && ok "$1: the turn's KV blocks are stored" ||
            not_ok "$1: no blocks written: $(cat "$T/out")"
    fi
    run "$KVCHAT" run -m "$2" -n 8 --temp 0 --json "$3"
    expect_rc 0
    [ "$(jq -r .answer "$T/out")" = "$a1" ] && [ "$(jq .prefilled_tokens "$T/out")" = 1 ] &&
        [ "$(jq .restored_snapshot_pos "$T/out")" = "$(jq .cached_tokens "$T/out")" ] &&
        ok "$1: a second run answers the same, resumed from a snapshot" ||
        not_ok "$1 second run: $(cat "$T/out"), first answer: $a1"
}

# live_same LABEL CMD [blank]: CMD (a chat) given $T/msgs.txt answers as
# $T/resumed.txt (the chat writes the model's bytes as they come, --json has
# U+FFFD for a byte that is not UTF-8: compared that way; with "blank",
# blank lines aside)
live_same() {
    run sh -c "$2 <'$T/msgs.txt'"
    expect_rc 0
    python3 -c "import sys; sys.stdout.write(sys.stdin.buffer.read().decode('utf-8', 'replace'))" <"$T/out" >"$T/live.txt"
    cp "$T/resumed.txt" "$T/resumed2.txt"
    if [ "${3:-}" = blank ]; then
        grep -v '^$' "$T/live.txt" >"$T/live2.txt"
        grep -v '^$' "$T/resumed.txt" >"$T/resumed2.txt"
        mv "$T/live2.txt" "$T/live.txt"
    fi
    cmp -s "$T/live.txt" "$T/resumed2.txt" && ok "$1one live process answers the same 6 turns alike" ||
        { not_ok "$1the live chat differs"; diff "$T/live.txt" "$T/resumed2.txt" | head -5; }
}

# fork_same LABEL R SESSION: a fork of SESSION (its history $total tokens)
# answers as its source, resuming at least that history
fork_same() {
    run "$KVCHAT" sessions fork "$3" "$3-fork"
    expect_rc 0
    run sh -c "$2 -s $3 'Branch one' </dev/null"
    b1=$(field answer)
    run sh -c "$2 -s $3-fork 'Branch one' </dev/null"
    expect_rc 0
    [ "$(field answer)" = "$b1" ] && ok "$1the fork answers as its source" || not_ok "$1fork answer differs"
    [ "$(field cached_tokens)" -ge "$total" ] && ok "$1the fork resumed $(field cached_tokens) tokens (its source's $total and more)" ||
        not_ok "$1the fork cached $(field cached_tokens), want $total"
}

# shared_system LABEL R PREFIX: a system prompt of several blocks, shared by
# a second session (PREFIX-s1, -s2, -s3), which answers as --no-cache
shared_system() {
    sys=$(awk 'BEGIN { for (i = 0; i < 60; i++) printf "%srule%d", i ? " " : "", i }')
    run sh -c "$2 -s $3-s1 --system '$sys' 'first' </dev/null"
    expect_rc 0
    p1=$(field prompt_tokens)
    run sh -c "$2 -s $3-s2 --system '$sys' 'second' </dev/null"
    expect_rc 0
    c=$(field cached_tokens) a=$(field answer)
    [ "$p1" -gt 128 ] && [ "$c" -ge 128 ] && ok "$1a second session reuses $c of the system prompt's tokens" ||
        not_ok "$1system prompt $p1 tokens, $c cached"
    run sh -c "$2 -s $3-s3 --system '$sys' --no-cache 'second' </dev/null"
    [ "$(field answer)" = "$a" ] && ok "$1the shared prefix answers as --no-cache" || not_ok "$1shared prefix differs"
}

# sessions_same LABEL MODEL SESSION SYS: a session on MODEL answers as
# --no-cache: six turns (six_turns) in SESSION, resumed from the blocks; one
# live chat (SESSION-live) alike; a fork (fork_same); a system prompt shared
# by SYS-s1, -s2 (shared_system). $total is the six turns' history after
sessions_same() {
    _r="$KVCHAT run -m $2 -t 2 --temp 0 -n 12 --json"
    six_turns "$_r" "$3" 3 word
    [ "$bad" = 0 ] && ok "${1}6 turns resumed from the blocks, each as --no-cache ($total tokens)" ||
        not_ok "$1$bad differences"
    live_same "$1" "$KVCHAT chat $3-live -m $2 -t 2 --temp 0 -n 12"
    fork_same "$1" "$_r" "$3"
    shared_system "$1" "$_r" "$4"
}

finish() {
    echo "$n_ok passed, $n_fail failed"
    [ "$n_fail" -eq 0 ]
}
