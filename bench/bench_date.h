/* bench_date.h - the default `date` of a benchmark's rows: today's UTC date
 * (YYYY-MM-DD) from the clock of the machine that runs it; --date overrides. */
#ifndef FK_BENCH_DATE_H
#define FK_BENCH_DATE_H
#include <time.h>

static inline const char *fk_bench_today(void)
{
    static char buf[16];
    const time_t now = time(NULL);
    struct tm tmv;
    if (now == (time_t)-1 || !gmtime_r(&now, &tmv) || !strftime(buf, sizeof buf, "%Y-%m-%d", &tmv))
        return "unknown";
    return buf;
}
#endif
