#!/usr/bin/python3
"""PyTorch DistributedDataParallel reference for dtrain's allreduce mode.

Two processes (torch.multiprocessing.spawn) on 127.0.0.1 with the gloo backend,
one compute thread each, each training mnist_cnn on its own half of
Fashion-MNIST (equal shards of a seeded permutation) with the same SGD as
torch_train.py. Prints one line

    images_per_s=<aggregate> per_rank=<r0>,<r1> peak_rss_mb=<max over ranks> ...

where the aggregate is the sum of the per-rank rates over the steps after
--warmup (dtrain's aggregate is computed the same way from its /train rows).

    /usr/bin/python3 bench/ddp_train.py --batch 32 --steps 400 --warmup 50
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_train as tt  # noqa: E402  (same model, data and step)


def worker(rank, world, a, port):
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(a.seed)  # same initial weights everywhere (DDP also broadcasts rank 0's)
    x, y = tt.load_train(a.path, rank, world, a.seed)
    data = tt.Batches(x, y, a.batch, a.seed + rank, a.data == "float")
    del x
    model = DDP(tt.MnistCnn())
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)

    for _ in range(a.warmup):
        tt.train_step(model, opt, *data.next())
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = tt.train_step(model, opt, *data.next())
    dt = time.perf_counter() - t0

    stats = torch.tensor([[a.batch * a.steps / dt, tt.peak_rss_mb(), float(loss)]],
                         dtype=torch.float64)
    gathered = [torch.zeros_like(stats) for _ in range(world)]
    dist.all_gather(gathered, stats)
    if rank == 0:
        g = torch.cat(gathered)
        rates = g[:, 0].tolist()
        print(f"images_per_s={sum(rates):.2f} per_rank={','.join(f'{r:.2f}' for r in rates)} "
              f"peak_rss_mb={g[:, 1].max().item():.1f} steps={a.steps} batch={a.batch} "
              f"ranks={world} threads={a.threads} loss={g[:, 2].mean().item():.4f}", flush=True)
    dist.destroy_process_group()


def main(argv):
    a = tt.parse_args(argv, ddp=True)
    world = int(os.environ.get("DDP_WORLD", "2"))
    port = int(os.environ.get("MASTER_PORT", "29517"))
    mp.spawn(worker, args=(world, a, port), nprocs=world, join=True)


if __name__ == "__main__":
    main(sys.argv[1:])
