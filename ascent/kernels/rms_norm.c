/* ascent: RMSNorm forward and backward for the learner, fp32, over a block of rows, one thread.

   Called through ctypes by ascent/policy/fused.py (`RMSNormFunction`), which splits the rows across the
   torch threads. HF's Llama/Qwen2 RMSNorm is six tensor ops forward and about twice that backward, each a
   pass over the (tokens, hidden) activations; here forward is one pass (saving one float per row) and
   backward one pass.

   forward:  r_i = 1 / sqrt(mean_c x_ic^2 + eps);  y_ic = w_c (x_ic r_i)
   backward: with u_ic = g_ic w_c:  dx_ic = r_i (u_ic - x_ic r_i^2 mean_c(u_ic x_ic));  dw_c += sum_i g_ic x_ic r_i
   (dw accumulates into the caller's buffer, one per thread). Rows are contiguous, H floats each. */
#include <math.h>
#include <stdint.h>

#include "kernels.h"

static inline float vsum(vf x) {
    float s = 0.f;
    for (int l = 0; l < W; l++) s += x[l];
    return s;
}

void ascent_rms_norm_forward(const float* restrict x, const float* restrict w, float* restrict y, float* restrict r, int64_t rows, int64_t H, float eps) {
    const int64_t hv = H - H % W;
    for (int64_t i = 0; i < rows; i++) {
        const float* xi = x + i * H;
        float* yi = y + i * H;
        vf acc = {0};
        for (int64_t c = 0; c < hv; c += W) {
            const vf v = vload(xi + c);
            acc += v * v;
        }
        float ss = vsum(acc);
        for (int64_t c = hv; c < H; c++) ss += xi[c] * xi[c];
        const float ri = 1.f / sqrtf(ss / (float)H + eps);
        r[i] = ri;
        for (int64_t c = 0; c < hv; c += W) vstore(yi + c, vload(w + c) * (vload(xi + c) * ri));
        for (int64_t c = hv; c < H; c++) yi[c] = w[c] * (xi[c] * ri);
    }
}

void ascent_rms_norm_backward(const float* restrict x, const float* restrict w, const float* restrict r, const float* restrict g,
                              float* restrict dx, float* restrict dw, int64_t rows, int64_t H) {
    const int64_t hv = H - H % W;
    for (int64_t i = 0; i < rows; i++) {
        const float *xi = x + i * H, *gi = g + i * H;
        float* dxi = dx + i * H;
        const float ri = r[i];
        vf acc = {0};
        for (int64_t c = 0; c < hv; c += W) acc += vload(gi + c) * vload(w + c) * vload(xi + c);
        float dot = vsum(acc);
        for (int64_t c = hv; c < H; c++) dot += gi[c] * w[c] * xi[c];
        const float k = ri * ri * ri * dot / (float)H;
        for (int64_t c = 0; c < hv; c += W) {
            const vf xv = vload(xi + c), gv = vload(gi + c);
            vstore(dxi + c, ri * gv * vload(w + c) - k * xv);
            vstore(dw + c, vload(dw + c) + gv * xv * ri);
        }
        for (int64_t c = hv; c < H; c++) {
            dxi[c] = ri * gi[c] * w[c] - k * xi[c];
            dw[c] += gi[c] * xi[c] * ri;
        }
    }
}
