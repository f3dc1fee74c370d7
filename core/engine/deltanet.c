/*
 * deltanet.c - the Gated DeltaNet layer's own steps (qwen35, issue 23):
 * the causal depthwise conv with SiLU, the L2 norms and gates of each
 * token, and the delta-rule recurrence of each value head with its gated
 * RMSNorm. Written from the architecture's definition (Qwen3.5; the facts
 * checked against llama.cpp's src/models/qwen35.cpp and its CPU op
 * gated_delta_net):
 *
 *   x = conv(window ++ qkv) then SiLU;  q, k = L2norm per head;
 *   beta = sigmoid(b);  g = softplus(alpha + dt_bias) * A  (A = -exp(A_log),
 *   stored so);  per value head h (key head h mod G):
 *     S <- exp(g) S;  delta = beta (v - S^T k);  S <- S + k (x) delta;
 *     o = S^T q / sqrt(S_k);  out = RMSNorm(o) * ssm_norm * silu(z).
 *
 * Why sequential: the state after position p must be the same bits however
 * the prompt was cut into passes (batch invariance, as the rest of the
 * engine). A chunked (parallel-scan) form would give bits that depend on
 * where chunks start; so each head runs its tokens one at a time in one
 * fixed order of float operations, the same in a one-token pass, a prefill
 * pass or one split anywhere, and the pass is parallel over heads instead.
 * On a CPU this costs little next to the projections (about 4 S^2 flops a
 * head a token). The conv depends only on raw inputs, so it is computed per
 * token (in parallel over tokens) from the window and the pass's rows.
 *
 * The dot products sum in 8 lanes in a fixed order (vectorisable, the same
 * on every path); RMSNorm and the L2 norm sum squares in double, as ggml.
 */
#include "core/engine/deltanet.h"

#include <math.h>
#include <string.h>

static float dot(const float *a, const float *b, int64_t n)
{
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += a[i + k] * b[i + k];
    for (int k = 0; i < n; i++, k++)
        acc[k] += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static float silu(float x) { return x / (1.0f + expf(-x)); }
static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static float softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

/* x / max(|x|, eps), in place */
static void l2norm(float *x, int64_t n, float eps)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
    for (int64_t i = 0; i < n; i++)
        x[i] *= scale;
}

void llm_dn_conv(const struct llm_model *m, const struct llm_layer *L, const float *window, const float *raw,
                 size_t ld, int64_t t, float *out)
{
    int64_t K = m->ssm_conv, C = m->conv_dim, S = m->ssm_state, G = m->ssm_groups, V = m->ssm_heads;
    const float *in[64]; /* the K input rows, oldest first (model.c: K <= 64) */
    for (int64_t j = 0; j < K; j++) {
        int64_t pos = t - (K - 1) + j;
        in[j] = pos >= 0 ? raw + (size_t)pos * ld : window + (K - 1 + pos) * C;
    }
    for (int64_t c = 0; c < C; c++) {
        const float *w = L->conv1d + c * K;
        float sum = 0.0f;
        for (int64_t j = 0; j < K; j++)
            sum += in[j][c] * w[j];
        out[c] = silu(sum);
    }
    for (int64_t h = 0; h < 2 * G; h++) /* the q heads, then the k heads */
        l2norm(out + h * S, S, m->rms_eps);
    const float *row = raw + (size_t)t * ld, *alpha = row + C + V * S, *beta = alpha + V;
    for (int64_t h = 0; h < V; h++) {
        out[C + h] = softplus(alpha[h] + L->dt_bias[h]) * L->ssm_a[h];
        out[C + V + h] = sigmoid(beta[h]);
    }
}

void llm_dn_window_update(const struct llm_model *m, float *window, const float *raw, size_t ld, int64_t T)
{
    int64_t K = m->ssm_conv, C = m->conv_dim;
    /* ascending rows: a row read from the old window lies T rows after the one written */
    for (int64_t r = 0; r < K - 1; r++) {
        int64_t pos = T - (K - 1) + r;
        const float *src = pos >= 0 ? raw + (size_t)pos * ld : window + (r + T) * C;
        memmove(window + r * C, src, (size_t)C * sizeof(float));
    }
}

void llm_dn_head(const struct llm_model *m, const struct llm_layer *L, int64_t h, float *st, const float *rq,
                 const float *raw, size_t ld, int64_t T, float *out)
{
    int64_t S = m->ssm_state, G = m->ssm_groups, V = m->ssm_heads, C = m->conv_dim, W = llm_dn_rq_width(m);
    int64_t kh = h % G;
    float scale = 1.0f / sqrtf((float)S);
    for (int64_t t = 0; t < T; t++) {
        const float *r = rq + t * W;
        const float *q = r + kh * S, *k = r + (G + kh) * S, *v = r + 2 * G * S + h * S;
        float decay = expf(r[C + h]), beta = r[C + V + h];
        float *o = out + t * S;
        for (int64_t j = 0; j < S; j++) {
            float *row = st + j * S;
            for (int64_t i = 0; i < S; i++)
                row[i] *= decay;
            float d = (v[j] - dot(row, k, S)) * beta;
            for (int64_t i = 0; i < S; i++)
                row[i] += k[i] * d;
            o[j] = dot(row, q, S) * scale;
        }
        /* the gated RMSNorm: RMSNorm(o) * ssm_norm * silu(z) */
        const float *z = raw + (size_t)t * ld + C + h * S;
        double sum = 0;
        for (int64_t j = 0; j < S; j++)
            sum += (double)(o[j] * o[j]);
        float rs = 1.0f / sqrtf((float)(sum / (double)S) + m->rms_eps);
        for (int64_t j = 0; j < S; j++)
            o[j] = ((o[j] * rs) * L->ssm_norm[j]) * silu(z[j]);
    }
}
