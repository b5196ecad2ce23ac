/* st_pyjson.h - a JSON document read the way Python's json.loads reads it
 * (st_pyjson.c): validated in one linear pass, with a jansson tree for reading
 * values and the byte ranges of the top-level object's members of one name, so
 * that a caller can rewrite that member and keep every other byte. Internal to
 * src/io. */
#ifndef FK_ST_PYJSON_H
#define FK_ST_PYJSON_H

#include <stddef.h>
#include <jansson.h>

/* Deeper nesting is refused (Python's json stops near 1000 levels). */
#define ST_PJ_MAX_DEPTH 2048

/* One top-level member, as byte offsets into the text. */
typedef struct st_pj_member {
    size_t index; /* its position among the top-level members */
    size_t key;   /* its key's opening quote */
    size_t value; /* the first byte of its value */
    size_t end;   /* just past its value */
    size_t prev;  /* just past the previous member's value; just past '{' for the first */
    size_t next;  /* the next member's key; 0 when it is the last */
} st_pj_member;

typedef struct st_pj_doc {
    size_t open, close;   /* the top-level object's '{' and '}' */
    size_t nmembers;      /* its members, duplicates counted */
    size_t first_key;     /* the first member's key (when nmembers) */
    size_t first_key_end; /* just past that key's closing quote */
    size_t first_value;   /* the first member's value */
    size_t first_end;     /* just past the first member's value */
    size_t second_key;    /* the second member's key (when nmembers > 1) */
    size_t last_end;      /* just past the last member's value */
    st_pj_member *named;  /* the members whose key is the name asked for, in order (malloc'd) */
    size_t nnamed;
} st_pj_doc;

typedef struct st_pj_error {
    int out_of_memory;
    size_t line, column; /* 1-based, columns in characters, as Python counts them */
    const char *reason;  /* a fixed text: never any of the document's bytes */
} st_pj_error;

/* Reads text[0, len): UTF-8 (an initial byte order mark allowed), whitespace
 * " \t\n\r", NaN, Infinity, -Infinity, integers and reals of any size,
 * duplicate keys (the last one wins), \u0000 and unpaired surrogates in
 * strings; the top level must be an object. On success *tree is the object
 * for reading values: a number jansson cannot hold (an integer beyond 64 bits,
 * NaN, an infinity, a real that overflows) reads as null, an unpaired
 * surrogate as U+FFFD. name: the key whose members go to doc->named. Returns
 * 0, or -1 with *e filled (and *tree NULL, doc empty). */
int st_pj_parse(const char *text, size_t len, const char *name, st_pj_doc *doc, json_t **tree, st_pj_error *e);
void st_pj_doc_free(st_pj_doc *doc);

#endif
