/* Minimal test helpers: each CHECK prints ok/not ok with file:line; a test
 * program returns tap_done(), non-zero if any check failed, so automake's
 * harness counts it as FAIL. */
#ifndef DT_TESTS_TAP_H
#define DT_TESTS_TAP_H

#include <math.h>
#include <stdio.h>

static int tap_failed_ = 0, tap_count_ = 0;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        tap_count_++;                                                          \
        if (!(cond)) {                                                         \
            tap_failed_++;                                                     \
            printf("not ok %d - %s:%d: ", tap_count_, __FILE__, __LINE__);     \
            printf(__VA_ARGS__);                                               \
            printf("\n");                                                      \
        } else {                                                               \
            printf("ok %d - ", tap_count_);                                    \
            printf(__VA_ARGS__);                                               \
            printf("\n");                                                      \
        }                                                                      \
        fflush(stdout);                                                        \
    } while (0)

/* |a - b| <= atol + rtol * |b| */
#define CHECK_CLOSE(a, b, atol, rtol, ...)                                     \
    do {                                                                       \
        double a_ = (a), b_ = (b);                                             \
        int ok_ = fabs(a_ - b_) <= (atol) + (rtol) * fabs(b_);                 \
        CHECK(ok_, __VA_ARGS__);                                               \
        if (!ok_)                                                              \
            printf("#   got %.9g, expected %.9g\n", a_, b_);                   \
    } while (0)

static inline int tap_done(void)
{
    printf("# %d checks, %d failed\n", tap_count_, tap_failed_);
    return tap_failed_ ? 1 : 0;
}

#endif
