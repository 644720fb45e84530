#!/usr/bin/python3
"""Reference values of dtrain's models from PyTorch, for tests/test_models.c.

The C engine dumps, for every model case, its initial parameters (one flat
float32 vector), its tensor table and a fixed input batch; this script builds
the same architecture with torch.nn, loads those parameters in the engine's
flat order, runs forward and backward in float64 with dropout off, and writes
the mean cross-entropy loss and, per parameter tensor, the gradient's L2 norm
and first 4 entries. test_models recomputes them in float32 and compares, so
`make check` needs no PyTorch; only regenerating the fixture does.

Regenerate (after a deliberate change to a model, its initialisation or the
case table in tests/test_models.c) with Debian's python3-torch:

    ./configure && make tests/test_models       # from the build directory
    mkdir -p /tmp/d && tests/test_models --dump /tmp/d
    /usr/bin/python3 tests/torch_reference.py /tmp/d tests/fixtures/models_reference.txt

Usage: /usr/bin/python3 tests/torch_reference.py DUMPDIR OUTFILE

DUMPDIR holds, per model NAME (little-endian raw files):
  NAME.params.f32   the flat parameter vector
  NAME.x.f32        the input batch (B, C, H, W)
  NAME.y.i32        the labels (B)
  NAME.tensors.txt  one line per tensor: name offset count shape
"""
import os
import re
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# Model cases: name, input (C, H, W), builder. Must agree with ref_cases in
# tests/test_models.c (batch 4, 10 classes, mlp "100" sigmoid, gn_groups 2).
B = 4
CLASSES = 10
GN_GROUPS = 2
GN_EPS = 1e-5


def logreg(c, h, w):
    return nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, CLASSES))


def mlp(c, h, w, hidden=(100,), act=nn.Sigmoid):
    layers, width = [nn.Flatten()], c * h * w
    for out in hidden:
        layers += [nn.Linear(width, out), act()]
        width = out
    return nn.Sequential(*layers, nn.Linear(width, CLASSES))


def mnist_cnn(c, h, w):
    p, q = (h - 4) // 2, (w - 4) // 2  # two valid 3x3 convs, then 2x2 max-pool
    return nn.Sequential(
        nn.Conv2d(c, 32, 3), nn.ReLU(),
        nn.Conv2d(32, 64, 3), nn.ReLU(),
        nn.MaxPool2d(2, 2), nn.Dropout(0.25),
        nn.Flatten(), nn.Linear(64 * p * q, 128), nn.ReLU(),
        nn.Dropout(0.5), nn.Linear(128, CLASSES))


class BasicBlock(nn.Module):
    """conv3x3(stride) GN ReLU conv3x3 GN, plus the shortcut (1x1 conv + GN
    where the shape changes), ReLU. Submodules are registered in the order the
    C builder adds them, so parameters() walks the flat vector's order."""

    def __init__(self, cin, width, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
        self.gn1 = nn.GroupNorm(GN_GROUPS, width, eps=GN_EPS)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.gn2 = nn.GroupNorm(GN_GROUPS, width, eps=GN_EPS)
        self.shortcut = None
        if stride != 1 or cin != width:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, width, 1, stride, 0, bias=False),
                                          nn.GroupNorm(GN_GROUPS, width, eps=GN_EPS))

    def forward(self, x):
        y = self.gn2(self.conv2(F.relu(self.gn1(self.conv1(x)))))
        return F.relu(y + (self.shortcut(x) if self.shortcut is not None else x))


def resnet_gn(depth):
    def build(c, h, w):
        blocks, layers, cin = (depth - 2) // 6, [], 16
        layers += [nn.Conv2d(c, 16, 3, 1, 1, bias=False),
                   nn.GroupNorm(GN_GROUPS, 16, eps=GN_EPS), nn.ReLU()]
        for s, width in enumerate((16, 32, 64)):
            for b in range(blocks):
                layers.append(BasicBlock(cin, width, 2 if s > 0 and b == 0 else 1))
                cin = width
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, CLASSES)]
        return nn.Sequential(*layers)
    return build


CASES = [
    ("logreg", (1, 28, 28), logreg),
    ("mlp", (1, 28, 28), mlp),
    ("mnist_cnn", (1, 28, 28), mnist_cnn),
    ("resnet20_gn", (3, 32, 32), resnet_gn(20)),
]


def check(cond, msg):
    """Like assert, but not dropped by `python3 -O`: a mismatch must stop the script."""
    if not cond:
        sys.exit(f"torch_reference.py: {msg}")


def read_raw(path, dtype, count):
    a = np.fromfile(path, dtype=dtype)
    check(a.size == count, f"{path}: {a.size} values, expected {count}")
    return a


def read_tensors(path):
    """[(name, offset, count, shape)] from 'name offset count (d0, d1, ...)'."""
    out = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            m = re.fullmatch(r"(\S+) (\d+) (\d+) \(([\d, ]*)\)\s*", line)
            check(m, f"{path}:{lineno}: cannot parse {line!r}")
            shape = tuple(int(d) for d in m.group(4).replace(",", " ").split())
            out.append((m.group(1), int(m.group(2)), int(m.group(3)), shape))
    return out


def load_params(model, flat, tensors, where):
    params = list(model.named_parameters())
    check(len(params) == len(tensors),
        f"{where}: torch has {len(params)} parameter tensors, the dump {len(tensors)}")
    expect_off = 0
    for (tname, p), (name, off, count, shape) in zip(params, tensors):
        check(off == expect_off, f"{where}: {name} at offset {off}, expected {expect_off}")
        check(tuple(p.shape) == shape, f"{where}: {name} {shape} vs torch {tname} {tuple(p.shape)}")
        check(p.numel() == count, f"{where}: {name} count {count} vs {p.numel()}")
        check(name.rsplit(".", 1)[1] == tname.rsplit(".", 1)[1],
            f"{where}: {name} is loaded into torch's {tname}")
        with torch.no_grad():
            p.copy_(torch.from_numpy(flat[off:off + count].astype(np.float64)).view(shape))
        expect_off += count
    check(expect_off == flat.size, f"{where}: tensors cover {expect_off} of {flat.size} values")
    return params


def reference(dump, name, chw, builder):
    prefix = os.path.join(dump, name)
    tensors = read_tensors(prefix + ".tensors.txt")
    nparams = sum(t[2] for t in tensors)
    flat = read_raw(prefix + ".params.f32", "<f4", nparams)
    x = read_raw(prefix + ".x.f32", "<f4", B * chw[0] * chw[1] * chw[2]).reshape((B,) + chw)
    y = read_raw(prefix + ".y.i32", "<i4", B)

    model = builder(*chw).double()
    check(not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()),
          f"{name}: BatchNorm would make train and eval differ")
    # eval() turns dropout off; with no BatchNorm nothing else differs from train()
    model.eval()
    params = load_params(model, flat, tensors, prefix)
    xt = torch.from_numpy(x.astype(np.float64))
    yt = torch.from_numpy(y.astype(np.int64))
    loss = F.cross_entropy(model(xt), yt, reduction="mean")
    loss.backward()

    lines = [f"model {name} loss {loss.item():.10e}"]
    for (tname, p), (cname, _, _, _) in zip(params, tensors):
        g = p.grad.detach().reshape(-1)
        first = " ".join(f"{v:.10e}" for v in g[:4].tolist())
        lines.append(f"grad {cname} l2 {torch.linalg.norm(g).item():.10e} first {first}")
    return lines


def main(argv):
    if len(argv) != 3:
        sys.exit(f"usage: {argv[0]} DUMPDIR OUTFILE")
    out = ["# Reference values for tests/test_models.c, written by tests/torch_reference.py",
           f"# (PyTorch {torch.__version__}, float64, dropout off). Do not edit; regenerate."]
    for name, chw, builder in CASES:
        out += reference(argv[1], name, chw, builder)
    with open(argv[2], "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {argv[2]}: {len(CASES)} models")


if __name__ == "__main__":
    main(sys.argv)
