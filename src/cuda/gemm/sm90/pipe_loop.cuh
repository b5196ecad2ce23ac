/* pipe_loop.cuh - the K loop of the pipelined Hopper GEMM consumers (consumer_pipe.cuh,
 * consumer_rc.cuh): two wgmma accumulator sets, the group of K block kb on the tensor
 * cores while the finished group of kb - 1, in the other set, is promoted. */
#ifndef FK_SM90_PIPE_LOOP_CUH
#define FK_SM90_PIPE_LOOP_CUH

/* After a group was issued from `stage`: it becomes the group in flight (pstage),
 * the lag counts it, the ring advances. */
#define FK_PIPE_NEXT(STAGES)                                                                     \
    pstage = stage;                                                                              \
    fk_sm90_lag_step(p, wg, ++issued);                                                           \
    if (++stage == (STAGES)) {                                                                   \
        stage = 0;                                                                               \
        phase ^= 1u;                                                                             \
    }

/* The loop after K block 0's group was issued into A0 (nkb > 0 K blocks in all):
 * STEP(NEW, OLD) issues K block kb into NEW, waits for the group in OLD,
 * promotes it and advances kb; LAST(X) promotes the last group, in X, once it
 * is done. U8: eight K blocks per trip while they last (the unrolled body lets
 * the compiler move each block's barrier wait and descriptors above the
 * previous one's promotion), then two. A macro, so that each consumer's steps
 * stay its own code (as lambdas they changed the register allocation and
 * spilled in the grouped block kernel). */
#define FK_PIPE_K(A0, A1, STEP, LAST, U8)                                                        \
    {                                                                                            \
        /* invariant at the loop heads: the group of kb - 1 is in A0 */                          \
        int kb = 1;                                                                              \
        for (; (U8) && kb + 7 < nkb;) {                                                          \
            STEP(A1, A0)                                                                         \
            STEP(A0, A1)                                                                         \
            STEP(A1, A0)                                                                         \
            STEP(A0, A1)                                                                         \
            STEP(A1, A0)                                                                         \
            STEP(A0, A1)                                                                         \
            STEP(A1, A0)                                                                         \
            STEP(A0, A1)                                                                         \
        }                                                                                        \
        for (; kb + 1 < nkb;) {                                                                  \
            STEP(A1, A0)                                                                         \
            STEP(A0, A1)                                                                         \
        }                                                                                        \
        if (kb < nkb) {                                                                          \
            STEP(A1, A0)                                                                         \
            fk_wgmma_wait<0>();                                                                  \
            LAST(A1)                                                                             \
        } else {                                                                                 \
            fk_wgmma_wait<0>();                                                                  \
            LAST(A0)                                                                             \
        }                                                                                        \
    }
#endif
