#!/usr/bin/python3
"""f64-qwen35.py - float64 reference logits of a qwen35 (Qwen3.5) GGUF model.

The peer's f64ref.py (float64 forward pass, exact dequantization) with the
Qwen3.5 hybrid block on top, written from the architecture's definition
(Qwen3.5's Gated DeltaNet and gated attention, as transformers' Qwen3_5 and
llama.cpp's src/models/qwen35.cpp describe them), not from kvchat's code:
  - layers: Gated DeltaNet where attention.recurrent_layers says 1 (else
    every layer but each full_attention_interval-th, default 4), gated full
    attention in the others; each layer x += mixer(rmsnorm(x, attn_norm)),
    then x += ffn(rmsnorm(x, post_attention_norm));
  - gated attention: attn_q gives per head q then a gate; q and k RMSNorm per
    head; NeoX RoPE on the first rope.dimension_count dims (imrope with a
    text token's position in sections 1-3 and 0 in the fourth, whose pairs
    stay put); softmax(q k^T / sqrt(D)) v times sigmoid(gate), then
    attn_output;
  - Gated DeltaNet: [q k v] = attn_qkv x, z = attn_gate x; a causal
    depthwise conv of ssm.conv_kernel taps over the sequence (zeros before
    it), SiLU; q, k L2-normalised per head (eps the RMS eps); beta =
    sigmoid(ssm_beta x); g = softplus(ssm_alpha x + ssm_dt.bias) * ssm_a;
    per value head h (key head h mod G), from S = 0:
      S <- exp(g) S;  S <- S + k (beta (v - S^T k))^T;  o = S^T q / sqrt(d_k);
    then RMSNorm(o) * ssm_norm * silu(z) per head, and ssm_out.
qwen35moe (Qwen3.5/3.6 MoE) is the same trunk with the FFN of
src/models/qwen35moe.cpp (transformers' Qwen3_5MoeSparseMoeBlock): for h the
FFN's input,
  - p = softmax(ffn_gate_inp h) over expert_count experts; the
    expert_used_count largest (ties to the lower index), divided by their sum;
    routed = sum over them of p_e down_e(silu(gate_e h) * up_e h) with the
    experts of ffn_{gate,up,down}_exps (or ffn_gate_up_exps: gate rows, then up);
  - shared = down_shexp(silu(gate_shexp h) * up_shexp h), times
    sigmoid(ffn_gate_inp_shexp . h);
  - out = routed + shared.
Same command line and output as f64ref.py: MODEL -p IDS -o OUT.f32 [--kv f16|f64]
(--kv f16 rounds the attention layers' K and V to f16, as an f16 KV cache).
F64REF names f64ref.py (default /work/shared/peer/f64ref.py).
"""
import sys

import numpy as np

from f64_common import R, meta_getter
R.ARCHS = R.ARCHS + ('qwen35', 'qwen35moe')
HYBRID = ('qwen35', 'qwen35moe')


class Qwen35Model(R.Model):
    def __init__(self, path):
        super().__init__(path)
        if self.arch not in HYBRID:
            return
        r = R.gguf.GGUFReader(path)
        a = self.arch
        get = meta_getter(r, path)
        self.neox = True
        self.conv_k = int(get(f'{a}.ssm.conv_kernel'))
        self.d_state = int(get(f'{a}.ssm.state_size'))
        self.n_group = int(get(f'{a}.ssm.group_count'))
        self.n_vhead = int(get(f'{a}.ssm.time_step_rank'))
        self.n_layer -= int(get(f'{a}.nextn_predict_layers', 0))
        sec = [int(s) for s in get(f'{a}.rope.dimension_sections')][:4]
        total, npairs = sum(sec), self.n_rot // 2
        self.rope_moves = np.array([
            (i % total % 3 == 1 and i % total < 3 * sec[1]) or (i % total % 3 == 2 and i % total < 3 * sec[2]) or
            (i % total % 3 == 0 and i % total < 3 * sec[0]) for i in range(npairs)])
        rl = get(f'{a}.attention.recurrent_layers', 'none')
        if rl != 'none':
            rl = [int(v) for v in (rl if isinstance(rl, list) else [rl] * self.n_layer)]
            self.recurrent = [bool(v) for v in rl[:self.n_layer]]
        else:
            iv = int(get(f'{a}.full_attention_interval', 4))
            self.recurrent = [(l + 1) % iv != 0 for l in range(self.n_layer)]
        if self.arch == 'qwen35moe':
            self.n_used = int(get(f'{a}.expert_used_count'))


def rope35(m, x, pos):
    # NeoX rotation of the first n_rot dims; the pairs of imrope's fourth section do not move
    n = m.n_rot
    theta = m.base ** (-2.0 * np.arange(n // 2) / n)
    ang = pos[:, None] * theta * m.rope_moves[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x = x.copy()
    a, b = x[..., :n // 2].copy(), x[..., n // 2:n].copy()
    x[..., :n // 2] = a * c - b * s
    x[..., n // 2:n] = a * s + b * c
    return x


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def gated_attention(m, p, h, pos, kv16):
    T, D = len(h), m.head_dim
    qg = R.linear(m, p + 'attn_q', h).reshape(T, m.n_head, 2 * D)
    q, gate = qg[..., :D], qg[..., D:].reshape(T, m.n_head * D)
    k = R.linear(m, p + 'attn_k', h).reshape(T, m.n_head_kv, D)
    v = R.linear(m, p + 'attn_v', h).reshape(T, m.n_head_kv, D)
    q = R.rmsnorm(q, m.w(p + 'attn_q_norm.weight'), m.eps)
    k = R.rmsnorm(k, m.w(p + 'attn_k_norm.weight'), m.eps)
    q, k = rope35(m, q, pos), rope35(m, k, pos)
    if kv16:
        k, v = R.f16(k), R.f16(v)
    return R.linear(m, p + 'attn_output', R.attention(q, k, v) * sigmoid(gate))


def l2norm(x, eps):
    return x / np.maximum(np.sqrt((x * x).sum(-1, keepdims=True)), eps)


def gated_deltanet(m, p, h):
    T, S, G, V, K = len(h), m.d_state, m.n_group, m.n_vhead, m.conv_k
    mixed = R.linear(m, p + 'attn_qkv', h)                      # (T, 2 G S + V S)
    z = R.linear(m, p + 'attn_gate', h).reshape(T, V, S)
    w = m.w(p + 'ssm_conv1d.weight')                             # (channels, K), oldest tap first
    padded = np.concatenate([np.zeros((K - 1, mixed.shape[1])), mixed])
    conv = sum(padded[j:j + T] * w[:, j] for j in range(K))
    conv = silu(conv)
    q = l2norm(conv[:, :G * S].reshape(T, G, S), m.eps)
    k = l2norm(conv[:, G * S:2 * G * S].reshape(T, G, S), m.eps)
    v = conv[:, 2 * G * S:].reshape(T, V, S)
    beta = sigmoid(R.linear(m, p + 'ssm_beta', h))               # (T, V)
    a = R.linear(m, p + 'ssm_alpha', h) + m.w(p + 'ssm_dt.bias')
    g = np.where(a > 20, a, np.log1p(np.exp(np.minimum(a, 20)))) * m.w(p + 'ssm_a')
    out = np.zeros((T, V, S))
    for hv in range(V):
        kh = hv % G
        st = np.zeros((S, S))                                    # st[i, j]: key i, value j
        for t in range(T):
            st *= np.exp(g[t, hv])
            delta = beta[t, hv] * (v[t, hv] - st.T @ k[t, kh])
            st += np.outer(k[t, kh], delta)
            out[t, hv] = st.T @ q[t, kh] / np.sqrt(S)
    o = R.rmsnorm(out, m.w(p + 'ssm_norm.weight'), m.eps) * silu(z)
    return R.linear(m, p + 'ssm_out', o.reshape(T, V * S))


def moe_ffn(m, p, h):
    # qwen35moe: the routed experts plus the gated shared expert
    logits = h @ m.w(p + 'ffn_gate_inp.weight').T
    z = np.exp(logits - logits.max(-1, keepdims=True))
    prob = z / z.sum(-1, keepdims=True)
    if p + 'ffn_gate_up_exps.weight' in m.tensors:
        gu = m.w(p + 'ffn_gate_up_exps.weight')
        F = gu.shape[1] // 2
        gate, up = gu[:, :F], gu[:, F:]
    else:
        gate, up = m.w(p + 'ffn_gate_exps.weight'), m.w(p + 'ffn_up_exps.weight')
    down = m.w(p + 'ffn_down_exps.weight')
    out = np.zeros_like(h)
    for t in range(len(h)):
        sel = np.argsort(-prob[t], kind='stable')[:m.n_used]
        w = prob[t, sel] / prob[t, sel].sum()
        for e, we in zip(sel, w):
            g = gate[e] @ h[t]
            out[t] += we * (down[e] @ (silu(g) * (up[e] @ h[t])))
    g = h @ m.w(p + 'ffn_gate_shexp.weight').T
    shared = (silu(g) * (h @ m.w(p + 'ffn_up_shexp.weight').T)) @ m.w(p + 'ffn_down_shexp.weight').T
    return out + sigmoid(h @ m.w(p + 'ffn_gate_inp_shexp.weight'))[:, None] * shared


def block(m, l, x, pos, kv16):
    if m.arch not in HYBRID:
        return base_block(m, l, x, pos, kv16)
    p = f'blk.{l}.'
    h = R.rmsnorm(x, m.w(p + 'attn_norm.weight'), m.eps)
    x = x + (gated_deltanet(m, p, h) if m.recurrent[l] else gated_attention(m, p, h, pos, kv16))
    h = R.rmsnorm(x, m.w(p + 'post_attention_norm.weight'), m.eps)
    return x + (moe_ffn(m, p, h) if m.arch == 'qwen35moe' else R.ffn(m, p, h))


base_block = R.block
R.Model, R.block = Qwen35Model, block

if __name__ == '__main__':
    sys.argv[0] = 'f64-qwen35.py'
    R.main()
