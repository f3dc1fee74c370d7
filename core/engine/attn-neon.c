/*
 * attn-neon.c - attention's inner steps on AArch64 NEON (attn.c picks them
 * when llm_cpu_features() has LLM_CPU_NEON and head_dim is a multiple of
 * 8): eight scores at a time, the exp polynomial, softmax and P V, each the
 * bits of attn.c's portable definitions.
 *
 * Why the same bits: the definitions are written for eight lanes (score
 * lanes by d % 8, the softmax sum in lanes j % 8, both reduced in one fixed
 * tree); here eight lanes are two 4-lane registers, lanes 0-3 and 4-7, and
 * the trees are the same additions (vpaddq pairs neighbours, which is the
 * definition's first level). Min and max use the maxNum forms where the
 * definition uses fminf/fmaxf; rounding is to nearest even (FRINTN).
 */
#include "core/engine/attn.h"
#include "core/llm.h"

#if defined(__aarch64__) && defined(__GNUC__)
#include <arm_neon.h>
#include <math.h>
#include <string.h>

/* attn.c's exp_poly on four lanes */
static inline float32x4_t exp_neon(float32x4_t x)
{
    x = vminnmq_f32(x, vdupq_n_f32(88.0f));
    x = vmaxnmq_f32(x, vdupq_n_f32(-87.3f));
    float32x4_t k = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t r = vfmsq_f32(x, k, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, k, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(k), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

/* ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) */
static inline float hsum8(float32x4_t lo, float32x4_t hi)
{
    float32x4_t a = vaddq_f32(lo, hi);
    float32x2_t b = vadd_f32(vget_low_f32(a), vget_high_f32(a));
    return vget_lane_f32(b, 0) + vget_lane_f32(b, 1);
}

void llm_attn_softmax_neon(float *s, int64_t n, float *sum_out)
{
    float32x4_t m0 = vdupq_n_f32(-INFINITY), m1 = m0;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        m0 = vmaxq_f32(m0, vld1q_f32(s + j));
        m1 = vmaxq_f32(m1, vld1q_f32(s + j + 4));
    }
    float mx = vmaxvq_f32(vmaxq_f32(m0, m1));
    for (; j < n; j++)
        mx = s[j] > mx ? s[j] : mx;
    float32x4_t m = vdupq_n_f32(mx), v0 = vdupq_n_f32(0), v1 = v0;
    for (j = 0; j + 8 <= n; j += 8) {
        float32x4_t e0 = exp_neon(vsubq_f32(vld1q_f32(s + j), m));
        float32x4_t e1 = exp_neon(vsubq_f32(vld1q_f32(s + j + 4), m));
        vst1q_f32(s + j, e0);
        vst1q_f32(s + j + 4, e1);
        v0 = vaddq_f32(v0, e0);
        v1 = vaddq_f32(v1, e1);
    }
    float sum = hsum8(v0, v1);
    if (j < n) { /* the tail through the same polynomial, one by one */
        float t[8];
        int64_t k = n - j;
        for (int64_t i = 0; i < 8; i++)
            t[i] = i < k ? s[j + i] - mx : -INFINITY;
        vst1q_f32(t, exp_neon(vld1q_f32(t)));
        vst1q_f32(t + 4, exp_neon(vld1q_f32(t + 4)));
        for (int64_t i = 0; i < k; i++) {
            s[j + i] = t[i];
            sum += t[i];
        }
    }
    *sum_out = sum;
}

void llm_attn_softmax_norm_neon(float *s, int64_t n)
{
    float sum;
    llm_attn_softmax_neon(s, n, &sum);
    float inv = 1.0f / sum;
    for (int64_t j = 0; j < n; j++)
        s[j] *= inv;
}

/* the definition's score of 8 rows: lanes d % 8 (a[i][0]: 0-3, a[i][1]:
 * 4-7), each row reduced ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) */
static inline void dot8_neon(const float *q, const float *k, int64_t hd, float scale, float *out)
{
    float32x4_t a[8][2];
    for (int i = 0; i < 8; i++)
        a[i][0] = a[i][1] = vdupq_n_f32(0);
    for (int64_t d = 0; d < hd; d += 8) {
        float32x4_t q0 = vld1q_f32(q + d), q1 = vld1q_f32(q + d + 4);
        for (int i = 0; i < 8; i++) {
            a[i][0] = vfmaq_f32(a[i][0], q0, vld1q_f32(k + i * hd + d));
            a[i][1] = vfmaq_f32(a[i][1], q1, vld1q_f32(k + i * hd + d + 4));
        }
    }
    float32x4_t p[8], s[2];
    for (int i = 0; i < 8; i++) /* (a0 + a1, a2 + a3, a4 + a5, a6 + a7) */
        p[i] = vpaddq_f32(a[i][0], a[i][1]);
    for (int h = 0; h < 2; h++) {
        /* rows 4h, 4h+1: ((a0 + a1) + (a2 + a3), (a4 + a5) + (a6 + a7)) each */
        float32x4_t x = vpaddq_f32(p[4 * h], p[4 * h + 1]), y = vpaddq_f32(p[4 * h + 2], p[4 * h + 3]);
        s[h] = vpaddq_f32(x, y);
    }
    float32x4_t sv = vdupq_n_f32(scale);
    vst1q_f32(out, vmulq_f32(s[0], sv));
    vst1q_f32(out + 4, vmulq_f32(s[1], sv));
}

void llm_attn_scores_neon(const float *q, const float *k, int64_t hd, int64_t nr, float scale, float *s)
{
    int64_t r = 0;
    for (; r + 8 <= nr; r += 8)
        dot8_neon(q, k + r * hd, hd, scale, s + r);
    if (r < nr) { /* k is readable to a multiple of 8 rows (attn.c pads its chunk) */
        float t[8];
        dot8_neon(q, k + r * hd, hd, scale, t);
        memcpy(s + r, t, (size_t)(nr - r) * sizeof(float));
    }
}

/* out[0..hd) += sum over r < nr of p[r] * v[r * hd ..]: one fused
 * multiply-add chain per element, r in order; 32 elements at a time */
void llm_attn_accumulate_neon(float *out, const float *p, const float *v, int64_t nr, int64_t hd)
{
    int64_t d = 0;
    for (; d + 32 <= hd; d += 32) {
        float32x4_t o[8];
        for (int i = 0; i < 8; i++)
            o[i] = vld1q_f32(out + d + 4 * i);
        const float *vr = v + d;
        for (int64_t r = 0; r < nr; r++, vr += hd) {
            float32x4_t pr = vdupq_n_f32(p[r]);
            for (int i = 0; i < 8; i++)
                o[i] = vfmaq_f32(o[i], pr, vld1q_f32(vr + 4 * i));
        }
        for (int i = 0; i < 8; i++)
            vst1q_f32(out + d + 4 * i, o[i]);
    }
    for (; d < hd; d += 8) {
        float32x4_t o0 = vld1q_f32(out + d), o1 = vld1q_f32(out + d + 4);
        const float *vr = v + d;
        for (int64_t r = 0; r < nr; r++, vr += hd) {
            float32x4_t pr = vdupq_n_f32(p[r]);
            o0 = vfmaq_f32(o0, pr, vld1q_f32(vr));
            o1 = vfmaq_f32(o1, pr, vld1q_f32(vr + 4));
        }
        vst1q_f32(out + d, o0);
        vst1q_f32(out + d + 4, o1);
    }
}

#endif
