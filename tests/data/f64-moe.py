#!/usr/bin/python3
"""f64-moe.py - float64 reference logits of a qwen3moe GGUF model.

The peer's f64ref.py (float64 forward pass, exact dequantization; its qwen3
block: per-head q/k RMSNorm, NeoX RoPE) with the mixture-of-experts FFN of
Qwen3-MoE in place of the dense FFN, written from the architecture's
definition (transformers' Qwen3MoeSparseMoeBlock; llama.cpp's
src/models/qwen3moe.cpp and build_moe_ffn), not from kvchat's code:
  - router logits r = ffn_gate_inp h (h = rmsnorm(x, ffn_norm));
  - p = softmax(r) over the expert_count experts;
  - the expert_used_count largest p (ties to the lower expert index),
    their p divided by their sum (norm_topk_prob);
  - out = sum over the chosen experts e of p_e down_e(silu(gate_e h) * up_e h),
    with gate_e, up_e, down_e expert e's matrices of ffn_gate_exps,
    ffn_up_exps, ffn_down_exps (or of ffn_gate_up_exps: each expert's
    gate rows, then its up rows).
Same command line and output as f64ref.py: MODEL -p IDS -o OUT.f32 [--kv f16|f64].
With F64_ROUTES=1 in the environment it prints, per layer, how many of the
prompt's tokens each expert got (to stderr).
F64REF names f64ref.py (default /work/shared/peer/f64ref.py).
"""
import os
import sys

import numpy as np

from f64_common import R, meta_getter
R.ARCHS = R.ARCHS + ('qwen3moe',)


class MoeModel(R.Model):
    def __init__(self, path):
        super().__init__(path)
        if self.arch != 'qwen3moe':
            return
        r = R.gguf.GGUFReader(path)
        a = self.arch
        get = meta_getter(r, path)
        self.n_expert = int(get(f'{a}.expert_count'))
        self.n_used = int(get(f'{a}.expert_used_count'))
        self.n_ff_exp = int(get(f'{a}.expert_feed_forward_length'))

    def experts(self, p):
        # (gate, up, down) as float64 arrays (X, F, E), (X, F, E), (X, E, F)
        if p + 'ffn_gate_up_exps.weight' in self.tensors:
            gu = self.w(p + 'ffn_gate_up_exps.weight')
            F = gu.shape[1] // 2
            return gu[:, :F], gu[:, F:], self.w(p + 'ffn_down_exps.weight')
        return (self.w(p + 'ffn_gate_exps.weight'), self.w(p + 'ffn_up_exps.weight'),
                self.w(p + 'ffn_down_exps.weight'))


def moe_ffn(m, l, h):
    p = f'blk.{l}.'
    logits = h @ m.w(p + 'ffn_gate_inp.weight').T                  # (T, X)
    z = np.exp(logits - logits.max(-1, keepdims=True))
    prob = z / z.sum(-1, keepdims=True)
    gate, up, down = m.experts(p)
    out = np.zeros_like(h)
    counts = np.zeros(m.n_expert, dtype=int)
    for t in range(len(h)):
        sel = np.argsort(-prob[t], kind='stable')[:m.n_used]       # ties: the lower index first
        w = prob[t, sel] / prob[t, sel].sum()
        for e, we in zip(sel, w):
            g = gate[e] @ h[t]
            out[t] += we * (down[e] @ (g / (1 + np.exp(-g)) * (up[e] @ h[t])))
            counts[e] += 1
    if os.environ.get('F64_ROUTES'):
        sys.stderr.write(f'layer {l}: tokens per expert {counts.tolist()}\n')
    return out


def block(m, l, x, pos, kv16):
    if m.arch != 'qwen3moe':
        return base_block(m, l, x, pos, kv16)
    # qwen3's block (q/k norms and all) with its FFN replaced
    saved = R.ffn
    R.ffn = lambda m_, p_, h: moe_ffn(m_, l, h)
    m.arch = 'qwen3'
    try:
        return base_block(m, l, x, pos, kv16)
    finally:
        R.ffn = saved
        m.arch = 'qwen3moe'


base_block = R.block
R.Model, R.block = MoeModel, block

if __name__ == '__main__':
    sys.argv[0] = 'f64-moe.py'
    R.main()
