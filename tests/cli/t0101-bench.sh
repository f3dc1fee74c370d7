#!/bin/sh
# t0101: kvchat bench --depth and --membw on a small test model: the depth
# is reported and the context grown for it (or a -c too small refused),
# bandwidth figures are present and positive, bad values are refused. No
# timing is asserted.
. "$TOP/tests/cli/lib.sh"

M=$T/llama.gguf
"$MKMODEL" "$M" --arch llama --dim 128 --layers 2 --heads 4 --kv-heads 2 --ff 256 --seed 3 >/dev/null
num() { sed -n "s/.*\"$1\": \([-0-9.]*\).*/\1/p" "$T/out"; }
positive() { awk -v x="$1" 'BEGIN { exit !(x + 0 > 0) }'; }

# depth: decode (and prefill) measured with 64 tokens in the cache
run "$KVCHAT" bench -m "$M" --depth 64 -p 8 -n 4 -r 1 -t 2 --json
expect_rc 0
[ "$(num depth)" = 64 ] && ok "depth 64 reported" || not_ok "depth is '$(num depth)'"
[ "$(num decode_depth)" = 64 ] && ok "decode at depth 64" || not_ok "decode_depth is '$(num decode_depth)'"
for k in prefill_tok_s decode_tok_s decode_weight_bytes decode_weight_gb_s; do
    positive "$(num $k)" && ok "$k positive" || not_ok "$k is '$(num $k)'"
done
# without --depth: depth 0, decode after the prompt (as llref bench)
run "$KVCHAT" bench -m "$M" -p 8 -n 4 -r 1 --json
expect_rc 0
[ "$(num depth)" = 0 ] && [ "$(num decode_depth)" = 8 ] && ok "depth 0, decode at 8" \
    || not_ok "depth '$(num depth)', decode_depth '$(num decode_depth)'"
# the context grows past the default (2048 for this model) to hold the depth
run "$KVCHAT" bench -m "$M" -d 2100 -p 8 -n 2 -r 1 -v
expect_rc 0; expect_out 'pp8 @ d2100'; expect_out 'tg2 @ d2100'; expect_err 'n_ctx 2110'
expect_out 'GB/s'
# -c that holds exactly depth + prompt + generated, and one less
run "$KVCHAT" bench -m "$M" --depth 64 -p 8 -n 4 -r 1 -c 76 --json
expect_rc 0
run "$KVCHAT" bench -m "$M" --depth 64 -p 8 -n 4 -r 1 -c 75
expect_rc 1; expect_out_empty; expect_err 'context size 75 is too small for depth 64 + 8 prompt + 4 generated tokens (needs 76)'

# membw alone, and with a model (then the fraction of the bound too)
run "$KVCHAT" bench --membw --json -t 1
expect_rc 0
positive "$(num membw_gb_s)" && ok "bandwidth positive" || not_ok "membw_gb_s is '$(num membw_gb_s)'"
run "$KVCHAT" bench --membw
expect_rc 0; expect_out 'DRAM read bandwidth [0-9.]* GB/s'
run "$KVCHAT" bench -m "$M" -p 8 -n 4 -r 1 --membw --json
expect_rc 0
for k in membw_gb_s membw_fraction decode_weight_gb_s rss_bytes; do
    positive "$(num $k)" && ok "$k positive" || not_ok "$k is '$(num $k)'"
done
run "$KVCHAT" bench -m "$M" -p 8 -n 4 -r 1 --membw
expect_rc 0; expect_out 'of the bandwidth bound'
# no model and no --membw: the message every command gives without a model
run env -u KVCHAT_MODEL "$KVCHAT" bench
expect_rc 2; expect_err 'no model configured'

# bad values
for d in -1 abc 1x ""; do
    run "$KVCHAT" bench -m "$M" --depth "$d" -p 8 -n 4
    expect_rc 1; expect_out_empty; expect_err "bad depth '$d'"
done
run "$KVCHAT" eval -m "$M" -p 1 --depth 4
expect_rc 1; expect_err "'--depth' is for kvchat bench"
run "$KVCHAT" bench --help
expect_rc 0; expect_out '--depth D'; expect_out '--membw'

# --draft K: verification passes of 0..K drafted tokens at decode's depth (JSON and table); a
# pass longer than -n grows the context; bad lengths and recurrent models refused
run "$KVCHAT" bench -m "$M" -d 16 -p 8 -n 2 -r 1 -t 1 --draft 5 --json
expect_rc 0
[ "$(jq .draft_depth "$T/out")" = 16 ] && positive "$(jq .draft_step_ms "$T/out")" && [ "$(jq '.draft_passes | length' "$T/out")" = 6 ] &&
    [ "$(jq '[.draft_passes[] | select(.pass_ms > 0 and .decode_steps > 0)] | length' "$T/out")" = 6 ] &&
    [ "$(jq -c '[.draft_passes[].drafted]' "$T/out")" = "[0,1,2,3,4,5]" ] &&
    ok "--draft 5: six passes at depth 16, times and costs positive" || not_ok "--draft 5: $(cat "$T/out")"
run "$KVCHAT" bench -m "$M" -p 8 -n 4 -r 1 -t 1 --draft 3
expect_rc 0; expect_out 'verification passes at depth 8'; expect_out '^|       3 |'
run "$KVCHAT" bench -m "$M" -p 8 -n 2 -r 1 -c 11 --draft 3
expect_rc 1; expect_err "--draft's longest pass"
# without --draft no pass is run: a context of exactly P + N is enough (here N = 0)
run "$KVCHAT" bench -m "$M" -p 8 -n 0 -c 8 -r 1 --json
expect_rc 0
[ "$(jq 'has("draft_passes")' "$T/out")" = false ] && ok "no --draft: no draft_passes" || not_ok "no --draft: $(cat "$T/out")"
for bad in 0 32 x; do
    run "$KVCHAT" bench -m "$M" --draft $bad
    expect_rc 1; expect_err "bad draft length '$bad'"
done
"$MKMODEL" "$T/q35.gguf" --arch qwen35 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --seed 3 >/dev/null
run "$KVCHAT" bench -m "$T/q35.gguf" -p 8 -n 2 -r 1 --draft 2
expect_rc 1; expect_err "not for a model with recurrent layers"
finish
