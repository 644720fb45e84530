#include "models/image_nets.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

const char *const model_names[] = { "logreg", "mlp", "mnist_cnn", "resnet20_gn", "resnet32_gn",
                                    NULL };

static dt_net *build_logreg(const dt_backend *be, int c, int h, int w, int classes)
{
    dt_net *n = net_create(be, c, h, w);
    net_linear(n, net_flatten(n, 0), classes);
    return n;
}

static dt_net *build_mlp(const dt_backend *be, const char *hidden, const char *activation,
                         int c, int h, int w, int classes)
{
    int sigmoid = strcmp(activation, "sigmoid") == 0;
    if (!sigmoid && strcmp(activation, "relu") != 0) {
        dt_err_set("model.activation = '%s': expected sigmoid or relu", activation);
        return NULL;
    }
    dt_net *n = net_create(be, c, h, w);
    int x = net_flatten(n, 0);
    const char *p = hidden;
    while (*p) {
        char *end;
        errno = 0;
        long width = strtol(p, &end, 10);
        if (end == p || errno || width < 1 || width > (1L << 24) || (*end && *end != ',')) {
            net_free(n);
            dt_err_set("model.hidden = '%s': expected comma-separated positive widths", hidden);
            return NULL;
        }
        x = net_linear(n, x, (int)width);
        x = sigmoid ? net_sigmoid(n, x) : net_relu(n, x);
        p = *end ? end + 1 : end;
    }
    net_linear(n, x, classes);
    return n;
}

static dt_net *build_mnist_cnn(const dt_backend *be, int c, int h, int w, int classes)
{
    if (h < 6 || w < 6) {
        dt_err_set("model mnist_cnn needs inputs of at least 6x6, the data are %dx%d", h, w);
        return NULL;
    }
    dt_net *n = net_create(be, c, h, w);
    int x = net_relu(n, net_conv2d(n, 0, 32, 3, 1, 0, 1));
    x = net_relu(n, net_conv2d(n, x, 64, 3, 1, 0, 1));
    x = net_dropout(n, net_maxpool(n, x, 2, 2), 0.25f);
    x = net_relu(n, net_linear(n, net_flatten(n, x), 128));
    net_linear(n, net_dropout(n, x, 0.5f), classes);
    return n;
}

/* Basic block: conv3x3(stride) GN ReLU conv3x3 GN, plus the shortcut, ReLU. */
static int basic_block(dt_net *n, int x, int width, int stride, int groups)
{
    int y = net_conv2d(n, x, width, 3, stride, 1, 0);
    y = net_relu(n, net_groupnorm(n, y, groups));
    y = net_groupnorm(n, net_conv2d(n, y, width, 3, 1, 1, 0), groups);
    int skip = x;
    if (stride != 1 || n->nodes[x].c != width)
        skip = net_groupnorm(n, net_conv2d(n, x, width, 1, stride, 0, 0), groups);
    return net_relu(n, net_add(n, y, skip));
}

static dt_net *build_resnet(const dt_backend *be, int depth, int groups, int c, int h, int w,
                            int classes)
{
    if (groups < 1 || 16 % groups) {
        dt_err_set("model.gn_groups = %d: must divide 16 (the narrowest stage's width)", groups);
        return NULL;
    }
    if (h < 4 || w < 4) {
        dt_err_set("model resnet%d_gn needs inputs of at least 4x4, the data are %dx%d", depth, h, w);
        return NULL;
    }
    int blocks = (depth - 2) / 6;
    dt_net *n = net_create(be, c, h, w);
    int x = net_relu(n, net_groupnorm(n, net_conv2d(n, 0, 16, 3, 1, 1, 0), groups));
    static const int widths[3] = { 16, 32, 64 };
    for (int s = 0; s < 3; s++)
        for (int b = 0; b < blocks; b++)
            x = basic_block(n, x, widths[s], (s > 0 && b == 0) ? 2 : 1, groups);
    net_linear(n, net_avgpool(n, x), classes);
    return n;
}

dt_net *model_build(const dt_backend *be, const char *name, const char *hidden,
                    const char *activation, int gn_groups, int c, int h, int w, int classes)
{
    dt_net *n = NULL;
    if (strcmp(name, "logreg") == 0)
        n = build_logreg(be, c, h, w, classes);
    else if (strcmp(name, "mlp") == 0)
        n = build_mlp(be, hidden, activation, c, h, w, classes);
    else if (strcmp(name, "mnist_cnn") == 0)
        n = build_mnist_cnn(be, c, h, w, classes);
    else if (strcmp(name, "resnet20_gn") == 0)
        n = build_resnet(be, 20, gn_groups, c, h, w, classes);
    else if (strcmp(name, "resnet32_gn") == 0)
        n = build_resnet(be, 32, gn_groups, c, h, w, classes);
    else
        dt_err_set("model.name = '%s': unknown model; expected logreg, mlp, mnist_cnn, "
                   "resnet20_gn or resnet32_gn", name);
    if (n)
        net_finish(n, classes);
    return n;
}
