#!/usr/bin/python3
"""f64-gptoss.py - float64 reference logits of a gpt-oss GGUF model.

Uses the peer's f64ref.py for what it shares (exact dequantization of every
weight type gguf-py knows, MXFP4 included, RMSNorm, the LM head, the command
line) and writes gpt-oss's blocks from the architecture's definition
(OpenAI's gpt-oss model card and reference code, transformers' GptOss*
modules; llama.cpp's src/models/openai-moe.cpp for the GGUF names), not from
kvchat's code:
  - h = rmsnorm(x, attn_norm); q, k, v = biased projections of h;
  - RoPE (NeoX halves) with YaRN: per pair i, theta_i = base^(-2i/d);
    low = floor(d ln(orig / (2 pi 32)) / (2 ln base)), high = ceil(the same
    with 1), clamped to [0, d - 1] (llama.cpp's and ggml's correction dims:
    the truncating form; transformers' gpt-oss config says truncate false,
    llama.cpp truncates, and this follows llama.cpp, the engine it judges);
    ramp_i = 1 - clamp((i - low) / max(0.001, high - low), 0, 1); the angle
    pos theta_i (ramp_i + (1 - ramp_i) / factor); cos and sin times
    0.1 ln(factor) + 1;
  - K and V rounded to f16 (--kv f16, the default) as an f16 cache stores them;
  - attention per query head h (KV head h // group): scores q.k / sqrt(d) over
    the causal keys, only the last `sliding_window` positions (p - p' < W) on
    the layers l with l % period < period - 1 (period: the
    sliding_window_pattern key, default 2: the even layers); softmax over the
    scores and the head's sink logit (attn_sinks), the sink's share dropped:
    p_j = exp(s_j) / (sum_j exp(s_j) + exp(sink_h)); out = sum_j p_j v_j;
  - x += attn_output(out) + its bias;
  - h = rmsnorm(x, post_attention_norm); router logits r = W_r h + b_r; the
    expert_used_count largest r (ties to the lower index), weights the
    softmax over those k logits;
  - expert e: g = W_gate,e h + b_gate,e, u = W_up,e h + b_up,e;
    g = min(g, 7), u = clamp(u, -7, 7); a = g sigmoid(1.702 g) (u + 1);
    y_e = W_down,e a + b_down,e; x += sum of w_e y_e.
Same command line and output as f64ref.py: MODEL -p IDS -o OUT.f32 [--kv f16|f64].
F64REF names f64ref.py (default /work/shared/peer/f64ref.py).
"""
import math
import sys

import numpy as np

from f64_common import R, meta_getter


class GptOssModel(R.Model):
    def __init__(self, path):
        r = R.gguf.GGUFReader(path)
        a = 'gpt-oss'
        get = meta_getter(r, path)
        if get('general.architecture') != a:
            R.die('f64-gptoss.py: the model is not gpt-oss')
        self.arch = a
        self.tensors = {t.name: t for t in r.tensors}
        self.n_embd = int(get(f'{a}.embedding_length'))
        self.n_layer = int(get(f'{a}.block_count'))
        self.n_head = int(get(f'{a}.attention.head_count'))
        self.n_head_kv = int(get(f'{a}.attention.head_count_kv'))
        self.head_dim = int(get(f'{a}.attention.key_length'))
        self.n_rot = int(get(f'{a}.rope.dimension_count', self.head_dim))
        self.eps = float(get(f'{a}.attention.layer_norm_rms_epsilon'))
        self.base = float(get(f'{a}.rope.freq_base', 10000.0))
        self.n_ctx_train = int(get(f'{a}.context_length'))
        self.yarn = get(f'{a}.rope.scaling.type', 'none') == 'yarn'
        self.factor = float(get(f'{a}.rope.scaling.factor', 1.0))
        self.orig = int(get(f'{a}.rope.scaling.original_context_length', self.n_ctx_train))
        self.window = int(get(f'{a}.attention.sliding_window'))
        self.period = int(get(f'{a}.attention.sliding_window_pattern', 2))
        self.n_expert = int(get(f'{a}.expert_count'))
        self.n_used = int(get(f'{a}.expert_used_count'))
        self.freq_factors = None
        self.out = 'output.weight'
        self.n_vocab = int(self.tensors[self.out].shape[1])


def rope_yarn(m, x, pos):
    d = m.n_rot
    i = np.arange(d // 2, dtype=np.float64)
    theta = m.base ** (-2.0 * i / d)
    if m.yarn and m.factor > 1:
        def corr(beta):
            return d * math.log(m.orig / (beta * 2 * math.pi)) / (2 * math.log(m.base))
        low, high = max(0.0, math.floor(corr(32.0))), min(d - 1.0, math.ceil(corr(1.0)))
        ramp = 1 - np.clip((i - low) / max(0.001, high - low), 0, 1)
        theta = theta * (ramp + (1 - ramp) / m.factor)
        mscale = 0.1 * math.log(m.factor) + 1
    else:
        mscale = 1.0
    ang = pos[:, None] * theta
    c, s = (np.cos(ang) * mscale)[:, None, :], (np.sin(ang) * mscale)[:, None, :]
    x = x.copy()
    a, b = x[..., :d // 2].copy(), x[..., d // 2:d].copy()
    x[..., :d // 2] = a * c - b * s
    x[..., d // 2:d] = a * s + b * c
    return x


def attention_sinks(q, k, v, sinks, window):
    T, H, D = q.shape
    grp = H // k.shape[1]
    k, v = np.repeat(k, grp, axis=1), np.repeat(v, grp, axis=1)
    t = np.arange(T)
    allowed = t[None, :] <= t[:, None]
    if window:
        allowed &= t[:, None] - t[None, :] < window
    s = np.einsum('thd,shd->hts', q, k) / np.sqrt(D)
    s = np.where(allowed[None], s, -np.inf)
    mx = np.maximum(s.max(-1, keepdims=True), sinks[:, None, None])
    z = np.exp(s - mx)
    p = z / (z.sum(-1, keepdims=True) + np.exp(sinks[:, None, None] - mx))
    return np.einsum('hts,shd->thd', p, v).reshape(T, H * D)


def moe(m, l, h):
    p = f'blk.{l}.'
    logits = h @ m.w(p + 'ffn_gate_inp.weight').T + m.w(p + 'ffn_gate_inp.bias')
    gate, up, down = (m.w(p + 'ffn_gate_exps.weight'), m.w(p + 'ffn_up_exps.weight'),
                      m.w(p + 'ffn_down_exps.weight'))
    bg, bu, bd = m.w(p + 'ffn_gate_exps.bias'), m.w(p + 'ffn_up_exps.bias'), m.w(p + 'ffn_down_exps.bias')
    out = np.zeros_like(h)
    for t in range(len(h)):
        sel = np.argsort(-logits[t], kind='stable')[:m.n_used]
        z = np.exp(logits[t, sel] - logits[t, sel].max())
        w = z / z.sum()
        for e, we in zip(sel, w):
            g = np.minimum(gate[e] @ h[t] + bg[e], 7.0)
            u = np.clip(up[e] @ h[t] + bu[e], -7.0, 7.0)
            a = g / (1 + np.exp(-1.702 * g)) * (u + 1)
            out[t] += we * (down[e] @ a + bd[e])
    return out


def block(m, l, x, pos, kv16):
    p, T = f'blk.{l}.', len(x)
    h = R.rmsnorm(x, m.w(p + 'attn_norm.weight'), m.eps)
    q = R.linear(m, p + 'attn_q', h).reshape(T, m.n_head, m.head_dim)
    k = R.linear(m, p + 'attn_k', h).reshape(T, m.n_head_kv, m.head_dim)
    v = R.linear(m, p + 'attn_v', h).reshape(T, m.n_head_kv, m.head_dim)
    q, k = rope_yarn(m, q, pos), rope_yarn(m, k, pos)
    if kv16:
        k, v = R.f16(k), R.f16(v)
    swa = m.period == 0 or l % m.period < m.period - 1
    att = attention_sinks(q, k, v, m.w(p + 'attn_sinks.weight'), m.window if swa else 0)
    x = x + R.linear(m, p + 'attn_output', att)
    return x + moe(m, l, R.rmsnorm(x, m.w(p + 'post_attention_norm.weight'), m.eps))


R.Model, R.block = GptOssModel, block

if __name__ == '__main__':
    sys.argv[0] = 'f64-gptoss.py'
    R.main()
