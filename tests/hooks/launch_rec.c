/* launch_rec.c - the bench-only launch recorder of launch_rec.h (test-only library). */
#include <string.h>
#include "hooks/launch_rec.h"

static fk_launch_rec *fk_armed;

/* The library's launch hook while armed: fills the armed record from one
 * launch's description and disarms. */
static fp8kit_status fk_launch_rec_take(const void *fn, const unsigned grid[3], const unsigned block[3], size_t smem,
                                        void *const *args, const size_t *sizes, int nargs, int pdl)
{
    fk_launch_rec *rec = __atomic_exchange_n(&fk_armed, NULL, __ATOMIC_ACQ_REL);
    fk_cuda_set_launch_hook(NULL);
    if (!rec)
        return fk_fail(NULL, FP8KIT_ERR_INTERNAL, "launch recorder: not armed");
    if (nargs > FK_LAUNCH_REC_ARGS)
        return fk_fail(NULL, FP8KIT_ERR_INTERNAL, "launch recorder: %d parameters", nargs);
    size_t off = 0;
    for (int i = 0; i < nargs; i++) {
        off = (off + 63) & ~(size_t)63;
        if (off + sizes[i] > sizeof rec->buf)
            return fk_fail(NULL, FP8KIT_ERR_INTERNAL, "launch recorder: parameters exceed %zu bytes",
                           sizeof rec->buf);
        memcpy(rec->buf + off, args[i], sizes[i]);
        rec->args[i] = rec->buf + off;
        off += sizes[i];
    }
    rec->fn = fn;
    memcpy(rec->grid, grid, sizeof rec->grid);
    memcpy(rec->block, block, sizeof rec->block);
    rec->smem = smem;
    rec->pdl = pdl;
    rec->nargs = nargs;
    return FP8KIT_OK;
}

void fk_launch_rec_arm(fk_launch_rec *rec)
{
    __atomic_store_n(&fk_armed, rec, __ATOMIC_RELEASE);
    fk_cuda_set_launch_hook(fk_launch_rec_take);
}

fk_launch_rec *fk_launch_rec_armed(void) { return __atomic_load_n(&fk_armed, __ATOMIC_ACQUIRE); }
