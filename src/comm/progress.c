#include "comm/progress.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

struct dt_progress {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    void (*fn)(void *);
    void *arg;
    int busy;       /* a job is posted and not finished */
    int quit;
};

#define PT_CHECK(call)                                                         \
    do {                                                                       \
        int pt_rc_ = (call);                                                   \
        if (pt_rc_)                                                            \
            DT_FATAL("%s failed: %s", #call, strerror(pt_rc_));               \
    } while (0)

static void *progress_main(void *arg)
{
    dt_progress *p = arg;
    PT_CHECK(pthread_mutex_lock(&p->lock));
    for (;;) {
        while (!p->quit && !(p->busy && p->fn))
            PT_CHECK(pthread_cond_wait(&p->cond, &p->lock));
        if (p->quit && !p->busy)
            break;
        void (*fn)(void *) = p->fn;
        void *a = p->arg;
        PT_CHECK(pthread_mutex_unlock(&p->lock));
        fn(a);
        PT_CHECK(pthread_mutex_lock(&p->lock));
        p->fn = NULL;
        p->busy = 0;
        PT_CHECK(pthread_cond_broadcast(&p->cond));
    }
    PT_CHECK(pthread_mutex_unlock(&p->lock));
    return NULL;
}

dt_progress *progress_start(void)
{
    dt_progress *p = dt_calloc(1, sizeof *p);
    PT_CHECK(pthread_mutex_init(&p->lock, NULL));
    PT_CHECK(pthread_cond_init(&p->cond, NULL));
    PT_CHECK(pthread_create(&p->thread, NULL, progress_main, p));
    return p;
}

void progress_post(dt_progress *p, void (*fn)(void *), void *arg)
{
    PT_CHECK(pthread_mutex_lock(&p->lock));
    if (p->busy)
        DT_FATAL("progress_post: the previous job has not been waited for");
    p->fn = fn;
    p->arg = arg;
    p->busy = 1;
    PT_CHECK(pthread_cond_broadcast(&p->cond));
    PT_CHECK(pthread_mutex_unlock(&p->lock));
}

int progress_test(dt_progress *p)
{
    PT_CHECK(pthread_mutex_lock(&p->lock));
    int done = !p->busy;
    PT_CHECK(pthread_mutex_unlock(&p->lock));
    return done;
}

void progress_wait(dt_progress *p)
{
    PT_CHECK(pthread_mutex_lock(&p->lock));
    while (p->busy)
        PT_CHECK(pthread_cond_wait(&p->cond, &p->lock));
    PT_CHECK(pthread_mutex_unlock(&p->lock));
}

void progress_stop(dt_progress *p)
{
    if (!p)
        return;
    progress_wait(p);
    PT_CHECK(pthread_mutex_lock(&p->lock));
    p->quit = 1;
    PT_CHECK(pthread_cond_broadcast(&p->cond));
    PT_CHECK(pthread_mutex_unlock(&p->lock));
    PT_CHECK(pthread_join(p->thread, NULL));
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p);
}
