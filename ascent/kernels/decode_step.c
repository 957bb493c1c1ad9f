/* ascent: one whole decode step of a Llama/Qwen2 model, fp32, one thread, in one call.

   Built with decode_attention.c by ascent/kernels/__init__.py and called through ctypes (the GIL
   is released for the call), by ascent/rollout/decoder.py `Decoder.forward` for a one-token step running on
   one intra-op thread (each shard of a sharded CPU rollout).

   Why: a decode step of a small model on one core is ~70 tensor ops (norms, projections, rope, cache
   writes, attention, activations, residual adds) of which only the ~5 matrix products per layer do real
   work; the rest cost a dispatch each, allocate their outputs, and hold the GIL the decode shards share.
   Here the matrix products run on weights packed once per rollout into panels (`ascent_pack`) through a
   register-tiled kernel (`linear`), the residual adds are folded into them, and norms, rope, cache
   writes, attention and SiLU run as plain loops over the step's rows. Measured on one core of the
   2-vCPU EPYC (64 rows, the 3.17M/25M/SmolLM2 shapes): 84-109 GFLOP/s with the weights in cache and
   66-95 from memory, where MKL's sgemm (what F.linear calls) reaches 65-80 and 38-65: MKL packs its B
   matrix again on every call, a third of the time of a product this small.

   The forward is the one of `Decoder.forward` (HF's Llama/Qwen2): per layer
     h = rms(x) * ln_in;  [q|k|v] = h Wqkv^T (+ bias);  q, k = rope(q, k);  cache[col] = k, v
     x += attention(q, cache) Wo^T;  h = rms(x) * ln_post;  [g|u] = h Wgu^T;  x += (silu(g) * u) Wd^T
   then logits = (rms(x) * norm) Wlm^T. rms(x) = x / sqrt(mean(x^2) + eps).

   Row b feeds token tokens[b] at rope position positions[b], writes its keys and values at cache column
   cols[b] (each row its own column, as under continuous batching; cols = NULL: every row at column end - 1,
   a lockstep step) and attends to the columns
   j < end with valid[b*sm + j] != 0. Cache layout: element (layer l, row b, kv head h, column j, c) at
   l*s[0] + b*s[1] + h*s[2] + j*s[3] + c, keys and values alike (see `Decoder.new_cache`).
   Returns 0; 1 on bad sizes, 2 when out of memory, 3 for a position outside the rope table, 4 for a column
   outside the cache, 5 for a token outside the vocabulary. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

typedef struct {
    int64_t layers, hidden, inter, heads, kv_heads, head_dim, vocab, rope_len;
    float eps;
    const float *embed, *norm, *lm_head; /* (V, H), (H,), lm_head panel-packed from (V, H) */
    const float *cos, *sin;              /* (rope_len, d) each, HF's duplicated-halves convention */
    const float* const* ln_in;           /* per layer: (H,) */
    const float* const* qkv;             /* panel-packed from ((nq + 2 nkv) d, H) */
    const float* const* qkv_bias;        /* ((nq + 2 nkv) d,) each, or NULL for none */
    const float* const* o;               /* panel-packed from (H, nq d) */
    const float* const* ln_post;         /* (H,) */
    const float* const* gate_up;         /* panel-packed from (2 I, H) */
    const float* const* down;            /* panel-packed from (H, I) */
} ascent_model;


/* Panel-packed weights. A linear layer's weight w (N, K) (y = x w^T) is stored as ceil(N / NP) panels of
   NP output columns, each k-major: packed[(p K + k) NP + j] = w[(p NP + j) K + k], zero past N. A decode
   step then reads each weight once, sequentially, straight into the multiply-adds: a BLAS call packs its
   B matrix again on every call, which for a decode step's few rows costs a third of the product. */
#define NP 32 /* two vectors */
#define MR 8  /* rows of x per register tile: 8 x 2 accumulators */

int64_t ascent_packed_floats(int64_t N, int64_t K) { return (N + NP - 1) / NP * K * NP; }

void ascent_pack(const float* restrict w, int64_t N, int64_t K, float* restrict out) {
    for (int64_t p = 0; p < (N + NP - 1) / NP; p++) /* reads each weight row once; writes stay in one panel */
        for (int64_t j = 0; j < NP; j++) {
            const int64_t n = p * NP + j;
            float* o = out + p * K * NP + j;
            if (n < N)
                for (int64_t k = 0; k < K; k++) o[k * NP] = w[n * K + k];
            else
                for (int64_t k = 0; k < K; k++) o[k * NP] = 0.f;
        }
}

/* y[i, :nn] (+)= x[i, :] . panel, for `rows` (<= MR) rows of x */
static inline void tile(const float* restrict x, int64_t K, const float* restrict w, float* restrict y, int64_t ldy, int64_t nn,
                        const float* restrict bias, int accumulate, int rows) {
    vf c[MR][2];
    for (int i = 0; i < MR; i++) c[i][0] = c[i][1] = (vf){0};
    if (rows == MR) { /* the same loop as below with a constant bound, which the compiler unrolls into registers */
        for (int64_t k = 0; k < K; k++) {
            const vf w0 = vload(w + k * NP), w1 = vload(w + k * NP + W);
            for (int i = 0; i < MR; i++) {
                const float xv = x[i * K + k];
                c[i][0] += xv * w0;
                c[i][1] += xv * w1;
            }
        }
    } else {
        for (int64_t k = 0; k < K; k++) {
            const vf w0 = vload(w + k * NP), w1 = vload(w + k * NP + W);
            for (int i = 0; i < rows; i++) {
                const float xv = x[i * K + k];
                c[i][0] += xv * w0;
                c[i][1] += xv * w1;
            }
        }
    }
    for (int i = 0; i < rows; i++) {
        float* yr = y + i * ldy;
        float out[NP];
        vstore(out, c[i][0]);
        vstore(out + W, c[i][1]);
        for (int64_t j = 0; j < nn; j++) yr[j] = (accumulate ? yr[j] : (bias ? bias[j] : 0.f)) + out[j];
    }
}

/* y (M, N) = x (M, K) . w^T (+ bias), or y += x . w^T when accumulate; w panel-packed (`ascent_pack`) */
static void linear(const float* x, int64_t M, int64_t K, const float* wp, int64_t N, const float* bias, int accumulate, float* y) {
    for (int64_t p = 0; p < (N + NP - 1) / NP; p++) {
        const int64_t n0 = p * NP, nn = N - n0 < NP ? N - n0 : NP;
        for (int64_t m0 = 0; m0 < M; m0 += MR)
            tile(x + m0 * K, K, wp + p * K * NP, y + m0 * N + n0, N, nn, bias ? bias + n0 : NULL, accumulate, M - m0 < MR ? (int)(M - m0) : MR);
    }
}

/* `linear` for callers outside this file (tests, benchmarks) */
void ascent_linear(const float* x, int64_t M, int64_t K, const float* wp, int64_t N, const float* bias, int accumulate, float* y) {
    linear(x, M, K, wp, N, bias, accumulate, y);
}

/* HF rope on one head in place: x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1] */
static void rope(float* restrict x, const float* restrict cs, const float* restrict sn, int64_t d, float* restrict tmp) {
    const int64_t half = d / 2;
    memcpy(tmp, x, (size_t)d * sizeof(float));
    for (int64_t c = 0; c < half; c++) x[c] = tmp[c] * cs[c] + (-tmp[c + half]) * sn[c];
    for (int64_t c = half; c < d; c++) x[c] = tmp[c] * cs[c] + tmp[c - half] * sn[c];
}

int ascent_decode_step_rows(const ascent_model* m, int64_t B, const int64_t* restrict tokens, const int64_t* restrict positions,
                            const int64_t* restrict cols, float* keys, float* values, const int64_t* ks, const int64_t* vs,
                            int64_t cache_len, const uint8_t* valid, int64_t sm, int64_t end, float* restrict logits,
                            const int64_t* restrict crow, int64_t cache_rows);

int ascent_decode_step(const ascent_model* m, int64_t B, const int64_t* restrict tokens, const int64_t* restrict positions,
                       const int64_t* restrict cols, float* keys, float* values, const int64_t* ks, const int64_t* vs,
                       int64_t cache_len, const uint8_t* valid, int64_t sm, int64_t end, float* restrict logits) {
    return ascent_decode_step_rows(m, B, tokens, positions, cols, keys, values, ks, vs, cache_len, valid, sm, end, logits, NULL, 0);
}

/* `ascent_decode_step` with token row b at cache row crow[b] (crow = NULL: row b; rows < cache_rows, else 4): the
   verify forward of speculative decoding (ascent/rollout/speculative.py) feeds a sequence's last token and its
   drafted tokens d_1..d_k as k + 1 rows over the sequence's one cache row, at columns c..c+k and positions
   p..p+k, each with its own mask row (the committed cache and the chain up to itself). Every layer writes all
   rows' keys and values before any row attends, so a drafted token sees the earlier ones; each row's
   products are those of a one-token step (the register tiles compute rows independently). */
int ascent_decode_step_rows(const ascent_model* m, int64_t B, const int64_t* restrict tokens, const int64_t* restrict positions,
                            const int64_t* restrict cols, float* keys, float* values, const int64_t* ks, const int64_t* vs,
                            int64_t cache_len, const uint8_t* valid, int64_t sm, int64_t end, float* restrict logits,
                            const int64_t* restrict crow, int64_t cache_rows) {
    const int64_t H = m->hidden, I = m->inter, nq = m->heads, nkv = m->kv_heads, d = m->head_dim, V = m->vocab;
    const int64_t dq = (nq + 2 * nkv) * d, g = nkv > 0 ? nq / nkv : 0;
    if (B < 1 || H < 1 || I < 1 || d < 2 || d % 2 || nkv < 1 || nq % nkv || V < 1 || m->layers < 1 || end < 1 || end > cache_len)
        return 1;
    if (H > INT32_MAX || 2 * I > INT32_MAX || dq > INT32_MAX || V > INT32_MAX || B > INT32_MAX) return 1;
    for (int64_t b = 0; b < B; b++) {
        if (positions[b] < 0 || positions[b] >= m->rope_len) return 3;
        if (cols && (cols[b] < 0 || cols[b] >= end)) return 4;
        if (tokens[b] < 0 || tokens[b] >= V) return 5;
        if (crow && (crow[b] < 0 || crow[b] >= cache_rows)) return 4;
    }
    const int64_t floats = B * (2 * H + dq + nq * d + 3 * I + 1) + g * end + d;
    float* work = malloc((size_t)floats * sizeof(float));
    if (!work) return 2;
    float *x = work, *h = x + B * H, *qkv = h + B * H, *att = qkv + B * dq, *gu = att + B * nq * d, *act = gu + B * 2 * I;
    float *scratch = act + B * I, *tmp = scratch + g * end, *rinv = tmp + d;

    for (int64_t b = 0; b < B; b++) memcpy(x + b * H, m->embed + tokens[b] * H, (size_t)H * sizeof(float));
    for (int64_t l = 0; l < m->layers; l++) {
        ascent_rms_norm_forward(x, m->ln_in[l], h, rinv, B, H, m->eps);
        linear(h, B, H, m->qkv[l], dq, m->qkv_bias ? m->qkv_bias[l] : NULL, 0, qkv);
        float* kl = keys + l * ks[0];
        float* vl = values + l * vs[0];
        for (int64_t b = 0; b < B; b++) {
            float* row = qkv + b * dq;
            const int64_t col = cols ? cols[b] : end - 1, cb = crow ? crow[b] : b;
            const float *cs = m->cos + positions[b] * d, *sn = m->sin + positions[b] * d;
            for (int64_t hd = 0; hd < nq + nkv; hd++) rope(row + hd * d, cs, sn, d, tmp);
            for (int64_t hd = 0; hd < nkv; hd++) {
                memcpy(kl + cb * ks[1] + hd * ks[2] + col * ks[3], row + (nq + hd) * d, (size_t)d * sizeof(float));
                memcpy(vl + cb * vs[1] + hd * vs[2] + col * vs[3], row + (nq + nkv + hd) * d, (size_t)d * sizeof(float));
            }
        }
        if (ascent_decode_attention_rows(qkv, kl, vl, valid, att, scratch, B, g, nkv, d, end, dq, ks[1], ks[2], ks[3], vs[1], vs[2], vs[3], sm,
                                         1.f / sqrtf((float)d), crow)) {
            free(work);
            return 1;
        }
        linear(att, B, nq * d, m->o[l], H, NULL, 1, x); /* x += att Wo^T */
        ascent_rms_norm_forward(x, m->ln_post[l], h, rinv, B, H, m->eps);
        linear(h, B, H, m->gate_up[l], 2 * I, NULL, 0, gu);
        const int64_t iv = I - I % W;
        for (int64_t b = 0; b < B; b++) {
            const float* gr = gu + b * 2 * I;
            const float* ur = gr + I;
            float* ar = act + b * I;
            int64_t j = 0;
            for (; j < iv; j += W) {
                const vf gv = vload(gr + j);
                vstore(ar + j, gv / (1.f + vexp(-gv)) * vload(ur + j));
            }
            for (; j < I; j++) ar[j] = gr[j] / (1.f + expf(-gr[j])) * ur[j];
        }
        linear(act, B, I, m->down[l], H, NULL, 1, x); /* x += act Wd^T */
    }
    ascent_rms_norm_forward(x, m->norm, h, rinv, B, H, m->eps);
    linear(h, B, H, m->lm_head, V, NULL, 0, logits);
    free(work);
    return 0;
}
