/* gemm_kernel_body.h - body of one fp32 GEMM microkernel, included by
 * gemm_kernel.c once per ISA with these macros defined:
 *   FK_UK_NAME   function name          FK_UK_TARGET  __attribute__((target(...))) or empty
 *   FK_UK_VT     GCC vector type        FK_UK_VW      floats per vector
 *   FK_UK_MR     rows of A per tile     FK_UK_NV      vectors per row (NR = VW * NV)
 * The contract is fk_ukernel_fn's (gemm_internal.h). Partial sums P live in
 * registers (MR * NV vectors) and restart from zero every promotion block;
 * the accumulators stay in memory and are touched once per block. */

FK_UK_TARGET static void FK_UK_NAME(int64_t kc, int64_t kblk, const float *restrict a, const float *restrict b,
                                    float *restrict acc, int64_t ldacc, const float *restrict as,
                                    const float *restrict bs)
{
    enum { MR = FK_UK_MR, NV = FK_UK_NV, VW = FK_UK_VW, NR = FK_UK_VW * FK_UK_NV };
    for (int64_t k0 = 0; k0 < kc; k0 += kblk) {
        int64_t len = kc - k0 < kblk ? kc - k0 : kblk;
        FK_UK_VT p[MR][NV];
#pragma GCC unroll 32
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                p[i][v] = (FK_UK_VT){0};
        const float *ak = a + k0 * MR, *bk = b + k0 * NR;
        for (int64_t k = 0; k < len; k++) {
            FK_UK_VT bv[NV];
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                memcpy(&bv[v], bk + v * VW, sizeof bv[v]);
#pragma GCC unroll 32
            for (int i = 0; i < MR; i++) {
                float s = ak[i];
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++)
                    p[i][v] += bv[v] * s;
            }
            ak += MR;
            bk += NR;
        }
        if (as) {
            FK_UK_VT sb[NV];
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                memcpy(&sb[v], bs + v * VW, sizeof sb[v]);
#pragma GCC unroll 32
            for (int i = 0; i < MR; i++) {
                float sa = as[i];
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) {
                    FK_UK_VT c, f = sb[v] * sa;
                    memcpy(&c, acc + i * ldacc + v * VW, sizeof c);
                    c += p[i][v] * f;
                    memcpy(acc + i * ldacc + v * VW, &c, sizeof c);
                }
            }
            as += MR;
            bs += NR;
        } else {
#pragma GCC unroll 32
            for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) {
                    FK_UK_VT c;
                    memcpy(&c, acc + i * ldacc + v * VW, sizeof c);
                    c += p[i][v];
                    memcpy(acc + i * ldacc + v * VW, &c, sizeof c);
                }
        }
    }
}

#undef FK_UK_NAME
#undef FK_UK_TARGET
#undef FK_UK_VT
#undef FK_UK_VW
#undef FK_UK_MR
#undef FK_UK_NV
