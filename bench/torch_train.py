#!/usr/bin/python3
"""PyTorch reference for dtrain's mnist_cnn throughput benchmark (one process).

Trains the same network as dtrain's `mnist_cnn` on Fashion-MNIST with SGD
(lr 0.02, momentum 0.9) and mean cross-entropy, and prints one line

    images_per_s=<float> peak_rss_mb=<float> steps=<int> batch=<int> threads=<int> loss=<float>

measured over the steps after --warmup. Batches are drawn like a DataLoader
without workers: a fresh random permutation per epoch, one index_select per
step. The whole training set is converted to a normalised float tensor up
front (--data float, the default), so the loader costs a gather only; dtrain
instead normalises each batch from the uint8 bytes. --data uint8 keeps the
bytes and normalises per batch the way dtrain does (smaller RSS).

Run with Debian's interpreter, which has torch 1.13:
    /usr/bin/python3 bench/torch_train.py --batch 32 --steps 400 --warmup 50 --threads 1
"""
import argparse
import gzip
import os
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    """Array from an IDX file (plain or .gz): magic 0x0000 08 ndim, big-endian dims, uint8 data.
    Read straight into the array so no second copy inflates the peak RSS."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        head = f.read(4)
        if len(head) != 4:
            raise ValueError(f"{path}: truncated header")
        zero, dtype, ndim = struct.unpack(">HBB", head)
        if zero != 0 or dtype != 0x08:
            raise ValueError(f"{path}: not an unsigned-byte IDX file")
        dims = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        data = np.empty(dims, dtype=np.uint8)
        if f.readinto(memoryview(data.reshape(-1))) != data.size or f.read(1):
            raise ValueError(f"{path}: data size does not match the dimensions {dims}")
    return data


def find(path, stem):
    for name in (stem + ".gz", stem):
        p = os.path.join(path, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(os.path.join(path, stem + "[.gz]"))


def load_train(path, rank=0, world=1, seed=1):
    """Training images (N, 1, 28, 28) uint8 and labels (N,) int64; with world > 1,
    rank's equal shard of a seeded permutation (like DistributedSampler)."""
    x = read_idx(find(path, "train-images-idx3-ubyte"))
    y = read_idx(find(path, "train-labels-idx1-ubyte"))
    if world > 1:
        perm = np.random.default_rng(seed).permutation(len(y))
        n = len(y) // world
        idx = np.sort(perm[rank * n:(rank + 1) * n])
        x, y = x[idx], y[idx]
    return torch.from_numpy(np.ascontiguousarray(x)).unsqueeze(1), \
        torch.from_numpy(y.astype(np.int64))


def normalise(xb):
    # in place after the one conversion: no full-size temporaries at the peak
    return xb.float().div_(255.0).sub_(MEAN).div_(STD)


class MnistCnn(nn.Module):
    """conv3x3 1->32, ReLU, conv3x3 32->64, ReLU, maxpool 2, dropout 0.25,
    linear 9216->128, ReLU, dropout 0.5, linear 128->10 (1,199,882 parameters)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = F.dropout(x, 0.25, self.training)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, 0.5, self.training)
        return self.fc2(x)


class BasicBlock(nn.Module):
    """dtrain's resnet block: conv3x3(stride) GN ReLU conv3x3 GN, plus the
    shortcut (1x1 conv + GN where the shape changes), ReLU."""

    def __init__(self, cin, width, stride, groups):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
        self.gn1 = nn.GroupNorm(groups, width)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.gn2 = nn.GroupNorm(groups, width)
        self.shortcut = None
        if stride != 1 or cin != width:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, width, 1, stride, 0, bias=False),
                                          nn.GroupNorm(groups, width))

    def forward(self, x):
        y = self.gn2(self.conv2(F.relu(self.gn1(self.conv1(x)))))
        return F.relu(y + (self.shortcut(x) if self.shortcut is not None else x))


def resnet_gn(depth, groups=2, classes=10):
    """dtrain's resnet20_gn / resnet32_gn (CIFAR layout, GroupNorm with `groups` groups)."""
    blocks, layers, cin = (depth - 2) // 6, [], 16
    layers += [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.GroupNorm(groups, 16), nn.ReLU()]
    for s, width in enumerate((16, 32, 64)):
        for b in range(blocks):
            layers.append(BasicBlock(cin, width, 2 if s > 0 and b == 0 else 1, groups))
            cin = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes)]
    return nn.Sequential(*layers)


def synthetic(n, seed, classes=10, shape=(3, 32, 32)):
    """(n, *shape) float32 images and labels: one Gaussian cluster per class,
    like dtrain's data.name = synthetic (the values do not change the speed)."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, *shape, generator=g)
    y = torch.randint(0, classes, (n,), generator=g)
    x = centres.index_select(0, y)
    x.add_(torch.randn(x.shape, generator=g))
    return x, y


class Batches:
    """Shuffled minibatches, reshuffled every epoch, dropping the last partial batch."""

    def __init__(self, x, y, batch, seed, as_float, ready=False):
        # ready: x already holds the model's float inputs (synthetic data)
        self.x = x if ready else normalise(x) if as_float else x
        self.as_float = as_float or ready
        self.y, self.batch = y, batch
        self.gen = torch.Generator().manual_seed(seed)
        self.per_epoch = len(y) // batch
        self.pos = self.per_epoch

    def next(self):
        if self.pos == self.per_epoch:
            self.perm = torch.randperm(len(self.y), generator=self.gen)
            self.pos = 0
        idx = self.perm[self.pos * self.batch:(self.pos + 1) * self.batch].to(self.y.device)
        self.pos += 1
        xb = self.x.index_select(0, idx)
        return (xb if self.as_float else normalise(xb)), self.y.index_select(0, idx)


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def parse_args(argv, ddp=False):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32, help="images per step (per process)")
    ap.add_argument("--steps", type=int, default=400, help="timed steps after warm-up")
    ap.add_argument("--warmup", type=int, default=50, help="untimed steps first")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", choices=("float", "uint8"), default="float",
                    help="float: normalise the whole set up front; uint8: per batch, like dtrain")
    ap.add_argument("--path", default="/usr/share/datasets/fashion-mnist",
                    help="Fashion-MNIST's directory, or synthetic (mnist_cnn on --synthetic "
                         "1x28x28 samples)")
    ap.add_argument("--model", choices=("mnist_cnn", "resnet20_gn", "resnet32_gn"),
                    default="mnist_cnn",
                    help="the resnets train on synthetic 3x32x32 data held as float32")
    ap.add_argument("--synthetic", type=int, default=4096,
                    help="resnets: training samples of the synthetic set")
    if not ddp:
        ap.add_argument("--profile", action="store_true",
                        help="print torch.profiler's per-operator table for 20 timed steps")
        ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cuda: model and the whole training set on the GPU, fp32 "
                             "(TF32 off, as dtrain's cuBLAS GEMMs); bench/gpu.sh")
        ap.add_argument("--compile", action="store_true",
                        help="torch.compile the model (default mode) before the warm-up")
    ap.add_argument("--autocast", choices=("none", "bf16"), default="none",
                    help="bf16: forward and loss under torch.autocast('cpu', bfloat16), "
                         "GroupNorm kept in fp32")
    return ap.parse_args(argv)


class GroupNormFp32(nn.GroupNorm):
    """GroupNorm in fp32 under CPU autocast: PyTorch 1.13's CPU autocast has
    no GroupNorm rule, so a bf16 conv output would be normalised in bf16; a
    user patches it this way (bench/bf16.sh)."""

    def forward(self, x):
        with torch.autocast("cpu", enabled=False):
            return super().forward(x.float())


def norms_fp32(model):
    for m in model.modules():
        if type(m) is nn.GroupNorm:
            m.__class__ = GroupNormFp32
    return model


AUTOCAST = None  # --autocast bf16: torch.bfloat16


def train_step(model, opt, xb, yb):
    opt.zero_grad(set_to_none=True)
    if AUTOCAST is not None:
        with torch.autocast("cpu", dtype=AUTOCAST):
            loss = F.cross_entropy(model(xb), yb)
    else:
        loss = F.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    return loss


def main(argv):
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    if a.device == "cuda":  # fp32 as fp32: no TF32 in matmuls or convolutions
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if a.model == "mnist_cnn" and a.path == "synthetic":  # 1x28x28, no dataset needed
        x, y = synthetic(a.synthetic, a.seed, shape=(1, 28, 28))
        data = Batches(x.to(dev), y.to(dev), a.batch, a.seed, True, ready=True)
        del x
        model = MnistCnn()
    elif a.model == "mnist_cnn":
        x, y = load_train(a.path)
        if a.device == "cuda":
            x, y = normalise(x).to(dev), y.to(dev)
            data = Batches(x, y, a.batch, a.seed, True, ready=True)
        else:
            data = Batches(x, y, a.batch, a.seed, a.data == "float")
        del x
        model = MnistCnn()
    else:
        x, y = synthetic(a.synthetic, a.seed)
        data = Batches(x.to(dev), y.to(dev), a.batch, a.seed, True, ready=True)
        del x
        model = resnet_gn(20 if a.model == "resnet20_gn" else 32)
    model.to(dev).train()
    if a.autocast == "bf16":
        global AUTOCAST
        AUTOCAST = torch.bfloat16
        norms_fp32(model)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    step_model = torch.compile(model) if a.compile else model

    def sync():
        if a.device == "cuda":
            torch.cuda.synchronize()

    for _ in range(a.warmup):
        train_step(step_model, opt, *data.next())
    sync()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = train_step(step_model, opt, *data.next())
    sync()
    lossv = float(loss)
    dt = time.perf_counter() - t0

    if a.profile:
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(20):
                train_step(model, opt, *data.next())
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25),
              file=sys.stderr)

    gpu = ""
    if a.device == "cuda":
        gpu = (f" device=\"{torch.cuda.get_device_name()}\" compile={int(a.compile)} "
               f"peak_gpu_mb={torch.cuda.max_memory_allocated() / 2**20:.1f}")
    print(f"images_per_s={a.batch * a.steps / dt:.2f} peak_rss_mb={peak_rss_mb():.1f} "
          f"steps={a.steps} batch={a.batch} threads={a.threads} loss={lossv:.4f} autocast={a.autocast}{gpu}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
