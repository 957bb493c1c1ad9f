/* ascent's native CPU kernels: what one source file exports to another. */
#ifndef ASCENT_KERNELS_H
#define ASCENT_KERNELS_H
#include <stdint.h>
#include <string.h>

#define W 16 /* floats per vector (AVX-512; the compiler splits it on narrower machines) */
typedef float vf __attribute__((vector_size(W * sizeof(float))));
typedef int32_t vi __attribute__((vector_size(W * sizeof(int32_t))));

typedef float vf8 __attribute__((vector_size(8 * sizeof(float))));
typedef float vf4 __attribute__((vector_size(4 * sizeof(float))));

static inline vf vload(const float* p) { vf x; memcpy(&x, p, sizeof x); return x; }
static inline void vstore(float* p, vf x) { memcpy(p, &x, sizeof x); }

/* the sum of a vector's lanes as a tree (halves, quarters, ...): four dependent adds instead of sixteen, in
   registers (shuffles; extracting halves through memcpy made GCC keep the callers' accumulators on the stack) */
_Static_assert(W == 16, "vhsum's shuffles are written for 16 lanes");
static inline float vhsum(vf x) {
#if defined(__has_builtin) && __has_builtin(__builtin_shufflevector)
    const vf8 s8 = __builtin_shufflevector(x, x, 0, 1, 2, 3, 4, 5, 6, 7) +
                   __builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15);
    const vf4 s4 = __builtin_shufflevector(s8, s8, 0, 1, 2, 3) + __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
#else
    float s = 0.f;
    for (int l = 0; l < W; l++) s += x[l];
    return s;
#endif
}

/* mask ? a : b lane by lane (mask lanes all ones or zero, as vector comparisons give) */
static inline vf vselect(vi mask, vf a, vf b) {
    vi ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    const vi r = (ia & mask) | (ib & ~mask);
    vf out;
    memcpy(&out, &r, sizeof out);
    return out;
}

/* e^x lane by lane, within 2 ulp of expf for -87.3 <= x <= 88.3; 0 below (a masked score), and e^88.3
   (~2e38, finite) above: e^x = 2^n e^r with n = round(x / ln 2) and r = x - n ln 2 (ln 2 in two parts),
   e^r by Cephes' degree-6 polynomial for expf, 2^n assembled in the exponent bits. */
static inline vf vexp(vf x) {
    const vf top = (vf){0} + 88.3762626647949f, bottom = (vf){0} - 87.3365447505531f;
    const vi dead = x < bottom;
    x = vselect(x > top, top, vselect(dead, bottom, x));
    const vf fx = x * 1.44269504088896341f + 0.5f;
    vf t = __builtin_convertvector(__builtin_convertvector(fx, vi), vf); /* truncation; floor next */
    t = vselect(t > fx, t - 1.f, t);
    const vf r = x - t * 0.693359375f - t * -2.12194440e-4f;
    vf p = (vf){0} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.f;
    const vi bits = (__builtin_convertvector(t, vi) + 127) << 23;
    vf scale;
    memcpy(&scale, &bits, sizeof scale);
    return vselect(dead, (vf){0}, p * scale);
}

/* decode_attention.c: one decode step's attention over the KV cache (layout described there). */
int ascent_decode_attention(const float* restrict q, const float* restrict k, const float* restrict v,
                            const uint8_t* restrict valid, float* restrict out, float* restrict scratch,
                            int64_t B, int64_t g, int64_t nkv, int64_t d, int64_t end, int64_t q_sb,
                            int64_t k_sb, int64_t k_sh, int64_t k_sj, int64_t v_sb, int64_t v_sh, int64_t v_sj,
                            int64_t sm, float scale);
/* the same with row b of q reading cache row crow[b] (crow = NULL: row b), for several query rows per cache row */
int ascent_decode_attention_rows(const float* restrict q, const float* restrict k, const float* restrict v,
                            const uint8_t* restrict valid, float* restrict out, float* restrict scratch,
                            int64_t B, int64_t g, int64_t nkv, int64_t d, int64_t end, int64_t q_sb,
                            int64_t k_sb, int64_t k_sh, int64_t k_sj, int64_t v_sb, int64_t v_sh, int64_t v_sj,
                            int64_t sm, float scale, const int64_t* crow);

/* rms_norm.c: y = w * (x / sqrt(mean(x^2) + eps)) per row of H, r[i] = 1 / sqrt(...) */
void ascent_rms_norm_forward(const float* restrict x, const float* restrict w, float* restrict y, float* restrict r, int64_t rows, int64_t H, float eps);

#endif
