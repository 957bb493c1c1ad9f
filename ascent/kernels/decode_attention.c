/* ascent: one decode step of attention over the engine's KV cache, fp32, one thread.

   Built at first use by ascent/kernels/__init__.py (cc -O3 -march=native) and called through
   ctypes, which releases the GIL, so the decode shards of `rollout.shards` run it in parallel.

   Why: on a CPU a decode step's attention is two batched matrix-vector products per layer (q . K^T, then
   p . V) over B x nkv small matrices plus a mask, a scale and a softmax as separate tensor ops, each pass
   re-reading its inputs and each small matrix paying a per-call overhead. This kernel does it in one pass
   per (row, kv head): the first `end` cached keys and values of the pair are read once, as two contiguous
   blocks, and the query heads of a GQA group share that read.

   Layout (the engine's, see ascent/rollout/decoder.py `Decoder.new_cache`), for rows b < B, kv heads h < nkv:
     keys:          element (b, h, j, c) at b*k_sb + h*k_sh + j*k_sj + c
     values:        element (b, h, j, c) at b*v_sb + h*v_sh + j*v_sj + c
     q:             element (b, h*g + r, c) at b*q_sb + (h*g + r)*d + c
     out (written): element (b, h*g + r, c) at ((b*nkv + h)*g + r)*d + c
     valid:         key j of row b is attended when valid[b*sm + j] != 0 (every row has at least one)
     scratch:       at least g*end floats
   Masked scores are a large negative finite number (MASKED), whose exp (`vexp`) is exactly 0.
   Returns 0, or 1 on bad sizes. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MASKED (-3.0e38f)
#include "kernels.h"


/* p[j] = scale * q . k_j for j < end; four keys at a time so four dot products are in flight */
static void scores(const float* restrict q, const float* restrict K, int64_t sj, int64_t d, int64_t end, float scale, float* restrict p,
                   const char* pf, int64_t pf_bytes) {
    const int64_t dv = d - d % W;
    int64_t j = 0;
    for (; j + 4 <= end; j += 4) {
        const float *k0 = K + j * sj, *k1 = k0 + sj, *k2 = k1 + sj, *k3 = k2 + sj;
        if (pf) /* the next (row, head)'s keys at the same offsets, a few lines per group of keys */
            for (int64_t o = j * sj * (int64_t)sizeof(float); o < (j + 4) * sj * (int64_t)sizeof(float) && o < pf_bytes; o += 64)
                __builtin_prefetch(pf + o, 0, 1);
        vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (int64_t c = 0; c < dv; c += W) {
            const vf x = vload(q + c);
            a0 += x * vload(k0 + c);
            a1 += x * vload(k1 + c);
            a2 += x * vload(k2 + c);
            a3 += x * vload(k3 + c);
        }
        float s0 = vhsum(a0), s1 = vhsum(a1), s2 = vhsum(a2), s3 = vhsum(a3);
        for (int64_t c = dv; c < d; c++) {
            s0 += q[c] * k0[c];
            s1 += q[c] * k1[c];
            s2 += q[c] * k2[c];
            s3 += q[c] * k3[c];
        }
        p[j] = s0 * scale;
        p[j + 1] = s1 * scale;
        p[j + 2] = s2 * scale;
        p[j + 3] = s3 * scale;
    }
    if (pf) /* the rest of the next keys */
        for (int64_t o = j * sj * (int64_t)sizeof(float); o < pf_bytes; o += 64) __builtin_prefetch(pf + o, 0, 1);
    for (; j < end; j++) {
        const float* kj = K + j * sj;
        vf a = {0};
        for (int64_t c = 0; c < dv; c += W) a += vload(q + c) * vload(kj + c);
        float s = vhsum(a);
        for (int64_t c = dv; c < d; c++) s += q[c] * kj[c];
        p[j] = s * scale;
    }
}

/* o[:n W] = sum_j p[j] v_j[:n W] with the n output vectors held in registers across all j (n constant at
   each call site, so the loop over them unrolls) */
static inline __attribute__((always_inline)) void values_block(const float* restrict V, int64_t sj, int64_t end, const float* restrict p, float* restrict o, const int n) {
    vf acc[8];
    for (int v = 0; v < n; v++) acc[v] = (vf){0};
    for (int64_t j = 0; j < end; j++) {
        const float w = p[j];
        const float* restrict vj = V + j * sj;
        for (int v = 0; v < n; v++) acc[v] += w * vload(vj + v * W);
    }
    for (int v = 0; v < n; v++) memcpy(o + v * W, &acc[v], sizeof(vf));
}

/* o[c] = sum_j p[j] v_j[c] for c < d: blocks of up to 8 vectors, then the columns past the last vector */
static void weighted_values(const float* restrict V, int64_t sj, int64_t d, int64_t end, const float* restrict p, float* restrict o) {
    const int64_t dv = d - d % W;
    for (int64_t c0 = 0; c0 < dv; c0 += 8 * W) {
        const int64_t left = (dv - c0) / W;
        switch (left >= 8 ? 8 : left) {
            case 8: values_block(V + c0, sj, end, p, o + c0, 8); break;
            case 7: values_block(V + c0, sj, end, p, o + c0, 7); break;
            case 6: values_block(V + c0, sj, end, p, o + c0, 6); break;
            case 5: values_block(V + c0, sj, end, p, o + c0, 5); break;
            case 4: values_block(V + c0, sj, end, p, o + c0, 4); break;
            case 3: values_block(V + c0, sj, end, p, o + c0, 3); break;
            case 2: values_block(V + c0, sj, end, p, o + c0, 2); break;
            default: values_block(V + c0, sj, end, p, o + c0, 1); break;
        }
    }
    for (int64_t c = dv; c < d; c++) {
        float a = 0.f;
        for (int64_t j = 0; j < end; j++) a += p[j] * V[j * sj + c];
        o[c] = a;
    }
}

int ascent_decode_attention(const float* restrict q, const float* restrict k, const float* restrict v,
                            const uint8_t* restrict valid, float* restrict out, float* restrict scratch,
                            int64_t B, int64_t g, int64_t nkv, int64_t d, int64_t end, int64_t q_sb,
                            int64_t k_sb, int64_t k_sh, int64_t k_sj, int64_t v_sb, int64_t v_sh, int64_t v_sj,
                            int64_t sm, float scale) {
    return ascent_decode_attention_rows(q, k, v, valid, out, scratch, B, g, nkv, d, end, q_sb, k_sb, k_sh, k_sj, v_sb, v_sh, v_sj, sm,
                                        scale, NULL);
}

/* Query row b attends to cache row crow[b] (crow = NULL: row b): the verify forward of speculative decoding
   feeds a sequence's last token and its drafted tokens as several query rows over the one cache row, each
   with its own mask row (the committed cache and the chain up to itself). */
int ascent_decode_attention_rows(const float* restrict q, const float* restrict k, const float* restrict v,
                                 const uint8_t* restrict valid, float* restrict out, float* restrict scratch,
                                 int64_t B, int64_t g, int64_t nkv, int64_t d, int64_t end, int64_t q_sb,
                                 int64_t k_sb, int64_t k_sh, int64_t k_sj, int64_t v_sb, int64_t v_sh, int64_t v_sj,
                                 int64_t sm, float scale, const int64_t* crow) {
    if (B < 0 || g < 1 || nkv < 1 || d < 1 || end < 1) return 1;
    for (int64_t b = 0; b < B; b++) {
        const uint8_t* restrict m = valid + b * sm;
        for (int64_t h = 0; h < nkv; h++) {
            const int64_t cb = crow ? crow[b] : b;
            const float* restrict K = k + cb * k_sb + h * k_sh;
            const float* restrict V = v + cb * v_sb + h * v_sh;
            const char *kn = NULL, *vn = NULL; /* the next (row, head)'s keys and values, prefetched while these are read */
            int64_t bytes_k = 0, bytes_v = 0;
            if (b + (h + 1) / nkv < B) {
                const int64_t nb = crow ? crow[b + (h + 1) / nkv] : b + (h + 1) / nkv, nh = (h + 1) % nkv;
                kn = (const char*)(k + nb * k_sb + nh * k_sh);
                vn = (const char*)(v + nb * v_sb + nh * v_sh);
                bytes_k = ((end - 1) * k_sj + d) * (int64_t)sizeof(float);
                bytes_v = ((end - 1) * v_sj + d) * (int64_t)sizeof(float);
            }
            const float* restrict Q = q + b * q_sb + h * g * d;
            float* restrict O = out + (b * nkv + h) * g * d;
            for (int64_t r = 0; r < g; r++) {
                float* restrict p = scratch + r * end;
                scores(Q + r * d, K, k_sj, d, end, scale, p, r == 0 ? kn : NULL, bytes_k);
                float top = MASKED; /* masked softmax over j */
                for (int64_t j = 0; j < end; j++) {
                    p[j] = m[j] ? p[j] : MASKED;
                    top = p[j] > top ? p[j] : top;
                }
                vf zv = {0};
                int64_t j = 0;
                for (; j + W <= end; j += W) { /* masked: e^(-3e38 - top) = 0 */
                    const vf e = vexp(vload(p + j) - top);
                    vstore(p + j, e);
                    zv += e;
                }
                float z = vhsum(zv);
                if (j < end) { /* the last partial vector through scratch lanes past `end` (the scratch has W spare floats) */
                    float tail[W];
                    for (int l = 0; l < W; l++) tail[l] = j + l < end ? p[j + l] - top : -1e30f;
                    const vf e = vexp(vload(tail));
                    for (int l = 0; l < W && j + l < end; l++) {
                        p[j + l] = e[l];
                        z += e[l];
                    }
                }
                const float inv = 1.f / z;
                for (int64_t j = 0; j < end; j++) p[j] *= inv;
            }
            if (vn)
                for (int64_t o = 0; o < bytes_v; o += 64) __builtin_prefetch(vn + o, 0, 1);
            for (int64_t r = 0; r < g; r++) weighted_values(V, v_sj, d, end, scratch + r * end, O + r * d); /* the group's re-reads hit L1 */
        }
    }
    return 0;
}
