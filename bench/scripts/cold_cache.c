/* How much colder this machine's caches are after a sleep: the time to copy and read
 * 2 MiB after sleeping 0 to 50 ms, and of 200 cheap system calls for contrast (issue
 * #26: why a request to an idle server is slower than one sent right after another).
 *
 *     gcc -O2 -o /tmp/cold_cache bench/scripts/cold_cache.c && /tmp/cold_cache
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SAMPLES 200

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    const size_t size = 2 << 20;
    char *from = malloc(size), *to = malloc(size);
    if (!from || !to)
        return 1;
    memset(from, 1, size);
    memset(to, 2, size);
    const int gaps_us[] = {0, 1000, 5000, 15000, 50000};
    double t[SAMPLES];
    for (size_t g = 0; g < sizeof gaps_us / sizeof *gaps_us; g++) {
        for (int i = 0; i < SAMPLES; i++) {
            if (gaps_us[g])
                usleep(gaps_us[g]);
            double start = now_us();
            memcpy(to, from, size);
            volatile long sum = 0;
            for (size_t j = 0; j < size; j += 64)
                sum += to[j];
            t[i] = now_us() - start;
        }
        qsort(t, SAMPLES, sizeof *t, by_value);
        printf("after %5d us asleep: copy and read 2 MiB p50 %6.1f us\n", gaps_us[g], t[SAMPLES / 2]);
    }
    for (size_t g = 0; g < sizeof gaps_us / sizeof *gaps_us; g++) {
        for (int i = 0; i < SAMPLES; i++) {
            if (gaps_us[g])
                usleep(gaps_us[g]);
            double start = now_us();
            for (int k = 0; k < 200; k++)
                getppid();
            t[i] = now_us() - start;
        }
        qsort(t, SAMPLES, sizeof *t, by_value);
        printf("after %5d us asleep: 200 getppid p50 %6.1f us\n", gaps_us[g], t[SAMPLES / 2]);
    }
    return 0;
}
