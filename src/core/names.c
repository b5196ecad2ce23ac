/* names.c - the names of the activations (docs/spec.md 3): ONE table, which
 * fp8kit_activation_name and fp8kit_activation_parse read and through them the
 * CLI (tools/cli_util.c) and the Python binding (python/fp8kit/_gemm.py). A new
 * activation adds its row here (and an alias a row with is_alias set). */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"

static const struct fk_act_name {
    const char *name;
    fp8kit_activation value;
    int is_alias; /* 0: the canonical name (one per value), 1: another spelling */
} fk_act_names[] = {
    {"none", FP8KIT_ACT_NONE, 0},
    {"relu", FP8KIT_ACT_RELU, 0},
    {"gelu_tanh", FP8KIT_ACT_GELU_TANH, 0},
    {"gelu_erf", FP8KIT_ACT_GELU_ERF, 0},
    {"silu", FP8KIT_ACT_SILU, 0},
    {"gelu", FP8KIT_ACT_GELU_ERF, 1},
    {"swish", FP8KIT_ACT_SILU, 1},
};
#define FK_ACT_NAMES ((int)(sizeof fk_act_names / sizeof fk_act_names[0]))

const char *fp8kit_activation_name(fp8kit_activation a)
{
    for (int i = 0; i < FK_ACT_NAMES; i++)
        if (!fk_act_names[i].is_alias && fk_act_names[i].value == a)
            return fk_act_names[i].name;
    return NULL;
}

/* ASCII case-insensitive equality (no locale). */
static int fk_name_eq(const char *a, const char *b)
{
    for (;; a++, b++) {
        unsigned char x = (unsigned char)*a, y = (unsigned char)*b;
        if (x >= 'A' && x <= 'Z')
            x = (unsigned char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z')
            y = (unsigned char)(y - 'A' + 'a');
        if (x != y)
            return 0;
        if (!x)
            return 1;
    }
}

fp8kit_status fp8kit_activation_parse(const char *name, fp8kit_activation *out)
{
    if (!name || !out)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "fp8kit_activation_parse: %s is NULL", name ? "out" : "name");
    for (int i = 0; i < FK_ACT_NAMES; i++)
        if (fk_name_eq(name, fk_act_names[i].name)) {
            *out = fk_act_names[i].value;
            return FP8KIT_OK;
        }
    /* "none, relu, ... and silu; aliases gelu (= gelu_erf), swish (= silu)" */
    char list[384] = "";
    size_t used = 0;
    int canon = 0, aliases = 0;
    for (int i = 0; i < FK_ACT_NAMES; i++)
        canon += !fk_act_names[i].is_alias;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0, k = 0; i < FK_ACT_NAMES; i++) {
            if (fk_act_names[i].is_alias != pass)
                continue;
            if (pass == 0)
                snprintf(list + used, sizeof list - used, "%s%s", k == 0 ? "" : k == canon - 1 ? " or " : ", ",
                         fk_act_names[i].name);
            else
                snprintf(list + used, sizeof list - used, "%s%s (= %s)", aliases++ ? ", " : "; aliases ",
                         fk_act_names[i].name, fp8kit_activation_name(fk_act_names[i].value));
            k++;
            used = strlen(list);
        }
    return fk_fail(NULL, FP8KIT_ERR_INVALID_ARGUMENT, "fp8kit_activation_parse: '%.64s' is not an activation: %s",
                   name, list);
}
