#!/usr/bin/python3
"""PyTorch peer of dtrain's transformer benchmark (bench/RESULTS.md §14): the same GPT,
data rule, optimizer and schedule as dtrain's `model.name = gpt` on
`data.name = text`, in PyTorch eager, one process.

Model (GPT-2's layout, as nanoGPT and llm.c): token embedding wte (V, C) plus
learned positions wpe (T, C); n_layer pre-LayerNorm blocks x + attn(ln1(x)),
x + mlp(ln2(x)) (LayerNorm eps 1e-5 with gain and bias); causal multi-head
attention with one fused qkv projection C -> 3C and an output projection
C -> C, both with bias, scale 1/sqrt(C/heads); MLP C -> 4C -> C with biases
and tanh-GELU; a final LayerNorm; logits = h wte^T (tied); mean cross-entropy
over every position. Dropout none. Initialisation GPT-2's: weights and
embeddings normal(0, 0.02), the two residual output projections (attention's
and the MLP's second) normal(0, 0.02/sqrt(2 n_layer)), biases 0, LayerNorm
gains 1.

Attention: --attn manual (the default) is the masked softmax written out,
softmax(mask(q k^T / sqrt(d))) v, materialising the (B, heads, T, T) scores
as nanoGPT's slow path does. --attn sdpa would use
F.scaled_dot_product_attention (is_causal=True), which PyTorch 2.0 added:
Debian's torch 1.13 has no such function, and the option then stops with an
error saying so.

Data (dtrain's data.name = text rule): the regular files (not symbolic links)
of --data (a directory, default /usr/share/games/fortunes, or one file), in
byte order of their names, concatenated, skipping any file that holds a NUL
byte (the strfile .dat indexes) with a note. Vocabulary: the distinct bytes,
sorted; a byte becomes its index. Training split: the first
floor(0.9 n) bytes; validation: the rest. A training batch is --batch
windows of T+1 tokens at offsets uniform over [0, n_train - T - 1], drawn from
a torch.Generator seeded with --seed (the weights come from torch's global
generator, seeded with the same value).

Optimizer: torch.optim.AdamW (betas (--beta1, --beta2), --eps), weight decay
--wd on the tensors of two or more dimensions (wte, wpe, every weight
matrix), none on biases and LayerNorm parameters. Gradients clipped to the
global L2 norm --clip first (0: off). Learning rate per step t (0-based),
W = --warmup, D = --decay-steps (default --steps):
    t < W:        lr (t + 1) / (W + 1)
    W <= t <= D:  min_lr + (lr - min_lr) (1 + cos(pi (t - W) / (D - W))) / 2
    t > D:        min_lr

--autocast bf16 (the peer of dtrain's compute.precision = bf16): the
forward and the loss under torch.autocast("cpu", dtype=torch.bfloat16), as
a user would turn it on (the linear layers and attention's matmuls in bf16,
what the autocast lists keep in fp32 in fp32); parameters, gradients and
AdamW stay fp32; the backward follows the forward's dtypes. Default none.

Output: a line per --log-every steps,
    step 100/1500 loss 2.4567 lr 9.9e-04 tok/s 12345.6 (interval 1.234 s)
then, with --eval, the mean cross-entropy (nats) over every position of every
non-overlapping window of the validation split (window k: inputs kT .. kT+T-1,
targets kT+1 .. kT+T; the first --limit-eval of them when given), and last a
machine-readable line:
    RESULT config=baby threads=1 steps=... tokens_per_step=... tok_s_best=...
           tok_s_median=... rss_mb=... rss_eval_mb=... val_loss=... autocast=...
tok_s_best/median are over the progress intervals after the first (the
first holds the allocator's and the thread pool's warm-up; with one interval
it is used). rss_mb is the peak RSS (getrusage ru_maxrss) at the end of
training, rss_eval_mb after the evaluation; val_loss is nan without --eval.

Run with Debian's interpreter, which has torch 1.13:
    /usr/bin/python3 bench/gpt_torch.py --config baby --steps 200 --threads 1
    /usr/bin/python3 bench/gpt_torch.py --config small --steps 30 --log-every 10 --threads 2
    # the quality run of bench/RESULTS.md §14 (about 1,500 steps of "baby"):
    /usr/bin/python3 bench/gpt_torch.py --config baby --steps 1500 --lr 1e-3 --beta2 0.99 \\
        --wd 0.1 --warmup 100 --min-lr 1e-4 --clip 1.0 --log-every 100 --eval --seed 1
"""
import argparse
import contextlib
import math
import os
import resource
import statistics
import sys
import time


def _threads_from_argv():
    """--threads, read before torch loads: Debian's torch runs its GEMMs in
    OpenBLAS (pthreads build), whose pool is sized from OPENBLAS_NUM_THREADS
    when the library loads: pinned here, --threads is the number of threads
    that compute (torch.set_num_threads alone leaves a second OpenBLAS
    thread in the process)."""
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return "1"


os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = _threads_from_argv()

import numpy as np  # noqa: E402  (after the thread count is fixed)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

CONFIGS = {
    # n_layer, n_head, n_embd, block_size (T), batch (B)
    "baby": dict(n_layer=4, n_head=4, n_embd=128, block=64, batch=12),
    "small": dict(n_layer=6, n_head=6, n_embd=384, block=256, batch=8),
}
LN_EPS = 1e-5


def load_corpus(path):
    """bytes of the corpus (dtrain's data.name = text rule) and the list of files read"""
    if os.path.isdir(path):
        names = sorted(os.listdir(os.fsencode(path)))
        files = []
        for name in names:
            full = os.path.join(os.fsencode(path), name)
            if os.path.islink(full) or not os.path.isfile(full):
                continue
            files.append(full)
        if not files:
            sys.exit(f"gpt_torch: {path}: no regular files (expected a text corpus)")
    elif os.path.isfile(path):
        files = [os.fsencode(path)]
    else:
        sys.exit(f"gpt_torch: {path}: no such file or directory (expected a text corpus)")
    parts, used, binary = [], [], []
    for full in files:
        with open(full, "rb") as f:
            data = f.read()
        if b"\0" in data:
            binary.append(os.path.basename(os.fsdecode(full)))
            continue
        parts.append(data)
        used.append(full)
    if binary:
        print(f"note: {len(binary)} files hold a NUL byte (binary) and were skipped: "
              f"{' '.join(binary)}", file=sys.stderr)
    return b"".join(parts), used


class Block(nn.Module):
    def __init__(self, c, heads, attn):
        super().__init__()
        self.heads, self.attn_kind = heads, attn
        self.ln1 = nn.LayerNorm(c, eps=LN_EPS)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c, eps=LN_EPS)
        self.fc = nn.Linear(c, 4 * c)
        self.fc_proj = nn.Linear(4 * c, c)

    def attention(self, x, mask):  # x (B, T, C) -> (B, T, C)
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        d = c // self.heads
        q = q.view(b, t, self.heads, d).transpose(1, 2)  # (B, h, T, d)
        k = k.view(b, t, self.heads, d).transpose(1, 2)
        v = v.view(b, t, self.heads, d).transpose(1, 2)
        if self.attn_kind == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))  # (B, h, T, T)
            att = att.masked_fill(mask[:t, :t] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v  # (B, h, T, d)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)

    def forward(self, x, mask):
        x = x + self.attention(self.ln1(x), mask)
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, n_layer, n_head, n_embd, block, attn):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block, n_embd)
        self.blocks = nn.ModuleList([Block(n_embd, n_head, attn) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd, eps=LN_EPS)
        self.register_buffer("mask", torch.tril(torch.ones(block, block, dtype=torch.bool)),
                             persistent=False)
        std = 0.02
        for name, p in self.named_parameters():
            if name.endswith(".bias"):
                nn.init.zeros_(p)
            elif ".ln" in name or name.startswith("ln_f"):
                nn.init.ones_(p)  # LayerNorm gains
            elif name.endswith("proj.weight"):  # attention's proj, the MLP's fc_proj
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * n_layer))
            else:
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets=None):  # idx (B, T) int64 -> logits (B, T, V)
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss


def lr_at(t, a):
    w, d = a.warmup, a.decay_steps
    if t < w:
        return a.lr * (t + 1) / (w + 1)
    if t > d:
        return a.min_lr
    if d == w:
        return a.lr
    return a.min_lr + (a.lr - a.min_lr) * (1 + math.cos(math.pi * (t - w) / (d - w))) / 2


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


@torch.no_grad()
def evaluate(model, val, t, batch, limit):
    """mean CE (nats) over every position of the non-overlapping validation windows"""
    model.eval()
    nwin = (len(val) - 1) // t
    if limit is not None:
        nwin = min(nwin, limit)
    total, count = 0.0, 0
    for w0 in range(0, nwin, batch):
        ws = torch.arange(w0, min(w0 + batch, nwin)) * t
        idx = ws[:, None] + torch.arange(t + 1)[None, :]
        win = val[idx].long()
        logits, _ = model(win[:, :-1])
        total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                       win[:, 1:].reshape(-1), reduction="sum"))
        count += win[:, 1:].numel()
    model.train()
    return total / count, nwin


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=sorted(CONFIGS), default="baby")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default="/usr/share/games/fortunes")
    ap.add_argument("--batch", type=int, default=None, help="default: the config's")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.99)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--decay-steps", type=int, default=None, help="default: --steps")
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--clip", type=float, default=1.0, help="global L2 norm; 0: off")
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--eval", action="store_true", help="final validation loss")
    ap.add_argument("--limit-eval", type=int, default=None, metavar="N",
                    help="evaluate the first N validation windows only")
    ap.add_argument("--attn", choices=["manual", "sdpa"], default="manual")
    ap.add_argument("--autocast", choices=["none", "bf16"], default="none",
                    help="bf16: forward and loss under torch.autocast('cpu', bfloat16)")
    a = ap.parse_args()
    if a.steps < 1 or a.threads < 1 or a.log_every < 1:
        ap.error("--steps, --threads and --log-every must be >= 1")
    if a.decay_steps is None:
        a.decay_steps = a.steps
    if a.decay_steps < a.warmup:
        ap.error(f"--decay-steps {a.decay_steps} < --warmup {a.warmup}")
    if a.attn == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
        sys.exit(f"gpt_torch: --attn sdpa: torch {torch.__version__} has no "
                 "F.scaled_dot_product_attention (PyTorch 2.0 added it); use --attn manual")
    cfg = dict(CONFIGS[a.config])
    if a.batch is not None:
        cfg["batch"] = a.batch
    T, B = cfg["block"], cfg["batch"]

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    corpus, files = load_corpus(a.data)
    raw = np.frombuffer(corpus, dtype=np.uint8)
    vocab_bytes = np.unique(raw)
    lut = np.zeros(256, dtype=np.uint8)
    lut[vocab_bytes] = np.arange(len(vocab_bytes), dtype=np.uint8)
    tokens = torch.from_numpy(lut[raw])  # (n,) uint8 token ids; a batch becomes int64
    del raw, corpus
    n = len(tokens)
    n_train = n * 9 // 10
    train, val = tokens[:n_train], tokens[n_train:]
    if n_train < 2 * (T + 1) or len(val) < T + 1:
        sys.exit(f"gpt_torch: {a.data}: {n} bytes is shorter than two windows of {T + 1} "
                 "in each split")
    V = len(vocab_bytes)

    model = GPT(V, cfg["n_layer"], cfg["n_head"], cfg["n_embd"], T, a.attn)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps)
    nparams = sum(p.numel() for p in model.parameters())
    C, L = cfg["n_embd"], cfg["n_layer"]
    flops_tok = 72 * L * C * C + 12 * L * T * C  # the count of bench/RESULTS.md §14 (training, per token)
    print(f"gpt_torch: torch {torch.__version__}, config {a.config} (n_layer {L} n_head "
          f"{cfg['n_head']} n_embd {C} block {T} batch {B}), {nparams} parameters, vocab {V}, "
          f"corpus {n} bytes from {len(files)} files (train {n_train}, val {len(val)}), "
          f"threads {a.threads}, attention {a.attn}, autocast {a.autocast}, "
          f"{flops_tok / 1e6:.2f} MFLOP/token",
          flush=True)

    def autocast():
        if a.autocast == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    gen = torch.Generator().manual_seed(a.seed)
    span = torch.arange(T + 1)
    rates, t_int, tok_int, loss_v = [], time.perf_counter(), 0, float("nan")
    for step in range(a.steps):
        lr = lr_at(step, a)
        for g in opt.param_groups:
            g["lr"] = lr
        off = torch.randint(0, n_train - T, (B,), generator=gen)  # [0, n_train - T - 1]
        win = train[off[:, None] + span[None, :]].long()  # (B, T + 1)
        with autocast():
            _, loss = model(win[:, :-1], win[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        tok_int += B * T
        if (step + 1) % a.log_every == 0 or step + 1 == a.steps:
            loss_v = loss.item()
            now = time.perf_counter()
            rate = tok_int / (now - t_int)
            rates.append(rate)
            print(f"step {step + 1}/{a.steps} loss {loss_v:.4f} lr {lr:.3e} tok/s {rate:.1f} "
                  f"(interval {now - t_int:.3f} s)", flush=True)
            t_int, tok_int = time.perf_counter(), 0
    rss_train = rss_mb()
    kept = rates[1:] if len(rates) > 1 else rates
    val_loss, nwin = float("nan"), 0
    if a.eval:
        t0 = time.perf_counter()
        with autocast():
            val_loss, nwin = evaluate(model, val, T, B, a.limit_eval)
        print(f"validation: {nwin} windows of {T}, loss {val_loss:.4f} nats "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"RESULT config={a.config} threads={a.threads} steps={a.steps} seed={a.seed} "
          f"tokens_per_step={B * T} params={nparams} tok_s_best={max(kept):.1f} "
          f"tok_s_median={statistics.median(kept):.1f} rss_mb={rss_train:.1f} "
          f"rss_eval_mb={rss_mb():.1f} val_windows={nwin} val_loss={val_loss:.4f} "
          f"autocast={a.autocast} torch={torch.__version__}", flush=True)


if __name__ == "__main__":
    main()
