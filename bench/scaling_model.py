#!/usr/bin/env python3
"""The scaling model of docs/scaling-model.md, fitted to a bench/netsim.sh result.

A synchronous parameter-server step of W workers (b examples each) on S servers, every host on a
full-duplex link of B bytes/s, moving M bytes of parameters each way per worker per step (M =
1,741,224 for the reference CNN in float32, half in bfloat16), takes

    t_step = C + t_comm,   t_comm = o + max(M, W * M / S) / (e * B)

C: a worker's compute per step; o: the per-step cost that bandwidth does not explain (RPCs, the
servers' accumulate and apply, waiting for the slower worker); e: the share of the nominal link
rate a transfer gets. A worker's link carries M each way; a server's carries W*M/S each way (the
placement splits the model evenly over the servers), so the servers' links are the bottleneck
once W > S. Throughput is W * b / t_step.

Fitted per wire dtype and security: o from the unlimited-link runs (veth at memory speed, where
the bandwidth term is small), e by least squares from the 10 and 1 Gbit/s runs. C is the measured
compute per step. Prints the fit, the model against every measured point, and predictions for 8,
32 and 128 workers: throughput per server count, and how many ps tasks keep the communication
within 10% of the step.

Usage: python3 bench/scaling_model.py NETSIM.json   (bench/netsim.sh's output)
"""
import json
import statistics
import sys

MODEL_BYTES = 1_741_224
BATCH = 128  # per worker per step
RATES = {"10gbit": 10e9 / 8, "1gbit": 1e9 / 8, "25gbit": 25e9 / 8, "100gbit": 100e9 / 8}


def wire_bytes(wire):
    return MODEL_BYTES // 2 if wire in ("bfloat16", "float16") else MODEL_BYTES


def main():
    res = json.load(open(sys.argv[1]))
    steps = int(res["conditions"].split(" steps")[0].rsplit(" ", 1)[1])
    workers = 2
    points = []
    for key, v in res["pscluster"].items():
        rate, nps, sec, wire = key.split()
        s = int(nps.rstrip("ps"))
        comm = statistics.median(v["worker_comm_s"]) / (workers * steps)
        compute = statistics.median(v["worker_compute_s"]) / (workers * steps)
        points.append(dict(rate=rate, S=s, sec=sec, wire=wire, comm=comm, compute=compute,
                           eps=v["examples_per_s"]))
    fits = {}
    for sec in sorted({p["sec"] for p in points}):
        for wire in sorted({p["wire"] for p in points}):
            mine = [p for p in points if p["sec"] == sec and p["wire"] == wire]
            free = [p["comm"] for p in mine if p["rate"] == "none"]
            if not free:
                continue
            o = statistics.median(free)
            # comm - o = bytes / (e * B): least squares for 1/e through the origin.
            xs, ys = [], []
            for p in mine:
                if p["rate"] in RATES:
                    m = wire_bytes(wire)
                    xs.append(max(m, workers * m / p["S"]) / RATES[p["rate"]])
                    ys.append(p["comm"] - o)
            inv_e = sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs) if xs else 1.0
            fits[(sec, wire)] = dict(o=o, e=1.0 / inv_e if inv_e > 0 else float("inf"),
                                     C=statistics.median(p["compute"] for p in mine))
    print("fit (per security and wire dtype): o = fixed comm per step, e = link efficiency, "
          "C = compute per step")
    for (sec, wire), f in sorted(fits.items()):
        print(f"  {sec:5} {wire:8}  o = {1000 * f['o']:6.1f} ms   e = {f['e']:.2f}   "
              f"C = {1000 * f['C']:6.1f} ms")

    def predict(f, wire, w, s, rate):
        m = wire_bytes(wire)
        band = max(m, w * m / s) / (f["e"] * RATES[rate]) if rate in RATES else 0.0
        return w * BATCH / (f["C"] + f["o"] + band), f["o"] + band

    print("\nmodel against the measured points (examples/s; each run's own measured compute C,"
          " so this checks the communication term):")
    errors = []
    for p in sorted(points, key=lambda p: (p["sec"], p["wire"], p["S"], p["rate"])):
        f = fits.get((p["sec"], p["wire"]))
        if not f:
            continue
        # The measured point's own compute: the 2 cores are shared, so C moves between runs.
        g = dict(f, C=p["compute"])
        model, _ = predict(g, p["wire"], workers, p["S"], p["rate"])
        errors.append(abs(model / p["eps"] - 1))
        print(f"  {p['rate']:7} {p['S']}ps {p['sec']:5} {p['wire']:8}  measured {p['eps']:7.1f}  "
              f"model {model:7.1f}  ({100 * (model / p['eps'] - 1):+.1f}%)")
    if errors:
        print(f"  median |error| {100 * statistics.median(errors):.1f}%, "
              f"max {100 * max(errors):.1f}%")

    print("\npredictions (plain; each worker its own host, the measured C and o; "
          "examples/s, and the ps tasks that keep comm <= 10% of the step):")
    for wire in ("float32", "bfloat16"):
        f = fits.get(("plain", wire))
        if not f:
            continue
        for rate in ("1gbit", "10gbit", "25gbit"):
            for w in (8, 32, 128):
                row = []
                for s in (1, 2, 4, 8, 16, 32):
                    if s > w:
                        continue
                    eps, _ = predict(f, wire, w, s, rate)
                    row.append(f"S={s}: {eps:,.0f}")
                need = "none (o and a worker's own link exceed 10%)"
                for s in range(1, w + 1):
                    _, comm = predict(f, wire, w, s, rate)
                    if comm <= 0.1 * (f["C"] + comm):
                        need = str(s)
                        break
                ideal = w * BATCH / f["C"]
                print(f"  {wire:8} {rate:6} W={w:3}: " + ", ".join(row) +
                      f"; no-comm ideal {ideal:,.0f}; ps for comm <= 10%: {need}")


if __name__ == "__main__":
    main()
