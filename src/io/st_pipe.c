/* st_pipe.c - the converter's I/O pipeline: a writer thread that pwrites
 * finished slabs (from a small pool of host buffers, or straight from the
 * input mapping for copied tensors) while the caller computes the next one,
 * starting disk writeback early (sync_file_range) when the output will be
 * fsync'ed, and a prefetch thread that maps the next input slab into memory
 * (MADV_POPULATE_READ) before the caller reads it. Internal to src/io. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/st_conv.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#define PIPE_SLOTS 4
#define PIPE_JOBS 32

typedef struct pipe_job {
    int slot;          /* -1: external memory */
    const void *ptr;
    size_t len;
    uint64_t off;
    const char *src;   /* the mapped input ptr lies in (st_pipe_submit_mapped), or NULL */
} pipe_job;

struct st_pipe {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t writer, prefetcher;
    int have_writer, have_prefetcher;
    st_writer *w;
    struct {
        void *p;
        size_t cap;
        int busy;
    } slot[PIPE_SLOTS];
    pipe_job jobs[PIPE_JOBS];
    int head, count, active; /* queue; a job being written */
    int stop, failed;
    fp8kit_status st;
    char msg[600];
    /* prefetch request (the latest wins) */
    const void *pf_addr;
    size_t pf_len;
    int pf_pending;
};

static void *pipe_writer_main(void *arg)
{
    st_pipe *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->count && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        if (!p->count && p->stop)
            break;
        pipe_job j = p->jobs[p->head];
        p->head = (p->head + 1) % PIPE_JOBS;
        p->count--;
        p->active = 1;
        st_writer *w = p->w;
        int skip = p->failed || p->stop;
        pthread_mutex_unlock(&p->mu);
        char msg[600];
        fp8kit_status st = FP8KIT_OK;
        if (!skip && j.len) {
            st = st_writer_pwrite(w, j.ptr, j.len, j.off, msg, sizeof msg);
            /* copying straight from a mapping whose file was truncated: the
             * kernel's read of the lost pages fails with EFAULT (no SIGBUS) */
            if (st && j.src && errno == EFAULT)
                snprintf(msg, sizeof msg,
                         "%s: I/O error: the file shrank while being copied (truncated or rewritten during the run)",
                         j.src);
            if (!st && !w->no_fsync) /* start writeback now; the final fsync then has little left */
                (void)sync_file_range(w->fd, (off64_t)j.off, (off64_t)j.len, SYNC_FILE_RANGE_WRITE);
        }
        pthread_mutex_lock(&p->mu);
        if (st && !p->failed) {
            p->failed = 1;
            p->st = st;
            snprintf(p->msg, sizeof p->msg, "%s", msg);
        }
        if (j.slot >= 0)
            p->slot[j.slot].busy = 0;
        p->active = 0;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void pipe_populate(const void *addr, size_t len)
{
    const size_t pg = 4096;
    uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(pg - 1);
    size_t n = len + ((uintptr_t)addr - a);
    if (!madvise((void *)a, n, MADV_POPULATE_READ) || errno != EINVAL)
        return; /* EFAULT: pages past a truncated file's end; touching them would raise SIGBUS here */
    /* kernels before 5.14 (no MADV_POPULATE_READ): touch one byte per page */
    volatile const unsigned char *b = (const unsigned char *)a;
    unsigned char sink = 0;
    for (size_t i = 0; i < n; i += pg)
        sink ^= b[i];
    (void)sink;
}

static void *pipe_prefetch_main(void *arg)
{
    st_pipe *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->pf_pending && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop)
            break;
        const void *a = p->pf_addr;
        size_t n = p->pf_len;
        p->pf_pending = 0;
        pthread_mutex_unlock(&p->mu);
        pipe_populate(a, n);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

st_pipe *st_pipe_create(int prefetch)
{
    st_pipe *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->have_writer = !pthread_create(&p->writer, NULL, pipe_writer_main, p);
    if (prefetch)
        p->have_prefetcher = !pthread_create(&p->prefetcher, NULL, pipe_prefetch_main, p);
    if (!p->have_writer) {
        st_pipe_destroy(p);
        return NULL;
    }
    return p;
}

void st_pipe_destroy(st_pipe *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (p->have_writer)
        pthread_join(p->writer, NULL);
    if (p->have_prefetcher)
        pthread_join(p->prefetcher, NULL);
    for (int i = 0; i < PIPE_SLOTS; i++)
        free(p->slot[i].p);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

static fp8kit_status pipe_fail(st_pipe *p, char *err, size_t errlen)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", p->msg);
    return p->st;
}

fp8kit_status st_pipe_drain(st_pipe *p, char *err, size_t errlen)
{
    pthread_mutex_lock(&p->mu);
    while ((p->count || p->active) && !p->failed)
        pthread_cond_wait(&p->cv, &p->mu);
    while (p->active) /* a failed run: let the job in flight end */
        pthread_cond_wait(&p->cv, &p->mu);
    fp8kit_status st = p->failed ? pipe_fail(p, err, errlen) : FP8KIT_OK;
    pthread_mutex_unlock(&p->mu);
    return st;
}

void st_pipe_set_writer(st_pipe *p, st_writer *w)
{
    pthread_mutex_lock(&p->mu);
    p->w = w;
    pthread_mutex_unlock(&p->mu);
}

void *st_pipe_acquire(st_pipe *p, size_t bytes, int *slot, fp8kit_status *st, char *err, size_t errlen)
{
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->failed) {
            *st = pipe_fail(p, err, errlen);
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        for (int i = 0; i < PIPE_SLOTS; i++) {
            if (p->slot[i].busy)
                continue;
            if (p->slot[i].cap < bytes || !p->slot[i].p) {
                free(p->slot[i].p);
                size_t cap = (bytes ? bytes : 1) + 4095;
                cap -= cap % 4096;
                p->slot[i].p = aligned_alloc(4096, cap);
                p->slot[i].cap = p->slot[i].p ? cap : 0;
                if (!p->slot[i].p) {
                    pthread_mutex_unlock(&p->mu);
                    *st = FP8KIT_ERR_OUT_OF_MEMORY;
                    if (err && errlen)
                        snprintf(err, errlen, "cannot allocate %zu bytes", cap);
                    return NULL;
                }
            }
            p->slot[i].busy = 1;
            *slot = i;
            pthread_mutex_unlock(&p->mu);
            *st = FP8KIT_OK;
            return p->slot[i].p;
        }
        pthread_cond_wait(&p->cv, &p->mu);
    }
}

void st_pipe_release(st_pipe *p, int slot)
{
    pthread_mutex_lock(&p->mu);
    p->slot[slot].busy = 0;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static fp8kit_status pipe_submit(st_pipe *p, int slot, const void *ptr, size_t len, uint64_t off, const char *src,
                                 char *err, size_t errlen);

fp8kit_status st_pipe_submit(st_pipe *p, int slot, const void *ptr, size_t len, uint64_t off, char *err,
                             size_t errlen)
{
    return pipe_submit(p, slot, ptr, len, off, NULL, err, errlen);
}

fp8kit_status st_pipe_submit_mapped(st_pipe *p, const void *ptr, size_t len, uint64_t off, const char *src, char *err,
                                    size_t errlen)
{
    return pipe_submit(p, -1, ptr, len, off, src, err, errlen);
}

static fp8kit_status pipe_submit(st_pipe *p, int slot, const void *ptr, size_t len, uint64_t off, const char *src,
                                 char *err, size_t errlen)
{
    pthread_mutex_lock(&p->mu);
    while (p->count == PIPE_JOBS && !p->failed)
        pthread_cond_wait(&p->cv, &p->mu);
    if (p->failed) {
        fp8kit_status st = pipe_fail(p, err, errlen);
        if (slot >= 0)
            p->slot[slot].busy = 0;
        pthread_mutex_unlock(&p->mu);
        return st;
    }
    pipe_job *j = &p->jobs[(p->head + p->count) % PIPE_JOBS];
    j->slot = slot;
    j->ptr = ptr;
    j->len = len;
    j->off = off;
    j->src = src;
    p->count++;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return FP8KIT_OK;
}

void st_pipe_prefetch(st_pipe *p, const void *addr, size_t len)
{
    if (!p->have_prefetcher || !len)
        return;
    pthread_mutex_lock(&p->mu);
    p->pf_addr = addr;
    p->pf_len = len;
    p->pf_pending = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}
