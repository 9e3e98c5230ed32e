#!/usr/bin/env bash
# Data I/O hot paths against peers on the same inputs, in one run:
#  1. reading JSON lines (plain, .gz, .zst, .xz) with LineReader (bench_data_io) vs Python's line iteration as
#     Megatron's preprocess_data.py reads (open / gzip.open / lzma.open) and vs the C tools' `-dc | wc -l`;
#  2. `lmforge merge` of 32 datasets vs a numpy transcription of Megatron's tools/merge_datasets.py
#     (bench/data/peers/megatron_merge_peer.py); outputs must be byte-identical.
#   usage: bench/data/run_data_io_bench.sh [TARGET_MB]   (corpus size, default 60; built from ../shared's sample)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
out="$root/bench/out/data_io"
mkdir -p "$out"
target_mb=${1:-60}
build=${BUILD:-$root/build}
[ -x "$build/bench/bench_data_io" ] && [ -x "$build/lmforge" ] || \
  cmake --build "$build" --target bench_data_io lmforge -j2 >/dev/null
shared=$root/../shared/data/sample

input=$out/corpus-${target_mb}mb.jsonl
if [ ! -f "$input" ]; then
  : > "$input.part"
  while [ "$(stat -c %s "$input.part")" -lt $((target_mb * 1000000)) ]; do cat "$shared/sample.jsonl" >> "$input.part"; done
  mv "$input.part" "$input"
fi
[ -f "$input.gz" ] || gzip -c "$input" > "$input.gz"
[ -f "$input.zst" ] || zstd -q -c "$input" > "$input.zst"
[ -f "$input.xz" ] || xz -T2 -c "$input" > "$input.xz"

secs() { local s e; s=$(date +%s.%N); "$@" >/dev/null; e=$(date +%s.%N); echo "$e - $s" | bc -l; }
size=$(stat -c %s "$input")
echo "corpus: $input ($(echo "$size / 1000000" | bc -l | xargs printf '%.1f') MB decoded), $(nproc) cores"
printf '%-6s %14s %14s %14s %10s %10s\n' format "lmforge MB/s" "python MB/s" "C tool MB/s" "vs python" "vs C tool"
for ext in "" .gz .zst .xz; do
  f=$input$ext
  ours=$("$build/bench/bench_data_io" "$f" | awk '{print $2}')
  case $ext in
    "") py="f = open(sys.argv[1], encoding='utf-8')"; tool="cat $f" ;;
    .gz) py="import gzip; f = gzip.open(sys.argv[1], 'rt', encoding='utf-8')"; tool="gzip -dc $f" ;;
    .zst) py=""; tool="zstd -dc $f" ;;
    .xz) py="import lzma; f = lzma.open(sys.argv[1], 'rt', encoding='utf-8')"; tool="xz -dc $f" ;;
  esac
  if [ -n "$py" ]; then
    t_py=$(secs /usr/bin/python3 -c "import sys
$py
n = 0
for line in f: n += 1
print(n)" "$f")
    py_mbs=$(echo "$size / 1000000 / $t_py" | bc -l); r_py=$(echo "$t_py / $ours" | bc -l)
  else
    py_mbs=0; r_py=0  # Python has no zstd module here
  fi
  t_tool=$(secs sh -c "$tool | wc -l")
  printf '%-6s %14.1f %14.1f %14.1f %9.2fx %9.2fx\n' "${ext:-plain}" "$(echo "$size / 1000000 / $ours" | bc -l)" \
    "$py_mbs" "$(echo "$size / 1000000 / $t_tool" | bc -l)" "$r_py" "$(echo "$t_tool / $ours" | bc -l)"
done

# Merge: 32 copies of Megatron's GPT-2 sample dataset (about 73 MB of .bin, 316k sequences).
mkdir -p "$out/merge-in"
args=()
for i in $(seq -w 1 32); do
  for e in bin idx; do [ -f "$out/merge-in/part$i.$e" ] || cp "$shared/sample_gpt2_text_document.$e" "$out/merge-in/part$i.$e"; done
  args+=("$out/merge-in/part$i")
done
in_args=()
for p in "${args[@]}"; do in_args+=(--input-prefix "$p"); done
sync
t_ours=$(secs "$build/lmforge" merge --output-prefix "$out/merged-lmforge" "${in_args[@]}")
t_peer=$(secs /usr/bin/python3 "$root/bench/data/peers/megatron_merge_peer.py" "$out/merged-peer" "${args[@]}")
same=no
cmp -s "$out/merged-lmforge.bin" "$out/merged-peer.bin" && cmp -s "$out/merged-lmforge.idx" "$out/merged-peer.idx" && same=yes
printf 'merge of 32 datasets (%s MB): lmforge %.2f s, megatron-style peer %.2f s, ratio %.1fx, byte-identical: %s\n' \
  "$(( $(stat -c %s "$out/merged-peer.bin") / 1000000 ))" "$t_ours" "$t_peer" "$(echo "$t_peer / $t_ours" | bc -l)" "$same"
