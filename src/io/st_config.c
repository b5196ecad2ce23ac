/* st_config.c - config.json of a model directory for the checkpoint
 * converter: read (integers beyond 64 bits kept, as Python's json keeps them)
 * and written back with quantization_config set or removed, in the text
 * Python's json.dump(indent=2) gives (shortest reals, ASCII escapes), into the
 * temporary output tree. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/st_model.h"

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
    char *p = st_path_join(dir, ST_CONFIG_NAME);
    if (!p)
        return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
    unsigned mode = 0;
    if (st_is_special(p, &mode)) { /* a FIFO, device, socket or directory */
        fp8kit_status st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: not a regular file (%s)", p, st_file_kind(mode));
        free(p);
        return st;
    }
    if (!st_is_regular(p)) {
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
    char *p = st_path_join(t->root, ST_CONFIG_NAME), *text = NULL;
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
    if ((st = st_tree_add(t, p, 0, err, errlen)))
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

