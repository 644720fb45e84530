#!/usr/bin/python3
"""Reference values of AdamW and gradient clipping from PyTorch, for
tests/test_adamw.c.

torch.optim.AdamW and torch.nn.utils.clip_grad_norm_ run on a fixed problem
that the C test rebuilds from the same integer formulas (no PyTorch needed by
`make check`, only by regenerating the fixture):

  two tensors: A (8, 9), weight-decayed, and B (21), not: the flat vector is
  A then B (93 floats).
  x0[i]    = float32(((i * 37 + 11) % 201 - 100) / 100)
  g_k[i]   = float32(((i * 7919 + k * 104729) % 2001 - 1000) / 1000 * s_k),
             s_k = 10 ** ((k % 5) - 2)  (step k = 1..20; gradients of widely
             differing sizes), and g_k = 0 for every i when k == 7.
  Hyper-parameter sets (Python floats; the C side passes the same doubles):
    set 1: lr 1e-3, betas (0.9, 0.99),  eps 1e-8, weight decay 0.1
    set 2: lr 5e-2, betas (0.8, 0.999), eps 1e-6, weight decay 0.5

Output lines (floats as Python float.hex, which strtof reads):
  torch VERSION
  adamw SET STEP x|m|v  v0 v1 ... v92     x after steps 1, 10, 20; m, v after 20
  clip CASE MAX NORM g0 ... g92           clip_grad_norm_(max) on g_CASE: the
                                          norm it returned and the clipped g

Regenerate (after a deliberate change to this problem, mirrored in
tests/test_adamw.c) with Debian's python3-torch:

    /usr/bin/python3 tests/adamw_reference.py > tests/fixtures/adamw_reference.txt
"""
import sys

import numpy as np
import torch

NA, NB = 72, 21
N = NA + NB
STEPS = 20
ZERO_STEP = 7
SETS = {
    1: dict(lr=1e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1),
    2: dict(lr=5e-2, betas=(0.8, 0.999), eps=1e-6, weight_decay=0.5),
}
# clip cases (gradient step k, max_norm): norm ~55 vs 1, ~5.5 vs 5 (clipped), ~0.56 vs 1 (not)
CLIPS = [(3, 1.0), (2, 5.0), (1, 1.0)]


def x0():
    return np.array([((i * 37 + 11) % 201 - 100) / 100 for i in range(N)], dtype=np.float32)


def grad(k):
    if k == ZERO_STEP:
        return np.zeros(N, dtype=np.float32)
    s = 10.0 ** ((k % 5) - 2)
    return np.array([((i * 7919 + k * 104729) % 2001 - 1000) / 1000 * s for i in range(N)],
                    dtype=np.float32)


def hexes(a):
    return " ".join(float(v).hex() for v in np.asarray(a, dtype=np.float32).ravel())


def main():
    torch.set_num_threads(1)
    out = [f"torch {torch.__version__}"]
    for sid, hp in SETS.items():
        x = torch.from_numpy(x0())
        a = torch.nn.Parameter(x[:NA].reshape(8, 9).clone())
        b = torch.nn.Parameter(x[NA:].clone())
        lr, eps, wd, betas = hp["lr"], hp["eps"], hp["weight_decay"], hp["betas"]
        opt = torch.optim.AdamW([{"params": [a], "weight_decay": wd},
                                 {"params": [b], "weight_decay": 0.0}],
                                lr=lr, betas=betas, eps=eps)
        for k in range(1, STEPS + 1):
            g = torch.from_numpy(grad(k))
            a.grad = g[:NA].reshape(8, 9).clone()
            b.grad = g[NA:].clone()
            opt.step()
            if k in (1, 10, STEPS):
                out.append(f"adamw {sid} {k} x " + hexes(torch.cat([a.detach().ravel(), b.detach()])))
        st_a, st_b = opt.state[a], opt.state[b]
        for name, key in (("m", "exp_avg"), ("v", "exp_avg_sq")):
            out.append(f"adamw {sid} {STEPS} {name} " +
                       hexes(torch.cat([st_a[key].ravel(), st_b[key]])))
    for case, (k, mx) in enumerate(CLIPS):
        g = torch.from_numpy(grad(k))
        a = torch.nn.Parameter(torch.zeros(8, 9))
        b = torch.nn.Parameter(torch.zeros(NB))
        a.grad = g[:NA].reshape(8, 9).clone()
        b.grad = g[NA:].clone()
        norm = torch.nn.utils.clip_grad_norm_([a, b], mx)
        out.append(f"clip {k} {float(mx).hex()} {float(norm).hex()} " +
                   hexes(torch.cat([a.grad.ravel(), b.grad])))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
