/* tune.c - the GEMM autotune table of a context: chosen plan configs keyed by
 * a text key (backend signature + device + shape + options), kept in memory
 * and, when the user names a cache file, in a text file read when autotune is
 * switched on and rewritten (temporary name + rename) on every new choice.
 * File format, one entry per line after a header line:
 *   # fp8kit autotune cache v1
 *   <key without spaces> <config as 128 hex digits> <microseconds>
 * The table is only touched under the context's plan-cache lock. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/internal.h"

#define FK_TUNE_HEADER "# fp8kit autotune cache v1"

void fk_tune_free(fk_tune *t)
{
    free(t->entries);
    memset(t, 0, sizeof *t);
}

static int fk_hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Parses one entry line; returns 1 on success. */
static int fk_tune_parse(char *line, fk_tune_entry *e)
{
    char *key = strtok(line, " \t");
    char *hex = strtok(NULL, " \t");
    char *us = strtok(NULL, " \t");
    if (!key || !hex || !us || strtok(NULL, " \t") || strlen(key) >= sizeof e->key ||
        strlen(hex) != 2 * FK_PLAN_CONFIG_BYTES)
        return 0;
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, strlen(key));
    for (int i = 0; i < FK_PLAN_CONFIG_BYTES; i++) {
        int hi = fk_hexval(hex[2 * i]), lo = fk_hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return 0;
        e->config[i] = (unsigned char)(hi * 16 + lo);
    }
    char *end = NULL;
    e->us = strtod(us, &end);
    return end && *end == 0 && e->us >= 0;
}

static int fk_tune_push(fk_tune *t, const fk_tune_entry *e)
{
    for (int64_t i = 0; i < t->count; i++)
        if (strcmp(t->entries[i].key, e->key) == 0) {
            t->entries[i] = *e;
            return 1;
        }
    if (t->count == t->cap) {
        int64_t cap = t->cap ? 2 * t->cap : 16;
        fk_tune_entry *ne = (fk_tune_entry *)realloc(t->entries, (size_t)cap * sizeof *ne);
        if (!ne)
            return 0;
        t->entries = ne;
        t->cap = cap;
    }
    t->entries[t->count++] = *e;
    return 1;
}

/* Reads path into t (t empty on entry). A missing file is an empty table. */
static fp8kit_status fk_tune_load(const fp8kit_ctx *ctx, fk_tune *t, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return FP8KIT_OK;
        return fk_fail(ctx, FP8KIT_ERR_IO, "fp8kit_ctx_set_autotune: cannot read '%s': %s", path,
                       strerror(errno));
    }
    char line[512];
    int64_t lineno = 0;
    fp8kit_status st = FP8KIT_OK;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            st = fk_fail(ctx, FP8KIT_ERR_CORRUPT_FILE,
                         "fp8kit_ctx_set_autotune: '%s' line %lld is too long", path,
                         (long long)lineno);
            break;
        }
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (lineno == 1) {
            if (strcmp(line, FK_TUNE_HEADER) != 0) {
                st = fk_fail(ctx, FP8KIT_ERR_CORRUPT_FILE,
                             "fp8kit_ctx_set_autotune: '%s' is not an fp8kit autotune cache "
                             "(first line must be '%s')",
                             path, FK_TUNE_HEADER);
                break;
            }
            continue;
        }
        if (len == 0)
            continue;
        fk_tune_entry e;
        if (!fk_tune_parse(line, &e)) {
            st = fk_fail(ctx, FP8KIT_ERR_CORRUPT_FILE,
                         "fp8kit_ctx_set_autotune: '%s' line %lld is not '<key> <128 hex digits> "
                         "<us>'",
                         path, (long long)lineno);
            break;
        }
        if (!fk_tune_push(t, &e)) {
            st = fk_fail(ctx, FP8KIT_ERR_OUT_OF_MEMORY, "fp8kit_ctx_set_autotune: out of memory");
            break;
        }
    }
    if (st == FP8KIT_OK && ferror(f))
        st = fk_fail(ctx, FP8KIT_ERR_IO, "fp8kit_ctx_set_autotune: error reading '%s'", path);
    fclose(f);
    return st;
}

/* Writes the whole table to path through a temporary file and rename. */
static fp8kit_status fk_tune_save(const fp8kit_ctx *ctx, const fk_tune *t, const char *path)
{
    char tmp[FK_TUNE_PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return fk_fail(ctx, FP8KIT_ERR_IO, "autotune cache: cannot write '%s': %s", tmp,
                       strerror(errno));
    int ok = fprintf(f, "%s\n", FK_TUNE_HEADER) > 0;
    for (int64_t i = 0; ok && i < t->count; i++) {
        const fk_tune_entry *e = &t->entries[i];
        ok = fprintf(f, "%s ", e->key) > 0;
        for (int j = 0; ok && j < FK_PLAN_CONFIG_BYTES; j++)
            ok = fprintf(f, "%02x", e->config[j]) > 0;
        ok = ok && fprintf(f, " %.3f\n", e->us) > 0;
    }
    ok = (fflush(f) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int err = errno;
        remove(tmp);
        return fk_fail(ctx, FP8KIT_ERR_IO, "autotune cache: cannot write '%s': %s", path,
                       strerror(err));
    }
    return FP8KIT_OK;
}

fp8kit_status fp8kit_ctx_set_autotune(fp8kit_ctx *ctx, int mode, const char *cache_file)
{
    if (!ctx)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "fp8kit_ctx_set_autotune: ctx is NULL");
    if (mode != 0 && mode != 1)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT,
                       "fp8kit_ctx_set_autotune: mode %d is not 0 (off) or 1 (on)", mode);
    if (cache_file && (!*cache_file || strlen(cache_file) >= FK_TUNE_PATH_MAX))
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT,
                       "fp8kit_ctx_set_autotune: cache_file must be a non-empty path shorter than "
                       "%d bytes",
                       FK_TUNE_PATH_MAX);
    fk_tune nt;
    memset(&nt, 0, sizeof nt);
    nt.mode = mode;
    if (mode && cache_file) {
        fp8kit_status st = fk_tune_load(ctx, &nt, cache_file);
        if (st == FP8KIT_OK)
            st = fk_tune_save(ctx, &nt, cache_file); /* proves the file can be written */
        if (st != FP8KIT_OK) {
            fk_tune_free(&nt);
            return st;
        }
        snprintf(nt.path, sizeof nt.path, "%s", cache_file);
    }
    pthread_mutex_lock(&ctx->plans.lock);
    if (mode && !cache_file) { /* keep choices made so far in this process */
        nt.entries = ctx->tune.entries;
        nt.count = ctx->tune.count;
        nt.cap = ctx->tune.cap;
        ctx->tune.entries = NULL;
    }
    fk_tune_free(&ctx->tune);
    ctx->tune = nt;
    pthread_mutex_unlock(&ctx->plans.lock);
    return FP8KIT_OK;
}

int fk_tune_find(const fp8kit_ctx *ctx, const char *key, void *config)
{
    const fk_tune *t = &ctx->tune;
    for (int64_t i = 0; i < t->count; i++)
        if (strcmp(t->entries[i].key, key) == 0) {
            memcpy(config, t->entries[i].config, FK_PLAN_CONFIG_BYTES);
            return 1;
        }
    return 0;
}

fp8kit_status fk_tune_add(fp8kit_ctx *ctx, const char *key, const void *config, double us)
{
    fk_tune_entry e;
    memset(&e, 0, sizeof e);
    if (strlen(key) >= sizeof e.key || strpbrk(key, " \t\r\n"))
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "autotune: bad key '%s'", key);
    memcpy(e.key, key, strlen(key));
    memcpy(e.config, config, FK_PLAN_CONFIG_BYTES);
    e.us = us;
    if (!fk_tune_push(&ctx->tune, &e))
        return fk_fail(ctx, FP8KIT_ERR_OUT_OF_MEMORY, "autotune: out of memory");
    return ctx->tune.path[0] ? fk_tune_save(ctx, &ctx->tune, ctx->tune.path) : FP8KIT_OK;
}

