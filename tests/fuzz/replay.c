/* replay.c - feeds files (or every file of the directories given) to the
 * safetensors fuzz target without libFuzzer: the regression test over
 * tests/fuzz/corpus (CTest st_fuzz_corpus). A broken invariant aborts; the
 * run fails when no input was found, so an empty corpus cannot pass.
 * Usage: st_fuzz_replay DIR_OR_FILE... */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(fp);
            return -1;
        }
        n += fread(buf + n, 1, cap - n, fp);
        if (n < cap)
            break;
        cap *= 2;
        buf = realloc(buf, cap);
    }
    fclose(fp);
    /* an exact-size copy, so reads past the end are caught by ASan */
    unsigned char *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

int main(int argc, char **argv)
{
    long files = 0, errors = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb)) {
            fprintf(stderr, "replay: %s: not found\n", argv[i]);
            errors++;
            continue;
        }
        if (!S_ISDIR(sb.st_mode)) {
            errors += replay_file(argv[i]) != 0;
            files++;
            continue;
        }
        struct dirent **list;
        int n = scandir(argv[i], &list, NULL, by_name);
        for (int k = 0; k < n; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], list[k]->d_name);
            if (list[k]->d_name[0] != '.' && !stat(path, &sb) && S_ISREG(sb.st_mode)) {
                errors += replay_file(path) != 0;
                files++;
            }
            free(list[k]);
        }
        free(list);
    }
    printf("st_fuzz_replay: %ld inputs replayed, %ld unreadable\n", files, errors);
    return files == 0 || errors ? 1 : 0;
}
