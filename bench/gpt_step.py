#!/usr/bin/python3
"""PyTorch reference for bench/gpt_step.c: the same GPT-2 (nanoGPT's layout,
eager mode, float32, GPT-2 init, dropout 0) timed over forward + backward of
the mean cross-entropy on random tokens; no optimizer, as in gpt_step.c.

Usage: /usr/bin/python3 bench/gpt_step.py [--threads N] [--steps S] [--rounds R] [--compile]
       [--device cpu|cuda] [--adamw] [--autocast none|bf16] baby|small|gpt2 ...
--compile: torch.compile the model (PyTorch 2.x; inductor's C++ code on the CPU)
before the warm-up, whose steps then include the compilation.
--device cuda: on the GPU (TF32 off: fp32 stays fp32), each round timed between
two synchronizations; peak device memory (torch.cuda.max_memory_allocated) reported.
--adamw: each step also takes an AdamW step (lr 1e-3, weight decay 0.1), as a
dtrain training step does (bench/gpu.sh races dtrain's training runs).
--autocast bf16: forward under torch.autocast(bfloat16), fp32 master weights.
"gpt2" is GPT-2 small's shape (124 M parameters: 12 layers, 12 heads, 768 wide,
block 1,024, vocabulary 50,257) at batch 8.
Prints per configuration the median and best tokens/s over the rounds and the
peak RSS of the process (run one configuration per process for that figure),
and a line `RESULT torch NAME tok_s_median X tok_s_best Y rss_kib Z`.
"""
import argparse
import math
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {  # vocab, block, n_layer, n_head, n_embd, batch (bench/gpt_step.c)
    "baby": (96, 64, 4, 4, 128, 12),
    "small": (96, 256, 6, 6, 384, 8),
    "gpt2": (50257, 1024, 12, 12, 768, 8),
}


class Block(nn.Module):
    def __init__(self, C, nh, T):
        super().__init__()
        self.nh = nh
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.attn_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.nh
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = F.softmax(att.masked_fill(~self.mask[:T, :T], float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, T, L, nh, C):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList(Block(C, nh, T) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        for name, p in self.named_parameters():  # GPT-2's init
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln_" in name:
                nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
        self.register_buffer("pos", torch.arange(T))

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(self.pos[: idx.shape[1]])
        for blk in self.h:
            x = blk(x)
        return self.ln_f(x) @ self.wte.weight.t()


def run(name, steps, rounds, compile_model, device="cpu", adamw=False, autocast="none"):
    V, T, L, nh, C, B = CONFIGS[name]
    torch.manual_seed(1)
    model = GPT(V, T, L, nh, C).to(device)
    fwd = torch.compile(model) if compile_model else model
    tok = torch.randint(0, V, (B, T + 1), device=device)
    x, y = tok[:, :-1].contiguous(), tok[:, 1:].contiguous()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1) if adamw else None
    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def step():
        for p in model.parameters():
            p.grad = None
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=autocast == "bf16"):
            logits = fwd(x)
        loss = F.cross_entropy(logits.float().view(B * T, V), y.view(-1))
        loss.backward()
        if opt:
            opt.step()
        return loss

    for _ in range(3):
        loss = step()
    sync()
    rates, crates = [], []
    for _ in range(rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        sync()
        rates.append(B * T * steps / (time.perf_counter() - t0))
        crates.append(B * T * steps / (time.process_time() - c0))
    crates.sort()
    rates.sort()
    med = rates[len(rates) // 2] if len(rates) % 2 else 0.5 * (rates[len(rates) // 2 - 1] + rates[len(rates) // 2])
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{name}: torch {torch.__version__}{' compiled' if compile_model else ''}, "
          f"{sum(p.numel() for p in model.parameters())} parameters, "
          f"initial loss {loss.item():.4f}")
    print(f"  tokens/s median {med:.0f} best {rates[-1]:.0f} ({rounds} rounds of {steps} steps); "
          f"{1e3 * B * T / med:.2f} ms/step; peak RSS {rss / 1024:.1f} MiB")
    print(f"  tokens per CPU-second (all threads) median {crates[len(crates) // 2]:.0f} best {crates[-1]:.0f}")
    dev_mib = torch.cuda.max_memory_allocated() / 2**20 if cuda else 0.0
    if cuda:
        print(f"  peak device memory {dev_mib:.0f} MiB (torch.cuda.max_memory_allocated)")
    print(f"RESULT torch {name} tok_s_median {med:.1f} tok_s_best {rates[-1]:.1f} rss_kib {rss} "
          f"tok_cpu_s_best {crates[-1]:.1f} device_mib {dev_mib:.0f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model first")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--adamw", action="store_true", help="an AdamW step in every step")
    ap.add_argument("--autocast", choices=["none", "bf16"], default="none")
    ap.add_argument("configs", nargs="+", choices=sorted(CONFIGS))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    for name in a.configs:
        run(name, a.steps or (50 if name == "baby" else 5), a.rounds, a.compile, a.device,
            a.adamw, a.autocast)


if __name__ == "__main__":
    main()
