/* tile_epilogue.cuh - the epilogue of one finished tile of the Hopper GEMM kernels: the
 * tile's epilogue inputs at its start and the choice of store path (TMA
 * store, bulk copies or the general path). */
#ifndef FK_SM90_EPILOGUE_CUH
#define FK_SM90_EPILOGUE_CUH

#include "cuda/gemm/sm90/store_tma.cuh"
#include "cuda/gemm/sm90/store_bulk.cuh"
#include "cuda/gemm/sm90/store_general.cuh"

#ifdef FK_SM90_DEVICE
/* The tile's epilogue inputs, at its start: copied to the warps' tables
 * (TS variants' TMA-store epilogue with row scales or a bias), else
 * prefetched into registers (gemm/sm90/epilogue_op.cuh). */
template <int BN, int TS>
static __device__ __forceinline__ fk_epi_pre fk_sm90_epi_start(const fk_gemm_params &p, float *tab, int m0, int n0,
                                                               int tid, int m_end, int g)
{
    if (TS && p.d_bulk == 2 && fk_epi_tma_tab<TS == 2>(p)) {
        fk_epi_tma_fetch<BN, TS == 2>(p, tab, m0, n0, tid, g);
        fk_epi_pre e = {};
        e.m_end = m_end;
        return e;
    }
    return fk_epi_prefetch<BN>(p, m0, n0, tid, m_end, g);
}

/* The epilogue of one finished tile by p.d_bulk (gemm/store.h's ids): the
 * TMA-store path (2, TS variants), the reduce-add path (3) or the
 * bulk-copy path (1) (the others), or the general one (0). GR: the grouped
 * walk's tiles, whose rows end at their group's (pre.m_end). */
template <int BN, int TS = 0, bool GR = false, int NACC>
static __device__ __forceinline__ void fk_sm90_epilogue(const fk_gemm_params &p, float (&acc)[NACC], float *area,
                                                        float *tab, const fk_epi_pre &pre, int m0, int n0, int tid,
                                                        int bar_id)
{
    if (TS && p.d_bulk == 2)
        fk_epilogue_tma<BN, TS == 2, GR>(p, acc, fk_smem_addr(area), tab, pre, m0, n0, tid);
    else if (!TS && p.d_bulk == 3)
        fk_epilogue_reduce<BN>(p, acc, (unsigned char *)area, tab, pre, m0, n0, tid, bar_id);
    else if (!TS && p.d_bulk)
        fk_epilogue_bulk<BN>(p, acc, (unsigned char *)area, tab, pre, m0, n0, tid, bar_id);
    else
        fk_epilogue<BN>(p, acc, area, tab, pre, m0, n0, tid, bar_id);
}
#endif /* FK_SM90_DEVICE */
#endif
