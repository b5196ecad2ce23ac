/* plan.c - the per-context GEMM plan cache: an open-addressing hash table of
 * individually allocated plans (pointers stay valid while the table grows),
 * guarded by a mutex. A hit costs one hash, one locked probe, no allocation;
 * a thread repeating its previous key skips both. Each plan also carries a
 * small lock-free memo for its backend. */
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"

/* Word-at-a-time multiplicative hash; n is a multiple of 8. */
static uint64_t fk_hash(const void *p, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w;
        memcpy(&w, (const unsigned char *)p + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    return h;
}

/* Each thread remembers the last plan it got and from which cache: a call
 * with the same key as that thread's previous call skips the hash and the
 * lock. Plans are immutable once inserted and live as long as their cache,
 * and a cache id is never reused, so a stale entry never matches. */
static uint64_t fk_cache_ids;
static __thread uint64_t fk_last_id;
static __thread const fk_plan *fk_last_plan;

void fk_plan_cache_init(fk_plan_cache *pc)
{
    memset(pc, 0, sizeof *pc);
    pthread_mutex_init(&pc->lock, NULL);
    pc->id = __atomic_add_fetch(&fk_cache_ids, 1, __ATOMIC_RELAXED);
}

void fk_plan_cache_renew(fk_plan_cache *pc)
{
    __atomic_store_n(&pc->id, __atomic_add_fetch(&fk_cache_ids, 1, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

void fk_plan_cache_free(fk_plan_cache *pc)
{
    for (int64_t i = 0; i < pc->cap; i++)
        free(pc->slots[i]);
    free(pc->slots);
    pthread_mutex_destroy(&pc->lock);
    memset(pc, 0, sizeof *pc);
}

static fk_plan **fk_probe(fk_plan **slots, int64_t cap, uint64_t h, const void *key, size_t len)
{
    for (int64_t i = (int64_t)(h & (uint64_t)(cap - 1));; i = (i + 1) & (cap - 1)) {
        fk_plan *p = slots[i];
        if (!p || (p->key_hash == h && memcmp(p->key, key, len) == 0))
            return &slots[i];
    }
}

static int fk_grow(fk_plan_cache *pc)
{
    int64_t cap = pc->cap ? pc->cap * 2 : 64;
    fk_plan **ns = (fk_plan **)calloc((size_t)cap, sizeof *ns);
    if (!ns)
        return 0;
    fk_plan **old = pc->slots;
    for (int64_t i = 0; i < pc->cap; i++)
        if (old[i])
            *fk_probe(ns, cap, old[i]->key_hash, old[i]->key, sizeof old[i]->key) = old[i];
    free(old);
    pc->slots = ns;
    pc->cap = cap;
    return 1;
}

const fk_plan *fk_plan_get(fp8kit_ctx *ctx, const void *key, size_t len, const fk_gemm_job *job, fk_plan_init_fn init,
                           fp8kit_status *st)
{
    unsigned char k[sizeof(((fk_plan *)0)->key)];
    if (len > sizeof k) {
        *st = fk_fail(ctx, FP8KIT_ERR_INTERNAL, "plan key of %zu bytes exceeds %zu", len, sizeof k);
        return NULL;
    }
    memset(k, 0, sizeof k);
    memcpy(k, key, len);
    fk_plan_cache *pc = &ctx->plans;
    if (fk_last_id == pc->id && fk_last_plan && memcmp(fk_last_plan->key, k, sizeof k) == 0) {
        *st = FP8KIT_OK;
        return fk_last_plan;
    }
    uint64_t h = fk_hash(k, sizeof k);
    pthread_mutex_lock(&pc->lock);
    fk_plan **slot = pc->cap ? fk_probe(pc->slots, pc->cap, h, k, sizeof k) : NULL;
    if (slot && *slot) {
        fk_plan *p = *slot;
        pthread_mutex_unlock(&pc->lock);
        fk_last_id = pc->id;
        fk_last_plan = p;
        *st = FP8KIT_OK;
        return p;
    }
    /* miss: build the plan under the lock (rare; keeps one plan per key) */
    fk_plan *p = (fk_plan *)calloc(1, sizeof *p);
    if (!p) {
        pthread_mutex_unlock(&pc->lock);
        *st = fk_fail(ctx, FP8KIT_ERR_OUT_OF_MEMORY, "plan cache: out of memory");
        return NULL;
    }
    p->key_hash = h;
    memcpy(p->key, k, sizeof k);
    *st = init(ctx, job, p->config);
    if (*st != FP8KIT_OK) {
        pthread_mutex_unlock(&pc->lock);
        free(p);
        return NULL;
    }
    p->valid = 1;
    if ((pc->count + 1) * 2 > pc->cap && !fk_grow(pc)) {
        pthread_mutex_unlock(&pc->lock);
        free(p);
        *st = fk_fail(ctx, FP8KIT_ERR_OUT_OF_MEMORY, "plan cache: out of memory");
        return NULL;
    }
    *fk_probe(pc->slots, pc->cap, h, k, sizeof k) = p;
    pc->count++;
    pthread_mutex_unlock(&pc->lock);
    fk_last_id = pc->id;
    fk_last_plan = p;
    return p;
}

/* Sequence lock over p->memo (see internal.h). Every memo word is accessed
 * atomically (relaxed), so a reader racing a writer reads stale or mixed
 * words, never undefined ones, and then sees memo_seq changed and misses. */
int fk_plan_memo_get(const fk_plan *p, const uint64_t *key, int nkey, void *val, size_t vbytes)
{
    const size_t nval = vbytes / 8;
    if (nkey < 0 || (size_t)nkey + nval > FK_PLAN_MEMO_WORDS)
        return 0;
    const uint64_t s1 = __atomic_load_n(&p->memo_seq, __ATOMIC_ACQUIRE);
    if (s1 == 0 || (s1 & 1))
        return 0;
    for (int i = 0; i < nkey; i++)
        if (__atomic_load_n(&p->memo[i], __ATOMIC_RELAXED) != key[i])
            return 0;
    uint64_t *out = (uint64_t *)val;
    for (size_t i = 0; i < nval; i++)
        out[i] = __atomic_load_n(&p->memo[(size_t)nkey + i], __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&p->memo_seq, __ATOMIC_RELAXED) == s1;
}

void fk_plan_memo_put(const fk_plan *cp, const uint64_t *key, int nkey, const void *val, size_t vbytes)
{
    fk_plan *p = (fk_plan *)cp; /* the memo is the mutable part of a shared plan */
    const size_t nval = vbytes / 8;
    if (nkey < 0 || (size_t)nkey + nval > FK_PLAN_MEMO_WORDS)
        return;
    uint64_t s = __atomic_load_n(&p->memo_seq, __ATOMIC_RELAXED);
    if ((s & 1) || !__atomic_compare_exchange_n(&p->memo_seq, &s, s + 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return; /* another thread is writing: leave it the memo */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    const uint64_t *in = (const uint64_t *)val;
    for (int i = 0; i < nkey; i++)
        __atomic_store_n(&p->memo[i], key[i], __ATOMIC_RELAXED);
    for (size_t i = 0; i < nval; i++)
        __atomic_store_n(&p->memo[(size_t)nkey + i], in[i], __ATOMIC_RELAXED);
    __atomic_store_n(&p->memo_seq, s + 2, __ATOMIC_RELEASE);
}
