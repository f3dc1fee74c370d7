#!/usr/bin/python3
"""f64-gemma4.py - float64 reference logits of a gemma4 (Gemma 4 text) GGUF model.

The peer's f64ref.py (exact dequantization, float64 arithmetic, the same
command line and output) with Gemma 4's dense block, written from the
architecture's definition (llama.cpp's src/models/gemma4.cpp and
conversion/gemma.py Gemma4Model, read for facts), not from kvchat's code:
  - embeddings times sqrt(n_embd);
  - per-layer inputs (embedding_length_per_layer_input P > 0): the token's
    per_layer_token_embd row (L x P) times sqrt(P), plus RMSNorm
    (per_layer_proj_norm, over each layer's P) of per_layer_model_proj x
    times 1/sqrt(n_embd), the sum times 1/sqrt(2); layer l's slice gates
    that layer's output (below);
  - each layer is local or global by the sliding_window_pattern array
    (true: local, a window of attention.sliding_window positions);
    local layers have head size key_length_swa, rope.dimension_count_swa
    rotated dimensions and base rope.freq_base_swa; global ones key_length,
    rope.dimension_count, rope.freq_base and the rope_freqs factors (theta_i
    divided by factor i: 1e30 leaves a pair unrotated); RoPE is NEOX's
    (halves); head_count_kv may be one count a layer;
  - q: attn_q, per-head RMSNorm (attn_q_norm), RoPE; no 1/sqrt(D) scaling
    of q.k (Gemma 4's attention scale is 1);
  - k: attn_k, per-head RMSNorm (attn_k_norm), RoPE; v: attn_v, or attn_k's
    output (before k's norm) where the layer has no attn_v, then an RMSNorm
    with no weight; K and V rounded to f16 with --kv f16 (an f16 cache);
  - the last attention.shared_kv_layers layers compute no K and V: a local
    one attends over layer (L - N - 2)'s, a global one over layer
    (L - N - 1)'s (llama.cpp's layer reuse);
  - attn_output, RMSNorm (post_attention_norm), plus the residual; FFN
    down(gelu_tanh(gate h) * up h) of RMSNorm (ffn_norm), RMSNorm
    (post_ffw_norm), plus the residual (feed_forward_length may be one
    count a layer); GELU's tanh form computed exactly (llama.cpp's CPU GELU
    goes through an f16 table);
  - with per-layer inputs: y = gelu(inp_gate y') * the layer's slice,
    proj, RMSNorm (post_norm), added to the layer's output;
  - layer_output_scale (a scalar) multiplies the layer's output, if present;
  - final RMSNorm, LM head (output or token_embd), final soft-capping
    c tanh(z / c) if final_logit_softcapping is set.
  - mixture-of-experts layers (the 26B-A4B: ffn_gate_inp present): with
    a = the attention's output plus the residual, the FFN's output before
    post_ffw_norm is RMSNorm(post_ffw_norm_1, the dense FFN of
    RMSNorm(ffn_norm, a)) + RMSNorm(post_ffw_norm_2, the experts' sum on
    RMSNorm(pre_ffw_norm_2, a)); the router's logits are ffn_gate_inp times
    a's unweighted RMSNorm / sqrt(n_embd) times ffn_gate_inp.scale; softmax
    over all experts, the top expert_used_count (ties to the lower index),
    weights renormalised to sum 1; each expert down(gelu_tanh(gate h) *
    up h) times ffn_down_exps.scale[e] (if present) times its weight, summed
    in rank order.
usage: f64-gemma4.py MODEL -p IDS -o OUT.f32 [--kv f16|f64]
F64_G4_NO_DOWN_SCALE=1 leaves ffn_down_exps.scale out (a check, not the model).
F64REF names f64ref.py (default /work/shared/peer/f64ref.py).
"""
import os
import sys

import numpy as np

from f64_common import R, attention, gelu_tanh, meta_getter


def per_layer(v, n):
    """a key that is one value or one value a layer, as a list of n"""
    if isinstance(v, (list, tuple)):
        if len(v) != n:
            R.die(f'an array key has {len(v)} values for {n} layers')
        return list(v)
    return [v] * n


class Gemma4Model(R.Model):
    def __init__(self, path):
        r = R.gguf.GGUFReader(path)
        get = meta_getter(r, path)
        self.arch = a = get('general.architecture')
        if a != 'gemma4':
            R.die(f'architecture {a!r} is not gemma4')
        self.tensors = {t.name: t for t in r.tensors}
        for t in r.tensors:
            if t.tensor_type not in R.TYPES:
                R.die(f'tensor {t.name} has type {t.tensor_type.name}, which gguf-py cannot dequantize')
        L = self.n_layer = int(get(f'{a}.block_count'))
        self.n_embd = int(get(f'{a}.embedding_length'))
        self.n_head = int(get(f'{a}.attention.head_count'))
        self.swa = [bool(x) for x in per_layer(get(f'{a}.attention.sliding_window_pattern'), L)]
        kvh = [int(x) for x in per_layer(get(f'{a}.attention.head_count_kv', self.n_head), L)]
        hd, hd_swa = int(get(f'{a}.attention.key_length')), int(get(f'{a}.attention.key_length_swa'))
        if int(get(f'{a}.attention.value_length', hd)) != hd or \
                int(get(f'{a}.attention.value_length_swa', hd_swa)) != hd_swa:
            R.die('value_length must equal key_length (Gemma 4 requires it)')
        rot = int(get(f'{a}.rope.dimension_count', hd))
        rot_swa = int(get(f'{a}.rope.dimension_count_swa', rot))
        base = float(get(f'{a}.rope.freq_base', 10000.0))
        base_swa = float(get(f'{a}.rope.freq_base_swa', base))
        self.n_swa = int(get(f'{a}.attention.sliding_window'))
        self.n_shared = int(get(f'{a}.attention.shared_kv_layers', 0))
        self.n_pl = int(get(f'{a}.embedding_length_per_layer_input'))
        self.eps = float(get(f'{a}.attention.layer_norm_rms_epsilon'))
        self.final_cap = float(get(f'{a}.final_logit_softcapping', 30.0))   # llama.cpp's default
        self.n_expert = int(get(f'{a}.expert_count', 0))
        self.n_expert_used = int(get(f'{a}.expert_used_count', 0))
        self.n_kv = L - self.n_shared
        if self.n_shared and self.n_kv < 2:
            R.die('shared_kv_layers leaves fewer than 2 layers with KV')
        self.hd = [hd_swa if s else hd for s in self.swa]
        self.kvh = kvh
        self.rot = [rot_swa if s else rot for s in self.swa]
        self.bases = [base_swa if s else base for s in self.swa]
        self.freq_factors = self.w('rope_freqs.weight') if 'rope_freqs.weight' in self.tensors else None
        self.out = 'output.weight' if 'output.weight' in self.tensors else 'token_embd.weight'
        self.n_vocab = int(self.tensors[self.out].shape[1])
        # what f64ref's rope() reads; set per layer below
        self.neox, self.pos_scale, self.n_rot, self.base = True, 1.0, rot, base


def rope_layer(m, l, x, pos):
    m.n_rot, m.base = m.rot[l], m.bases[l]
    ff, m.freq_factors = m.freq_factors, (None if m.swa[l] else m.freq_factors)
    try:
        return R.rope(m, x, pos)
    finally:
        m.freq_factors = ff


def norm1(x, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def per_layer_inputs(m, ids, x):
    # (T, L, P): (RMSNorm(proj x / sqrt(n_embd)) + tok rows * sqrt(P)) / sqrt(2)
    T, L, P = len(ids), m.n_layer, m.n_pl
    tok = m.w('per_layer_token_embd.weight', np.asarray(ids)).reshape(T, L, P) * np.sqrt(P)
    pr = (x @ m.w('per_layer_model_proj.weight').T / np.sqrt(m.n_embd)).reshape(T, L, P)
    pr = R.rmsnorm(pr, m.w('per_layer_proj_norm.weight'), m.eps)
    return (pr + tok) / np.sqrt(2.0)


def experts(m, p, a):
    # the routed experts' weighted sum, (T, n_embd)
    T, E, K = len(a), m.n_expert, m.n_expert_used
    z = (norm1(a, m.eps) / np.sqrt(m.n_embd) * m.w(p + 'ffn_gate_inp.scale')) @ m.w(p + 'ffn_gate_inp.weight').T
    pr = np.exp(z - z.max(-1, keepdims=True))
    pr /= pr.sum(-1, keepdims=True)
    h = R.rmsnorm(a, m.w(p + 'pre_ffw_norm_2.weight'), m.eps)
    if p + 'ffn_gate_up_exps.weight' in m.tensors:
        gu = m.w(p + 'ffn_gate_up_exps.weight')          # (E, 2F, n_embd)
        F = gu.shape[1] // 2
        g_all, u_all = gu[:, :F, :], gu[:, F:, :]
    else:
        g_all, u_all = m.w(p + 'ffn_gate_exps.weight'), m.w(p + 'ffn_up_exps.weight')
    d_all = m.w(p + 'ffn_down_exps.weight')               # (E, n_embd, F)
    sc = m.w(p + 'ffn_down_exps.scale') if p + 'ffn_down_exps.scale' in m.tensors else np.ones(E)
    if os.environ.get('F64_G4_NO_DOWN_SCALE'):      # regen-gemma4.sh's check that it matters
        sc = np.ones(E)
    out = np.zeros_like(a)
    for t in range(T):
        top = np.argsort(-pr[t], kind='stable')[:K]
        wts = pr[t, top] / pr[t, top].sum()
        for e, wt in zip(top, wts):
            y = d_all[e] @ (gelu_tanh(g_all[e] @ h[t]) * (u_all[e] @ h[t]))
            out[t] += wt * sc[e] * y
    return out


def block(m, l, x, pos, kv16, kvs, pli):
    p, T = f'blk.{l}.', len(x)
    D, H = m.hd[l], m.n_head
    h = R.rmsnorm(x, m.w(p + 'attn_norm.weight'), m.eps)
    q = R.linear(m, p + 'attn_q', h).reshape(T, H, D)
    q = rope_layer(m, l, R.rmsnorm(q, m.w(p + 'attn_q_norm.weight'), m.eps), pos)
    if l < m.n_kv:
        kr = R.linear(m, p + 'attn_k', h)
        vr = R.linear(m, p + 'attn_v', h) if p + 'attn_v.weight' in m.tensors else kr
        k = R.rmsnorm(kr.reshape(T, m.kvh[l], D), m.w(p + 'attn_k_norm.weight'), m.eps)
        v = norm1(vr.reshape(T, m.kvh[l], D), m.eps)
        k = rope_layer(m, l, k, pos)
        if kv16:
            k, v = R.f16(k), R.f16(v)
        kvs[l] = (k, v)
    else:
        src = m.n_kv - (2 if m.swa[l] else 1)
        if m.swa[src] != m.swa[l]:
            R.die(f'layer {l} would reuse the KV of layer {src}, which is not of its kind')
        k, v = kvs[src]
    a = R.linear(m, p + 'attn_output', attention(q, k, v, m.n_swa if m.swa[l] else 0, scaled=False))
    x = x + R.rmsnorm(a, m.w(p + 'post_attention_norm.weight'), m.eps)
    h = R.rmsnorm(x, m.w(p + 'ffn_norm.weight'), m.eps)
    f = R.linear(m, p + 'ffn_down', gelu_tanh(R.linear(m, p + 'ffn_gate', h)) * R.linear(m, p + 'ffn_up', h))
    if p + 'ffn_gate_inp.weight' in m.tensors:
        f = R.rmsnorm(f, m.w(p + 'post_ffw_norm_1.weight'), m.eps) + \
            R.rmsnorm(experts(m, p, x), m.w(p + 'post_ffw_norm_2.weight'), m.eps)
    x = x + R.rmsnorm(f, m.w(p + 'post_ffw_norm.weight'), m.eps)
    if pli is not None:
        g = gelu_tanh(R.linear(m, p + 'inp_gate', x)) * pli[:, l, :]
        x = x + R.rmsnorm(R.linear(m, p + 'proj', g), m.w(p + 'post_norm.weight'), m.eps)
    if p + 'layer_output_scale.weight' in m.tensors:
        x = x * m.w(p + 'layer_output_scale.weight')[0]
    return x


def forward(m, ids, kv16=True):
    x = R.embed(m, ids) * np.sqrt(m.n_embd)
    pli = per_layer_inputs(m, ids, x) if m.n_pl > 0 else None
    pos = np.arange(len(ids), dtype=np.float64)
    kvs = {}
    for l in range(m.n_layer):
        x = block(m, l, x, pos, kv16, kvs, pli)
    z = R.lm_head(m, x)
    return m.final_cap * np.tanh(z / m.final_cap) if m.final_cap else z


R.ARCHS = R.ARCHS + ('gemma4',)
R.Model, R.forward = Gemma4Model, forward

if __name__ == '__main__':
    sys.argv[0] = 'f64-gemma4.py'
    R.main()
