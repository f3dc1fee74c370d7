#!/bin/sh
# t0020: sessions keep their word (issue 15): a session reopens with its
# own model (another is refused, or taken with --switch-model; a model
# that is gone is named), its sampling parameters (only those the user
# set) are saved, restored and overridden by the command line for that
# turn, --seed re-seeds an existing session, one rule for names, forks
# carry the sampler state of their turn and refuse --at past the end.
. "$TOP/tests/cli/lib.sh"
mk() { qwen2_tiny "$1" --ctx 4096 --seed "$2"; }
A=$T/a.gguf B=$T/b.gguf
mk "$A" 1; mk "$B" 2
# a model of another vocabulary (placeholder tokens, 300 of them)
"$MKMODEL" "$T/c.gguf" --arch llama --n-vocab 300 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 \
    --scale 0.2 --ctx 4096 >/dev/null
params() { "$KVCHAT" sessions export "$1" | jq -c .params; }

# ---- 1. the session's own model
run sh -c "$KVCHAT run -m $A -t 2 --temp 0 -n 4 --json -s q hi < /dev/null"
expect_rc 0
run sh -c "KVCHAT_MODEL=$B $KVCHAT run -t 2 --temp 0 -n 4 --json -s q again < /dev/null"
expect_rc 0
[ "$(field model)" = "$A" ] && ok "without -m the session's model answers" || not_ok "model $(field model), want $A"
[ ! -s "$T/err" ] && ok "and nothing is recomputed or warned" || { not_ok "stderr not empty"; cat "$T/err"; }
[ "$(field cached_tokens)" -gt 0 ] && ok "its KV is restored" || not_ok "cached $(field cached_tokens)"
# the default from the config file gives way to the session's too
mkdir -p "$XDG_CONFIG_HOME/kvchat"; echo "model = $B" > "$XDG_CONFIG_HOME/kvchat/config"
run sh -c "$KVCHAT run -t 2 --temp 0 -n 4 --json -s q 'and again' < /dev/null"
expect_rc 0
[ "$(field model)" = "$A" ] && ok "the configured model gives way to the session's" || not_ok "model $(field model)"
printf 'from the chat\n' > "$T/in"
run sh -c "$KVCHAT q -t 2 -n 4 < $T/in"
expect_rc 0
[ "$("$KVCHAT" sessions list --json | jq -r '.[] | select(.name == "q") | .turns')" = 4 ] && ok "the chat opened q with its model" || not_ok "chat did not add a turn"
rm "$XDG_CONFIG_HOME/kvchat/config"
# another model: refused with both names, the session unchanged
turns=$("$KVCHAT" sessions list --json | jq -r '.[] | select(.name == "q") | .turns')
run sh -c "$KVCHAT run -m $B -t 2 -n 4 -s q other < /dev/null"
expect_rc 3; expect_out_empty
expect_err "kvchat: session 'q' was saved with model '$A', not '$B'"
expect_err "add --switch-model"
[ "$("$KVCHAT" sessions list --json | jq -r '.[] | select(.name == "q") | .turns')" = "$turns" ] && ok "refused: the session is unchanged" || not_ok "session changed"
run sh -c "printf 'x\n' | $KVCHAT chat -m $B -t 2 -n 4 q"
expect_err "session 'q' was saved with model '$A', not '$B'"
expect_err "kvchat q -m MODEL --switch-model"
# explicitly: it goes on with the other model, recomputing, with a note
run sh -c "$KVCHAT run -m $B --switch-model -t 2 --temp 0 -n 4 --json -s q other < /dev/null"
expect_rc 0
expect_err "session 'q' was saved with model '$A': it goes on with '$B', its history computed again"
[ "$(field cached_tokens)" = 0 ] && ok "the switch recomputes the history" || not_ok "switch cached $(field cached_tokens)"
[ "$("$KVCHAT" sessions list --json | jq -r '.[] | select(.name == "q") | .model')" = "$B" ] && ok "the session now belongs to the other model" || not_ok "sessions list names another model"
# ... even one of another vocabulary: its messages are tokenized again
run sh -c "$KVCHAT run -m $T/c.gguf --switch-model -t 2 --temp 0 -n 4 --json -s q 'other vocabulary' < /dev/null"
expect_rc 0
grep -q "out of range" "$T/err" && not_ok "token ids of the other vocabulary used" || ok "another vocabulary: tokenized again"
run sh -c "$KVCHAT run -t 2 --temp 0 -n 4 --json -s q 'back' < /dev/null"
expect_rc 0
[ "$(field model)" = "$T/c.gguf" ] && ok "and it reopens with it" || not_ok "model $(field model)"
# the model's file is gone: said which
mv "$T/c.gguf" "$T/c.moved"
run sh -c "$KVCHAT run -t 2 -n 4 -s q gone < /dev/null"
expect_rc 2; expect_out_empty
expect_err "kvchat: session 'q' was saved with model '$T/c.gguf', which is gone"
mv "$T/c.moved" "$T/c.gguf"

# ---- 2. sampling parameters: only what was set, restored, overridden for a turn
R="$KVCHAT run -m $A -t 2 --json"
run sh -c "$R -s p --temp 0 --seed 5 -n 4 hi < /dev/null"
expect_rc 0
[ "$(params p)" = '{"temp":0,"seed":5,"n_predict":4}' ] && ok "export shows the parameters set" || not_ok "params $(params p)"
run "$KVCHAT" sessions fork p p2; expect_rc 0
run sh -c "$R -s p 'go on' < /dev/null"
expect_rc 0
[ "$(field generated_tokens)" = 4 ] && ok "-n 4 restored" || not_ok "generated $(field generated_tokens), want 4"
restored=$(field answer)
run sh -c "$R -s p2 --temp 0 -n 4 'go on' < /dev/null"
[ "$(field answer)" = "$restored" ] && ok "--temp 0 restored: the greedy answer" || not_ok "restored '$restored', explicit '$(field answer)'"
run sh -c "$R -s p -n 2 --temp 1.5 'for once' < /dev/null"
expect_rc 0
[ "$(field generated_tokens)" = 2 ] && ok "the command line overrides for the turn" || not_ok "generated $(field generated_tokens)"
[ "$(params p)" = '{"temp":0,"seed":5,"n_predict":4}' ] && ok "without changing what is saved" || not_ok "params $(params p)"
# /set in the chat is saved
run sh -c "printf '/set top_k 7\n/set temp 0.5\n' | $KVCHAT p -t 2"
expect_rc 0
[ "$(params p)" = '{"temp":0.5,"top_k":7,"seed":5,"n_predict":4}' ] && ok "/set is saved" || not_ok "params after /set $(params p)"
# a session made without options keeps none
run sh -c "$R -s bare hi < /dev/null -n 2"
[ "$(params bare)" = '{"n_predict":2}' ] && ok "only what the user set is kept" || not_ok "params $(params bare)"

# ---- 3. --seed on an existing session re-seeds it
run sh -c "$R -s s --temp 1 --seed 1 -n 8 hi < /dev/null"
for i in 1 2 3; do run "$KVCHAT" sessions fork s s$i; done
run "$KVCHAT" sessions fork s s1b
for i in 1 2 3; do
    run sh -c "$R -s s$i --seed $i 'once more' < /dev/null"; expect_rc 0; eval "a$i=\$(field answer)"
done
run sh -c "$R -s s1b --seed 1 'once more' < /dev/null"; b1=$(field answer)
[ "$a1" != "$a2" ] && [ "$a2" != "$a3" ] && [ "$a1" != "$a3" ] && ok "seeds 1, 2, 3 give three answers" || not_ok "seeds ignored: '$a1' '$a2' '$a3'"
[ "$a1" = "$b1" ] && ok "the same seed, the same answer" || not_ok "seed 1 twice: '$a1' vs '$b1'"

# ---- 5. one rule for names; names of earlier releases still open
for bad in "my chat" "a/b" "-s" "tab	x"; do
    run sh -c "$R -s '$bad' hi < /dev/null"
    expect_rc 1; expect_err "bad session name"
done
run "$KVCHAT" sessions rename p "c d"; expect_rc 3; expect_err "bad session name 'c d'"
run "$KVCHAT" sessions fork p "c d"; expect_rc 3; expect_err "bad session name 'c d'"
run sh -c "printf '/save my chat\n' | $KVCHAT chat -m $A -t 2"
expect_err "bad session name 'my chat'"
run sh -c "$KVCHAT 'my chat' -m $A -t 2 < /dev/null"
expect_rc 1; expect_err "not a session: bad session name 'my chat'"
# a name an earlier release accepted
python3 -c "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute(\"UPDATE sessions SET name = 'old name' WHERE name = 'p2'\"); db.commit()" "$KVCHAT_HOME/kvchat.db"
run sh -c "$R -s 'old name' 'still there' < /dev/null"
expect_rc 0
run "$KVCHAT" sessions show "old name"; expect_rc 0; expect_out "still there"
run "$KVCHAT" sessions rename "old name" old-name; expect_rc 0
run "$KVCHAT" sessions show old-name; expect_rc 0

# ---- 7. forks carry the sampler state of their turn; --at past the end is refused
run sh -c "$R -s g --temp 0.9 --seed 3 -n 8 one < /dev/null"
run sh -c "$R -s g two < /dev/null"; g2=$(field answer)
run sh -c "$R -s g three < /dev/null"
run "$KVCHAT" sessions fork g gf --at 1; expect_rc 0
run sh -c "$R -s gf two < /dev/null"
[ "$(field answer)" = "$g2" ] && ok "a fork at turn 1 answers turn 2 as the original did" || not_ok "fork answered '$(field answer)', original '$g2'"
run "$KVCHAT" sessions fork g g9 --at 9
expect_rc 3; expect_err "session 'g' has 3 turns: --at 9 is past its end"
run "$KVCHAT" sessions show g9; expect_rc 3
finish
