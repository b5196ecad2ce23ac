/* st_config.h - config.json of a model directory for the checkpoint converter
 * (st_config.c): read as Python's json reads it, and written back as the same
 * bytes with only the top-level quantization_config member set or removed.
 * Internal to src/io. */
#ifndef FK_ST_CONFIG_H
#define FK_ST_CONFIG_H

#include <jansson.h>
#include "io/st_model.h"
#include "io/st_pyjson.h"

#define ST_QCFG_KEY "quantization_config"

typedef struct st_config {
    char *text;     /* the file's bytes (NULL: there is no config.json) */
    size_t len;
    json_t *values; /* the top-level object, for reading values (st_pyjson.h says how numbers read) */
    st_pj_doc doc;  /* where its members lie; doc.named: its quantization_config members */
} st_config;

/* dir/config.json read into *c (c->text NULL when there is none). Anything
 * Python's json.loads refuses, and a top level that is not an object, is
 * FP8KIT_ERR_CORRUPT_FILE with the line, column and reason. */
fp8kit_status st_config_load(const char *dir, st_config *c, char *err, size_t errlen);
void st_config_free(st_config *c);
/* c's bytes with quantization_config set to qcfg (the last such member's value
 * replaced, or a member appended in the document's layout) or, qcfg NULL,
 * every quantization_config member removed; every other byte as it was.
 * Returns 0, or -1 when out of memory. *out is malloc'd. */
int st_config_text(const st_config *c, const json_t *qcfg, char **out, size_t *outlen);
/* That text written as config.json into the tree. */
fp8kit_status st_config_write(st_tmp_tree *t, const st_config *c, const json_t *qcfg, int no_fsync, uint64_t *bytes,
                              char *err, size_t errlen);

#endif
