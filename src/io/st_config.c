/* st_config.c - config.json of a model directory for the checkpoint converter:
 * read as Python's json reads it (st_pyjson.c), and written into the temporary
 * output tree as the same bytes with only the top-level quantization_config
 * member set or removed (st_config.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/st_config.h"

#define ST_CONFIG_MAX ((size_t)64 << 20)

fp8kit_status st_config_load(const char *dir, st_config *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
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
    char *text = NULL;
    /* O_NONBLOCK: a FIFO swapped in after the check must not block the open */
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat sb;
    memset(&sb, 0, sizeof sb);
    if (fd < 0 || fstat(fd, &sb) || !S_ISREG(sb.st_mode) || (size_t)sb.st_size > ST_CONFIG_MAX) {
        st = st_err(err, errlen, FP8KIT_ERR_IO, "%s: %s%s", p,
                    fd < 0 ? strerror(errno) : !S_ISREG(sb.st_mode) ? "not a regular file: " : "larger than 64 MB",
                    fd >= 0 && !S_ISREG(sb.st_mode) ? st_file_kind(sb.st_mode) : "");
        goto out;
    }
    size_t n = (size_t)sb.st_size, got = 0;
    if (!(text = malloc(n + 1))) {
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
    text[n] = '\0';
    st_pj_error je;
    json_t *values = NULL;
    if (st_pj_parse(text, n, ST_QCFG_KEY, &c->doc, &values, &je)) {
        if (je.out_of_memory)
            st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "%s: out of memory", p);
        else
            st = st_err(err, errlen, FP8KIT_ERR_CORRUPT_FILE, "%s: invalid JSON (line %zu, column %zu): %s", p,
                        je.line, je.column, je.reason);
        goto out;
    }
    if (!json_is_object(values)) {
        st = st_err(err, errlen, FP8KIT_ERR_CORRUPT_FILE, "%s: not a JSON object", p);
        json_decref(values);
        st_pj_doc_free(&c->doc);
        goto out;
    }
    c->values = values;
    c->text = text;
    c->len = n;
    text = NULL;
out:
    if (fd >= 0)
        close(fd);
    free(text);
    free(p);
    return st;
}

void st_config_free(st_config *c)
{
    json_decref(c->values);
    st_pj_doc_free(&c->doc);
    free(c->text);
    memset(c, 0, sizeof *c);
}

/* How the document lays out its top-level members, for the one written. */
typedef struct st_layout {
    const char *between; /* from one member's value to the next one's key (",\n  ") */
    size_t betweenlen;
    const char *sep; /* between a key and its value (": ") */
    size_t seplen;
    const char *lead; /* indented: a member's indentation */
    size_t leadlen;
    int indented, crlf;
} st_layout;

static void st_layout_of(const st_config *c, st_layout *l)
{
    static const char comma_space[] = ", ";
    const st_pj_doc *d = &c->doc;
    memset(l, 0, sizeof *l);
    l->sep = ": ";
    l->seplen = 2;
    if (!d->nmembers)
        return; /* an empty object: the member on one line */
    l->sep = c->text + d->first_key_end;
    l->seplen = d->first_value - d->first_key_end;
    /* the whitespace before a member's key: as between the first two members,
     * else as before the first one (with a space after the comma when there
     * is none there but there is one after the colon) */
    const char *ws = c->text + d->open + 1;
    size_t wslen = d->first_key - d->open - 1;
    if (d->nmembers > 1) {
        l->between = c->text + d->first_end;
        l->betweenlen = d->second_key - d->first_end;
        ws = (const char *)memchr(l->between, ',', l->betweenlen) + 1;
        wslen = (size_t)(l->between + l->betweenlen - ws);
    } else if (!wslen && memchr(l->sep, ' ', l->seplen)) {
        l->between = comma_space;
        l->betweenlen = 2;
    }
    const char *nl = memrchr(ws, '\n', wslen);
    if (nl) {
        l->indented = 1;
        l->crlf = nl > ws && nl[-1] == '\r';
        l->lead = nl + 1;
        l->leadlen = (size_t)(ws + wslen - l->lead);
    }
}

typedef struct st_buf {
    char *p;
    size_t n, cap;
    int oom;
} st_buf;

static void st_put(st_buf *b, const char *s, size_t k)
{
    if (b->oom || !k)
        return;
    if (b->n + k + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + k + 1)
            cap *= 2;
        char *g = realloc(b->p, cap);
        if (!g) {
            b->oom = 1;
            return;
        }
        b->p = g;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, k);
    b->n += k;
    b->p[b->n] = '\0';
}

/* v's JSON text in the document's layout: indented like its members (one more
 * level per level, the first member's indentation as the unit) or on one line,
 * with the separators the document uses; ASCII only, \u escapes in lower-case
 * hex, as Python's json.dump writes them. */
static char *st_value_text(const json_t *v, const st_layout *l)
{
    size_t flags = JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER;
    if (l->indented)
        flags |= JSON_INDENT(1);
    else if (!memchr(l->sep, ' ', l->seplen))
        flags |= JSON_COMPACT;
    char *raw = json_dumps(v, flags);
    if (!raw)
        return NULL;
    const char *unit = l->leadlen ? l->lead : "  ";
    size_t unitlen = l->leadlen ? l->leadlen : 2;
    st_buf b = {0};
    int in_str = 0;
    for (const char *q = raw; *q && !b.oom;) {
        if (in_str && q[0] == '\\' && q[1] == 'u') {
            char esc[6];
            for (int k = 0; k < 6 && q[k]; k++)
                esc[k] = (char)(q[k] >= 'A' && q[k] <= 'F' ? q[k] - 'A' + 'a' : q[k]);
            st_put(&b, esc, 6);
            q += 6;
        } else if (in_str && q[0] == '\\') {
            st_put(&b, q, 2);
            q += 2;
        } else if (in_str && *q == 0x7F) {
            st_put(&b, "\\u007f", 6);
            q++;
        } else if (!in_str && *q == '\n') { /* a new line at k levels: the document's indentation + k units */
            st_put(&b, l->crlf ? "\r\n" : "\n", l->crlf ? 2 : 1);
            st_put(&b, l->lead, l->leadlen);
            for (q++; *q == ' '; q++)
                st_put(&b, unit, unitlen);
        } else {
            in_str ^= *q == '"';
            st_put(&b, q++, 1);
        }
    }
    free(raw);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p ? b.p : strdup("");
}

typedef struct st_edit {
    size_t from, to;  /* the bytes replaced */
    const char *with; /* by these (NULL: removed) */
    size_t withlen;
} st_edit;

int st_config_text(const st_config *c, const json_t *qcfg, char **out, size_t *outlen)
{
    const st_pj_doc *d = &c->doc;
    st_layout l;
    st_layout_of(c, &l);
    char *val = NULL;
    st_buf ins = {0};
    st_edit *ed = calloc(d->nnamed + 1, sizeof *ed);
    size_t ne = 0;
    if (!ed)
        return -1;
    if (qcfg && !(val = st_value_text(qcfg, &l))) {
        free(ed);
        return -1;
    }
    /* members removed: all of them, or all but the last when it is replaced */
    size_t nremoved = qcfg && d->nnamed ? d->nnamed - 1 : d->nnamed;
    int all_removed = nremoved == d->nmembers;
    for (size_t j = 0; j < nremoved; j++) {
        const st_pj_member *m = &d->named[j];
        /* after a member that stays (or when none does): with the separator
         * before it; at the start: up to the next member's key */
        if (m->index > j || all_removed)
            ed[ne++] = (st_edit){m->prev, m->end, NULL, 0};
        else
            ed[ne++] = (st_edit){m->key, m->next, NULL, 0};
    }
    if (qcfg && d->nnamed) { /* the last one's value replaced */
        const st_pj_member *m = &d->named[d->nnamed - 1];
        ed[ne++] = (st_edit){m->value, m->end, val, strlen(val)};
    } else if (qcfg) { /* a new last member, laid out as the first one */
        if (d->nmembers && l.between) {
            st_put(&ins, l.between, l.betweenlen);
        } else if (d->nmembers) {
            st_put(&ins, ",", 1);
            st_put(&ins, c->text + d->open + 1, d->first_key - d->open - 1);
        }
        st_put(&ins, "\"" ST_QCFG_KEY "\"", strlen(ST_QCFG_KEY) + 2);
        st_put(&ins, l.sep, l.seplen);
        st_put(&ins, val, strlen(val));
        size_t at = d->nmembers ? d->last_end : d->open + 1;
        ed[ne++] = (st_edit){at, at, ins.p, ins.n};
    }
    st_buf o = {0};
    size_t at = 0;
    for (size_t k = 0; k < ne; k++) {
        st_put(&o, c->text + at, ed[k].from - at);
        st_put(&o, ed[k].with, ed[k].withlen);
        at = ed[k].to;
    }
    st_put(&o, c->text + at, c->len - at);
    int oom = o.oom || ins.oom;
    free(val);
    free(ins.p);
    free(ed);
    if (oom || !o.p) {
        free(o.p);
        return -1;
    }
    *out = o.p;
    *outlen = o.n;
    return 0;
}

fp8kit_status st_config_write(st_tmp_tree *t, const st_config *c, const json_t *qcfg, int no_fsync, uint64_t *bytes,
                              char *err, size_t errlen)
{
    char *p = st_path_join(t->root, ST_CONFIG_NAME), *text = NULL;
    size_t len = 0;
    fp8kit_status st = FP8KIT_OK;
    if (!p || st_config_text(c, qcfg, &text, &len)) {
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
    for (size_t o = 0; o < len && !st;) {
        ssize_t w = write(fd, text + o, len - o);
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
        *bytes += len;
out:
    free(p);
    free(text);
    return st;
}
