/* mx_norm_host.h - the MX chunk normalization (format/mx_norm_rule.h) applied on
 * the host to a whole operand, as the CUDA MX GEMMs' workspace path does:
 * the reference the GPU tests compare fk_cuda_mx_norm's copies and the
 * normalized GEMM with. */
#ifndef FK_TESTS_MX_NORM_HOST_H
#define FK_TESTS_MX_NORM_HOST_H
#include <math.h>
#include <stdint.h>
#include "format/codec.h"
#include "format/geometry.h"
#include "format/mx_norm_rule.h"

/* The host rule of format/mx_norm_rule.h over one operand, as fk_cuda_mx_norm
 * applies it: rows x k codes x (row stride ldx) with scale bytes s (plain
 * rows x k/32, or blocked) into codes y (row stride ldy; columns k .. ldy - 1
 * not written) and plain scales sy. Each 128-wide chunk of a row (fewer
 * blocks at the end of K) takes fk_mx_norm_scale's common scale E, its codes
 * fk_mx_norm_code(c, E - e), or stays as it is. Returns how many codes
 * changed value (x 2^(scale - 127)): those the rule rounded. */
static inline int64_t host_norm(const uint8_t *x, int64_t ldx, const uint8_t *s, int blocked, int64_t rows,
                                int64_t k, int e5m2, uint8_t *y, int64_t ldy, uint8_t *sy)
{
    const int64_t kbs = k / 32, cp = fk_blocked_cols(kbs);
    int64_t changed = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c0 = 0; c0 < kbs; c0 += 4) {
            const int nb = (int)(kbs - c0 < 4 ? kbs - c0 : 4);
            uint8_t sc[4] = {0, 0, 0, 0};
            for (int j = 0; j < nb; j++)
                sc[j] = s[blocked ? fk_blocked_offset(r, c0 + j, cp) : r * kbs + c0 + j];
            const int E = fk_mx_norm_scale(sc, x + r * ldx + c0 * 32, nb, e5m2);
            for (int j = 0; j < nb; j++) {
                const int d = E < 0 ? 0 : E - sc[j];
                for (int64_t t = 0; t < 32; t++) {
                    const int64_t col = (c0 + j) * 32 + t;
                    const uint8_t in = x[r * ldx + col], out = fk_mx_norm_code(in, d, e5m2);
                    y[r * ldy + col] = out;
                    if (d) {
                        const double vi = ldexp(fk_fp8_to_f32(in, e5m2), sc[j] - 127);
                        const double vo = ldexp(fk_fp8_to_f32(out, e5m2), E - 127);
                        changed += !(vi == vo || (isnan(vi) && isnan(vo)));
                    }
                }
                sy[r * kbs + c0 + j] = (uint8_t)(E < 0 ? sc[j] : E);
            }
        }
    return changed;
}

#endif
