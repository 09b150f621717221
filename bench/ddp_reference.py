#!/usr/bin/python3
"""PyTorch DistributedDataParallel peer of pscluster's multi_worker_mirrored.

The reference job (the seed CNN, Fashion-MNIST, SGD lr 0.01, no momentum) on
2 processes on 127.0.0.1, each torch.set_num_threads(1), batch 128 per rank
(256 global), with DDP over the `gloo` backend: every step, each rank computes
the gradients of its own batch, DDP all-reduces them (averaged, in buckets,
overlapped with the backward pass), and each rank applies the same SGD step.

The model, data loading, standardization and the "tuned" glibc allocator come
from ../shared/anchors/fmnist_common.py, loaded by path (--anchors), as the
anchors (torch_rpc_ps.py) use them: NHWC (channels_last) by default, mallopt
M_MMAP_MAX=0, M_TRIM_THRESHOLD=2 GiB, M_ARENA_MAX=1 in both processes. Each
rank trains on its own half of the 55,000 training images, in a random order.

Timing, as the anchors time: --warmup steps per rank, a barrier, then --steps
timed steps per rank; examples/s = 2 * steps * 128 / (last rank's end - first
rank's start), on the shared CLOCK_MONOTONIC (time.perf_counter). Evaluation
is not part of it. At the end the ranks' parameters are checked identical.

Run with Debian's interpreter (python3-torch), one run per call:
    /usr/bin/python3 bench/ddp_reference.py [--steps 150] [--warmup 5] [--out FILE]
Prints one JSON line.
"""

import argparse
import importlib.util
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD = 2


def load_common(anchors_dir):
    """fmnist_common from the anchors folder, by path (not copied)."""
    path = os.path.join(anchors_dir, "fmnist_common.py")
    spec = importlib.util.spec_from_file_location("fmnist_common", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rank(rank, port, cfg, queue):
    """One DDP process (torch.multiprocessing.spawn entry point)."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"   # keep Gloo's pairs on loopback
    fc = load_common(cfg["anchors"])
    fc.configure_malloc(cfg["malloc"])
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        queue.put((rank, _train(fc, rank, cfg)))
    except Exception as e:  # report to the driver, then still tear down
        queue.put((rank, {"error": repr(e)}))
        raise
    finally:
        dist.destroy_process_group()


def _train(fc, rank, cfg):
    fmt = cfg["memory_format"]
    data = fc.load_fashion_mnist()
    n = data["x_train"].shape[0]
    shard = n // WORLD
    x = data["x_train"][rank * shard:(rank + 1) * shard].clone()
    y = data["y_train"][rank * shard:(rank + 1) * shard].clone()
    del data
    # Same initial weights on every rank (DDP also broadcasts rank 0's).
    model = DDP(fc.to_memory_format(fc.build_model(seed=0), fmt))
    opt = torch.optim.SGD(model.parameters(), lr=fc.LR)
    order = torch.randperm(shard, generator=torch.Generator().manual_seed(1000 + rank))
    pos = 0

    def step():
        nonlocal pos
        if pos + fc.BATCH > order.numel():
            pos = 0
        idx = order[pos:pos + fc.BATCH]
        pos += fc.BATCH
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(fc.batch_to_format(x[idx], fmt)), y[idx])
        loss.backward()   # DDP's all-reduce of the gradients happens in here
        opt.step()
        return float(loss)

    for _ in range(cfg["warmup"]):
        step()
    dist.barrier()
    f0 = fc.page_faults()
    t_start = time.perf_counter()
    losses = [step() for _ in range(cfg["steps"])]
    t_end = time.perf_counter()
    faults = (fc.page_faults() - f0) / cfg["steps"]
    # The replicas must have stayed identical (same averaged gradients).
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    return {"rank": rank, "t_start": t_start, "t_end": t_end,
            "ms_per_step": 1000 * (t_end - t_start) / cfg["steps"],
            "page_faults_per_step": faults,
            "loss_first": losses[0], "loss_last": losses[-1],
            "params_equal_rank0": bool(torch.equal(flat, reference))}


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=150, help="timed steps per rank")
    ap.add_argument("--warmup", type=int, default=5, help="warm-up steps per rank")
    ap.add_argument("--malloc", default="tuned", choices=["tuned", "default"],
                    help="glibc allocator setting in both processes (fmnist_common.py)")
    ap.add_argument("--memory-format", default="nhwc", choices=["nchw", "nhwc"])
    ap.add_argument("--anchors", default=os.path.join(HERE, "..", "..", "shared", "anchors"),
                    help="folder of fmnist_common.py")
    ap.add_argument("--out", default="", help="also write the JSON here")
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0:
        ap.error("need --steps >= 1 and --warmup >= 0")
    anchors = os.path.abspath(args.anchors)
    if not os.path.isfile(os.path.join(anchors, "fmnist_common.py")):
        ap.error(f"no fmnist_common.py in {anchors} (give --anchors)")
    if not dist.is_available() or not dist.is_gloo_available():
        sys.exit("ddp_reference: this torch has no torch.distributed with gloo")

    cfg = {"steps": args.steps, "warmup": args.warmup, "malloc": args.malloc,
           "memory_format": args.memory_format, "anchors": anchors}
    t0 = time.perf_counter()
    queue = mp.get_context("spawn").SimpleQueue()
    mp.spawn(_rank, args=(_free_port(), cfg, queue), nprocs=WORLD, join=True)
    ranks = [queue.get() for _ in range(WORLD)]
    stats = [s for _, s in sorted(ranks, key=lambda r: r[0])]
    errors = [s["error"] for s in stats if "error" in s]
    if errors:
        sys.exit(f"ddp_reference: {errors}")
    if not all(s["params_equal_rank0"] for s in stats):
        sys.exit("ddp_reference: the replicas' parameters differ after training")

    fc = load_common(anchors)
    first = min(s["t_start"] for s in stats)
    last = max(s["t_end"] for s in stats)
    examples = WORLD * args.steps * fc.BATCH
    result = {
        "bench": "ddp_reference",
        "examples_per_s": round(examples / (last - first), 1),
        "window_s": round(last - first, 3),
        "start_skew_ms": round(1000 * (max(s["t_start"] for s in stats) - first), 1),
        "ranks": [{k: (round(v, 4) if isinstance(v, float) else v)
                   for k, v in s.items() if k not in ("t_start", "t_end")} for s in stats],
        "conditions": {
            "machine": fc.machine_info(),
            "what": "torch DistributedDataParallel, gloo backend, 2 processes on 127.0.0.1, "
                    "torch.set_num_threads(1) each",
            "batch_per_rank": fc.BATCH, "global_batch": WORLD * fc.BATCH, "lr": fc.LR,
            "optimizer": "SGD, no momentum", "params": fc.EXPECTED_PARAMS,
            "warmup_steps": args.warmup, "timed_steps": args.steps,
            "malloc": args.malloc, "memory_format": args.memory_format,
            "timing": "barrier after warm-up; examples/s = 2*steps*128 / (last rank end - "
                      "first rank start), perf_counter; no evaluation",
        },
        "script_wall_s": round(time.perf_counter() - t0, 1),
    }
    text = json.dumps(result, separators=(",", ":"))
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
