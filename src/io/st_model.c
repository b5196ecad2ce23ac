/* st_model.c - model directories for the checkpoint converter: what an input
 * path is (one .safetensors file, a directory holding model.safetensors, a
 * sharded directory with its index), the temporary output directory created
 * beside OUT (mode from the umask, every path in it registered for removal
 * on a signal), the model's other files copied into it byte for byte,
 * config.json given or stripped of its quantization_config, and the finished
 * directory put in place in one step (a rename, or with --force an atomic
 * exchange with the old directory, which is then removed). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/st_model.h"

#define ST_MAX_TREE_DEPTH 16

static char *st_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (p) {
        memcpy(p, dir, a);
        p[a] = '/';
        memcpy(p + a + 1, name, b + 1);
    }
    return p;
}

static char *st_parent(const char *path)
{
    const char *s = strrchr(path, '/');
    if (!s)
        return strdup(".");
    return s == path ? strdup("/") : strndup(path, (size_t)(s - path));
}

static const char *st_base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int st_is_reg(const char *path)
{
    struct stat sb;
    return !stat(path, &sb) && S_ISREG(sb.st_mode);
}

/* Does path name something (links followed) that is not a regular file? */
static int st_is_other(const char *path, unsigned *mode)
{
    struct stat sb;
    if (stat(path, &sb) || S_ISREG(sb.st_mode))
        return 0;
    *mode = sb.st_mode;
    return 1;
}

/* ------------------------------------------------------------------ input */
fp8kit_status st_input_classify(const char *in, st_input *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    struct stat sb;
    if (stat(in, &sb))
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", in, strerror(errno));
    if (S_ISREG(sb.st_mode)) {
        if (!strcmp(st_base(in), ST_INDEX_NAME)) {
            out->kind = ST_INPUT_SHARDED;
            out->dir = st_parent(in);
        } else {
            out->kind = ST_INPUT_FILE;
            out->file = strdup(in);
        }
    } else if (S_ISDIR(sb.st_mode)) {
        out->dir = strdup(in);
        char *ix = st_join(in, ST_INDEX_NAME), *one = st_join(in, ST_SINGLE_NAME);
        if (!ix || !one) {
            free(ix), free(one);
            st_input_free(out);
            return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
        }
        unsigned mode = 0;
        const char *odd = st_is_other(ix, &mode) ? ix : st_is_other(one, &mode) ? one : NULL;
        if (odd) { /* a FIFO named model.safetensors would block a reader: refused */
            fp8kit_status st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: not a regular file (%s)", odd,
                                      st_file_kind(mode));
            free(ix), free(one);
            st_input_free(out);
            return st;
        }
        if (st_is_reg(ix) && st_is_reg(one)) {
            free(ix), free(one);
            st_input_free(out);
            return st_err(err, errlen, FP8KIT_ERR_INVALID_ARGUMENT,
                          "%s: holds both %s and %s; which one is the model is ambiguous (give the file or the "
                          "index's path)",
                          in, ST_SINGLE_NAME, ST_INDEX_NAME);
        }
        if (st_is_reg(ix)) {
            out->kind = ST_INPUT_SHARDED;
            free(one);
        } else if (st_is_reg(one)) {
            out->kind = ST_INPUT_DIR_FILE;
            out->file = one;
        } else {
            free(ix), free(one);
            st_input_free(out);
            return st_err(err, errlen, FP8KIT_ERR_IO,
                          "%s: a directory without %s or %s (not a model directory)", in, ST_SINGLE_NAME,
                          ST_INDEX_NAME);
        }
        free(ix);
    } else {
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: not a regular file or a directory (%s)", in,
                      st_file_kind(sb.st_mode));
    }
    if (!out->dir && out->kind != ST_INPUT_FILE) {
        st_input_free(out);
        return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (out->kind == ST_INPUT_FILE && !out->file)
        return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
    return FP8KIT_OK;
}

void st_input_free(st_input *in)
{
    free(in->dir);
    free(in->file);
    memset(in, 0, sizeof *in);
}

/* Is `inner` the same path as `outer` or inside it (both resolved)? */
static int st_path_within(const char *inner, const char *outer)
{
    size_t n = strlen(outer);
    if (n == 1 && outer[0] == '/')
        return 1;
    return !strncmp(inner, outer, n) && (inner[n] == '\0' || inner[n] == '/');
}

/* realpath of path, or of its parent joined with its base name when path does
 * not exist yet. */
static char *st_resolve(const char *path)
{
    char *r = realpath(path, NULL);
    if (r || errno != ENOENT)
        return r;
    char *parent = st_parent(path), *rp = parent ? realpath(parent, NULL) : NULL;
    char *j = rp ? st_join(strcmp(rp, "/") ? rp : "", st_base(path)) : NULL;
    free(parent), free(rp);
    return j;
}

/* Is `path` (resolved) the file or directory `node` (device and inode), or
 * is one of its ancestors that node? Paths can differ where the node is the
 * same: a bind mount, a hard link. */
static int st_node_within(const char *path, const struct stat *node)
{
    char *p = strdup(path);
    int hit = 0;
    for (size_t n = p ? strlen(p) : 0; p && n > 0 && !hit;) {
        struct stat sb;
        hit = !stat(p, &sb) && sb.st_dev == node->st_dev && sb.st_ino == node->st_ino;
        while (n > 1 && p[n - 1] != '/') /* up one level */
            n--;
        if (n <= 1) {
            if (!hit && strcmp(p, "/"))
                hit = !stat("/", &sb) && sb.st_dev == node->st_dev && sb.st_ino == node->st_ino;
            break;
        }
        p[--n] = '\0';
    }
    free(p);
    return hit;
}

fp8kit_status st_check_out_vs_in(const char *in, const char *out, int in_is_dir, char *err, size_t errlen)
{
    char *ri = realpath(in, NULL), *ro = st_resolve(out);
    struct stat si, so;
    int have_in = ri && !stat(ri, &si), have_out = ro && !stat(ro, &so);
    fp8kit_status st = FP8KIT_OK;
    if (!ri)
        st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", in, strerror(errno));
    else if (!ro)
        st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: the directory it would be written in does not exist (%s)", out,
                    strerror(errno));
    else if (!strcmp(ri, ro) || (have_in && have_out && si.st_dev == so.st_dev && si.st_ino == so.st_ino))
        st = st_err(err, errlen, FP8KIT_ERR_INVALID_ARGUMENT,
                    "%s: the output is the input; write to a new path (the input is never replaced)", out);
    else if (in_is_dir && (st_path_within(ro, ri) || (have_in && st_node_within(ro, &si))))
        st = st_err(err, errlen, FP8KIT_ERR_INVALID_ARGUMENT, "%s: the output lies inside the input directory %s",
                    out, in);
    else if (st_path_within(ri, ro) || (have_out && S_ISDIR(so.st_mode) && st_node_within(ri, &so)))
        st = st_err(err, errlen, FP8KIT_ERR_INVALID_ARGUMENT,
                    "%s: the input %s lies inside it; replacing it would remove the input", out, in);
    free(ri), free(ro);
    return st;
}

/* --------------------------------------------------------- temporary tree */
static fp8kit_status st_tree_track(st_tmp_tree *t, const char *path, int is_dir, char *err, size_t errlen)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        int *s = realloc(t->slots, cap * sizeof *s);
        if (!s)
            return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
        t->slots = s, t->cap = cap;
    }
    int slot = st_tmp_register(path, is_dir);
    if (slot < 0)
        return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
    t->slots[t->n++] = slot;
    return FP8KIT_OK;
}

fp8kit_status st_tree_add(st_tmp_tree *t, const char *path, int is_dir, char *err, size_t errlen)
{
    return st_tree_track(t, path, is_dir, err, errlen);
}

/* For a temporary name "." + target + ST_TMP_TAG + ... (tag points at the
 * tag): does dir/target exist? No when the name's target part may have been
 * cut (st_tmp_name keeps at most 160 bytes of it). */
static int st_target_exists(const char *dir, const char *name, const char *tag)
{
    size_t n = (size_t)(tag - name) - 1;
    if (n == 0 || n >= 160)
        return 0;
    char *target = strndup(name + 1, n), *p = target ? st_join(dir, target) : NULL;
    struct stat sb;
    int yes = p && !lstat(p, &sb);
    free(target), free(p);
    return yes;
}

int st_tmp_clean_stale(const char *final_path)
{
    char *dir = st_parent(final_path);
    DIR *d = dir ? opendir(dir) : NULL;
    int removed = 0;
    if (!d) {
        free(dir);
        return 0;
    }
    const unsigned host = st_tmp_host_tag();
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *tag = e->d_name[0] == '.' ? strstr(e->d_name, ST_TMP_TAG) : NULL;
        if (!tag)
            continue;
        char kind[8];
        unsigned h;
        long pid;
        int n = 0;
        if (sscanf(tag + strlen(ST_TMP_TAG), "%7[a-z]-%8x-%ld-%*6x%n", kind, &h, &pid, &n) != 3 || !n ||
            tag[strlen(ST_TMP_TAG) + (size_t)n] != '\0' || h != host || pid <= 0)
            continue;
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* its writer is alive (or may be): not ours to touch */
        if (!strcmp(kind, "old") && !st_target_exists(dir, e->d_name, tag))
            continue; /* an old OUT moved aside, never put back: the only copy */
        char *p = st_join(dir, e->d_name);
        struct stat sb;
        if (p && !lstat(p, &sb) && (S_ISDIR(sb.st_mode) ? !st_remove_tree(p) : !unlink(p)))
            removed++;
        free(p);
    }
    closedir(d);
    free(dir);
    return removed;
}

fp8kit_status st_tree_create(st_tmp_tree *t, const char *final_path, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    for (int tries = 0; tries < 100; tries++) {
        char *p = st_tmp_name(final_path, "dir");
        if (!p)
            return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
        if (!mkdir(p, 0777)) { /* the umask applies, as to any new directory */
            t->root = p;
            return st_tree_track(t, p, 1, err, errlen);
        }
        int e = errno;
        free(p);
        if (e != EEXIST)
            return st_err(err, errlen, FP8KIT_ERR_IO, "%s: cannot create a temporary directory next to it: %s",
                          final_path, strerror(e));
    }
    return st_err(err, errlen, FP8KIT_ERR_IO, "%s: cannot find a free temporary name next to it", final_path);
}

void st_tree_forget(st_tmp_tree *t)
{
    for (size_t i = 0; i < t->n; i++)
        st_tmp_forget(t->slots[i]);
    t->n = 0;
}

void st_tree_discard(st_tmp_tree *t)
{
    for (size_t i = t->n; i-- > 0;)
        st_tmp_remove(t->slots[i]);
    free(t->slots);
    free(t->root);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------------- copy */
static fp8kit_status st_copy_file(const char *src, const char *dst, int no_fsync, uint64_t *bytes, char *err,
                                  size_t errlen)
{
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (in < 0)
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", src, strerror(errno));
    struct stat sb;
    memset(&sb, 0, sizeof sb);
    if (fstat(in, &sb) || !S_ISREG(sb.st_mode)) {
        close(in);
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: not a regular file (%s)", src, st_file_kind(sb.st_mode));
    }
    /* the umask's mode, but no group / other permission the source lacks: a
     * private file (linked from anywhere) stays private in OUT */
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600 | (sb.st_mode & 0066));
    if (out < 0) {
        int e = errno;
        close(in);
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", dst, strerror(e));
    }
    fp8kit_status st = FP8KIT_OK;
    uint64_t done = 0, size = (uint64_t)sb.st_size;
    int plain = 0;
    char buf[1 << 16];
    while (done < size && !st) {
        ssize_t r = -1;
        if (!plain) {
            r = copy_file_range(in, NULL, out, NULL, size - done > (1u << 30) ? (1u << 30) : size - done, 0);
            if (r < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
                plain = 1;
                continue;
            }
        } else {
            r = pread(in, buf, sizeof buf, (off_t)done);
            if (r > 0) {
                ssize_t w = 0;
                for (ssize_t o = 0; o < r; o += w)
                    if ((w = pwrite(out, buf + o, (size_t)(r - o), (off_t)(done + (uint64_t)o))) <= 0) {
                        if (w < 0 && errno == EINTR) {
                            w = 0;
                            continue;
                        }
                        st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: write failed: %s", dst,
                                    w ? strerror(errno) : "no progress");
                        break;
                    }
            }
        }
        if (st)
            break;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            st = st_err(err, errlen, FP8KIT_ERR_IO, "%s -> %s: copy failed: %s", src, dst, strerror(errno));
        else if (r == 0)
            st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: shrank while being copied", src);
        else
            done += (uint64_t)r;
    }
    if (!st && !no_fsync && fsync(out))
        st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: fsync failed: %s", dst, strerror(errno));
    if (close(out) && !st)
        st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: close failed: %s", dst, strerror(errno));
    close(in);
    if (!st)
        *bytes += done;
    return st;
}

static int st_skipped(const char *name, const char *const *skip, size_t nskip)
{
    for (size_t i = 0; i < nskip; i++)
        if (!strcmp(name, skip[i]))
            return 1;
    return 0;
}

/* Hidden names not copied: version control and download caches, and the
 * temporary paths of this tool. */
static int st_never_copied(const char *name)
{
    return !strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, ".git") || !strcmp(name, ".cache") ||
           (name[0] == '.' && strstr(name, ST_TMP_TAG));
}

static fp8kit_status st_copy_dir(st_tmp_tree *t, const char *src, const char *dst, const char *const *skip,
                                 size_t nskip, int depth, int no_fsync, uint64_t *bytes, int64_t *nfiles, char *err,
                                 size_t errlen)
{
    if (depth > ST_MAX_TREE_DEPTH)
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: directories nested deeper than %d levels (a link loop?)", src,
                      ST_MAX_TREE_DEPTH);
    DIR *d = opendir(src);
    if (!d)
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", src, strerror(errno));
    /* sorted, so the copy order (and any error) does not depend on the file system */
    struct dirent **list = NULL;
    int n = scandir(src, &list, NULL, alphasort);
    closedir(d);
    if (n < 0)
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", src, strerror(errno));
    fp8kit_status st = FP8KIT_OK;
    for (int i = 0; i < n; i++) {
        const char *name = list[i]->d_name;
        if (st || st_never_copied(name) || (depth == 0 && st_skipped(name, skip, nskip)))
            continue;
        char *s = st_join(src, name), *o = st_join(dst, name);
        struct stat sb;
        if (!s || !o)
            st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
        else if (stat(s, &sb)) /* links are followed: a model in a download cache is links to blobs */
            st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", s, strerror(errno));
        else if (S_ISDIR(sb.st_mode)) {
            if (mkdir(o, 0777))
                st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", o, strerror(errno));
            else if (!(st = st_tree_track(t, o, 1, err, errlen)))
                st = st_copy_dir(t, s, o, skip, nskip, depth + 1, no_fsync, bytes, nfiles, err, errlen);
        } else if (S_ISREG(sb.st_mode)) {
            if (!(st = st_tree_track(t, o, 0, err, errlen)) && !(st = st_copy_file(s, o, no_fsync, bytes, err, errlen)))
                ++*nfiles;
        } else {
            st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: not a regular file or a directory (%s; not copied)", s,
                        st_file_kind(sb.st_mode));
        }
        free(s), free(o);
    }
    for (int i = 0; i < n; i++)
        free(list[i]);
    free(list);
    return st;
}

fp8kit_status st_copy_model_files(st_tmp_tree *t, const char *src, const char *const *skip, size_t nskip,
                                  int no_fsync, uint64_t *bytes, int64_t *nfiles, char *err, size_t errlen)
{
    return st_copy_dir(t, src, t->root, skip, nskip, 0, no_fsync, bytes, nfiles, err, errlen);
}

/* ----------------------------------------------------------- config.json */
/* Integers beyond 64 bits (Python's json reads and writes them, jansson does
 * not): each such literal is replaced by the string "\x02<k>\x02" before
 * parsing, and its text kept under FK_BIGINTS_KEY so st_config_write puts it
 * back. Returns the rewritten text (malloc'd) or NULL. */
#define FK_BIGINTS_KEY "\x02" "bigints"
static char *st_protect_bigints(const char *src, size_t n, json_t *texts)
{
    char *out = malloc(2 * n + 32), tok[40];
    size_t o = 0;
    int in_str = 0;
    for (size_t i = 0; out && i < n;) {
        char ch = src[i];
        if (in_str) {
            out[o++] = src[i++];
            if (ch == '\\' && i < n)
                out[o++] = src[i++];
            else if (ch == '"')
                in_str = 0;
            continue;
        }
        if (ch == '"') {
            in_str = 1;
            out[o++] = src[i++];
            continue;
        }
        if (ch == '-' || (ch >= '0' && ch <= '9')) {
            size_t e = i + (ch == '-');
            while (e < n && src[e] >= '0' && src[e] <= '9')
                e++;
            size_t digits = e - i - (ch == '-');
            int integer = e >= n || !strchr(".eE", src[e]);
            if (integer && digits > 18) {
                char *lit = strndup(src + i, e - i);
                errno = 0;
                (void)strtoll(lit ? lit : "0", NULL, 10);
                if (lit && errno == ERANGE) {
                    snprintf(tok, sizeof tok, "\"\\u0002%zu\\u0002\"", json_array_size(texts));
                    json_array_append_new(texts, json_string(lit));
                    size_t l = strlen(tok);
                    if (l > e - i) { /* the token is longer than a short literal: grow */
                        char *g = realloc(out, 2 * n + 32 + 40 * json_array_size(texts));
                        if (!g) {
                            free(lit);
                            free(out);
                            return NULL;
                        }
                        out = g;
                    }
                    memcpy(out + o, tok, l);
                    o += l;
                    i = e;
                    free(lit);
                    continue;
                }
                free(lit);
            }
            memcpy(out + o, src + i, e - i);
            o += e - i;
            i = e;
            continue;
        }
        out[o++] = src[i++];
    }
    if (out)
        out[o] = '\0';
    return out;
}

fp8kit_status st_config_load(const char *dir, json_t **config, char *err, size_t errlen)
{
    *config = NULL;
    char *p = st_join(dir, ST_CONFIG_NAME);
    if (!p)
        return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
    unsigned mode = 0;
    if (st_is_other(p, &mode)) { /* a FIFO, device, socket or directory */
        fp8kit_status st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: not a regular file (%s)", p, st_file_kind(mode));
        free(p);
        return st;
    }
    if (!st_is_reg(p)) {
        free(p);
        return FP8KIT_OK; /* no config.json: nothing to read or rewrite */
    }
    fp8kit_status st = FP8KIT_OK;
    json_t *j = NULL, *big = json_array();
    char *text = NULL, *prot = NULL;
    /* O_NONBLOCK: a FIFO swapped in after the check must not block the open */
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat sb;
    memset(&sb, 0, sizeof sb);
    if (fd < 0 || fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_size > (64 << 20)) {
        st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s%s", p,
                    fd < 0 ? strerror(errno) : !S_ISREG(sb.st_mode) ? "not a regular file: " : "larger than 64 MB",
                    fd >= 0 && !S_ISREG(sb.st_mode) ? st_file_kind(sb.st_mode) : "");
        goto out;
    }
    size_t n = (size_t)sb.st_size, got = 0;
    if (!(text = malloc(n + 1)) || !big) {
        st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    while (got < n) {
        ssize_t r = read(fd, text + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: read failed: %s", p, r ? strerror(errno) : "file shrank");
            goto out;
        }
        got += (size_t)r;
    }
    if (!(prot = st_protect_bigints(text, n, big))) {
        st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    json_error_t je;
    j = json_loads(prot, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        char why[160];
        st_json_reason(je.text, why, sizeof why);
        st = st_err(err, errlen, FP8KIT_ERR_CORRUPT_FILE, "%s: invalid JSON (line %d, column %d): %s", p, je.line,
                    je.column, why);
    } else if (!json_is_object(j)) {
        st = st_err(err, errlen, FP8KIT_ERR_CORRUPT_FILE, "%s: not a JSON object", p);
        json_decref(j);
        j = NULL;
    } else if (json_array_size(big)) {
        json_object_set(j, FK_BIGINTS_KEY, big);
    }
out:
    if (fd >= 0)
        close(fd);
    free(text);
    free(prot);
    json_decref(big);
    free(p);
    *config = j;
    return st;
}

/* A real as Python's json writes it: the shortest text that reads back to the
 * same double, with ".0" when it would otherwise read as an integer. */
static void st_real_text(double v, char *buf, size_t n)
{
    int p = 1;
    for (; p < 17; p++) { /* fewest significant digits that read back */
        snprintf(buf, n, "%.*e", p - 1, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    snprintf(buf, n, "%.*e", p - 1, v);
    const char *e = strchr(buf, 'e');
    int x = e ? atoi(e + 1) : 0;
    if (isfinite(v) && x >= -4 && x < 16) /* fixed notation, as Python's repr */
        snprintf(buf, n, "%.*f", p - 1 - x > 0 ? p - 1 - x : 0, v);
    if (!strpbrk(buf, ".eEn"))
        strncat(buf, ".0", n - strlen(buf) - 1);
}

/* Replaces every real in j by a placeholder string "\x01<k>\x01" and appends
 * its text to texts (jansson prints reals with 17 digits: 1e-05 would become
 * 1.0000000000000001e-05). */
static json_t *st_real_token(json_t *v, json_t *texts)
{
    char tok[32], num[40];
    st_real_text(json_real_value(v), num, sizeof num);
    snprintf(tok, sizeof tok, "\x01%zu\x01", json_array_size(texts));
    json_array_append_new(texts, json_string(num));
    return json_string(tok);
}

static void st_reals_out(json_t *j, json_t *texts)
{
    const char *key;
    json_t *v;
    size_t i;
    if (json_is_object(j)) {
        json_object_foreach(j, key, v) {
            if (json_is_real(v))
                json_object_set_new(j, key, st_real_token(v, texts));
            else
                st_reals_out(v, texts);
        }
    } else if (json_is_array(j)) {
        json_array_foreach(j, i, v) {
            if (json_is_real(v))
                json_array_set_new(j, i, st_real_token(v, texts));
            else
                st_reals_out(v, texts);
        }
    }
}

/* At p, a placeholder string "\u000<tag><k>\u000<tag>" (quotes included) of
 * one of texts' entries: its length, and the text in *num; else 0. */
static size_t st_placeholder(const char *p, char tag, const json_t *texts, const char **num)
{
    char open[8], fmt[24];
    unsigned long k;
    int used = 0;
    snprintf(open, sizeof open, "\"\\u000%c", tag);
    snprintf(fmt, sizeof fmt, "%%lu\\u000%c\"%%n", tag);
    if (!texts || strncmp(p, open, 7) || sscanf(p + 7, fmt, &k, &used) != 1 || !used ||
        k >= json_array_size(texts))
        return 0;
    *num = json_string_value(json_array_get(texts, k));
    return 7 + (size_t)used;
}

/* JSON text of j, indented by 2 as Python's json.dump(indent=2) writes it. */
static char *st_json_text(json_t *j)
{
    json_t *texts = json_array(), *big = json_incref(json_object_get(j, FK_BIGINTS_KEY));
    if (!texts)
        return NULL;
    json_object_del(j, FK_BIGINTS_KEY);
    st_reals_out(j, texts);
    /* ASCII only, as Python's json.dump (ensure_ascii): \u escapes with
     * lower-case hex, DEL escaped too */
    char *raw = json_dumps(j, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    if (!raw) {
        json_decref(texts);
        return NULL;
    }
    size_t cap = 6 * strlen(raw) + 40 * json_array_size(texts) + 1, o = 0;
    for (size_t i = 0; i < json_array_size(big); i++)
        cap += strlen(json_string_value(json_array_get(big, i)));
    char *out = malloc(cap);
    for (const char *p = raw; out && *p;) {
        if (p[0] == '\\' && p[1] == 'u' && p[2] && p[3] && p[4] && p[5] && strncmp(p, "\\u0001", 6) &&
            strncmp(p, "\\u0002", 6)) {
            for (int k = 0; k < 6; k++)
                out[o++] = (char)(k >= 2 && p[k] >= 'A' && p[k] <= 'F' ? p[k] - 'A' + 'a' : p[k]);
            p += 6;
            continue;
        }
        if (p[0] == '\\' && p[1]) { /* any other escape: copied as a pair */
            out[o++] = *p++;
            out[o++] = *p++;
            continue;
        }
        if (*p == 0x7F) {
            memcpy(out + o, "\\u007f", 6);
            o += 6;
            p++;
            continue;
        }
        /* reals (tag 1) and integers beyond 64 bits (tag 2) put back */
        const char *num = NULL;
        size_t used = st_placeholder(p, '1', texts, &num);
        if (!used)
            used = st_placeholder(p, '2', big, &num);
        if (used) {
            size_t l = strlen(num);
            memcpy(out + o, num, l);
            o += l;
            p += used;
        } else {
            out[o++] = *p++;
        }
    }
    if (out)
        out[o] = '\0';
    free(raw);
    json_decref(texts);
    json_decref(big);
    return out;
}

fp8kit_status st_config_write(st_tmp_tree *t, const json_t *config, json_t *qcfg, int no_fsync, uint64_t *bytes,
                              char *err, size_t errlen)
{
    json_t *c = json_deep_copy(config);
    char *p = st_join(t->root, ST_CONFIG_NAME), *text = NULL;
    fp8kit_status st = FP8KIT_OK;
    if (!c || !p) {
        st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    if (qcfg)
        json_object_set(c, "quantization_config", qcfg);
    else
        json_object_del(c, "quantization_config");
    text = st_json_text(c);
    if (!text) {
        st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory (config.json)");
        goto out;
    }
    if ((st = st_tree_track(t, p, 0, err, errlen)))
        goto out;
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", p, strerror(errno));
        goto out;
    }
    size_t len = strlen(text);
    for (size_t o = 0; o < len + 1 && !st;) {
        ssize_t w = o < len ? write(fd, text + o, len - o) : write(fd, "\n", 1);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: write failed: %s", p, w ? strerror(errno) : "no progress");
        else
            o += (size_t)w;
    }
    if (!st && !no_fsync && fsync(fd))
        st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: fsync failed: %s", p, strerror(errno));
    if (close(fd) && !st)
        st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: close failed: %s", p, strerror(errno));
    if (!st)
        *bytes += len + 1;
out:
    json_decref(c);
    free(p);
    free(text);
    return st;
}

/* ----------------------------------------------------------------- commit */
static __thread int st_rm_first_err; /* nftw has no user pointer */

static int st_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)ftw;
    if ((flag == FTW_DP ? rmdir(path) : unlink(path)) && !st_rm_first_err)
        st_rm_first_err = errno;
    return 0; /* go on: remove everything that can be removed */
}

int st_remove_tree(const char *path)
{
    /* FTW_PHYS: links are removed, not followed; FTW_MOUNT: a file system
     * mounted inside is left alone (its mount point stays, with an error) */
    st_rm_first_err = 0;
    int r = nftw(path, st_rm_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
    return r ? errno : st_rm_first_err;
}

static void st_fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

fp8kit_status st_tree_commit(st_tmp_tree *t, const char *out, int replace, int no_fsync, int *out_changed,
                             char *warn, size_t warnlen, char *err, size_t errlen)
{
    if (!no_fsync)
        st_fsync_dir(t->root);
    struct stat ob;
    int exists = !lstat(out, &ob);
    if (exists && !replace)
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: appeared while converting (not replaced)", out);
    if (exists && !S_ISDIR(ob.st_mode))
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: exists and is %s, not a directory (not replaced)", out,
                      st_file_kind(ob.st_mode));
    if (!exists) {
        int e = st_rename(t->root, out, 0);
        if (e)
            return st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", out,
                          e == EEXIST ? "appeared while converting (not replaced)" : strerror(e));
        st_tree_forget(t);
    } else {
        /* one step: exchange the two directories, then remove the old one
         * (now under the temporary name) */
        if (!renameat2(AT_FDCWD, t->root, AT_FDCWD, out, RENAME_EXCHANGE)) {
            st_tree_forget(t);
        } else if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) {
            /* no exchange here: move the old one aside, the new one in, and
             * the old one back if the second rename fails (a signal in
             * between puts it back too: st_tmp_restore_arm) */
            char *old = st_tmp_name(out, "old");
            if (!old)
                return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
            if (st_tmp_restore_arm(old, out)) {
                free(old);
                return st_err(err, errlen, FP8KIT_ERR_IO, "%s: path too long to replace it safely", out);
            }
            if (rename(out, old)) {
                int e = errno;
                st_tmp_restore_disarm();
                free(old);
                return st_err(err, errlen, FP8KIT_ERR_IO, "%s: cannot move the old directory aside: %s", out,
                              strerror(e));
            }
            if (rename(t->root, out)) {
                int e = errno, back = rename(old, out) ? errno : 0;
                st_tmp_restore_disarm();
                fp8kit_status st;
                if (back) { /* OUT is gone from its name: say where it is */
                    if (out_changed)
                        *out_changed = 1;
                    st = st_err(err, errlen, FP8KIT_ERR_IO,
                                "%s: cannot move the new directory into place (%s), and the old directory could "
                                "not be moved back (%s): it is now %s (nothing in it was removed; move it back "
                                "with mv)",
                                out, strerror(e), strerror(back), old);
                } else {
                    st = st_err(err, errlen, FP8KIT_ERR_IO,
                                "%s: cannot move the new directory into place: %s (the old one is back, unchanged)",
                                out, strerror(e));
                }
                free(old);
                return st;
            }
            st_tmp_restore_disarm();
            st_tree_forget(t);
            free(t->root);
            t->root = old;
        } else {
            return st_err(err, errlen, FP8KIT_ERR_IO, "%s: cannot replace it: %s", out, strerror(errno));
        }
        /* the new directory is in place; the old one goes, as far as it can
         * (an immutable file or a mount point inside it stays, with a warning) */
        int e = st_remove_tree(t->root);
        if (e && warn && warnlen)
            snprintf(warn, warnlen,
                     "%s: replaced, but the old directory could not be removed completely (%s): what is left of it "
                     "is in %s",
                     out, strerror(e), t->root);
    }
    if (!no_fsync) {
        char *parent = st_parent(out);
        if (parent)
            st_fsync_dir(parent);
        free(parent);
    }
    return FP8KIT_OK;
}
