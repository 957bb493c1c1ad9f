/* ascent: the log-probability of chosen tokens and its gradient, fp32, over a block of rows, one thread.

   Called through ctypes by ascent/policy/logprob.py (`TokenLogprob`), which splits the rows across the
   torch threads. A row is one position's logits over the vocabulary (49,152 floats for SmolLM2: 192 KiB,
   which stays in a core's L2 between the passes over it).

   forward:  with z_j = x_j / T:  lse = max z + log sum_j exp(z_j - max z);  out = z_target - lse
             (out = 0 and lse unused where target < 0); lse is kept for the backward, one float per row.
   backward: with w = g / T (0 where target < 0):  dx_j = -w exp(z_j - lse) + (j == target ? w : 0)
   One pass for the max, one for the sum of exps, one for the gradient: torch's logsumexp + log_softmax
   backward make twice as many, each through a full-size temporary. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

static inline float vmax_lanes(vf x) {
    float m = x[0];
    for (int l = 1; l < W; l++) m = x[l] > m ? x[l] : m;
    return m;
}

static inline float vsum_lanes(vf x) {
    float s = 0.f;
    for (int l = 0; l < W; l++) s += x[l];
    return s;
}

void ascent_logprob_forward(const float* restrict x, const int64_t* restrict targets, int64_t rows, int64_t V,
                            float inv_t, float* restrict out, float* restrict lse) {
    const int64_t vv = V - V % W;
    for (int64_t i = 0; i < rows; i++) {
        const float* xi = x + i * V;
        if (targets[i] < 0) {
            out[i] = 0.f;
            lse[i] = 0.f;
            continue;
        }
        float m = -INFINITY;
        if (vv) {
            vf mv = vload(xi);
            for (int64_t c = W; c < vv; c += W) {
                const vf v = vload(xi + c);
                mv = vselect(v > mv, v, mv);
            }
            m = vmax_lanes(mv);
        }
        for (int64_t c = vv; c < V; c++) m = xi[c] > m ? xi[c] : m;
        const float ms = m * inv_t;
        vf acc = {0};
        for (int64_t c = 0; c < vv; c += W) acc += vexp(vload(xi + c) * inv_t - ms);
        float s = vsum_lanes(acc);
        for (int64_t c = vv; c < V; c++) s += expf(xi[c] * inv_t - ms);
        const float l = ms + logf(s);
        lse[i] = l;
        out[i] = xi[targets[i]] * inv_t - l;
    }
}

void ascent_logprob_backward(const float* restrict x, const int64_t* restrict targets, const float* restrict lse,
                             const float* restrict w, int64_t rows, int64_t V, float inv_t, float* restrict dx) {
    const int64_t vv = V - V % W;
    for (int64_t i = 0; i < rows; i++) {
        const float* xi = x + i * V;
        float* di = dx + i * V;
        const float wi = w[i];
        if (targets[i] < 0 || wi == 0.f) {
            memset(di, 0, (size_t)V * sizeof(float));
            continue;
        }
        const float li = lse[i];
        for (int64_t c = 0; c < vv; c += W) vstore(di + c, -wi * vexp(vload(xi + c) * inv_t - li));
        for (int64_t c = vv; c < V; c++) di[c] = -wi * expf(xi[c] * inv_t - li);
        di[targets[i]] += wi;
    }
}
