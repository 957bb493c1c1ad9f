/* ascent's native rollout kernels: what one source file exports to another. */
#ifndef ASCENT_KERNELS_H
#define ASCENT_KERNELS_H
#include <stdint.h>

/* decode_attention.c: one decode step's attention over the KV cache (layout described there). */
int ascent_decode_attention(const float* restrict q, const float* restrict k, const float* restrict v,
                            const uint8_t* restrict valid, float* restrict out, float* restrict scratch,
                            int64_t B, int64_t g, int64_t nkv, int64_t d, int64_t end, int64_t q_sb,
                            int64_t k_sb, int64_t k_sh, int64_t k_sj, int64_t v_sb, int64_t v_sh, int64_t v_sj,
                            int64_t sm, float scale);

#endif
