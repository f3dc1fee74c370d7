#!/usr/bin/python3
"""f64-families.py - float64 reference logits of a gemma2 or gemma3 GGUF model.

The peer's f64ref.py (float64 forward pass of llama, qwen2, qwen3) with the
Gemma 2 and Gemma 3 block on top, written from the architectures' definitions
(llama.cpp's src/models/gemma2.cpp and gemma3.cpp, gemma_pytorch), not from
kvchat's code:
  - embeddings times sqrt(n_embd);
  - RMSNorm after attention and after the FFN (post_attention_norm,
    post_ffw_norm) before each joins the residual;
  - FFN down(gelu_tanh(gate x) * up x), GELU's tanh form computed exactly
    (llama.cpp's CPU GELU goes through an f16 table: its F32 logits are
    ~3e-4 of the range off exact for these models, see regen-families.sh);
  - q/k RMSNorm per head before RoPE (gemma3);
  - sliding-window layers (l % period < period - 1): a query at p sees the
    keys p' with p - p' < n_swa; their own RoPE base (rope.freq_base_swa,
    gemma3's default 10000, no linear scaling there);
  - attention soft-capping c tanh(s / c) of the scaled scores, before the
    mask and softmax, and final logit soft-capping (gemma2; gemma3 if set);
  - gemma2's LM head is the token embedding.
Same command line and output as f64ref.py: MODEL -p IDS -o OUT.f32 [--kv f16|f64].
F64REF names f64ref.py (default /work/shared/peer/f64ref.py).
"""
import sys

import numpy as np

from f64_common import R, attention, gelu_tanh, meta_getter
R.ARCHS = R.ARCHS + ('gemma2', 'gemma3')


class GemmaModel(R.Model):
    def __init__(self, path):
        super().__init__(path)
        if self.arch not in ('gemma2', 'gemma3'):
            return
        r = R.gguf.GGUFReader(path)
        get = meta_getter(r, path)
        a, g2 = self.arch, self.arch == 'gemma2'
        self.n_swa = int(get(f'{a}.attention.sliding_window', 4096 if g2 else 0))
        self.period = int(get(f'{a}.attention.sliding_window_pattern', 2 if g2 else 6))
        self.attn_cap = float(get(f'{a}.attn_logit_softcapping', 50.0)) if g2 else 0.0
        self.final_cap = float(get(f'{a}.final_logit_softcapping', 30.0 if g2 else 0.0))
        self.base_swa = float(get(f'{a}.rope.freq_base_swa', self.base if g2 else 10000.0))
        self.scale_swa = self.pos_scale if g2 else 1.0
        if g2:
            self.out = 'token_embd.weight'


def rope_with(m, x, pos, base, scale):
    saved = m.base, m.pos_scale
    m.base, m.pos_scale = base, scale
    try:
        return R.rope(m, x, pos)
    finally:
        m.base, m.pos_scale = saved


def block(m, l, x, pos, kv16):
    if m.arch not in ('gemma2', 'gemma3'):
        return base_block(m, l, x, pos, kv16)
    p, T = f'blk.{l}.', len(x)
    h = R.rmsnorm(x, m.w(p + 'attn_norm.weight'), m.eps)
    q = R.linear(m, p + 'attn_q', h).reshape(T, m.n_head, m.head_dim)
    k = R.linear(m, p + 'attn_k', h).reshape(T, m.n_head_kv, m.head_dim)
    v = R.linear(m, p + 'attn_v', h).reshape(T, m.n_head_kv, m.head_dim)
    if m.arch == 'gemma3':
        q = R.rmsnorm(q, m.w(p + 'attn_q_norm.weight'), m.eps)
        k = R.rmsnorm(k, m.w(p + 'attn_k_norm.weight'), m.eps)
    swa = m.n_swa > 0 and l % m.period < m.period - 1
    base, scale = (m.base_swa, m.scale_swa) if swa else (m.base, m.pos_scale)
    q, k = rope_with(m, q, pos, base, scale), rope_with(m, k, pos, base, scale)
    if kv16:
        k, v = R.f16(k), R.f16(v)
    a = R.linear(m, p + 'attn_output', attention(q, k, v, m.n_swa if swa else 0, m.attn_cap))
    x = x + R.rmsnorm(a, m.w(p + 'post_attention_norm.weight'), m.eps)
    h = R.rmsnorm(x, m.w(p + 'ffn_norm.weight'), m.eps)
    f = R.linear(m, p + 'ffn_down', gelu_tanh(R.linear(m, p + 'ffn_gate', h)) * R.linear(m, p + 'ffn_up', h))
    return x + R.rmsnorm(f, m.w(p + 'post_ffw_norm.weight'), m.eps)


def embed(m, ids):
    x = base_embed(m, ids)
    return x * np.sqrt(m.n_embd) if m.arch in ('gemma2', 'gemma3') else x


def lm_head(m, x):
    z = base_lm_head(m, x)
    cap = getattr(m, 'final_cap', 0.0)
    return cap * np.tanh(z / cap) if cap else z


base_block, base_embed, base_lm_head = R.block, R.embed, R.lm_head
R.Model, R.block, R.embed, R.lm_head = GemmaModel, block, embed, lm_head

if __name__ == '__main__':
    sys.argv[0] = 'f64-families.py'
    R.main()
