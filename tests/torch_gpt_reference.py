#!/usr/bin/python3
"""Reference values of dtrain's GPT (src/models/gpt.c) from PyTorch, for
tests/test_gpt.c.

`test_gpt --dump DIR` writes, per case, the flat float32 parameter vector,
its tensor table and a batch of tokens and targets; this script builds the
same GPT-2 (nanoGPT's layout: pre-LayerNorm blocks, fused qkv, causal
attention, tanh-GELU MLP, tied head) with torch.nn in float64, loads those
parameters by name, runs forward and backward with dropout off and writes the
mean cross-entropy, the logits' L2 norm and first 4 entries, and per tensor
the gradient's L2 norm and first 4 entries. test_gpt recomputes them in
float32 and compares, so `make check` needs no PyTorch; only regenerating
the fixture does.

Regenerate (after a deliberate change to the model, its initialisation or
the case table in tests/test_gpt.c) with Debian's python3-torch:

    make tests/test_gpt && mkdir -p /tmp/g && tests/test_gpt --dump /tmp/g
    /usr/bin/python3 tests/torch_gpt_reference.py /tmp/g tests/fixtures/gpt_reference.txt

Usage: /usr/bin/python3 tests/torch_gpt_reference.py DUMPDIR OUTFILE
"""
import math
import os
import re
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CASES = ["tiny", "wide"]  # must agree with ref_cases in tests/test_gpt.c


def check(cond, msg):
    """Like assert, but not dropped by `python3 -O`."""
    if not cond:
        sys.exit(f"torch_gpt_reference.py: {msg}")


class Block(nn.Module):
    def __init__(self, C, nh):
        super().__init__()
        self.nh = nh
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(C, 3 * C)
        self.attn.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(C, 4 * C)
        self.mlp.c_proj = nn.Linear(4 * C, C)

    def attention(self, x):
        B, T, C = x.shape
        hs = C // self.nh
        q, k, v = self.attn.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.attn.c_proj(y)

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        h = F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh")
        return x + self.mlp.c_proj(h)


class GPT(nn.Module):
    def __init__(self, V, T, L, nh, C):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList(Block(C, nh) for _ in range(L))
        self.ln_f = nn.LayerNorm(C, eps=1e-5)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for blk in self.h:
            x = blk(x)
        return self.ln_f(x) @ self.wte.weight.t()


def read_raw(path, dtype, count):
    a = np.fromfile(path, dtype=dtype)
    check(a.size == count, f"{path}: {a.size} values, expected {count}")
    return a


def read_tensors(path):
    """config dict and [(name, offset, count, shape)]."""
    out, cfg = [], None
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if lineno == 1:
                w = line.split()
                check(w[0] == "config" and len(w) % 2 == 1, f"{path}:1: expected 'config KEY N ...'")
                cfg = {w[i]: int(w[i + 1]) for i in range(1, len(w), 2)}
                continue
            m = re.fullmatch(r"(\S+) (\d+) (\d+) \(([\d, ]*)\)\s*", line)
            check(m, f"{path}:{lineno}: cannot parse {line!r}")
            shape = tuple(int(d) for d in m.group(4).replace(",", " ").split())
            out.append((m.group(1), int(m.group(2)), int(m.group(3)), shape))
    return cfg, out


def first4(t):
    return " ".join(f"{v:.10e}" for v in t.reshape(-1)[:4].tolist())


def reference(dump, name):
    prefix = os.path.join(dump, name)
    cfg, tensors = read_tensors(prefix + ".tensors.txt")
    B, T, V = cfg["batch"], cfg["block"], cfg["vocab"]
    flat = read_raw(prefix + ".params.f32", "<f4", sum(t[2] for t in tensors))
    tok = read_raw(prefix + ".tokens.i32", "<i4", B * T).reshape(B, T)
    tgt = read_raw(prefix + ".targets.i32", "<i4", B * T).reshape(B, T)

    model = GPT(V, T, cfg["n_layer"], cfg["n_head"], cfg["n_embd"]).double()
    params = dict(model.named_parameters())
    check(len(params) == len(tensors), f"{prefix}: torch has {len(params)} tensors, the dump {len(tensors)}")
    expect_off = 0
    for tname, off, count, shape in tensors:
        check(tname in params, f"{prefix}: no torch parameter {tname}")
        p = params[tname]
        check(off == expect_off and tuple(p.shape) == shape and p.numel() == count,
              f"{prefix}: {tname} at {off} {shape} vs torch {tuple(p.shape)}")
        with torch.no_grad():
            p.copy_(torch.from_numpy(flat[off:off + count].astype(np.float64)).view(shape))
        expect_off += count
    logits = model(torch.from_numpy(tok.astype(np.int64)))
    loss = F.cross_entropy(logits.reshape(B * T, V), torch.from_numpy(tgt.astype(np.int64)).reshape(-1))
    loss.backward()
    lines = [f"model {name} loss {loss.item():.10e}",
             f"logits l2 {torch.linalg.norm(logits.detach()).item():.10e} first {first4(logits.detach())}"]
    for tname, _, _, _ in tensors:
        g = params[tname].grad.detach()
        lines.append(f"grad {tname} l2 {torch.linalg.norm(g).item():.10e} first {first4(g)}")
    return lines


def main(argv):
    if len(argv) != 3:
        sys.exit(f"usage: {argv[0]} DUMPDIR OUTFILE")
    out = ["# Reference values for tests/test_gpt.c, written by tests/torch_gpt_reference.py",
           f"# (PyTorch {torch.__version__}, float64, dropout off). Do not edit; regenerate."]
    for name in CASES:
        out += reference(argv[1], name)
    with open(argv[2], "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {argv[2]}: {len(CASES)} models")


if __name__ == "__main__":
    main(sys.argv)
