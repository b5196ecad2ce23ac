/* test_hostile_api.c - hostile input for the public C API on the CPU backend
 * (issue 21): a thread count past the bound. Each bad call must return its
 * specific status, leave a new message naming the function and the culprit,
 * and change no byte of any buffer (the whole arena the call's tensors live
 * in is poisoned first and compared after). Run: ctest -R test_hostile_api;
 * built with -DFP8KIT_SANITIZE=ON, UBSan aborts on any misaligned access or
 * signed overflow inside the library. */
#include <stdint.h>
#include <unistd.h>
#include "fp8kit.h"
#include "test_util.h"

static fp8kit_ctx *ctx;

/* ------------------------------------------------------------- the arena */
#define ARENA (1 << 20)
static _Alignas(64) unsigned char arena[ARENA];
static unsigned char arena_copy[ARENA];

static void arena_snapshot(void) { memcpy(arena_copy, arena, ARENA); }
static int arena_unchanged(void) { return memcmp(arena_copy, arena, ARENA) == 0; }

/* ------------------------------------------------- the bad-call checker */
static long n_bad;
static char marker[512];
static void set_marker(void)
{
    fp8kit_ctx_set_threads(ctx, -1); /* a known failure leaves a known message */
    snprintf(marker, sizeof marker, "%s", fp8kit_last_error(ctx));
}

/* A failing call: want, a new message naming fn and both words (w2 may be
 * NULL), and the arena unchanged since the snapshot. */
static void check_bad(int line, fp8kit_status got, fp8kit_status want, const char *fn, const char *w1, const char *w2)
{
    const char *msg = fp8kit_last_error(ctx);
    n_bad++;
    CHECK(got == want, "line %d: got %s, want %s (%s)", line, fp8kit_status_string(got), fp8kit_status_string(want),
          msg);
    CHECK(msg[0] && strcmp(msg, marker) != 0, "line %d: no new message", line);
    CHECK(strstr(msg, fn) != NULL, "line %d: message \"%s\" does not name %s", line, msg, fn);
    CHECK(strstr(msg, w1) != NULL, "line %d: message \"%s\" does not mention %s", line, msg, w1);
    CHECK(!w2 || strstr(msg, w2) != NULL, "line %d: message \"%s\" does not mention %s", line, msg, w2);
    CHECK(arena_unchanged(), "line %d: the failing call changed memory", line);
}

#define BAD(want, fn, w1, w2, call)                                                                              \
    do {                                                                                                         \
        set_marker();                                                                                            \
        arena_snapshot();                                                                                        \
        fp8kit_status st_ = (call);                                                                              \
        check_bad(__LINE__, st_, want, fn, w1, w2);                                                              \
    } while (0)

#define GOOD(call)                                                                                               \
    do {                                                                                                         \
        fp8kit_status st_ = (call);                                                                              \
        CHECK(st_ == FP8KIT_OK, "line %d: %s returned %s (%s)", __LINE__, #call, fp8kit_status_string(st_),      \
              fp8kit_last_error(ctx));                                                                           \
    } while (0)

static void *at(size_t off) { return arena + off; }

/* ------------------------------------------------------- item 3: threads */
static void test_thread_bound(void)
{
    const char *fn = "fp8kit_ctx_set_threads";
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int bound = ncpu * 4 > 64 ? (int)ncpu * 4 : 64;
    char bs[32];
    snprintf(bs, sizeof bs, "%d", bound);
    GOOD(fp8kit_ctx_set_threads(ctx, 2));
    const int over[] = {100000, 40000, INT32_MAX, bound + 1};
    for (int i = 0; i < 4; i++) {
        BAD(FP8KIT_ERR_INVALID_ARGUMENT, fn, "nthreads", bs, fp8kit_ctx_set_threads(ctx, over[i]));
        CHECK(strstr(fp8kit_ctx_describe(ctx), " 2 ") != NULL, "a refused count changed the setting: %s",
              fp8kit_ctx_describe(ctx));
    }
    /* the bound itself is usable (64 threads at least, even on a small machine) */
    int64_t shp[2] = {64, 256};
    float *x = (float *)at(0);
    for (int i = 0; i < 64 * 256; i++)
        x[i] = (float)(i % 97) - 48.0f;
    fp8kit_quant_desc d = fp8kit_quant_desc_default(FP8KIT_SCHEME_ROW);
    fp8kit_tensor xt = fp8kit_tensor_make(x, FP8KIT_F32, 2, shp), q, s;
    GOOD(fp8kit_quant_shapes(&d, &xt, &q, &s));
    q.data = at(65536);
    s.data = at(65536 + 16384);
    GOOD(fp8kit_ctx_set_threads(ctx, 64));
    GOOD(fp8kit_quantize(ctx, &d, &xt, &q, &s, NULL));
    GOOD(fp8kit_ctx_set_threads(ctx, bound));
    GOOD(fp8kit_ctx_set_threads(ctx, 2));
}

int main(void)
{
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx), FP8KIT_OK);
    if (!ctx)
        return fk_test_summary("test_hostile_api");
    test_thread_bound();
    printf("test_hostile_api: %ld bad calls checked (status, message, memory unchanged)\n", n_bad);
    fp8kit_ctx_destroy(ctx);
    return fk_test_summary("test_hostile_api");
}
