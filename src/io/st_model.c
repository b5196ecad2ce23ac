/* st_model.c - model directories for the checkpoint converter: what an input
 * path is (one .safetensors file, a directory holding model.safetensors, a
 * sharded directory with its index), the temporary output directory created
 * beside OUT (mode from the umask, every path in it registered for removal
 * on a signal), the model's other files copied into it byte for byte
 * (config.json: st_config.c), and the finished
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

char *st_path_join(const char *dir, const char *name)
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

int st_is_regular(const char *path)
{
    struct stat sb;
    return !stat(path, &sb) && S_ISREG(sb.st_mode);
}

/* Does path name something (links followed) that is not a regular file? */
int st_is_special(const char *path, unsigned *mode)
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
        char *ix = st_path_join(in, ST_INDEX_NAME), *one = st_path_join(in, ST_SINGLE_NAME);
        if (!ix || !one) {
            free(ix), free(one);
            st_input_free(out);
            return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
        }
        unsigned mode = 0;
        const char *odd = st_is_special(ix, &mode) ? ix : st_is_special(one, &mode) ? one : NULL;
        if (odd) { /* a FIFO named model.safetensors would block a reader: refused */
            fp8kit_status st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: not a regular file (%s)", odd,
                                      st_file_kind(mode));
            free(ix), free(one);
            st_input_free(out);
            return st;
        }
        if (st_is_regular(ix) && st_is_regular(one)) {
            free(ix), free(one);
            st_input_free(out);
            return st_err(err, errlen, FP8KIT_ERR_INVALID_ARGUMENT,
                          "%s: holds both %s and %s; which one is the model is ambiguous (give the file or the "
                          "index's path)",
                          in, ST_SINGLE_NAME, ST_INDEX_NAME);
        }
        if (st_is_regular(ix)) {
            out->kind = ST_INPUT_SHARDED;
            free(one);
        } else if (st_is_regular(one)) {
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
    char *j = rp ? st_path_join(strcmp(rp, "/") ? rp : "", st_base(path)) : NULL;
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
    char *target = strndup(name + 1, n), *p = target ? st_path_join(dir, target) : NULL;
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
        char *p = st_path_join(dir, e->d_name);
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

/* The directories from the model directory down to the one being walked
 * (links followed): a directory that is one of them again is a link loop. */
typedef struct st_walk {
    dev_t dev[ST_MAX_TREE_DEPTH + 2];
    ino_t ino[ST_MAX_TREE_DEPTH + 2];
    int n;
} st_walk;

/* Enters directory path (its stat in sb): refused when it is an ancestor
 * (a link loop) or lies too deep. */
static fp8kit_status st_walk_enter(st_walk *w, const char *path, const struct stat *sb, char *err, size_t errlen)
{
    for (int i = 0; i < w->n; i++)
        if (w->dev[i] == sb->st_dev && w->ino[i] == sb->st_ino)
            return st_err(err, errlen, FP8KIT_ERR_IO,
                          "%s: a link loop: it leads back to a directory that contains it (remove the link; nothing "
                          "of the model's other files is copied through it)",
                          path);
    if (w->n > ST_MAX_TREE_DEPTH)
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: directories nested deeper than %d levels", path,
                      ST_MAX_TREE_DEPTH);
    w->dev[w->n] = sb->st_dev;
    w->ino[w->n++] = sb->st_ino;
    return FP8KIT_OK;
}

/* Sorted entries of src (so the copy order, and any error, does not depend
 * on the file system); *n of them, or an error. */
static fp8kit_status st_list_dir(const char *src, struct dirent ***list, int *n, char *err, size_t errlen)
{
    *list = NULL;
    *n = scandir(src, list, NULL, alphasort);
    if (*n < 0)
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", src, strerror(errno));
    return FP8KIT_OK;
}

static void st_free_list(struct dirent **list, int n)
{
    for (int i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

/* st_check_model_files' walk: what st_copy_dir would copy, nothing written. */
static fp8kit_status st_check_dir(st_walk *w, const char *src, const char *const *skip, size_t nskip, char *err,
                                  size_t errlen)
{
    struct dirent **list;
    int n;
    fp8kit_status st = st_list_dir(src, &list, &n, err, errlen);
    for (int i = 0; i < n && !st; i++) {
        const char *name = list[i]->d_name;
        if (st_never_copied(name) || (w->n == 1 && st_skipped(name, skip, nskip)))
            continue;
        char *s = st_path_join(src, name);
        struct stat sb;
        if (!s)
            st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
        else if (stat(s, &sb))
            st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", s, strerror(errno));
        else if (S_ISDIR(sb.st_mode)) {
            if (!(st = st_walk_enter(w, s, &sb, err, errlen))) {
                st = st_check_dir(w, s, skip, nskip, err, errlen);
                w->n--;
            }
        } else if (!S_ISREG(sb.st_mode))
            st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: not a regular file or a directory (%s; not copied)", s,
                        st_file_kind(sb.st_mode));
        free(s);
    }
    if (n > 0)
        st_free_list(list, n);
    return st;
}

fp8kit_status st_check_model_files(const char *src, const char *const *skip, size_t nskip, char *err, size_t errlen)
{
    st_walk w = {.n = 0};
    struct stat sb;
    if (stat(src, &sb))
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", src, strerror(errno));
    fp8kit_status st = st_walk_enter(&w, src, &sb, err, errlen);
    return st ? st : st_check_dir(&w, src, skip, nskip, err, errlen);
}

static fp8kit_status st_copy_dir(st_tmp_tree *t, st_walk *w, const char *src, const char *dst,
                                 const char *const *skip, size_t nskip, int no_fsync, uint64_t *bytes, int64_t *nfiles,
                                 char *err, size_t errlen)
{
    struct dirent **list;
    int n;
    fp8kit_status st = st_list_dir(src, &list, &n, err, errlen);
    if (st)
        return st;
    for (int i = 0; i < n; i++) {
        const char *name = list[i]->d_name;
        if (st || st_never_copied(name) || (w->n == 1 && st_skipped(name, skip, nskip)))
            continue;
        char *s = st_path_join(src, name), *o = st_path_join(dst, name);
        struct stat sb;
        if (!s || !o)
            st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
        else if (stat(s, &sb)) /* links are followed: a model in a download cache is links to blobs */
            st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", s, strerror(errno));
        else if (S_ISDIR(sb.st_mode)) {
            /* st_check_model_files found no loop; a link changed since is refused here */
            if (!(st = st_walk_enter(w, s, &sb, err, errlen))) {
                if (mkdir(o, 0777))
                    st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", o, strerror(errno));
                else if (!(st = st_tree_track(t, o, 1, err, errlen)))
                    st = st_copy_dir(t, w, s, o, skip, nskip, no_fsync, bytes, nfiles, err, errlen);
                w->n--;
            }
        } else if (S_ISREG(sb.st_mode)) {
            if (!(st = st_tree_track(t, o, 0, err, errlen)) && !(st = st_copy_file(s, o, no_fsync, bytes, err, errlen)))
                ++*nfiles;
        } else {
            st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: not a regular file or a directory (%s; not copied)", s,
                        st_file_kind(sb.st_mode));
        }
        free(s), free(o);
    }
    st_free_list(list, n);
    return st;
}

fp8kit_status st_copy_model_files(st_tmp_tree *t, const char *src, const char *const *skip, size_t nskip,
                                  int no_fsync, uint64_t *bytes, int64_t *nfiles, char *err, size_t errlen)
{
    st_walk w = {.n = 0};
    struct stat sb;
    if (stat(src, &sb))
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s", src, strerror(errno));
    fp8kit_status st = st_walk_enter(&w, src, &sb, err, errlen);
    return st ? st : st_copy_dir(t, &w, src, t->root, skip, nskip, no_fsync, bytes, nfiles, err, errlen);
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
