/* st_write.c - safetensors writer: header serialization (jansson), files
 * written under a temporary name in the target directory and renamed into
 * place only when complete, and the registry of temporary paths that a
 * SIGINT/SIGTERM/SIGHUP/SIGBUS handler removes before the process dies (a
 * SIGBUS names the mapped input it hit: st_map_register); SIGXFSZ ignored
 * while a conversion writes (st_xfsz_hold), so RLIMIT_FSIZE is an EFBIG
 * error with a message instead of a silent death. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "io/st_model.h"


/* ------------------------------------------------------------------ header */
fp8kit_status st_header_build(const st_out_tensor *t, size_t n, const st_kv *meta, size_t nmeta, int has_meta,
                              unsigned char **out, size_t *out_len, uint64_t *data_size, char *err, size_t errlen)
{
    char q[160];
    fp8kit_status st = FP8KIT_OK;
    char *text = NULL;
    json_t *root = json_object();
    if (!root)
        return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
    if (has_meta) {
        json_t *m = json_object();
        if (!m || json_object_set_new(root, "__metadata__", m)) {
            st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
            goto out;
        }
        for (size_t i = 0; i < nmeta; i++) {
            json_t *v = json_string(meta[i].value);
            if (!v || json_object_set_new(m, meta[i].key, v)) {
                st_quote(meta[i].key, q, sizeof q);
                st = st_err(err, errlen, FP8KIT_ERR_INVALID_ARGUMENT, "metadata entry '%s' is not valid UTF-8", q);
                goto out;
            }
        }
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        st_quote(t[i].name, q, sizeof q);
        if (!st_dtype_size(t[i].dtype) || t[i].ndim < 0 || t[i].ndim > ST_MAX_DIMS) {
            st = st_err(err, errlen, FP8KIT_ERR_INVALID_ARGUMENT, "tensor '%s': bad dtype or rank", q);
            goto out;
        }
        json_t *e = json_object(), *shape = json_array(), *offs = json_array();
        if (!e || !shape || !offs) {
            json_decref(e), json_decref(shape), json_decref(offs);
            st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
            goto out;
        }
        /* the reader's rule (st_shape_bytes), so whatever it accepts can be written back */
        uint64_t bytes = 0;
        int bad = st_shape_bytes(t[i].dtype, t[i].ndim, t[i].shape, &bytes);
        if (bad)
            st = st_err(err, errlen, FP8KIT_ERR_SIZE_OVERFLOW, "tensor '%s': %s", q,
                        bad == -1 ? "a negative dim" : "size overflows");
        for (int d = 0; d < t[i].ndim; d++)
            json_array_append_new(shape, json_integer((json_int_t)t[i].shape[d]));
        if (!st && off > (uint64_t)INT64_MAX - bytes)
            st = st_err(err, errlen, FP8KIT_ERR_SIZE_OVERFLOW, "tensor '%s': file size overflows", q);
        json_array_append_new(offs, json_integer((json_int_t)off));
        json_array_append_new(offs, json_integer((json_int_t)(off + bytes)));
        json_object_set_new(e, "dtype", json_string(st_dtype_name(t[i].dtype)));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets", offs);
        size_t before = json_object_size(root);
        if (st) {
            json_decref(e);
            goto out;
        }
        if (!strcmp(t[i].name, "__metadata__")) {
            json_decref(e);
            st = st_err(err, errlen, FP8KIT_ERR_INVALID_ARGUMENT, "tensor '%s': the name is reserved", q);
            goto out;
        }
        /* set_new takes e even when it fails; a repeated name replaces the
         * earlier entry, which shows as an object that did not grow */
        if (json_object_set_new(root, t[i].name, e) || json_object_size(root) != before + 1) {
            st = st_err(err, errlen, FP8KIT_ERR_INVALID_ARGUMENT,
                         "tensor '%s': the name is used twice or is not valid UTF-8", q);
            goto out;
        }
        off += bytes;
    }
    text = json_dumps(root, JSON_COMPACT);
    if (!text) {
        st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory (header)");
        goto out;
    }
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    if (padded > ST_MAX_HEADER) {
        st = st_err(err, errlen, FP8KIT_ERR_INVALID_ARGUMENT, "the header would have %zu bytes, over the 100 MB limit",
                     padded);
        goto out;
    }
    unsigned char *buf = malloc(8 + padded);
    if (!buf) {
        st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory (header)");
        goto out;
    }
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, text, len);
    memset(buf + 8 + len, ' ', padded - len);
    *out = buf;
    *out_len = 8 + padded;
    *data_size = off;
out:
    free(text);
    json_decref(root);
    return st;
}

/* ---------------------------------------------------- temporary path registry */
/* Tables only grow; an older table stays linked (and reachable) after a newer
 * one replaces it, so the signal handler never reads freed memory. */
typedef struct st_tmp_entry {
    char *path;
    int is_dir;
    volatile sig_atomic_t live;
} st_tmp_entry;

typedef struct st_tmp_table {
    struct st_tmp_table *prev;
    size_t cap;
    size_t n;
    st_tmp_entry e[];
} st_tmp_table;

static st_tmp_table *st_tmp_tab;
static pthread_mutex_t st_tmp_lock = PTHREAD_MUTEX_INITIALIZER;
static int st_tmp_handlers;
static const int st_tmp_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGBUS};

/* Async-signal-safe: unlink/rmdir only, newest first (files inside a
 * temporary directory are registered after it). */
static void st_tmp_remove_all(void)
{
    st_tmp_table *t = __atomic_load_n(&st_tmp_tab, __ATOMIC_ACQUIRE);
    if (!t)
        return;
    size_t n = __atomic_load_n(&t->n, __ATOMIC_ACQUIRE);
    for (size_t i = n; i-- > 0;) {
        if (!t->e[i].live)
            continue;
        t->e[i].live = 0;
        if (t->e[i].is_dir)
            (void)rmdir(t->e[i].path);
        else
            (void)unlink(t->e[i].path);
    }
}

/* ------------------------------------------- a directory moved aside (restore) */
/* While st_tree_commit's fallback has moved the old OUT aside, a signal puts
 * it back (rename is async-signal-safe) unless the new one is already in
 * place. One at a time per process (st_restore_lock). */
static char st_restore_from[PATH_MAX], st_restore_to[PATH_MAX];
static volatile sig_atomic_t st_restore_armed;
static pthread_mutex_t st_restore_lock = PTHREAD_MUTEX_INITIALIZER;

int st_tmp_restore_arm(const char *aside, const char *out)
{
    if (strlen(aside) >= PATH_MAX || strlen(out) >= PATH_MAX)
        return -1;
    pthread_mutex_lock(&st_restore_lock);
    memcpy(st_restore_from, aside, strlen(aside) + 1);
    memcpy(st_restore_to, out, strlen(out) + 1);
    __atomic_store_n(&st_restore_armed, 1, __ATOMIC_RELEASE);
    return 0;
}

void st_tmp_restore_disarm(void)
{
    __atomic_store_n(&st_restore_armed, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&st_restore_lock);
}

static void st_restore_now(void)
{
    struct stat sb;
    if (__atomic_load_n(&st_restore_armed, __ATOMIC_ACQUIRE) && lstat(st_restore_to, &sb) && errno == ENOENT)
        (void)rename(st_restore_from, st_restore_to);
}

/* ---------------------------------------------- mapped inputs (SIGBUS) */
/* Every file st_open maps is listed with its address range, so a SIGBUS
 * (a mapped input truncated while it is read) can name the file. Tables
 * only grow, like st_tmp_table; dead slots are reused; paths are kept inline
 * (their last ST_MAP_PATH - 1 bytes) so the handler never reads freed memory. */
#define ST_MAP_PATH 256
typedef struct st_map_entry {
    uintptr_t lo, hi;
    volatile sig_atomic_t live;
    char path[ST_MAP_PATH];
} st_map_entry;

typedef struct st_map_table {
    struct st_map_table *prev;
    size_t cap, n;
    st_map_entry *e[]; /* entries are shared by every table */
} st_map_table;

static st_map_table *st_map_tab;

static void st_put(const char *s)
{
    ssize_t r = write(STDERR_FILENO, s, strlen(s));
    (void)r;
}

static void st_put_u64(uint64_t v)
{
    char b[24];
    int i = (int)sizeof b - 1;
    b[i] = '\0';
    do
        b[--i] = (char)('0' + v % 10);
    while ((v /= 10) && i > 0);
    st_put(b + i);
}

/* Async-signal-safe: one line naming the mapped file holding addr, if any. */
static void st_map_report(uintptr_t addr)
{
    st_map_table *t = __atomic_load_n(&st_map_tab, __ATOMIC_ACQUIRE);
    size_t n = t ? __atomic_load_n(&t->n, __ATOMIC_ACQUIRE) : 0;
    for (size_t i = 0; i < n; i++) {
        st_map_entry *e = t->e[i];
        if (!e->live || addr < e->lo || addr >= e->hi)
            continue;
        st_put("fp8kit: ");
        st_put(e->path);
        st_put(": I/O error: the file shrank while being read (bus error at byte ");
        st_put_u64(addr - e->lo);
        st_put(" of ");
        st_put_u64(e->hi - e->lo);
        st_put("): it was truncated or rewritten during the run; the temporary output was removed and OUT was "
               "not changed\n");
        return;
    }
}

static void st_tmp_on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    int saved = errno;
    if (sig == SIGBUS && si && si->si_code > 0) /* a fault (BUS_ADRERR), not kill() or raise() */
        st_map_report((uintptr_t)si->si_addr);
    st_tmp_remove_all();
    st_restore_now();
    errno = saved;
    /* SA_RESETHAND restored the default action: die of the same signal */
    raise(sig);
}

static void st_tmp_install(void)
{
    if (st_tmp_handlers)
        return;
    st_tmp_handlers = 1;
    for (size_t i = 0; i < sizeof st_tmp_signals / sizeof st_tmp_signals[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(st_tmp_signals[i], NULL, &old) || old.sa_handler == SIG_IGN)
            continue; /* keep an inherited "ignore" (nohup) */
        if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
            continue; /* the program has its own handler */
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = st_tmp_on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND | SA_SIGINFO;
        (void)sigaction(st_tmp_signals[i], &sa, NULL);
    }
}

int st_map_register(const void *addr, size_t len, const char *path)
{
    st_map_entry *e = NULL;
    pthread_mutex_lock(&st_tmp_lock);
    st_tmp_install();
    st_map_table *t = st_map_tab;
    size_t slot = 0;
    for (; t && slot < t->n; slot++)
        if (!t->e[slot]->live)
            break;
    if (!t || slot == t->n) {
        if (!t || t->n == t->cap) {
            size_t cap = t ? 2 * t->cap : 16;
            st_map_table *nt = calloc(1, sizeof *nt + cap * sizeof nt->e[0]);
            if (!nt) {
                pthread_mutex_unlock(&st_tmp_lock);
                return -1;
            }
            nt->prev = t;
            nt->cap = cap;
            if (t)
                memcpy(nt->e, t->e, t->n * sizeof t->e[0]);
            nt->n = t ? t->n : 0;
            __atomic_store_n(&st_map_tab, nt, __ATOMIC_RELEASE);
            t = nt;
        }
        if (!(e = calloc(1, sizeof *e))) {
            pthread_mutex_unlock(&st_tmp_lock);
            return -1;
        }
        slot = t->n;
        t->e[slot] = e;
    }
    e = t->e[slot];
    size_t l = strlen(path);
    const char *tail = l < ST_MAP_PATH ? path : path + l - (ST_MAP_PATH - 4);
    snprintf(e->path, sizeof e->path, "%s%s", tail == path ? "" : "...", tail);
    e->lo = (uintptr_t)addr;
    e->hi = (uintptr_t)addr + len;
    __atomic_store_n(&e->live, 1, __ATOMIC_RELEASE);
    if (slot == t->n)
        __atomic_store_n(&t->n, slot + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&st_tmp_lock);
    return (int)slot;
}

void st_map_forget(int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&st_tmp_lock);
    if (st_map_tab && (size_t)slot < st_map_tab->n)
        st_map_tab->e[slot]->live = 0;
    pthread_mutex_unlock(&st_tmp_lock);
}

/* ------------------------------------------------------- SIGXFSZ */
static pthread_mutex_t st_xfsz_lock = PTHREAD_MUTEX_INITIALIZER;
static int st_xfsz_holders, st_xfsz_set;

void st_xfsz_hold(void)
{
    pthread_mutex_lock(&st_xfsz_lock);
    if (st_xfsz_holders++ == 0) {
        struct sigaction old, sa;
        if (!sigaction(SIGXFSZ, NULL, &old) && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) {
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = SIG_IGN;
            sigemptyset(&sa.sa_mask);
            st_xfsz_set = !sigaction(SIGXFSZ, &sa, NULL);
        }
    }
    pthread_mutex_unlock(&st_xfsz_lock);
}

void st_xfsz_release(void)
{
    pthread_mutex_lock(&st_xfsz_lock);
    if (st_xfsz_holders > 0 && --st_xfsz_holders == 0 && st_xfsz_set) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigemptyset(&sa.sa_mask);
        (void)sigaction(SIGXFSZ, &sa, NULL);
        st_xfsz_set = 0;
    }
    pthread_mutex_unlock(&st_xfsz_lock);
}

int st_tmp_register(const char *path, int is_dir)
{
    char *p = strdup(path);
    if (!p)
        return -1;
    pthread_mutex_lock(&st_tmp_lock);
    st_tmp_install();
    st_tmp_table *t = st_tmp_tab;
    if (!t || t->n == t->cap) {
        size_t cap = t ? 2 * t->cap : 16;
        st_tmp_table *nt = calloc(1, sizeof *nt + cap * sizeof nt->e[0]);
        if (!nt) {
            pthread_mutex_unlock(&st_tmp_lock);
            free(p);
            return -1;
        }
        nt->prev = t;
        nt->cap = cap;
        if (t) {
            for (size_t i = 0; i < t->n; i++) {
                nt->e[i].path = t->e[i].path;
                nt->e[i].is_dir = t->e[i].is_dir;
                nt->e[i].live = t->e[i].live;
            }
            nt->n = t->n;
        }
        __atomic_store_n(&st_tmp_tab, nt, __ATOMIC_RELEASE);
        t = nt;
    }
    size_t slot = t->n;
    t->e[slot].path = p;
    t->e[slot].is_dir = is_dir;
    t->e[slot].live = 1;
    __atomic_store_n(&t->n, slot + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&st_tmp_lock);
    return (int)slot;
}

void st_tmp_forget(int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&st_tmp_lock);
    /* every table's copy: the handler reads the newest, but be thorough */
    for (st_tmp_table *t = st_tmp_tab; t; t = t->prev)
        if ((size_t)slot < t->n)
            t->e[slot].live = 0;
    pthread_mutex_unlock(&st_tmp_lock);
}

void st_tmp_remove(int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&st_tmp_lock);
    st_tmp_table *t = st_tmp_tab;
    if (t && (size_t)slot < t->n && t->e[slot].live) {
        if (t->e[slot].is_dir)
            (void)rmdir(t->e[slot].path);
        else
            (void)unlink(t->e[slot].path);
    }
    for (; t; t = t->prev)
        if ((size_t)slot < t->n)
            t->e[slot].live = 0;
    pthread_mutex_unlock(&st_tmp_lock);
}

void st_tmp_cleanup(void)
{
    pthread_mutex_lock(&st_tmp_lock);
    st_tmp_remove_all();
    for (st_tmp_table *t = st_tmp_tab; t; t = t->prev)
        for (size_t i = 0; i < t->n; i++)
            t->e[i].live = 0;
    pthread_mutex_unlock(&st_tmp_lock);
}

/* ------------------------------------------------------------------ writer */
int st_rename(const char *from, const char *to, int force)
{
    if (force)
        return rename(from, to) ? errno : 0;
    if (!renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE))
        return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
        return errno;
    /* file systems without RENAME_NOREPLACE: link fails when `to` exists */
    struct stat sb;
    if (!stat(from, &sb) && S_ISDIR(sb.st_mode)) {
        if (!lstat(to, &sb))
            return EEXIST;
        return rename(from, to) ? errno : 0;
    }
    if (link(from, to))
        return errno;
    (void)unlink(from);
    return 0;
}

static char *st_dirname_dup(const char *path)
{
    const char *s = strrchr(path, '/');
    if (!s)
        return strdup(".");
    if (s == path)
        return strdup("/");
    return strndup(path, (size_t)(s - path));
}

/* 32-bit FNV-1a of this host's name: temporary names carry it, so a stale one
 * is only ever judged (by its writer's process id) on the host that made it. */
unsigned st_tmp_host_tag(void)
{
    char h[256] = "";
    (void)gethostname(h, sizeof h - 1);
    unsigned x = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)h; *p; p++)
        x = (x ^ *p) * 16777619u;
    return x;
}

/* Temporary names: "." + at most 160 bytes of the target's name + ST_TMP_TAG +
 * kind + host tag + process id + a random tag, below NAME_MAX whatever the
 * target's name. */
char *st_tmp_name(const char *final_path, const char *kind)
{
    char *dir = st_dirname_dup(final_path);
    const char *slash = strrchr(final_path, '/'), *base = slash ? slash + 1 : final_path;
    size_t bl = strlen(base) > 160 ? 160 : strlen(base), need = (dir ? strlen(dir) : 0) + bl + 80;
    char *p = dir ? malloc(need) : NULL;
    if (p) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned r = (unsigned)(ts.tv_nsec ^ (ts.tv_sec << 7)) ^ (unsigned)rand() ^ ((unsigned)getpid() << 12);
        snprintf(p, need, "%s/.%.*s" ST_TMP_TAG "%s-%08x-%ld-%06x", dir, (int)bl, base, kind, st_tmp_host_tag(),
                 (long)getpid(), r & 0xFFFFFF);
    }
    free(dir);
    return p;
}

fp8kit_status st_writer_open(st_writer *w, const char *final_path, int no_fsync, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    w->fd = -1;
    w->slot = -1;
    w->no_fsync = no_fsync;
    if (!(w->final_path = strdup(final_path)))
        return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
    /* a temporary name next to it (st_tmp_name: short enough for NAME_MAX
     * whatever the final name's length; mode 0666 less the umask) */
    int e = EEXIST;
    for (int tries = 0; tries < 100 && w->fd < 0 && e == EEXIST; tries++) {
        free(w->tmp_path);
        if (!(w->tmp_path = st_tmp_name(final_path, "file"))) {
            st_writer_abort(w);
            return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
        }
        w->fd = open(w->tmp_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        e = w->fd < 0 ? errno : 0;
    }
    if (w->fd < 0) {
        fp8kit_status st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: cannot create a temporary file here: %s",
                                   final_path, strerror(e));
        free(w->tmp_path);
        w->tmp_path = NULL;
        st_writer_abort(w);
        return st;
    }
    w->slot = st_tmp_register(w->tmp_path, 0);
    if (w->slot < 0) {
        st_writer_abort(w);
        return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
    }
    return FP8KIT_OK;
}

fp8kit_status st_writer_reserve(st_writer *w, uint64_t size, char *err, size_t errlen)
{
    if (size == 0)
        return FP8KIT_OK;
    int e = posix_fallocate(w->fd, 0, (off_t)size);
    if (e == EINVAL || e == EOPNOTSUPP || e == ENOSYS)
        e = ftruncate(w->fd, (off_t)size) ? errno : 0;
    if (e)
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: cannot reserve %llu bytes: %s", w->final_path,
                       (unsigned long long)size, strerror(e));
    return FP8KIT_OK;
}

fp8kit_status st_writer_pwrite(st_writer *w, const void *buf, size_t n, uint64_t off, char *err, size_t errlen)
{
    const char *p = buf;
    while (n) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t r = pwrite(w->fd, p, chunk, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return st_err(err, errlen, FP8KIT_ERR_IO, "%s: write failed: %s", w->final_path,
                           r ? strerror(errno) : "no progress");
        p += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return FP8KIT_OK;
}

fp8kit_status st_writer_finish(st_writer *w, char *err, size_t errlen)
{
    if (!w->no_fsync && fsync(w->fd))
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: fsync failed: %s", w->final_path, strerror(errno));
    int r = close(w->fd);
    w->fd = -1;
    if (r)
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: close failed: %s", w->final_path, strerror(errno));
    return FP8KIT_OK;
}

fp8kit_status st_writer_commit(st_writer *w, int force, char *err, size_t errlen)
{
    struct stat sb;
    if (force && !lstat(w->final_path, &sb) && !S_ISREG(sb.st_mode)) /* checked again, just before */
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: exists and is %s, not a regular file (not replaced)",
                      w->final_path, st_file_kind(sb.st_mode));
    int e = st_rename(w->tmp_path, w->final_path, force);
    if (e)
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", w->final_path,
                       e == EEXIST ? "exists (use --force to overwrite)" : strerror(e));
    st_tmp_forget(w->slot);
    w->slot = -1;
    free(w->tmp_path);
    w->tmp_path = NULL;
    if (!w->no_fsync) { /* make the rename itself durable */
        char *dir = st_dirname_dup(w->final_path);
        int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
        free(dir);
    }
    return FP8KIT_OK;
}

void st_writer_abort(st_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    if (w->tmp_path)
        (void)unlink(w->tmp_path);
    st_tmp_forget(w->slot);
    w->slot = -1;
    free(w->tmp_path);
    free(w->final_path);
    w->tmp_path = w->final_path = NULL;
}
