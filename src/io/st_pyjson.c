/* st_pyjson.c - JSON validated the way Python's json.loads validates it, in one
 * pass with an explicit stack (no recursion), building a jansson tree for
 * reading values and recording where the top-level members of one name lie
 * (st_pyjson.h). */
#define _GNU_SOURCE
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/st_pyjson.h"

#if JANSSON_VERSION_HEX >= 0x020e00
#define PJ_KEYS_WITH_NUL 1 /* json_object_setn: keys may hold U+0000 */
#else
#define PJ_KEYS_WITH_NUL 0 /* older jansson: such members are left out of the tree */
#endif

typedef struct pj_frame {
    json_t *c;      /* the container being filled */
    int obj;        /* object (else array) */
    size_t key_off; /* object: where its pending key starts in pj.keys */
} pj_frame;

typedef struct pj {
    const unsigned char *s;
    size_t n, i;
    const char *name;
    size_t namelen;
    st_pj_doc *doc;
    st_pj_error *e;
    char *buf; /* the last string decoded */
    size_t blen, bcap;
    char *keys; /* the pending keys of the open objects, each NUL-terminated */
    size_t klen, kcap;
    pj_frame *stk;
    size_t depth, scap;
    locale_t c_numeric;
} pj;

static int pj_fail(pj *p, size_t at, const char *why)
{
    size_t line = 1, col = 1;
    for (size_t k = 0; k < at && k < p->n; k++) {
        if (p->s[k] == '\n') {
            line++;
            col = 1;
        } else if ((p->s[k] & 0xC0) != 0x80) { /* one per character, as Python counts */
            col++;
        }
    }
    p->e->line = line;
    p->e->column = col;
    p->e->reason = why;
    return -1;
}

static int pj_oom(pj *p)
{
    p->e->out_of_memory = 1;
    p->e->reason = "out of memory";
    return -1;
}

static int pj_grow(char **b, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    char *g = realloc(*b, c);
    if (!g)
        return -1;
    *b = g;
    *cap = c;
    return 0;
}

static int pj_put(pj *p, const void *src, size_t k)
{
    if (pj_grow(&p->buf, &p->bcap, p->blen + k + 1))
        return pj_oom(p);
    memcpy(p->buf + p->blen, src, k);
    p->blen += k;
    return 0;
}

static int pj_put_cp(pj *p, uint32_t cp)
{
    unsigned char u[4];
    size_t k;
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        k = 1;
    } else if (cp < 0x800) {
        u[0] = (unsigned char)(0xC0 | cp >> 6);
        u[1] = (unsigned char)(0x80 | (cp & 0x3F));
        k = 2;
    } else if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | cp >> 12);
        u[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        u[2] = (unsigned char)(0x80 | (cp & 0x3F));
        k = 3;
    } else {
        u[0] = (unsigned char)(0xF0 | cp >> 18);
        u[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
        u[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        u[3] = (unsigned char)(0x80 | (cp & 0x3F));
        k = 4;
    }
    return pj_put(p, u, k);
}

/* Length of the UTF-8 sequence at s (s[0] >= 0x80) as Python decodes it with
 * 'surrogatepass' (encoded surrogates allowed: *surrogate set), 0 if invalid. */
static size_t pj_utf8(const unsigned char *s, size_t n, int *surrogate)
{
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    size_t k;
    if (c >= 0xC2 && c <= 0xDF) {
        k = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0;
    }
    if (n < k || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t j = 2; j < k; j++)
        if ((s[j] & 0xC0) != 0x80)
            return 0;
    *surrogate = c == 0xED && s[1] >= 0xA0;
    return k;
}

/* Four hex digits at s[i..i+4): their value, or -1. */
static long pj_hex4(const unsigned char *s, size_t n, size_t i)
{
    if (i + 4 > n)
        return -1;
    long v = 0;
    for (size_t k = i; k < i + 4; k++) {
        unsigned c = s[k];
        int d = c >= '0' && c <= '9' ? (int)(c - '0')
                : c >= 'a' && c <= 'f' ? (int)(c - 'a' + 10)
                : c >= 'A' && c <= 'F' ? (int)(c - 'A' + 10)
                                       : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The string whose opening quote is at p->i, decoded into p->buf[0, p->blen)
 * (NUL-terminated); p->i just past its closing quote. */
static int pj_string(pj *p)
{
    const unsigned char *s = p->s;
    const size_t n = p->n, start = p->i;
    size_t i = start + 1;
    p->blen = 0;
    if (pj_grow(&p->buf, &p->bcap, 1)) /* room for the NUL of an empty string */
        return pj_oom(p);
    for (;;) {
        size_t run = i;
        while (run < n && s[run] >= 0x20 && s[run] < 0x80 && s[run] != '"' && s[run] != '\\')
            run++;
        if (run > i && pj_put(p, s + i, run - i))
            return -1;
        i = run;
        if (i >= n)
            return pj_fail(p, start, "Unterminated string starting at");
        unsigned c = s[i];
        if (c == '"')
            break;
        if (c < 0x20)
            return pj_fail(p, i, "Invalid control character at");
        if (c >= 0x80) {
            int sur = 0;
            size_t k = pj_utf8(s + i, n - i, &sur);
            if (!k)
                return pj_fail(p, i, "invalid UTF-8");
            if (sur ? pj_put_cp(p, 0xFFFD) : pj_put(p, s + i, k))
                return -1;
            i += k;
            continue;
        }
        /* a backslash */
        if (i + 1 >= n)
            return pj_fail(p, start, "Unterminated string starting at");
        char one = 0;
        switch (s[i + 1]) {
        case '"': one = '"'; break;
        case '\\': one = '\\'; break;
        case '/': one = '/'; break;
        case 'b': one = '\b'; break;
        case 'f': one = '\f'; break;
        case 'n': one = '\n'; break;
        case 'r': one = '\r'; break;
        case 't': one = '\t'; break;
        case 'u': break;
        default: return pj_fail(p, i, "Invalid \\escape");
        }
        if (one) {
            if (pj_put(p, &one, 1))
                return -1;
            i += 2;
            continue;
        }
        long cp = pj_hex4(s, n, i + 2);
        if (cp < 0)
            return pj_fail(p, i + 1, "Invalid \\uXXXX escape"); /* at the 'u', as Python says */
        i += 6;
        if (cp >= 0xD800 && cp <= 0xDBFF && i + 1 < n && s[i] == '\\' && s[i + 1] == 'u') {
            long lo = pj_hex4(s, n, i + 2); /* a pair: one character */
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            }
        }
        if (pj_put_cp(p, cp >= 0xD800 && cp <= 0xDFFF ? 0xFFFD : (uint32_t)cp)) /* unpaired */
            return -1;
    }
    p->buf[p->blen] = '\0';
    p->i = i + 1;
    return 0;
}

static int pj_digit(const pj *p, size_t i)
{
    return i < p->n && p->s[i] >= '0' && p->s[i] <= '9';
}

/* The number at p->i ('-' or a digit, or -Infinity): Python's grammar
 * -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?, the longest match; what
 * follows it is the caller's. */
static int pj_number(pj *p, json_t **v)
{
    const size_t start = p->i;
    size_t i = start;
    int real = 0;
    if (p->s[i] == '-') {
        i++;
        if (i + 8 <= p->n && !memcmp(p->s + i, "Infinity", 8)) {
            p->i = i + 8;
            *v = json_null();
            return 0;
        }
    }
    if (i < p->n && p->s[i] == '0') {
        i++;
    } else if (pj_digit(p, i)) {
        while (pj_digit(p, i))
            i++;
    } else {
        return pj_fail(p, start, "Expecting value");
    }
    if (i < p->n && p->s[i] == '.' && pj_digit(p, i + 1)) {
        real = 1;
        for (i += 1; pj_digit(p, i);)
            i++;
    }
    if (i < p->n && (p->s[i] == 'e' || p->s[i] == 'E')) {
        size_t k = i + 1;
        if (k < p->n && (p->s[k] == '+' || p->s[k] == '-'))
            k++;
        if (pj_digit(p, k)) { /* else the number ends before the 'e' */
            real = 1;
            while (pj_digit(p, k))
                k++;
            i = k;
        }
    }
    p->i = i;
    if (!real) { /* an integer: a json integer when it fits 64 bits */
        int neg = p->s[start] == '-';
        uint64_t u = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        for (size_t k = start + (size_t)neg; k < i; k++) {
            unsigned d = p->s[k] - '0';
            if (u > (lim - d) / 10) {
                *v = json_null();
                return 0;
            }
            u = u * 10 + d;
        }
        *v = json_integer(neg ? (json_int_t)(0 - u) : (json_int_t)u);
        return *v ? 0 : pj_oom(p);
    }
    p->blen = 0;
    if (pj_put(p, p->s + start, i - start))
        return -1;
    p->buf[p->blen] = '\0';
    double d = p->c_numeric ? strtod_l(p->buf, NULL, p->c_numeric) : strtod(p->buf, NULL);
    *v = isfinite(d) ? json_real(d) : json_null();
    return *v ? 0 : pj_oom(p);
}

static void pj_ws(pj *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static int pj_word(pj *p, const char *w)
{
    size_t l = strlen(w);
    if (p->i + l > p->n || memcmp(p->s + p->i, w, l))
        return 0;
    p->i += l;
    return 1;
}

static int pj_push(pj *p, json_t *c, int obj)
{
    if (!c)
        return pj_oom(p);
    if (p->depth >= ST_PJ_MAX_DEPTH) {
        json_decref(c);
        return pj_fail(p, p->i, "nested deeper than 2048 levels");
    }
    if (p->depth == p->scap) {
        size_t cap = p->scap ? 2 * p->scap : 16;
        pj_frame *g = realloc(p->stk, cap * sizeof *g);
        if (!g) {
            json_decref(c);
            return pj_oom(p);
        }
        p->stk = g;
        p->scap = cap;
    }
    p->stk[p->depth].c = c;
    p->stk[p->depth].obj = obj;
    p->stk[p->depth].key_off = p->klen;
    p->depth++;
    return 0;
}

/* A member's key just decoded into p->buf: kept until its value is done. */
static int pj_key(pj *p)
{
    if (pj_grow(&p->keys, &p->kcap, p->klen + p->blen + 1))
        return pj_oom(p);
    p->stk[p->depth - 1].key_off = p->klen;
    memcpy(p->keys + p->klen, p->buf, p->blen + 1);
    p->klen += p->blen + 1;
    return 0;
}

/* v (a reference) added to the innermost open container. */
static int pj_attach(pj *p, json_t *v)
{
    pj_frame *f = &p->stk[p->depth - 1];
    if (!f->obj)
        return json_array_append_new(f->c, v) ? pj_oom(p) : 0;
    const char *key = p->keys + f->key_off;
    size_t kl = p->klen - f->key_off - 1;
    p->klen = f->key_off;
    int r;
#if PJ_KEYS_WITH_NUL
    r = json_object_setn_new_nocheck(f->c, key, kl, v);
#else
    if (strlen(key) != kl) {
        json_decref(v);
        return 0;
    }
    r = json_object_set_new_nocheck(f->c, key, v);
#endif
    return r ? pj_oom(p) : 0;
}

static int pj_named(pj *p, size_t key_at)
{
    st_pj_doc *d = p->doc;
    st_pj_member *g = realloc(d->named, (d->nnamed + 1) * sizeof *g);
    if (!g)
        return pj_oom(p);
    d->named = g;
    st_pj_member *m = &g[d->nnamed++];
    memset(m, 0, sizeof *m);
    m->index = d->nmembers - 1;
    m->key = key_at;
    m->prev = d->nmembers == 1 ? d->open + 1 : d->last_end;
    return 0;
}

static int pj_run(pj *p, json_t **root)
{
    const unsigned char *s = p->s;
    st_pj_doc *d = p->doc;
    json_t *v = NULL;
    int named = 0; /* the top-level member being read is one of the named */
    if (p->n >= 2 && (!s[0] || !s[1] || (s[0] == 0xFF && s[1] == 0xFE) || (s[0] == 0xFE && s[1] == 0xFF)))
        return pj_fail(p, 0, "UTF-16 or UTF-32 text: only UTF-8 is read");
    if (p->n >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3))
        p->i = 3;
    pj_ws(p);
value:
    if (p->i >= p->n)
        return pj_fail(p, p->i, "Expecting value");
    switch (s[p->i]) {
    case '{':
        if (!p->depth)
            d->open = p->i;
        if (pj_push(p, json_object(), 1))
            return -1;
        p->i++;
        pj_ws(p);
        if (p->i < p->n && s[p->i] == '}')
            goto close;
        goto key;
    case '[':
        if (pj_push(p, json_array(), 0))
            return -1;
        p->i++;
        pj_ws(p);
        if (p->i < p->n && s[p->i] == ']')
            goto close;
        goto value;
    case '"':
        if (pj_string(p))
            return -1;
        v = json_stringn_nocheck(p->buf, p->blen);
        break;
    case '-':
    case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
        if (pj_number(p, &v))
            return -1;
        break;
    default:
        if (pj_word(p, "NaN") || pj_word(p, "Infinity") || pj_word(p, "null"))
            v = json_null();
        else if (pj_word(p, "true"))
            v = json_true();
        else if (pj_word(p, "false"))
            v = json_false();
        else
            return pj_fail(p, p->i, "Expecting value");
    }
done: /* v: a complete value, p->i just past it */
    if (!v)
        return pj_oom(p);
    if (!p->depth) {
        *root = v;
        pj_ws(p);
        return p->i < p->n ? pj_fail(p, p->i, "Extra data") : 0;
    }
    if (pj_attach(p, v))
        return -1;
    v = NULL;
    if (p->depth == 1 && p->stk[0].obj) { /* a top-level member is complete */
        d->last_end = p->i;
        if (d->nmembers == 1)
            d->first_end = p->i;
        if (named)
            d->named[d->nnamed - 1].end = p->i;
        named = 0;
    }
    pj_ws(p);
    if (p->i < p->n && s[p->i] == ',') {
        p->i++;
        pj_ws(p);
        if (p->stk[p->depth - 1].obj)
            goto key;
        goto value;
    }
    if (p->i < p->n && s[p->i] == (p->stk[p->depth - 1].obj ? '}' : ']'))
        goto close;
    return pj_fail(p, p->i, "Expecting ',' delimiter");
close: /* at the closing bracket of the innermost container */
    if (p->depth == 1 && p->stk[0].obj)
        d->close = p->i;
    p->i++;
    v = p->stk[--p->depth].c;
    goto done;
key: /* at a member's key */
    if (p->i >= p->n || s[p->i] != '"')
        return pj_fail(p, p->i, "Expecting property name enclosed in double quotes");
    {
        size_t at = p->i;
        if (pj_string(p) || pj_key(p))
            return -1;
        if (p->depth == 1) {
            d->nmembers++;
            if (d->nmembers == 1) {
                d->first_key = at;
                d->first_key_end = p->i;
            } else if (d->nmembers == 2) {
                d->second_key = at;
            }
            if (d->nnamed && d->named[d->nnamed - 1].index == d->nmembers - 2)
                d->named[d->nnamed - 1].next = at;
            named = p->blen == p->namelen && !memcmp(p->buf, p->name, p->namelen);
            if (named && pj_named(p, at))
                return -1;
        }
    }
    pj_ws(p);
    if (p->i >= p->n || s[p->i] != ':')
        return pj_fail(p, p->i, "Expecting ':' delimiter");
    p->i++;
    pj_ws(p);
    if (p->depth == 1) {
        if (d->nmembers == 1)
            d->first_value = p->i;
        if (named)
            d->named[d->nnamed - 1].value = p->i;
    }
    goto value;
}

int st_pj_parse(const char *text, size_t len, const char *name, st_pj_doc *doc, json_t **tree, st_pj_error *e)
{
    pj p;
    memset(&p, 0, sizeof p);
    memset(doc, 0, sizeof *doc);
    memset(e, 0, sizeof *e);
    *tree = NULL;
    p.s = (const unsigned char *)text;
    p.n = len;
    p.name = name;
    p.namelen = strlen(name);
    p.doc = doc;
    p.e = e;
    p.c_numeric = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); /* '.' whatever the process's locale */
    json_t *root = NULL;
    int r = pj_run(&p, &root);
    while (p.depth) /* after a failure: the containers still open */
        json_decref(p.stk[--p.depth].c);
    if (p.c_numeric)
        freelocale(p.c_numeric);
    free(p.buf);
    free(p.keys);
    free(p.stk);
    if (r) {
        json_decref(root);
        st_pj_doc_free(doc);
        return -1;
    }
    *tree = root;
    return 0;
}

void st_pj_doc_free(st_pj_doc *doc)
{
    free(doc->named);
    memset(doc, 0, sizeof *doc);
}
