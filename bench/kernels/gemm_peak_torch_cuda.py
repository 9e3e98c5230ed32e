#!/usr/bin/python3
# defines: the GPU's measured bf16 GEMM peak for the device check's second MFU basis (scripts/device-check.sh):
# torch.mm of two random bf16 8192×8192 matrices on cuda (cuBLAS, fp32 accumulation), the best of --reps timed calls
# after warm-up, by CUDA events; prints "peak cuda bf16: X TFLOP/s (torch.mm 8192³, <GPU name>)".
#   usage: gemm_peak_torch_cuda.py [--n 8192] [--reps 20]
import argparse

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible to PyTorch")
    n = a.n
    x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):  # cuBLAS's heuristics, clocks up
        torch.mm(x, w)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(a.reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.mm(x, w)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1000.0)
    tflops = 2.0 * n * n * n / best / 1e12
    print(f"peak cuda bf16: {tflops:.0f} TFLOP/s (torch.mm {n}³, {torch.cuda.get_device_name()})")


if __name__ == "__main__":
    main()
