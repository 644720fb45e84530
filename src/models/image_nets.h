/* The image networks by name, built on the network engine (nn/net.h).
 *
 *   logreg       linear (C*H*W -> classes)
 *   mlp          linear layers of model.hidden widths with model.activation,
 *                then linear -> classes (default 784-100-10 sigmoid)
 *   mnist_cnn    conv3x3 32 ReLU, conv3x3 64 ReLU, max-pool 2, dropout 0.25,
 *                dense 128 ReLU, dropout 0.5, dense classes
 *                (1,199,882 parameters on 1x28x28, 10 classes)
 *   resnet20_gn, resnet32_gn
 *                CIFAR ResNets (He et al. 2016, 6n+2 layers, widths 16/32/64)
 *                with GroupNorm (model.gn_groups) in place of BatchNorm and
 *                1x1-conv + GroupNorm shortcuts where the shape changes. */
#ifndef DT_MODELS_IMAGE_NETS_H
#define DT_MODELS_IMAGE_NETS_H

#include "backend/backend.h"
#include "io/settings.h"
#include "nn/net.h"

/* Build the named model for inputs of shape (c, h, w) and `classes`.
 * Returns NULL after dt_err_set() for an unknown name or bad options. */
dt_net *model_build(const dt_backend *be, const char *name, const char *hidden,
                    const char *activation, int gn_groups, int c, int h, int w, int classes);

/* The known names, NULL-terminated. */
extern const char *const model_names[];

#endif
