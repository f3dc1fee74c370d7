#!/bin/sh
# t0014: `kvchat sessions search` over sessions real turns wrote (kept in
# step with /undo, fork, rename, rm), its --json and --raw; `kvchat -c` and
# `kvchat run -c` (the session changed last; -c before a number is still
# the context size); `kvchat paths`.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M" --ctx 4096 || exit 1
R="$KVCHAT run -m $M -t 1 --temp 0 -n 4"

# ---- search
run "$KVCHAT" sessions search anything
expect_rc 0; expect_out_empty; expect_err 'no saved message matches'
$R -s trip "Three days in Lisbon, by tram?" </dev/null >/dev/null
sleep 1
$R -s work "A Python error in my parser" </dev/null >/dev/null
run "$KVCHAT" sessions search lisbon
expect_rc 0
expect_out '^trip  turn 1  user  '
expect_out '^  Three days in \[Lisbon\], by tram?$'
[ "$(grep -c '^  ' "$T/out")" = 1 ] && ok "one hit" || not_ok "hits: $(cat "$T/out")"
run "$KVCHAT" sessions search --json PYTHON parser
expect_rc 0
[ "$(jq -c '[.[] | {session, turn, seq, role, snippet, marks}]' "$T/out")" = \
  '[{"session":"work","turn":1,"seq":0,"role":"user","snippet":"A Python error in my parser","marks":[[2,8],[21,27]]}]' ] &&
    ok "--json: session, turn, seq, role, snippet and its marks" || not_ok "json: $(cat "$T/out")"
run "$KVCHAT" sessions search --raw 'lisbon OR python'
expect_rc 0
[ "$(grep -c '^  ' "$T/out")" = 2 ] && ok "--raw: OR" || not_ok "raw OR: $(cat "$T/out")"
run "$KVCHAT" sessions search 'lisbon OR python'
expect_rc 0; expect_err 'no saved message matches'
run "$KVCHAT" sessions search --raw 'AND ('
expect_rc 1; expect_err "kvchat: sessions search: bad search query 'AND ('"
run "$KVCHAT" sessions search
expect_rc 1; expect_err 'wrong number of arguments'
run "$KVCHAT" sessions search --limit x y
expect_rc 1; expect_err '\-\-limit takes a count'
# the chat's /undo takes the exchange out of the index (a second later: a
# session's last change is kept in seconds)
sleep 1
printf 'zebra crossing\n/undo\nokapi\n' | $KVCHAT -m "$M" --yes -t 1 --temp 0 -n 4 trip >/dev/null 2>&1
run "$KVCHAT" sessions search zebra
expect_rc 0; expect_err 'no saved message matches'
run "$KVCHAT" sessions search okapi
expect_out '^trip  turn 2  user'
# fork copies, rename follows, rm removes
"$KVCHAT" sessions fork trip trip2 --at 1
run "$KVCHAT" sessions search tram
[ "$(grep -c '^trip2\? ' "$T/out")" = 2 ] && ok "a fork's messages are found too" || not_ok "fork: $(cat "$T/out")"
run "$KVCHAT" sessions search okapi
[ "$(grep -c '^  ' "$T/out")" = 1 ] && ok "the fork at turn 1 has no turn 2" || not_ok "fork --at: $(cat "$T/out")"
"$KVCHAT" sessions rename trip2 lisbon
run "$KVCHAT" sessions search tram
expect_out '^lisbon  turn 1'
"$KVCHAT" sessions rm lisbon
run "$KVCHAT" sessions search tram
expect_out '^trip  turn 1'
[ "$(grep -c '^  ' "$T/out")" = 1 ] && ok "rm takes its messages out" || not_ok "rm: $(cat "$T/out")"

# ---- -c / --continue: the session changed last is trip (its /undo turn)
run sh -c "$R --json -c 'and the museums?' </dev/null"
expect_rc 0
[ "$(jq -r .session "$T/out")" = trip ] && ok "run -c continues trip" || not_ok "run -c: $(cat "$T/out")"
sleep 1
$R -s work "another question" </dev/null >/dev/null
run sh -c "$R --json --continue 'more' </dev/null"
[ "$(jq -r .session "$T/out")" = work ] && ok "run --continue follows the last change" || not_ok "--continue: $(cat "$T/out")"
[ "$(jq -r .cached_tokens "$T/out")" -gt 0 ] && ok "and resumes its KV cache" || not_ok "cached: $(cat "$T/out")"
run sh -c "echo /show | $KVCHAT -m $M -t 1 -c"
expect_rc 0; expect_err "session    'work'"
run sh -c "$R -c -s work hi </dev/null"
expect_rc 1; expect_err 'give one of them'
run sh -c "echo hi | $KVCHAT -m $M -c work"
expect_rc 1; expect_err 'give one of them'
# -c before a number is the context size: no session
run sh -c "$R --json -c 4096 'hello' </dev/null"
expect_rc 0
[ "$(jq -r .session "$T/out")" = null ] && ok "-c 4096 is the context size" || not_ok "-c 4096: $(cat "$T/out")"
run env KVCHAT_HOME="$T/empty" $R -c hi
expect_rc 3; expect_err "no session to continue: 'kvchat chat NAME' starts one"
[ ! -e "$T/empty/kvchat.db" ] && ok "-c on no store makes none" || not_ok "-c made a store"

# ---- paths
run env KVCHAT_HOME="$T/h2" XDG_CONFIG_HOME="$T/c2" XDG_STATE_HOME="$T/s2" "$KVCHAT" paths
expect_rc 0
expect_out "^database   $T/h2/kvchat.db (not yet made)$"
expect_out "^kv store   $T/h2/kv (not yet made)$"
expect_out "^models     $T/h2/models (not yet made)$"
expect_out "^config     $T/c2/kvchat/config (not yet made)$"
expect_out "^history    $T/s2/kvchat/history (not yet made)$"
[ ! -e "$T/h2" ] && ok "paths creates nothing" || not_ok "paths made $T/h2"
run "$KVCHAT" paths --json
expect_rc 0
[ "$(jq -r '.database, .kv_store, .exists.database, .exists.models' "$T/out" | tr '\n' ' ')" = \
  "$KVCHAT_HOME/kvchat.db $KVCHAT_HOME/kv true false " ] && ok "paths --json" || not_ok "paths json: $(cat "$T/out")"
run env -u XDG_STATE_HOME HOME="$T/fh" "$KVCHAT" paths --json
[ "$(jq -r .history "$T/out")" = "$T/fh/.local/state/kvchat/history" ] && ok "history under HOME" || not_ok "history: $(cat "$T/out")"
run sh -c "echo /show | $KVCHAT -m $M -t 1"
expect_err "^files      database $KVCHAT_HOME/kvchat.db, KV blocks $KVCHAT_HOME/kv/, models $KVCHAT_HOME/models/, config $XDG_CONFIG_HOME/kvchat/config, history $XDG_STATE_HOME/kvchat/history$"
finish
