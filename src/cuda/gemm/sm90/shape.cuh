/* shape.cuh - the shared-memory shape of the Hopper GEMM kernels: the stage
 * ring, the epilogue areas and tables, the barriers (fk_sm90_shape). */
#ifndef FK_SM90_SHAPE_CUH
#define FK_SM90_SHAPE_CUH

#include "cuda/gemm/sm90/epilogue_op.cuh"

/* Shared memory of one CTA: the stage ring, then per consumer warpgroup an
 * epilogue area (a 64 x 32 fp32 staging chunk, or the 64 staged output rows
 * of the bulk epilogue, whichever is larger) and its table of prefetched
 * factors (TS: large enough also for the 4 per-warp tables of the
 * row-scaled TMA-store epilogue), then (SC: staged block scales) one
 * 128-byte aligned scale table per stage, then the full + empty barriers;
 * 1024 bytes of slack align the ring. The ring takes as many stages as fit in 227 KB (at most 8). */
#define FK_SM90_SMEM_MAX (227 * 1024)
/* Floats of one warp's table in the TMA-store epilogue with row scales or
 * a bias: BN column factors (or, with a bias, the BN bias values), the 16
 * row scales of the warp's rows, the two tensor scales, padding to a
 * multiple of 4. */
#define FK_EPI_WTAB(BN) ((BN) + 32)
/* SC: the stages' scale tables (staged block scales): none; for tiles that
 * start at a multiple of 4 rows (dense); for tiles that start at any row
 * (grouped: A's box starts at the 4-row boundary below the tile, since a TMA
 * box's innermost coordinate must be 16-byte aligned, and has 4 rows more). */
enum { FK_SC_NONE = 0, FK_SC_ALIGNED = 1, FK_SC_ANY_ROW = 2 };
/* The tables a kernel with staged scales (ST) and the grouped walk (GR) needs. */
#define FK_SC_OF(ST, GR) ((ST) ? ((GR) ? FK_SC_ANY_ROW : FK_SC_ALIGNED) : FK_SC_NONE)
/* NS = 2: the gated (swiglu) tile of kernels_glu.cu: 64 rows of A that both
 * consumer warpgroups share, and 2 BN rows of B (each warpgroup's BN / 2 gate
 * rows and the BN / 2 up rows that pair with them); its epilogue area is two
 * per-row exchange buffers per warpgroup (epilogue_glu.cuh), no tables.
 * NS = 3: the paired gated tile: 128 rows of A (each warpgroup its own 64, as
 * NS 1) by BN rows of B ([BN / 2 gate | BN / 2 up], both warpgroups), run
 * twice per work item for D's two halves of 128 columns (BN / 2 each); its
 * epilogue area holds a warpgroup's first half (64 x BN / 2 fp32) until the
 * second completes its 1x128 groups. */
template <int BN, bool TS = false, int WV = 1, int SC = FK_SC_NONE, int NS = 1> struct fk_sm90_shape {
    static constexpr int A_BYTES = (NS == 2 ? 64 : WV * FK_GEMM_BM) * FK_GEMM_BK; /* WV 128-row waves */
    static constexpr int B_BYTES = (NS == 2 ? 2 : 1) * BN * FK_GEMM_BK;
    /* SC: a stage's scale table (FK_SM90_SCALE_STAGED): A's block scales of
     * the K block, one per row of the tile (MN-major, by TMA; FK_SC_ANY_ROW: from the
     * 4-row boundary below it), then at the next 128 bytes the 16 bytes of
     * B's scales holding the K block's (a TMA box; pipeline.cuh
     * fk_sm90_sb_base), the table padded to 128 bytes */
    static constexpr int SC_ROWS = WV * FK_GEMM_BM + (SC == FK_SC_ANY_ROW ? 4 : 0);
    static constexpr int SC_B = (SC_ROWS * 4 + 127) / 128 * 32; /* B's 16 bytes: floats into the table */
    static constexpr int SC_BYTES = SC ? (SC_B * 4 + 16 + 127) / 128 * 128 : 0;
    static constexpr int CHUNK_FLOATS = 64 * FK_EPI_CH;
    /* TS: no room for the bulk epilogue's staged rows; the TMA-store
     * epilogue's two 4 KB buffers fit in the general epilogue's chunk */
    static constexpr int ROWS_FLOATS = TS ? 0 : 64 * FK_EPI_ROW_BYTES(BN) / 4;
    /* per consumer warpgroup */
    static constexpr int STAGE_OUT_FLOATS = NS == 2   ? 2 * 64
                                            : NS == 3 ? 64 * BN / 2
                                            : CHUNK_FLOATS > ROWS_FLOATS ? CHUNK_FLOATS : ROWS_FLOATS;
    static constexpr int TAB_FLOATS = /* per consumer warpgroup */
        NS >= 2 ? 0 : TS && 4 * FK_EPI_WTAB(BN) > FK_EPI_TAB(BN) ? 4 * FK_EPI_WTAB(BN) : FK_EPI_TAB(BN);
    static constexpr int EPI_BYTES = 2 * (STAGE_OUT_FLOATS + TAB_FLOATS) * 4;
    static constexpr int FIXED = EPI_BYTES + 1024 + 2 * 8 * 8 + (SC ? 128 : 0); /* (SC: the tables' alignment) */
    static constexpr int FIT = (FK_SM90_SMEM_MAX - FIXED) / (A_BYTES + B_BYTES + SC_BYTES);
    static constexpr int STAGES = FIT < 8 ? FIT : 8;
    static constexpr int SMEM = STAGES * (A_BYTES + B_BYTES + SC_BYTES) + FIXED;
    static constexpr int NACC = BN / 2; /* fp32 accumulators per consumer thread */
    static_assert(STAGES >= 3, "stage ring too shallow");
    static_assert(NS == 1 || (NS <= 3 && WV == 1 && !TS && !SC), "the gated tiles: one wave, general epilogue");
    static_assert(!TS || CHUNK_FLOATS * 4 == 2 * 4096, "TMA-store buffers");
    static_assert(TAB_FLOATS % 4 == 0, "tables stay 16-byte aligned");
    static_assert(SC_BYTES % 128 == 0, "TMA writes 128-byte aligned scale tables");
    static_assert(!TS || STAGES == 8 || STAGES == fk_sm90_shape<BN>::STAGES + 1,
                  "the TS variants' per-warp tables must not cost their extra stage");
};
#endif
