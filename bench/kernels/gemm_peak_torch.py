#!/usr/bin/python3
# defines: the PyTorch peer's GEMM peaks on the shapes of bench_gemm_peak — torch.mm in fp32 (the BLAS torch is
# loaded with: OpenBLAS, its core as OPENBLAS_CORETYPE picks) and, with --bf16, in bf16 (oneDNN, where the CPU has
# AVX-512); best call's GFLOP/s and GFLOP per CPU-second over >= 0.3 s of calls, then "peak torch f32: ..." lines that bench/train/common.sh
# reads beside bench_gemm_peak's.
#   usage: gemm_peak_torch.py [--reps N] [--threads 2] [--bf16]
import argparse
import ctypes
import time

import torch


def rate(a, b, reps):
    """Best wall time of `reps` calls; CPU time over calls spanning >= 0.3 s, per call (bench_gemm_peak's reasons:
    the process clock counts another thread's time only when that thread's accounting is updated)."""
    flops = 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
    torch.mm(a, b)  # warms the BLAS buffers / JIT-compiles oneDNN's kernel
    best_wall, calls = 1e30, 0
    start, c0 = time.perf_counter(), time.process_time()
    while True:
        t0 = time.perf_counter()
        torch.mm(a, b)
        t1 = time.perf_counter()
        best_wall, calls = min(best_wall, t1 - t0), calls + 1
        if calls >= reps and t1 - start >= 0.3:
            break
    cpu = time.process_time() - c0
    return flops / best_wall / 1e9, flops * calls / max(cpu, 1e-9) / 1e9


def blas_line():
    """The BLAS library this process loaded (from /proc/self/maps) and, for OpenBLAS, the core it runs."""
    paths = sorted({l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.split()[-1].rsplit("/", 1)[-1]})
    core = ""
    for p in paths:
        try:
            f = ctypes.CDLL(p).openblas_get_corename
            f.restype = ctypes.c_char_p
            core = f().decode()
        except (OSError, AttributeError):
            pass
    return f"blas: {', '.join(paths) or 'none loaded'}; OpenBLAS core {core or 'n/a'}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", action="store_true", help="also time bf16 torch.mm (oneDNN; give it only on AVX-512)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.mm(torch.ones(64, 64), torch.ones(64, 64))  # loads the BLAS
    print(blas_line())
    shapes = [(1024, 768, 3072), (512, 768, 3072), (1024, 256, 50304)]
    for dtype, name in [(torch.float32, "f32")] + ([(torch.bfloat16, "bf16")] if a.bf16 else []):
        peak, peak_cpu, where = 0.0, 0.0, ""
        for n, k, m in shapes:
            x = torch.full((n, k), 0.01, dtype=dtype)
            w = torch.full((k, m), 0.01, dtype=dtype)
            g, gc = rate(x, w, a.reps)
            print(f"gemm {name} torch.mm [{n} x {k}]·[{k} x {m}]: {g:.0f} GFLOP/s, {gc:.0f} GFLOP/cpu-s")
            if g > peak:
                peak, where = g, f"torch.mm [{n} x {k}]·[{k} x {m}]"
            peak_cpu = max(peak_cpu, gc)
        print(f"peak torch {name}: {peak:.0f} GFLOP/s, {peak_cpu:.0f} GFLOP/cpu-s ({where})")


if __name__ == "__main__":
    main()
