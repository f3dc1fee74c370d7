#!/bin/sh
# regen-v1.sh - makes v1.db: a session index written by the first release
# (schema 1: KV as one segment per message), for the migration tests
# (tests/test_store.c, tests/cli/t0007-migrate.sh). It builds that release
# (commit 766d8c8) in a temporary worktree, makes the t0007 model with its
# mkmodel, and runs two sessions of two turns each:
#   sampled: --system "You are terse." --temp 0.8 --seed 5
#   greedy:  --temp 0
# then a third turn of each on a copy, whose answers t0007 expects from the
# migrated index (v1-greedy-turn3.txt; v1-sampled-turn3.txt, with no --seed:
# the sampler state saved with turn 2 decides it). Run from the top of the
# tree:
#   sh tests/data/sessions/regen-v1.sh
set -eu
top=$(pwd)
out=$top/tests/data/sessions
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvchat-v1.XXXXXX")
trap 'git -C "$top" worktree remove --force "$tmp/src" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git -C "$top" worktree add --detach "$tmp/src" 766d8c8 >/dev/null 2>&1
(cd "$tmp/src" && ./configure >/dev/null && make -j2 kvchat tests/mkmodel >/dev/null 2>&1)
"$tmp/src/tests/mkmodel" "$tmp/m.gguf" --arch qwen2 --vocab "$top/tests/data/vocab/ggml-vocab-qwen2.gguf" \
    --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 >/dev/null
export KVCHAT_HOME=$tmp/home
run() { "$tmp/src/kvchat" run -m "$tmp/m.gguf" -t 2 -n 6 "$@" < /dev/null; }
run -s sampled --system "You are terse." --temp 0.8 --seed 5 "first question" > /dev/null
run -s sampled --temp 0.8 --seed 5 "second question" > /dev/null
run -s greedy --temp 0 "first question" > /dev/null
run -s greedy --temp 0 "second question" > /dev/null
cp "$KVCHAT_HOME/kvchat.db" "$out/v1.db"
run -s greedy --temp 0 "third question" > "$out/v1-greedy-turn3.txt"
run -s sampled --temp 0.8 "third question" > "$out/v1-sampled-turn3.txt"
echo "regen-v1: wrote $out/v1.db, v1-greedy-turn3.txt, v1-sampled-turn3.txt"
