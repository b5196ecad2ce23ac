/* st_model.h - model directories for the checkpoint converter (st_model.c,
 * config.json in st_config.h):
 * input kinds, the temporary output tree, copying a model's other files,
 * and putting the finished directory in place. Internal to src/io. */
#ifndef FK_ST_MODEL_H
#define FK_ST_MODEL_H

#include <jansson.h>
#include "io/safetensors.h"

#define ST_SINGLE_NAME "model.safetensors"
#define ST_CONFIG_NAME "config.json"
#define ST_TMP_TAG ".fp8kit-tmp-" /* in every temporary name: never copied, safe to clean */

typedef enum st_input_kind {
    ST_INPUT_FILE,      /* a .safetensors file: the output is a file */
    ST_INPUT_DIR_FILE,  /* a directory holding model.safetensors */
    ST_INPUT_SHARDED    /* a directory holding model.safetensors.index.json (or the index's path) */
} st_input_kind;

typedef struct st_input {
    st_input_kind kind;
    char *dir;  /* the model directory (NULL for ST_INPUT_FILE) */
    char *file; /* the weights file (ST_INPUT_FILE, ST_INPUT_DIR_FILE) */
} st_input;

/* dir + "/" + name (malloc'd). */
char *st_path_join(const char *dir, const char *name);
/* 1 when path (links followed) is a regular file. */
int st_is_regular(const char *path);
/* 1 when path (links followed) exists and is not a regular file; its mode in *mode. */
int st_is_special(const char *path, unsigned *mode);

/* What IN is; a FIFO, device or other special file is refused, and so is a
 * directory holding both model.safetensors and the index (ambiguous). */
fp8kit_status st_input_classify(const char *in, st_input *out, char *err, size_t errlen);
void st_input_free(st_input *in);
/* Refuses an output that is the input, lies inside the input directory, or
 * contains the input. */
fp8kit_status st_check_out_vs_in(const char *in, const char *out, int in_is_dir, char *err, size_t errlen);

/* A temporary directory beside the final output; every path created in it is
 * registered (st_tmp_register) so a signal removes them, newest first. */
typedef struct st_tmp_tree {
    char *root;
    int *slots;
    size_t n, cap;
} st_tmp_tree;

/* A temporary name next to final_path: "." + (part of) its name + ST_TMP_TAG +
 * kind + this host's tag + the process id + a random tag (malloc'd; st_write.c). */
char *st_tmp_name(const char *final_path, const char *kind);
unsigned st_tmp_host_tag(void); /* the host tag of temporary names */
fp8kit_status st_tree_create(st_tmp_tree *t, const char *final_path, char *err, size_t errlen);
/* Removes the temporary files and directories of this tool next to
 * final_path whose writer is gone: made on this host by a process that no
 * longer exists (a run killed with SIGKILL). An old OUT moved aside ("old")
 * is removed only when its target exists again (else it is the only copy).
 * Returns how many were removed. */
int st_tmp_clean_stale(const char *final_path);
/* Registers a path the caller created inside the tree. */
fp8kit_status st_tree_add(st_tmp_tree *t, const char *path, int is_dir, char *err, size_t errlen);
/* Checks, before anything is written, what st_copy_model_files would copy
 * from src (the same names skipped): every entry (links followed) exists and
 * is a regular file or a directory, no link leads back to a directory that
 * contains it (a link loop such as "x -> ."), nothing lies deeper than 16
 * levels. FP8KIT_ERR_IO naming the path otherwise. */
fp8kit_status st_check_model_files(const char *src, const char *const *skip, size_t nskip, char *err, size_t errlen);
/* Copies every file and directory of src (links followed) into the tree,
 * except the top-level names in skip, .git, .cache and temporary names;
 * adds the bytes and the number of files copied to *bytes and *nfiles. */
fp8kit_status st_copy_model_files(st_tmp_tree *t, const char *src, const char *const *skip, size_t nskip,
                                  int no_fsync, uint64_t *bytes, int64_t *nfiles, char *err, size_t errlen);
/* Puts the finished tree at out: a rename when out does not exist; when it
 * does and replace is set (and it is a directory, not a link), an atomic
 * exchange (or, where the file system has none, rename aside + rename in +
 * put back on failure or on a signal), then the old tree is removed without
 * leaving this file system (a failure to remove all of it is a warning in
 * warn naming what is left). On failure out is as it was, except in one case
 * the message spells out: the old directory moved aside could not be moved
 * back; *out_changed (when set) is then 1. */
fp8kit_status st_tree_commit(st_tmp_tree *t, const char *out, int replace, int no_fsync, int *out_changed,
                             char *warn, size_t warnlen, char *err, size_t errlen);
/* Forgets the registered paths (they are no longer temporary). */
void st_tree_forget(st_tmp_tree *t);
/* Removes what is still registered (newest first) and frees the tree. */
void st_tree_discard(st_tmp_tree *t);
/* Removes a directory tree without following links or entering another
 * file system, going on past entries it cannot remove; 0 or the first errno. */
int st_remove_tree(const char *path);

#endif
