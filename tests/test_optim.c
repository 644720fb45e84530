/* SGD and learning-rate schedule against hand-computed recursions. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "optim/optim.h"
#include "optim/sgd.h"
#include "tap.h"

static void test_momentum(int nesterov)
{
    const float m = 0.9f, wd = 0.01f, lr = 0.1f;
    float x[3] = { 1.0f, -2.0f, 0.5f };
    double xr[3] = { 1.0, -2.0, 0.5 }, v[3] = { 0, 0, 0 };
    dt_sgd o;
    sgd_init(&o, 3, m, wd, nesterov);
    for (int step = 0; step < 5; step++) {
        float g[3];
        for (int i = 0; i < 3; i++)
            g[i] = (float)(0.3 * (i + 1) - 0.1 * step);
        sgd_step(&o, x, g, lr);
        for (int i = 0; i < 3; i++) {
            double gi = g[i] + wd * xr[i];
            v[i] = m * v[i] + gi;
            xr[i] -= lr * (nesterov ? gi + m * v[i] : v[i]);
        }
    }
    for (int i = 0; i < 3; i++)
        CHECK_CLOSE(x[i], xr[i], 1e-6, 1e-5, "%s momentum: x[%d] after 5 steps",
                    nesterov ? "nesterov" : "heavy-ball", i);
    sgd_free(&o);
}

static void test_plain(void)
{
    float x[2] = { 1, 2 }, g[2] = { 0.5f, -1 };
    dt_sgd o;
    sgd_init(&o, 2, 0.0, 0.0, false);
    sgd_step(&o, x, g, 0.1f);
    CHECK_CLOSE(x[0], 0.95, 1e-7, 0, "plain SGD x0");
    CHECK_CLOSE(x[1], 2.1, 1e-6, 0, "plain SGD x1");
    sgd_free(&o);
}

static void test_schedule(void)
{
    dt_schedule s;
    CHECK(schedule_init(&s, 0.1, true, 32, 16, 5, "30,60,80", 0.1) == 0, "schedule parses");
    double target = 0.1 * 32 * 16 / 256.0; /* 0.2 */
    CHECK_CLOSE(schedule_lr(&s, 0), 0.1, 1e-12, 0, "warm-up starts at lr");
    CHECK_CLOSE(schedule_lr(&s, 2.5), 0.1 + (target - 0.1) * 0.5, 1e-12, 0, "warm-up midpoint");
    CHECK_CLOSE(schedule_lr(&s, 5), target, 1e-12, 0, "target after warm-up");
    CHECK_CLOSE(schedule_lr(&s, 29.99), target, 1e-12, 0, "before the first decay");
    CHECK_CLOSE(schedule_lr(&s, 30), target * 0.1, 1e-12, 0, "first decay at epoch 30");
    CHECK_CLOSE(schedule_lr(&s, 85), target * 1e-3, 1e-12, 0, "three decays by epoch 85");
    CHECK(schedule_init(&s, 0.05, false, 32, 16, 0, "", 0.1) == 0, "empty decay list");
    CHECK_CLOSE(schedule_lr(&s, 100), 0.05, 1e-12, 0, "no scaling, no decay");
    CHECK(schedule_init(&s, 0.1, false, 1, 1, 0, "30,20", 0.1) == -1, "decreasing list refused");
    CHECK(schedule_init(&s, 0.1, false, 1, 1, 0, "30,x", 0.1) == -1, "non-number refused");
}

/* The optimizer table's sgd: the whole vector, two ranges [0, k) and
 * [k, n) stepped apart (a parameter server's shards), and sgd_step_flat are
 * the same bit for bit; its one state vector is named "momentum" (the name
 * every checkpoint so far uses). */
static void test_optim_table(int nesterov)
{
    enum { N = 37, K = 15 };
    dt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.optim.momentum = 0.9;
    cfg.optim.weight_decay = 1e-3;
    cfg.optim.nesterov = nesterov;
    const dt_optim_ops *ops = optim_find("sgd");
    CHECK(ops == &optim_sgd && ops->nstate == 1 && !strcmp(ops->state_names[0], "momentum"),
          "optim_find(sgd): one state vector named momentum");
    CHECK(optim_find("lion") == NULL && strstr(dt_err_msg(), "sgd") != NULL,
          "an unknown optimizer is an error naming the known ones");
    dt_optim whole, split;
    CHECK(optim_init(&whole, ops, &cfg, N, NULL, 0, NULL) == 0 &&
              optim_init(&split, ops, &cfg, N, NULL, 0, NULL) == 0, "optim_init");
    float xw[N], xs[N], xr[N], vr[N] = { 0 }, g[N];
    for (int i = 0; i < N; i++) {
        xw[i] = xs[i] = xr[i] = 0.1f * (float)(i % 7) - 0.3f;
    }
    for (int step = 1; step <= 4; step++) {
        for (int i = 0; i < N; i++)
            g[i] = 0.05f * (float)((i * step) % 11) - 0.2f;
        const float lr = 0.1f / (float)step;
        optim_step(&whole, backend_cpu(), xw, g, lr, step);
        optim_step_range(&split, 0, K, xs, g, lr, step);
        optim_step_range(&split, K, N, xs + K, g + K, lr, step);
        sgd_step_flat(N, 0.9f, 1e-3f, nesterov, lr, xr, g, vr);
    }
    CHECK(!memcmp(xw, xr, sizeof xr) && !memcmp(whole.state[0], vr, sizeof vr),
          "sgd (nesterov %d) through the table == sgd_step_flat, x and momentum", nesterov);
    CHECK(!memcmp(xs, xr, sizeof xr) && !memcmp(split.state[0], vr, sizeof vr),
          "sgd (nesterov %d) on ranges [0, %d) + [%d, %d) == the whole vector", nesterov, K, K,
          N);
    dt_ckpt_array a[4];
    CHECK(optim_state_arrays(&whole, a, 4) == 1 && !strcmp(a[0].name, "momentum") &&
              a[0].data == whole.state[0] && a[0].n == N,
          "the checkpoint arrays: momentum (n)");
    optim_free(&whole, NULL);
    optim_free(&split, NULL);
}

int main(void)
{
    test_optim_table(0);
    test_optim_table(1);
    test_plain();
    test_momentum(0);
    test_momentum(1);
    test_schedule();
    return tap_done();
}
