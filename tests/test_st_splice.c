/* test_st_splice.c - unit tests of config.json handling in src/io
 * (st_config.c, st_pyjson.c): the bytes written for quantization_config set
 * (appended in the document's layout, or the last such member's value
 * replaced and earlier duplicates removed) and removed, exactly; the values
 * read from documents only Python's json reads (NaN, big integers, duplicate
 * keys, U+0000 in keys, unpaired surrogates, reals under a locale whose
 * decimal point is a comma); and refusals with Python's line, column and
 * reason. tests/test_st_config.py checks the same through the CLI against
 * Python's json. Built and run by CTest (tests/test_*.c). */
#define _GNU_SOURCE
#include <locale.h>
#include <stdio.h>
#include <unistd.h>

#include "io/st_config.h"
#include "test_util.h"

static char dir[64];

/* text as dir/config.json, loaded; returns the load's status. */
static fp8kit_status load(const char *text, size_t len, st_config *c, char *err, size_t errlen)
{
    char p[128];
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(text, 1, len, f) != len || fclose(f))
        return FP8KIT_ERR_IO;
    return st_config_load(dir, c, err, errlen);
}

/* in with quantization_config set to q (JSON text, NULL: removed) is want. */
static void expect_text(const char *in, const char *q, const char *want)
{
    st_config c;
    char err[512] = "";
    json_t *qv = q ? json_loads(q, JSON_DECODE_ANY, NULL) : NULL;
    fp8kit_status st = load(in, strlen(in), &c, err, sizeof err);
    CHECK(st == FP8KIT_OK, "%s: %s", in, err);
    if (st)
        return;
    char *out = NULL;
    size_t n = 0;
    CHECK(!st_config_text(&c, qv, &out, &n), "%s: text", in);
    CHECK(out && n == strlen(want) && !memcmp(out, want, n), "%s with %s:\n got  [%.*s]\n want [%s]", in,
          q ? q : "(removed)", (int)n, out ? out : "", want);
    free(out);
    json_decref(qv);
    st_config_free(&c);
}

static void expect_refused(const char *in, size_t len, const char *want)
{
    st_config c;
    char err[512] = "";
    fp8kit_status st = load(in, len, &c, err, sizeof err);
    CHECK(st == FP8KIT_ERR_CORRUPT_FILE && strstr(err, want) && !c.text && !c.values, "%s: got %s (%s), want %s",
          in, fp8kit_status_string(st), err, want);
    st_config_free(&c);
}

static void test_set_remove(void)
{
    const char *q = "{\"quant_method\": \"fp8\", \"b\": [1, 2], \"e\": {}}";
    /* appended after the last member, laid out as the first one is */
    expect_text("{\n  \"a\": 1\n}\n", q,
                "{\n  \"a\": 1,\n  \"quantization_config\": {\n    \"quant_method\": \"fp8\",\n    \"b\": [\n"
                "      1,\n      2\n    ],\n    \"e\": {}\n  }\n}\n");
    expect_text("{\r\n\t\"a\" : NaN\r\n}", "{\"x\": 1}",
                "{\r\n\t\"a\" : NaN,\r\n\t\"quantization_config\" : {\r\n\t\t\"x\": 1\r\n\t}\r\n}");
    expect_text("{\"a\":1}", q, "{\"a\":1,\"quantization_config\":{\"quant_method\":\"fp8\",\"b\":[1,2],\"e\":{}}}");
    expect_text(" { \"a\": [1e400] } ", "{\"x\": [1, 2]}", " { \"a\": [1e400], \"quantization_config\": {\"x\": [1, 2]} } ");
    expect_text("{}", "{\"x\": 1}", "{\"quantization_config\": {\"x\": 1}}");
    expect_text("{\"m\": 1}", "{\"x\": \"\xc3\xa9\x7f\\u001B\xf0\x9f\x98\x80\"}",
                "{\"m\": 1, \"quantization_config\": {\"x\": \"\\u00e9\\u007f\\u001b\\ud83d\\ude00\"}}");
    /* an existing member: its value replaced, earlier duplicates removed */
    expect_text("{\"a\": 1, \"quantization_config\": {\"y\": 2}, \"b\": 2}", "{\"x\": 1}",
                "{\"a\": 1, \"quantization_config\": {\"x\": 1}, \"b\": 2}");
    expect_text("{\"quantization_config\": 1, \"a\": 1, \"quantization_config\": 2}", "{\"x\": 1}",
                "{\"a\": 1, \"quantization_config\": {\"x\": 1}}");
    expect_text("{\"a\": 1, \"quantization_config\": 1, \"quantization\\u005fconfig\" :3}", "{\"x\": 1}",
                "{\"a\": 1, \"quantization\\u005fconfig\" :{\"x\": 1}}");
    /* removed: with the separator before it, or at the start up to the next key */
    expect_text("{\"quantization_config\": {}, \"a\": 1}", NULL, "{\"a\": 1}");
    expect_text("{\n  \"a\": 1,\n  \"quantization_config\": {\n  },\n  \"b\": 2\n}", NULL, "{\n  \"a\": 1,\n  \"b\": 2\n}");
    expect_text("{\"a\": 1, \"quantization_config\": null}", NULL, "{\"a\": 1}");
    expect_text("{\n  \"quantization_config\": 1\n}\n", NULL, "{\n}\n");
    expect_text("{\"quantization_config\": 1, \"quantization_config\": 2}", NULL, "{}");
    expect_text("{\"quantization_config\": 1, \"quantization_config\": 2, \"a\": [], \"quantization_config\": 3, "
                "\"b\": 1, \"quantization_config\": 4}",
                NULL, "{\"a\": [], \"b\": 1}");
    /* nothing to remove: the bytes as they were; nested ones are not top-level */
    expect_text("\xef\xbb\xbf{\"t\": {\"quantization_config\": 1}}\t", NULL, "\xef\xbb\xbf{\"t\": {\"quantization_config\": 1}}\t");
}

static void test_values(void)
{
    st_config c;
    char err[512] = "";
    static const char doc[] = "{\"nan\": NaN, \"inf\": -Infinity, \"big\": 123456789012345678901234567890, "
                              "\"max\": 9223372036854775807, \"min\": -9223372036854775808, \"over\": 9223372036854775808, "
                              "\"r\": 0.5, \"huge\": 1e400, \"tiny\": 1e-400, \"d\": false, \"d\": true, "
                              "\"s\": \"a\\ud800b\\udc00\\ud83d\\ude00\xed\xa0\x80\", \"n\\u0000k\": \"x\\u0000y\", "
                              "\"deep\": [[[[{\"k\": [1]}]]]]}";
    /* a locale whose decimal point is a comma, where one is installed */
    const char *loc = setlocale(LC_NUMERIC, "de_DE.UTF-8");
    if (!loc)
        loc = setlocale(LC_NUMERIC, "fr_FR.UTF-8");
    fp8kit_status st = load(doc, sizeof doc - 1, &c, err, sizeof err);
    setlocale(LC_NUMERIC, "C");
    CHECK(st == FP8KIT_OK, "%s", err);
    if (st)
        return;
    json_t *v = c.values;
    CHECK(json_is_null(json_object_get(v, "nan")) && json_is_null(json_object_get(v, "inf")) &&
              json_is_null(json_object_get(v, "big")) && json_is_null(json_object_get(v, "over")) &&
              json_is_null(json_object_get(v, "huge")),
          "numbers jansson cannot hold read as null");
    CHECK(json_integer_value(json_object_get(v, "max")) == INT64_MAX &&
              json_integer_value(json_object_get(v, "min")) == INT64_MIN,
          "64-bit integers");
    CHECK(json_is_real(json_object_get(v, "r")) && json_real_value(json_object_get(v, "r")) == 0.5,
          "0.5 read as 0.5 (locale %s)", loc ? loc : "C");
    CHECK(json_real_value(json_object_get(v, "tiny")) == 0.0, "1e-400 is 0");
    CHECK(json_is_true(json_object_get(v, "d")) && json_object_size(v) == 13, "the last duplicate wins (%zu keys)",
          json_object_size(v));
    const char *s = json_string_value(json_object_get(v, "s"));
    CHECK(s && !strcmp(s, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xf0\x9f\x98\x80\xef\xbf\xbd"),
          "unpaired surrogates read as U+FFFD, a pair as one character");
#if JANSSON_VERSION_HEX >= 0x020e00
    json_t *nk = json_object_getn(v, "n\0k", 3);
    CHECK(nk && json_string_length(nk) == 3 && !memcmp(json_string_value(nk), "x\0y", 3), "U+0000 in keys and strings");
#endif
    CHECK(json_integer_value(json_array_get(
              json_object_get(json_array_get(json_array_get(json_array_get(json_array_get(
                                                 json_object_get(v, "deep"), 0), 0), 0), 0), "k"), 0)) == 1,
          "nested values");
    CHECK(c.doc.nmembers == 14 && c.doc.nnamed == 0, "14 top-level members (%zu)", c.doc.nmembers);
    st_config_free(&c);
}

static void test_refused(void)
{
    /* line, column and reason as Python's json.loads gives them */
    expect_refused("{\n  \"a\": 1,\n  \"b\": x\n}", 21, "(line 3, column 8): Expecting value");
    expect_refused("{\"a\": \"\xc3\xa9\xc3\xa9\", \"b\" 1}", 22, "(line 1, column 17): Expecting ':' delimiter");
    expect_refused("{\"a\": 1,}", 9, "(line 1, column 9): Expecting property name enclosed in double quotes");
    expect_refused("{\"a\":[1,]}", 10, "(line 1, column 9): Expecting value");
    expect_refused("{\"a\":\"x\\q\"}", 11, "(line 1, column 8): Invalid \\escape");
    expect_refused("{\"a\":\"x\\u12\"}", 13, "(line 1, column 9): Invalid \\uXXXX escape");
    expect_refused("{\"a\":\"x\x01\"}", 10, "(line 1, column 8): Invalid control character at");
    expect_refused("{\"a\":\"x", 7, "(line 1, column 6): Unterminated string starting at");
    expect_refused("{\"a\": 1} 2", 10, "(line 1, column 10): Extra data");
    expect_refused("{\"a\": 1 \"b\": 2}", 15, "(line 1, column 9): Expecting ',' delimiter");
    expect_refused("{\"a\": 1}\0", 9, "Extra data");
    expect_refused("{\"a\": \"\xff\"}", 10, "invalid UTF-8");
    expect_refused("", 0, "(line 1, column 1): Expecting value");
    expect_refused("{\0\"\0a\0\"\0:\0001\0}\0", 16, "UTF-16 or UTF-32");
    expect_refused("[1]", 3, "not a JSON object");
    char deep[2 * ST_PJ_MAX_DEPTH + 8];
    memset(deep, '[', ST_PJ_MAX_DEPTH + 1);
    memset(deep + ST_PJ_MAX_DEPTH + 1, ']', ST_PJ_MAX_DEPTH + 1);
    expect_refused(deep, 2 * ST_PJ_MAX_DEPTH + 2, "nested deeper than");
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/fp8kit-test-splice-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_set_remove();
    test_values();
    test_refused();
    char p[128];
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    rmdir(dir);
    return fk_test_summary("test_st_splice");
}
