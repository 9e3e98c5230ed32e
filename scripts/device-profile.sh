#!/usr/bin/env bash
# Where one GPT-2 training step's GPU time goes, kernel by kernel: Nsight Compute (ncu, on the lent GPU machine)
# times every kernel of ONE iteration of the device check's throughput run (GPT-2 124M shapes, bf16) and this prints
# the kernels grouped by name with their share of the step's kernel time. Run after scripts/device-check.sh (it uses
# the libraries that script unpacked, or unpacks them), on the machine with the GPU:
#
#   bash scripts/device-profile.sh [OUTDIR] [B T LAYERS]    # defaults: $OUT, 16 1024 12
#
# ncu serialises the kernels and times each alone (gpu__time_duration.sum, one pass, no replay of memory), so the
# total is the step's kernel time without launch gaps or overlap; the gap to the measured step time is the host's.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
deps=$root/build-device-deps
out=${1:-${OUT:-$root/device-check-out}}
read -r B T L <<<"${2:-16} ${3:-1024} ${4:-12}"
mkdir -p "$out"
libs=${TMPDIR:-/tmp}/lmforge-devlibs/lib
if [ ! -d "$libs" ]; then
  mkdir -p "${libs%/lib}" && tar -xJf "$deps/devlibs.tar.xz" -C "${libs%/lib}"
fi
sys_cxx=$(ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/{print $NF; exit}')
if [ -n "$sys_cxx" ] && grep -q GLIBCXX_3.4.30 "$sys_cxx" 2>/dev/null; then rm -f "$libs"/libstdc++.so.6 "$libs"/libgcc_s.so.1; fi
lt=""
for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
           $(python3 -c 'import site; print(" ".join(p + "/nvidia/cublas/lib" for p in site.getsitepackages()))' 2>/dev/null); do
  ls "$dir"/libcublasLt.so.13* >/dev/null 2>&1 && { lt=$dir; break; }
done
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "device-profile: no ncu on this machine" >&2; exit 1; }
d=$deps/data
tmp=$(mktemp -d)
echo "== ncu: one iteration of GPT-2 ${L}x768, B=$B T=$T, bf16"
s0=$SECONDS
timeout "${DEVICE_PROFILE_LIMIT:-110}" env LD_LIBRARY_PATH="$libs${lt:+:$lt}" "$ncu" --csv --page raw \
  --metrics gpu__time_duration.sum --log-file "$out/ncu.csv" \
  "$deps/bin/lmforge" train gpt --num-layers "$L" --hidden-size 768 --num-attention-heads 12 --seq-length "$T" \
  --max-position-embeddings 1024 --micro-batch-size "$B" --global-batch-size "$B" --train-iters 1 --log-interval 1 \
  --lr 0.0006 --clip-grad 1.0 --weight-decay 0.1 --hidden-dropout 0 --attention-dropout 0 --split 100,0,0 \
  --eval-iters 0 --data-path "$d/sample_gpt2_text_document" --tokenizer-type GPT2BPETokenizer \
  --vocab-file "$d/gpt2-vocab.json" --merge-file "$d/gpt2-merges.txt" --data-cache-path "$tmp/cache" --bf16 \
  --device cuda >"$out/ncu-run.txt" 2>&1
echo "ncu rc $? in $((SECONDS - s0)) s"
rm -rf "$tmp"
python3 - "$out/ncu.csv" <<'EOF' | tee "$out/profile.txt"
import csv, sys, collections, re
rows = list(csv.reader(l for l in open(sys.argv[1], errors="replace") if l.startswith('"')))
if not rows:
    sys.exit("device-profile: no kernel rows in ncu's output")
head = rows[0]
name_col = head.index("Kernel Name")
time_col = next(i for i, h in enumerate(head) if h.startswith("gpu__time_duration"))
unit = rows[1][time_col] if len(rows) > 1 and not re.match(r"^[0-9.,]+$", rows[1][time_col]) else "nsecond"
scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}.get(unit, 1e-6)
total, per = 0.0, collections.defaultdict(lambda: [0, 0.0])
for r in rows[1:]:
    try:
        ms = float(r[time_col].replace(",", "")) * scale
    except ValueError:
        continue
    name = re.sub(r"\(.*", "", r[name_col])[:70]
    per[name][0] += 1
    per[name][1] += ms
    total += ms
print(f"kernel time of one iteration: {total:.1f} ms over {sum(c for c, _ in per.values())} launches")
print(f"{'kernel':70s} {'launches':>8s} {'ms':>9s} {'share':>6s}")
for name, (n, ms) in sorted(per.items(), key=lambda kv: -kv[1][1])[:30]:
    print(f"{name:70s} {n:8d} {ms:9.2f} {100 * ms / total:5.1f}%")
EOF
