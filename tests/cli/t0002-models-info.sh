#!/bin/sh
# t0002: `kvchat models info` agrees with what llama.cpp reports for the same
# files (tests/data/models-info/*.ref, made by tests/data/regen-models-info.sh),
# and bad files are refused with exit 2.
. "$TOP/tests/cli/lib.sh"
d=$TOP/tests/data/models-info
vocab=$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf

# the generated models: same command lines as regen-models-info.sh
"$MKMODEL" "$T/llama-f32.gguf" --dim 256 --layers 2 --heads 8 --kv-heads 2 --ff 512 --n-vocab 512 >/dev/null
"$MKMODEL" "$T/qwen2-vocab.gguf" --arch qwen2 --vocab "$vocab" --dim 64 --layers 1 --heads 4 --kv-heads 2 \
      --ff 128 --tied --rope-theta 1000000 --ctx 32768 >/dev/null
"$MKMODEL" "$T/qwen3-f32.gguf" --arch qwen3 --dim 128 --layers 2 --heads 4 --kv-heads 2 --head-dim 64 \
      --ff 256 --n-vocab 300 >/dev/null
cp "$d"/llama-*.gguf "$T/"
# gemma2, gemma3, phi3 (tests/data/regen-families.sh made these files)
fam=
for a in gemma2 gemma3 phi3; do
    cp "$TOP/tests/data/families/$a-Q8_0.gguf" "$T/$a-q8_0.gguf"
    cp "$TOP/tests/data/families/$a-Q4_K_M.gguf" "$T/$a-q4_k_m.gguf"
    fam="$fam $a-q8_0 $a-q4_k_m"
done

# compare one JSON field with llama.cpp's figure
field() { # model json-key ref-key
    want=$(sed -n "s/^$3=//p" "$d/$1.ref")
    got=$(jq -r ".$2" "$T/out")
    [ "$got" = "$want" ] && ok "$1 $2 = $want" || not_ok "$1 $2: kvchat says '$got', llama.cpp '$want'"
}

for m in llama-f32 llama-f16 llama-q8_0 llama-q4_k_m qwen2-vocab qwen3-f32 $fam; do
    run "$KVCHAT" models info --json "$T/$m.gguf"
    expect_rc 0
    jq -e . "$T/out" >/dev/null && ok "$m: valid JSON" || not_ok "$m: invalid JSON"
    for k in n_params weight_bytes context_length embedding_length block_count head_count \
             head_count_kv vocab_size bos_token_id eos_token_id rope_type chat_template architecture \
             sliding_window; do
        field "$m" "$k" "$k"
    done
    # llama.cpp's description ends with the file type's name
    desc=$(sed -n 's/^desc=//p' "$d/$m.ref")
    ft=$(jq -r .file_type "$T/out")
    case "$desc" in *" $ft") ok "$m file type '$ft'" ;; *) not_ok "$m file type '$ft' vs '$desc'" ;; esac
    # the type mix adds up to the tensor count
    sum=$(jq '[.tensor_types[]] | add' "$T/out")
    [ "$sum" = "$(jq .n_tensors "$T/out")" ] && ok "$m type mix sums to $sum" || not_ok "$m type mix $sum"
done

# the K-quant mix as llama.cpp's quantizer made it
run "$KVCHAT" models info "$T/llama-q4_k_m.gguf"
expect_rc 0
expect_out 'file type:      Q4_K - Medium'
expect_out 'tensors:        21 (Q4_K: [0-9]*, F32: 5, Q6_K: [0-9]*)'
expect_out 'parameters:     1.38 M (1377536)'
expect_out 'heads:          8 (kv heads 2, head dim 32)'

# a real vocabulary: tokenizer, special tokens, chat template family
run "$KVCHAT" models info "$T/qwen2-vocab.gguf"
expect_rc 0
expect_out 'vocabulary:     151936 tokens, gpt2 (pre-tokenizer qwen2)'
expect_out "bos 151643 '<|endoftext|>'"
expect_out 'chat template:  chatml'
expect_out 'rope:           neox, freq base 1e+06, 16 dims'
run "$KVCHAT" models info --json "$T/qwen2-vocab.gguf"
[ "$(jq -r .chat_template_family "$T/out")" = chatml ] && ok "chatml family" || not_ok "family"
[ "$(jq -r .tokenizer_pre "$T/out")" = qwen2 ] && ok "pre qwen2" || not_ok "pre"

# qwen3 with head dim != n_embd / n_head
run "$KVCHAT" models info --json "$T/qwen3-f32.gguf"
[ "$(jq .key_length "$T/out")" = 64 ] && ok "qwen3 key_length 64" || not_ok "qwen3 key_length"

# gemma4 (its figures computed by hand below, not by llama.cpp): 8 layers,
# local (L) or global (G) by the pattern 4 (LLLGLLLG), local heads of 32
# with 2 KV heads and 32 RoPE dims, global heads of 64 with 1 KV head and 64
# dims, the last 4 layers sharing the KV of layers 2 (local) and 3
# (global), per-layer inputs of 8, 8 experts of 32 rows (2 used) beside the
# dense FFN of 128, tied, the Gemma 4 vocabulary of 262144 tokens.
xz -dc "$TOP/tests/data/tokenizer/ggml-vocab-gemma-4.gguf.xz" >"$T/g4v.gguf"
"$MKMODEL" "$T/gemma4.gguf" --arch gemma4 --vocab "$T/g4v.gguf" --dim 64 --layers 8 --heads 4 --kv-heads 2 \
    --kv-heads-global 1 --head-dim 64 --head-dim-swa 32 --ff 128 --swa 16 --swa-pattern 4 --shared-kv 4 \
    --per-layer 8 --experts 8 --experts-used 2 --ff-exp 32 --ctx 32768 --tied >/dev/null
# parameters: token_embd and per_layer_token_embd 64 x 262144 each
# (33554432), per_layer_model_proj 64 x 64, per_layer_proj_norm 8,
# rope_freqs 32, output_norm 64: 33558632; a local layer 92265 (attn_q and
# attn_output 8192 each, q norm 32, 4 norms of 64, the FFN 3 x 8192, the
# experts' 4 norms 256, router 512, experts 3 x 64 x 32 x 8 = 49152, their 8
# scales, inp_gate 512, proj 512, post_norm 64, the layer scale 1); a global
# one 108681 (attn_q and attn_output 16384 each, q norm 64); K of their own
# on layers 0-2 (attn_k and attn_v 4096 each, k norm 32: 8224) and 3
# (attn_k 4096, V = K, k norm 64: 4160). 33558632 + 6 x 92265 + 2 x 108681
# + 3 x 8224 + 4160 = 34358416.
# active: less the 6 unchosen experts of each layer (8 x 6 x (6144 + 1) =
# 294960) and the other 262143 tokens' per-layer rows (262143 x 64 =
# 16777152): 17286304.
run "$KVCHAT" models info "$T/gemma4.gguf"
expect_rc 0
expect_out 'parameters:     34.36 M (34358416)'
expect_out 'heads:          4 (kv heads 2 local, 1 global; head dim 32 local, 64 global)'
expect_out 'rope:           neox, freq base 10000, 64 dims (local layers 32)'
expect_out 'sliding window: 16 positions on 6 of 8 layers: LLLGLLLG (L local, G global)'
expect_out "shared KV:      the last 4 layers have no K/V of their own: they read layer 2's (local) and 3's (global); 4 layers hold KV"
expect_out 'per-layer input: 8 values a layer'
expect_out 'experts:        8 a layer on 8 of 8 layers beside the dense FFN, 2 used a token (softmax, top-k, renormalised), 32 rows each'
expect_out 'active params:  17.29 M a token (17286304)'
run "$KVCHAT" models info --json "$T/gemma4.gguf"
expect_rc 0
for kv in n_params=34358416 n_params_active=17286304 head_count_kv=2 key_length=64 key_length_swa=32 \
          head_count_kv_swa=2 rope_dimension_count_swa=32 key_length_global=64 head_count_kv_global=1 \
          rope_dimension_count_global=64 sliding_window=16 sliding_window_layers=6 \
          sliding_window_pattern=LLLGLLLG shared_kv_layers=4 shared_kv_source_swa=2 \
          shared_kv_source_global=3 embedding_length_per_layer_input=8 expert_count=8 \
          expert_used_count=2 expert_feed_forward_length=32 experts_beside_dense_ffn=true; do
    k=${kv%%=*} want=${kv#*=}
    got=$(jq -r ".$k" "$T/out")
    [ "$got" = "$want" ] && ok "gemma4 $k = $want" || not_ok "gemma4 $k: '$got', by hand '$want'"
done

# a dense gemma4 whose shared-KV layers have a double-wide FFN (E2B's):
# feed_forward_length is an array; layer 0's (128) is llama.cpp's n_ff()
"$MKMODEL" "$T/gemma4-dense.gguf" --arch gemma4 --vocab "$T/g4v.gguf" --dim 64 --layers 8 --heads 2 --kv-heads 1 \
    --head-dim 32 --head-dim-swa 16 --ff 128 --swa 16 --swa-pattern 4 --shared-kv 4 --double-wide --per-layer 0 \
    --tied >/dev/null
run "$KVCHAT" models info "$T/gemma4-dense.gguf"
expect_rc 0
expect_out 'feed forward:   128 (up to 256 on later layers)'
expect_out 'heads:          2 (kv heads 1 local, 1 global; head dim 16 local, 32 global)'
run "$KVCHAT" models info --json "$T/gemma4-dense.gguf"
[ "$(jq .feed_forward_length "$T/out")" = 128 ] && ok "gemma4 feed_forward_length 128" || not_ok "gemma4 n_ff"

# --all lists every key, abbreviating long arrays
run "$KVCHAT" models info --all "$T/qwen2-vocab.gguf"
expect_rc 0
expect_out 'tokenizer.ggml.tokens (array) = \[151936 x string\] "!", "\\"", "#"'
expect_out 'tokenizer.ggml.merges (array) = \[151387 x string\]'
expect_out 'tokenizer.chat_template (string) = "'
run "$KVCHAT" models info --all --json "$T/qwen2-vocab.gguf"
[ "$(jq '.metadata["tokenizer.ggml.tokens"].n' "$T/out")" = 151936 ] && ok "json --all array n" || not_ok "json --all"

# a model name from the store
mkdir -p "$KVCHAT_HOME/models"
cp "$T/llama-q8_0.gguf" "$KVCHAT_HOME/models/tiny.gguf"
run "$KVCHAT" models info tiny
expect_rc 0; expect_out 'file type:      Q8_0'

# bad files: exit 2, the reason, nothing on stdout
run "$KVCHAT" models info "$T/nonexistent.gguf"
expect_rc 2; expect_out_empty
expect_err "kvchat: cannot open model '$T/nonexistent.gguf': No such file or directory"
printf 'GGML\3\0\0\0' > "$T/bad.gguf"; head -c 100 /dev/zero >> "$T/bad.gguf"
run "$KVCHAT" models info "$T/bad.gguf"
expect_rc 2; expect_out_empty
expect_err "kvchat: cannot open model '$T/bad.gguf': not a GGUF file (bad magic)"
head -c 100000 "$T/llama-q8_0.gguf" > "$T/truncated.gguf"
run "$KVCHAT" models info "$T/truncated.gguf"
expect_rc 2; expect_out_empty; expect_err "lies outside the file's data section"
: > "$T/empty.gguf"
run "$KVCHAT" models info "$T/empty.gguf"
expect_rc 2; expect_err "file too small for a GGUF header (0 bytes)"
run "$KVCHAT" models info "$T"
expect_rc 2; expect_err "not a regular file"

finish
