#!/bin/sh
# t0030: a model is known by all of its bytes (issue 29). A file patched in
# place - 2 KiB of one tensor changed outside the three 4 KiB windows the
# version-1 fingerprint sampled, its size kept and its mtime put back - is
# another model: a session resumed with it recomputes its history (no KV
# block of the old bytes is used) and answers as --no-cache does; the
# packed-weight cache (which checks ctime now) is packed again. A models
# row is a (fingerprint, path) pair: opening the same bytes at another path
# does not re-point a session, and `models rm` still sees that the session
# uses the store's model. A store of schema 4 upgrades: sessions reopen.
# A store model replaced under its name goes on with a note by every route
# (run -s, run -m NAME -s, /load), never "saved with model X, not X"; the
# name given to a remote model is said as another model of that name.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M" --type F32
R="$KVCHAT run -m $M -t 2 --temp 0 -n 12 --json"

# the crafted file: same size, same mtime, other weights (outside the windows)
patch_in_place() {
    mt=$(stat -c %y "$1"); size=$(stat -c %s "$1")
    n=$(python3 "$TOP/tests/cli/gguf-patch.py" "$1" "$2" 6144 2048) || not_ok "patch $2"
    touch -d "$mt" "$1"
    [ "$(stat -c %y "$1")" = "$mt" ] && [ "$(stat -c %s "$1")" = "$size" ] && [ "$n" -ge 20480 ] &&
        ok "$2 patched in place ($n bytes; size and mtime kept)" || not_ok "the crafted file"
}

run timeout 120 sh -c "$R -s s 'tell me about the sea' < /dev/null"
expect_rc 0
history=$(( $(field prompt_tokens) + $(field generated_tokens) ))
run timeout 120 sh -c "$R 'an unnamed question' < /dev/null"
expect_rc 0
cp "$M" "$T/orig.gguf"
patch_in_place "$M" blk.0.ffn_down.weight

# without a session: recomputed, the same answer as --no-cache
run timeout 120 sh -c "$R --no-cache 'an unnamed question' < /dev/null"
want=$(field answer)
run timeout 120 sh -c "$R 'an unnamed question' < /dev/null"
expect_rc 0
[ "$(field cached_tokens)" = 0 ] && ok "unnamed: nothing cached from the old bytes" || not_ok "unnamed cached $(field cached_tokens)"
[ "$(field answer)" = "$want" ] && ok "unnamed: --no-cache's answer" || not_ok "unnamed '$(field answer)' vs '$want'"
# the session: recomputed, and the same answer as --no-cache
run timeout 120 sh -c "$R --no-cache -s s 'and the mountains' < /dev/null"
expect_rc 0
want=$(field answer)
run timeout 120 sh -c "$R -s s 'and the mountains' < /dev/null"
expect_rc 0
expect_err "model file '$M' has changed since session 's' was saved"
# (at most the template's first tokens, shared with the unnamed turn's new blocks)
[ "$(field cached_tokens)" -lt 8 ] && ok "no block of the old bytes is used (history of $history tokens)" ||
    not_ok "cached $(field cached_tokens) of a history of $history"
[ "$(field answer)" = "$want" ] && ok "the resumed answer is --no-cache's" ||
    not_ok "resumed '$(field answer)', --no-cache '$want'"
# the original bytes again (a copy: another file): its own blocks
cp "$T/orig.gguf" "$M"
run timeout 120 sh -c "$R 'an unnamed question' < /dev/null"
expect_rc 0
[ "$(field cached_tokens)" -gt 0 ] && ok "the original bytes find their blocks again" || not_ok "original cached 0"

# the packed-weight cache: patched in place with the mtime put back, packed again
cp "$TOP/tests/data/quant/m-Q5_0.gguf" "$T/q.gguf"
ev() { run timeout 120 "$KVCHAT" eval -m "$1" -p "1 5 9 33" --token-by-token --logits-out "$T/$2" -v; }
ev "$T/q.gguf" q0.f32
ev "$T/q.gguf" q1.f32
expect_err 'mapped from the cache'
patch_in_place "$T/q.gguf" blk.0.ffn_down.weight
ev "$T/q.gguf" q2.f32
expect_rc 0
expect_err 'packed now'
cp "$T/q.gguf" "$T/q-copy.gguf"
ev "$T/q-copy.gguf" q3.f32
cmp -s "$T/q2.f32" "$T/q3.f32" && ok "the patched file's logits, not the cache's" || not_ok "logits from the stale cache"
cmp -s "$T/q0.f32" "$T/q2.f32" && not_ok "the patch changed no logit" || ok "the patch changes the logits"

# one models row per (fingerprint, path): a session made with the store's
# model is not re-pointed by a command that opens the same bytes elsewhere
run "$KVCHAT" models add --name tiny "$M"
expect_rc 0
run timeout 120 sh -c "$KVCHAT run -m tiny -t 2 --temp 0 -n 4 -s withstore 'hello' < /dev/null"
expect_rc 0
cp "$M" "$T/download.gguf"
run timeout 120 sh -c "$KVCHAT run -m $T/download.gguf -t 2 --temp 0 -n 4 'hello' < /dev/null"
expect_rc 0
run timeout 120 sh -c "$KVCHAT run -m $T/download.gguf -t 2 --temp 0 -n 4 -s withstore 'again' < /dev/null"
expect_rc 0
rm "$T/download.gguf"
run timeout 120 sh -c "$KVCHAT run -t 2 --temp 0 -n 4 -s withstore 'and again' < /dev/null"
expect_rc 0
run "$KVCHAT" sessions list --json
[ "$(jq -r '.[] | select(.name == "withstore") | .model' "$T/out")" = tiny ] &&
    [ "$(jq -r '.[] | select(.name == "withstore") | .model_path' "$T/out")" = "$KVCHAT_HOME/models/tiny.gguf" ] &&
    ok "the session keeps its model, the store's 'tiny'" || not_ok "the session was re-pointed: $(cat "$T/out")"
run "$KVCHAT" models rm tiny
[ "$rc" != 0 ] && grep -q withstore "$T/err" && ok "models rm sees the session's use" || not_ok "models rm: rc $rc, $(cat "$T/err")"

# the step to schema 5 on a store with blocks (the snapshots table of step 6 dropped and user_version
# set back to 4: the steps' SQL runs again): every block goes, files too, the sessions stay
run timeout 120 sh -c "$R -s up 'first turn' < /dev/null"
expect_rc 0
ls "$KVCHAT_HOME"/kv/*/*.kvblk > /dev/null 2>&1 && ok "block files before" || not_ok "no block files"
python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.executescript('DROP TABLE snapshots; ALTER TABLE block_totals DROP COLUMN n_snapshots; PRAGMA user_version = 4;'); c.commit()" \
    "$KVCHAT_HOME/kvchat.db"
run "$KVCHAT" sessions list --json
expect_rc 0
expect_err "upgraded: the model fingerprint now covers every byte"
ls "$KVCHAT_HOME"/kv/*/*.kvblk > /dev/null 2>&1 && not_ok "block files left" || ok "the blocks of version-1 fingerprints are gone"
run timeout 120 sh -c "$R --no-cache -s up 'second turn' < /dev/null"
want=$(field answer)
run timeout 120 sh -c "$R -s up 'second turn' < /dev/null"
expect_rc 0
[ "$(field cached_tokens)" = 0 ] && [ "$(field answer)" = "$want" ] && ok "the session reopens, recomputed" ||
    not_ok "after the upgrade: cached $(field cached_tokens), '$(field answer)' vs '$want'"

# ---- a store model whose file was replaced (models add --force, same name,
# other bytes): never "saved with model 'X', not 'X'" (issue 29); the
# session goes on with the file as it is now and says so, by every route
"$MKMODEL" "$T/other.gguf" --arch qwen2 --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 64 --layers 2 \
    --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 --type F32 --seed 9 >/dev/null
cp "$M" "$T/first.gguf"
run "$KVCHAT" models add --name twin "$T/first.gguf"
expect_rc 0
for s in own named chat; do
    run timeout 120 sh -c "$KVCHAT run -m twin -t 2 --temp 0 -n 4 -s tw-$s 'hello' < /dev/null"
    expect_rc 0
done
run "$KVCHAT" models add --force --name twin "$T/other.gguf"
expect_rc 0
TW=$KVCHAT_HOME/models/twin.gguf
not_x_not_x() { # what
    grep -q "not 'twin'\|not '$TW'" "$T/err" && not_ok "$1: 'saved with model X, not X': $(cat "$T/err")" ||
        ok "$1: not 'saved with model X, not X'"
}
run timeout 120 sh -c "$KVCHAT run -m twin -t 2 --temp 0 -n 4 --json --no-cache -s tw-own 'again' < /dev/null"
want=$(field answer)
# its own model (no -m): the file at its path has other bytes now
run timeout 120 sh -c "$KVCHAT run -t 2 --temp 0 -n 4 --json -s tw-own 'again' < /dev/null"
expect_rc 0
expect_err "kvchat: the model file '$TW' has changed since session 'tw-own' was saved: it goes on with the file as it is now"
not_x_not_x "run -s, its own model"
[ "$(field answer)" = "$want" ] && ok "the changed file's answer is --no-cache's" || not_ok "'$(field answer)' vs '$want'"
# -m NAME naming the same store model
run timeout 120 sh -c "$KVCHAT run -m twin -t 2 --temp 0 -n 4 -s tw-named 'again' < /dev/null"
expect_rc 0
expect_err "the model file '$TW' has changed since session 'tw-named' was saved"
not_x_not_x "run -m twin -s"
# the chat's /load
run sh -c "printf '/load tw-chat\n' | timeout 120 $KVCHAT chat -m twin -t 2 --temp 0 -n 4"
expect_rc 0
expect_err "session 'tw-chat': the model file '$TW' has changed since session 'tw-chat' was saved"
not_x_not_x "/load"
# the name given to a remote model since: said as another model of that name
run "$KVCHAT" models rm --force twin
expect_rc 0
run "$KVCHAT" models add-remote twin "http://127.0.0.1:9/v1" --model other
expect_rc 0
run timeout 120 sh -c "$KVCHAT run -m twin -s tw-named 'again' < /dev/null"
expect_rc 3
expect_err "session 'tw-named' was saved with another model named 'twin' (the file '$TW'; now the remote entry '$KVCHAT_HOME/models/twin.remote'): the name was given to another model since"
not_x_not_x "a remote model of the same name"
finish
