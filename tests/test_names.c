/* test_names.c - the activation names of the public API (src/core/names.c):
 * fp8kit_activation_name gives a distinct canonical name for every value from
 * 0 to FP8KIT_ACT_COUNT - 1 and NULL outside; fp8kit_activation_parse round
 * trips each of them (in any ASCII case), maps the aliases "gelu" and
 * "swish", refuses bad names with INVALID_ARGUMENT and a message listing the
 * valid names (fp8kit_last_error(NULL)), NULL arguments with NULL_POINTER,
 * and leaves *out alone when it fails. Build: part of CTest (tests/test_*.c). */
#include <ctype.h>
#include "fp8kit.h"
#include "test_util.h"

static void check_bad(const char *name)
{
    fp8kit_activation out = (fp8kit_activation)77;
    fp8kit_status st = fp8kit_activation_parse(name, &out);
    CHECK(st == FP8KIT_ERR_INVALID_ARGUMENT, "parse('%s') returned %s", name, fp8kit_status_string(st));
    CHECK(out == (fp8kit_activation)77, "parse('%s') wrote *out = %d on failure", name, (int)out);
    const char *msg = fp8kit_last_error(NULL);
    CHECK(strstr(msg, "fp8kit_activation_parse") != NULL, "message '%s' does not name the function", msg);
    for (int v = 0; v < FP8KIT_ACT_COUNT; v++) {
        const char *canon = fp8kit_activation_name((fp8kit_activation)v);
        CHECK(canon && strstr(msg, canon) != NULL, "message '%s' does not list '%s'", msg, canon ? canon : "?");
    }
    CHECK(strstr(msg, "gelu (= gelu_erf)") && strstr(msg, "swish (= silu)"), "message '%s' does not list the aliases",
          msg);
}

int main(void)
{
    /* docs/spec.md 3's names of the first values (a new activation is checked below without
     * an edit here: a distinct name that round trips) */
    static const char *const want[] = {"none", "relu", "gelu_tanh", "gelu_erf", "silu"};
    CHECK(FP8KIT_ACT_COUNT >= (int)(sizeof want / sizeof want[0]) && FP8KIT_ACT_COUNT > FP8KIT_ACT_SILU,
          "FP8KIT_ACT_COUNT %d is below the values of the enum", FP8KIT_ACT_COUNT);

    /* every value: a canonical name, distinct, that parses back (any case) */
    for (int v = 0; v < FP8KIT_ACT_COUNT; v++) {
        const char *name = fp8kit_activation_name((fp8kit_activation)v);
        CHECK(name != NULL, "value %d has no name", v);
        if (!name)
            continue;
        if (v < (int)(sizeof want / sizeof want[0]))
            CHECK(strcmp(name, want[v]) == 0, "value %d is named '%s', want '%s'", v, name, want[v]);
        for (int w = 0; w < v; w++) {
            const char *other = fp8kit_activation_name((fp8kit_activation)w);
            CHECK(!other || strcmp(name, other) != 0, "values %d and %d share the name '%s'", w, v, name);
        }
        fp8kit_activation back = (fp8kit_activation)-1;
        CHECK_STATUS(fp8kit_activation_parse(name, &back), FP8KIT_OK);
        CHECK(back == (fp8kit_activation)v, "parse('%s') = %d, want %d", name, (int)back, v);
        char upper[32];
        size_t n = strlen(name);
        CHECK(n < sizeof upper, "name '%s' too long for the test", name);
        for (size_t i = 0; i <= n && i < sizeof upper; i++)
            upper[i] = (char)toupper((unsigned char)name[i]);
        upper[sizeof upper - 1] = '\0';
        back = (fp8kit_activation)-1;
        CHECK_STATUS(fp8kit_activation_parse(upper, &back), FP8KIT_OK);
        CHECK(back == (fp8kit_activation)v, "parse('%s') = %d, want %d", upper, (int)back, v);
    }
    /* outside the enum */
    CHECK(fp8kit_activation_name((fp8kit_activation)FP8KIT_ACT_COUNT) == NULL, "FP8KIT_ACT_COUNT has a name");
    CHECK(fp8kit_activation_name((fp8kit_activation)-1) == NULL, "-1 has a name");
    CHECK(fp8kit_activation_name((fp8kit_activation)1000) == NULL, "1000 has a name");

    /* aliases */
    static const struct { const char *name; fp8kit_activation v; } alias[] = {
        {"gelu", FP8KIT_ACT_GELU_ERF}, {"GELU", FP8KIT_ACT_GELU_ERF}, {"swish", FP8KIT_ACT_SILU},
        {"Swish", FP8KIT_ACT_SILU}};
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++) {
        fp8kit_activation back = (fp8kit_activation)-1;
        CHECK_STATUS(fp8kit_activation_parse(alias[i].name, &back), FP8KIT_OK);
        CHECK(back == alias[i].v, "parse('%s') = %d, want %d", alias[i].name, (int)back, (int)alias[i].v);
    }
    /* an alias is not a canonical name */
    for (int v = 0; v < FP8KIT_ACT_COUNT; v++) {
        const char *name = fp8kit_activation_name((fp8kit_activation)v);
        CHECK(!name || (strcmp(name, "gelu") && strcmp(name, "swish")), "alias '%s' is a canonical name", name);
    }

    /* bad names */
    static const char *const bad[] = {"", "tanh", "gelu_", "gelu tanh", " relu", "relu ", "relu\n", "sigmoid", "0",
                                      "nonee", "gelu_erff", "silu_",
                                      "a-name-much-longer-than-any-activation-name-there-is-to-check-truncation-of-the-"
                                      "message-text-in-the-error-buffer"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        check_bad(bad[i]);

    /* NULL */
    fp8kit_activation out = (fp8kit_activation)77;
    CHECK_STATUS(fp8kit_activation_parse(NULL, &out), FP8KIT_ERR_NULL_POINTER);
    CHECK(out == (fp8kit_activation)77, "parse(NULL) wrote *out");
    CHECK_STATUS(fp8kit_activation_parse("relu", NULL), FP8KIT_ERR_NULL_POINTER);
    CHECK(strstr(fp8kit_last_error(NULL), "out is NULL") != NULL, "message '%s'", fp8kit_last_error(NULL));
    return fk_test_summary("test_names");
}
