"""f64_common.py - what the float64 reference scripts (f64-*.py) share.

Each of them is the peer's f64ref.py (float64 forward pass of llama, qwen2,
qwen3) with one family's block on top. They load f64ref.py the same way,
read GGUF metadata the same way, and two of them (gemma2/gemma3, gemma4)
need the same windowed causal attention and GELU: written once here, from
the definitions, so that the references cannot drift apart.
F64REF names f64ref.py (default /work/shared/peer/f64ref.py).
"""
import importlib.util
import os

import numpy as np

_spec = importlib.util.spec_from_file_location(
    'f64ref', os.environ.get('F64REF', '/work/shared/peer/f64ref.py'))
R = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(R)


def meta_getter(r, path):
    """get(key[, default]) on GGUFReader r's metadata: a missing key without
    a default ends the script with a message naming path and key."""
    def get(key, default=KeyError):
        if key in r.fields:
            return r.fields[key].contents()
        if default is KeyError:
            R.die(f'{path}: metadata {key} is missing')
        return default
    return get


def attention(q, k, v, window, cap=0.0, scaled=True):
    """Causal attention of q (T, H, D) over k, v (T, H_kv, D), grouped heads.
    window: a query at t sees the keys t' with t - t' < window (0: all).
    cap: soft-capping cap tanh(s / cap) of the scores (0: none).
    scaled: scores q.k / sqrt(D) (False: q.k, as Gemma 4)."""
    T, H, D = q.shape
    grp = H // k.shape[1]
    k, v = np.repeat(k, grp, axis=1), np.repeat(v, grp, axis=1)
    s = np.einsum('thd,shd->hts', q, k)
    if scaled:
        s = s / np.sqrt(D)
    if cap:
        s = cap * np.tanh(s / cap)
    t = np.arange(T)
    masked = (t[None, :] > t[:, None]) | ((t[:, None] - t[None, :] >= window) if window else False)
    s = np.where(masked, -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum('hts,shd->thd', p, v).reshape(T, H * D)


def gelu_tanh(x):
    """GELU's tanh form, computed exactly (llama.cpp's CPU GELU is an f16 table)."""
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * x * (1 + 0.044715 * x * x)))
