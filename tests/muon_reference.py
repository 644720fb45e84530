#!/usr/bin/python3
"""Reference values of Muon from PyTorch, for tests/test_muon.c.

The rule of KellerJordan/Muon's muon.py (SingleDeviceMuonWithAuxAdam,
commit 857d1ad; doc/references.md), written here in PyTorch with the
Newton-Schulz iteration in float32 (the reference runs it in bfloat16 on a
GPU; dtrain runs it in float32), and its AdamW part as torch.optim.AdamW (as
dtrain's optim.name = adamw). The C test rebuilds the problem from the same
integer formulas (no PyTorch needed by `make check`, only by regenerating the
fixture).

The flat vector, C = 8 (a GPT block in miniature), in this order:
  E    (12, 8)   AdamW, weight-decayed (an embedding)
  QKV  (24, 8)   Muon, as three (8, 8) matrices (q, k, v)
  QB   (24)      AdamW, no decay (a bias)
  FC   (32, 8)   Muon, taller than wide: transposed, update scaled by 2
  PR   (8, 32)   Muon, wider than tall
  G    (8)       AdamW, no decay (a LayerNorm gain)
  x0[i]  = float32(((i * 37 + 11) % 201 - 100) / 100)
  g_k[i] = float32(((31 i^2 + 7919 i + 104729 k) % 2001 - 1000) / 1000 * s_k),
           s_k = 10 ** ((k % 5) - 2)  (step k = 1..10), g_k = 0 when k == 4
           (the square keeps the gradient matrices far from low rank).
Hyper-parameter sets (Python floats; lr is a float32 value, as dtrain's
learning rate is a float):
  set 1: lr float32(0.02), momentum 0.95, nesterov, weight decay 0.1,
         AdamW lr 3e-4, betas (0.9, 0.95), eps 1e-8
  set 2: lr float32(0.05), momentum 0.9, no nesterov, no weight decay,
         AdamW lr 1e-3, betas (0.8, 0.999), eps 1e-6

Output lines (floats as Python float.hex, which strtof reads):
  torch VERSION
  muon SET STEP x  v0 ... v831      x after steps 1, 5, 10
  muon SET 10 mom|m|v  v0 ... v831  Muon's momentum, AdamW's moments after 10
                                     (zero where the other part owns the entry)
  ns ROWS COLS  in v... out v...    newton_schulz5 of one matrix, input then
                                     output (row-major)

Regenerate (after a deliberate change to this problem, mirrored in
tests/test_muon.c) with Debian's python3-torch:

    /usr/bin/python3 tests/muon_reference.py > tests/fixtures/muon_reference.txt
"""
import sys

import numpy as np
import torch

C = 8
# (name, rows, cols, muon matrices (0: AdamW), AdamW decay)
TENSORS = [("E", 12, C, 0, True), ("QKV", 3 * C, C, 3, False), ("QB", 3 * C, 0, 0, False),
           ("FC", 4 * C, C, 1, False), ("PR", C, 4 * C, 1, False), ("G", C, 0, 0, False)]
N = sum(r * (c or 1) for _, r, c, _, _ in TENSORS)
STEPS = 10
ZERO_STEP = 4
SETS = {
    1: dict(lr=float(np.float32(0.02)), momentum=0.95, nesterov=True, weight_decay=0.1,
            adamw_lr=3e-4, betas=(0.9, 0.95), eps=1e-8),
    2: dict(lr=float(np.float32(0.05)), momentum=0.9, nesterov=False, weight_decay=0.0,
            adamw_lr=1e-3, betas=(0.8, 0.999), eps=1e-6),
}
NS_A, NS_B, NS_C = 3.4445, -4.7750, 2.0315


def x0():
    return np.array([((i * 37 + 11) % 201 - 100) / 100 for i in range(N)], dtype=np.float32)


def grad(k):
    if k == ZERO_STEP:
        return np.zeros(N, dtype=np.float32)
    s = 10.0 ** ((k % 5) - 2)
    return np.array([((31 * i * i + 7919 * i + 104729 * k) % 2001 - 1000) / 1000 * s
                     for i in range(N)], dtype=np.float32)


def hexes(a):
    return " ".join(float(v).hex() for v in np.asarray(a, dtype=np.float32).ravel())


def newton_schulz5(g):
    """muon.py's zeropower_via_newtonschulz5(g, 5), float32 throughout."""
    x = g.clone()
    tall = g.size(0) > g.size(1)
    if tall:
        x = x.T
    x = x / (x.norm() + 1e-7)
    for _ in range(5):
        a = x @ x.T
        b = NS_B * a + NS_C * a @ a
        x = NS_A * x + b @ x
    if tall:
        x = x.T
    return x


def muon_update(g, buf, beta, nesterov):
    """muon.py's muon_update (2-D): momentum by lerp, then orthogonalised."""
    buf.lerp_(g, 1 - beta)
    u = g.lerp(buf, beta) if nesterov else buf.clone()
    u = newton_schulz5(u)
    u *= max(1, g.size(-2) / g.size(-1)) ** 0.5
    return u


def views(flat):
    """The tensors as views of the flat vector, and Muon's matrices among them."""
    out, mats, at = [], [], 0
    for name, r, c, m, decay in TENSORS:
        n = r * (c or 1)
        t = flat[at:at + n].view(r, c) if c else flat[at:at + n]
        out.append((name, t, m, decay))
        if m:
            rows = r // m
            for j in range(m):
                mats.append(t[j * rows:(j + 1) * rows])
        at += n
    return out, mats


def run(sid, hp, lines):
    x = torch.from_numpy(x0())
    mom = torch.zeros(N)
    params = [torch.nn.Parameter(t.clone()) for _, t, _, _ in views(x)[0]]
    adam_decay = [p for p, (_, _, m, d) in zip(params, views(x)[0]) if not m and d]
    adam_plain = [p for p, (_, _, m, d) in zip(params, views(x)[0]) if not m and not d]
    opt = torch.optim.AdamW([{"params": adam_decay, "weight_decay": hp["weight_decay"]},
                             {"params": adam_plain, "weight_decay": 0.0}],
                            lr=hp["adamw_lr"], betas=hp["betas"], eps=hp["eps"])
    _, mom_mats = views(mom)
    lr, wd = hp["lr"], hp["weight_decay"]
    for k in range(1, STEPS + 1):
        g = torch.from_numpy(grad(k))
        gviews, g_mats = views(g)
        for p, (_, gt, m, _) in zip(params, gviews):
            p.grad = gt.clone()
        # Muon on each hidden matrix of each Muon tensor
        with torch.no_grad():
            mi = 0
            for p, (_, _, m, _) in zip(params, gviews):
                if not m:
                    continue
                rows = p.size(0) // m
                for j in range(m):
                    w = p[j * rows:(j + 1) * rows]
                    u = muon_update(g_mats[mi], mom_mats[mi], hp["momentum"], hp["nesterov"])
                    w.mul_(1 - lr * wd)
                    w.add_(u, alpha=-lr)
                    mi += 1
        opt.step()
        if k in (1, 5, STEPS):
            lines.append(f"muon {sid} {k} x " + hexes(torch.cat([p.detach().ravel()
                                                                for p in params])))
    m = [opt.state[p]["exp_avg"].ravel() if p in opt.state else torch.zeros(p.numel())
         for p in params]
    v = [opt.state[p]["exp_avg_sq"].ravel() if p in opt.state else torch.zeros(p.numel())
         for p in params]
    lines.append(f"muon {sid} {STEPS} mom " + hexes(mom))
    lines.append(f"muon {sid} {STEPS} m " + hexes(torch.cat(m)))
    lines.append(f"muon {sid} {STEPS} v " + hexes(torch.cat(v)))


def main():
    torch.set_num_threads(1)
    lines = [f"torch {torch.__version__}"]
    for sid, hp in SETS.items():
        run(sid, hp, lines)
    # one orthogonalisation alone: a tall (32, 8) slice of the gradients
    g = torch.from_numpy(grad(3)[:256].copy()).view(32, 8)
    lines.append("ns 32 8 in " + hexes(g) + " out " + hexes(newton_schulz5(g)))
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
