#!/usr/bin/env bash
# Distributed `lmforge prep`: throughput with 1 and 2 processes (one tokenizing thread each), single-process and
# sharded, under mpirun and as a static split + `lmforge merge --shards`, against the Megatron-style peer
# (bench/data/peers/megatron_preprocess_peer.py: a Pool of 1 or 2 worker processes, Megatron's pipeline) on the same
# input in one run. Prints wall time, MB/s, each run's speed-up over the peer with as many processes, lmforge's
# scaling from 1 to 2 processes, and whether every output is byte-identical to the single-process one.
#   usage: bench/data/run_prep_scaling.sh [INPUT.jsonl] [TARGET_MB]     (BUILD=build-dir, default build)
# Without INPUT, ../shared's sample corpus is repeated (each copy letter-shifted, so it is new text to the tokenizer)
# to TARGET_MB (default 30).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${BUILD:-build}
exe="$root/$build/lmforge"
out="$root/bench/out/scaling"
mkdir -p "$out"
target_mb=${2:-30}
vocab=$root/../shared/data/vocab/gpt2-vocab.json
merges=$root/../shared/data/vocab/gpt2-merges.txt
[ -x "$exe" ] || { echo "build lmforge first: cmake --build $build --target lmforge" >&2; exit 1; }

input=${1:-}
if [ -z "$input" ]; then
  seed=$root/../shared/data/sample/sample.jsonl
  input=$out/shifted-corpus-${target_mb}mb.jsonl
  if [ ! -f "$input" ]; then
    # Copy k of the sample has its ASCII letters rotated by k (a Caesar shift): new words each time, so a
    # tokenizer's word cache cannot turn the repetitions into cache hits, while line and document lengths stay real.
    /usr/bin/python3 - "$seed" "$input.part" "$target_mb" <<'PY'
import json, sys
seed, dest, target = sys.argv[1], sys.argv[2], int(sys.argv[3]) * 1000000
lines = open(seed, encoding="utf-8").read().splitlines()
def shift(text, k):
    out = []
    for c in text:
        if "a" <= c <= "z": c = chr((ord(c) - 97 + k) % 26 + 97)
        elif "A" <= c <= "Z": c = chr((ord(c) - 65 + k) % 26 + 65)
        out.append(c)
    return "".join(out)
size, k = 0, 0
with open(dest, "w", encoding="utf-8") as f:
    while size < target:
        for line in lines:
            doc = json.loads(line)
            doc["text"] = shift(doc["text"], k)
            s = json.dumps(doc, ensure_ascii=False) + "\n"
            try: s.encode("utf-8")
            except UnicodeEncodeError: s = json.dumps(doc) + "\n"  # lone surrogates stay escaped
            f.write(s)
            size += len(s.encode("utf-8"))
        k += 1
PY
    mv "$input.part" "$input"
  fi
fi
size=$(stat -c %s "$input")
shard=${SHARD_SIZE:-4M}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi="mpirun --oversubscribe --bind-to none --mca btl self,tcp"
common=(--input "$input" --tokenizer-type GPT2BPETokenizer --vocab-file "$vocab" --merge-file "$merges" --append-eod
        --workers 1 --progress-seconds 1000)

# Wall seconds of a command; its CPU seconds (user + system, children included) are appended to $out/cpu.txt, a
# figure the other jobs on a shared machine disturb much less than wall time.
seconds() {
  /usr/bin/time -f "%e %U %S" -o "$out/time.txt" "$@" > "$out/last.log" 2>&1 || { cat "$out/last.log" >&2; exit 1; }
  read -r wall user sys < "$out/time.txt"
  echo "$user + $sys" | bc -l >> "$out/cpu.txt"
  echo "$wall"
}
cpu_of() { sed -n "${1}p" "$out/cpu.txt"; }
: > "$out/cpu.txt"
fresh() { rm -rf "$out/$1"_* "$out/$1.shards"; }

fresh single; t_single=$(seconds "$exe" prep "${common[@]}" --output-prefix "$out/single")
fresh mpi1; t_mpi1=$(seconds $mpi -np 1 "$exe" prep "${common[@]}" --output-prefix "$out/mpi1" --shard-size "$shard")
fresh mpi2; t_mpi2=$(seconds $mpi -np 2 "$exe" prep "${common[@]}" --output-prefix "$out/mpi2" --shard-size "$shard")
cp "$out/last.log" "$out/mpi2.log"
cat > "$out/static2.sh" <<EOS
"$exe" prep ${common[*]} --output-prefix "$out/static2" --shard-size "$shard" --rank 0 --world-size 2 & a=\$!
"$exe" prep ${common[*]} --output-prefix "$out/static2" --shard-size "$shard" --rank 1 --world-size 2 & b=\$!
wait \$a && wait \$b && "$exe" merge --shards "$out/static2"
EOS
fresh static2; t_static2=$(seconds bash "$out/static2.sh")
# The merge step alone, on the shards of the last run (streaming concatenation).
t_merge=$(seconds "$exe" merge --shards "$out/static2")
t_peer1=$(seconds /usr/bin/python3 "$root/bench/data/peers/megatron_preprocess_peer.py" "$input" "$out/peer1" "$vocab" "$merges" 1)
t_peer2=$(seconds /usr/bin/python3 "$root/bench/data/peers/megatron_preprocess_peer.py" "$input" "$out/peer2" "$vocab" "$merges" 2)

same() { cmp -s "$out/$1_text_document.bin" "$out/single_text_document.bin" && cmp -s "$out/$1_text_document.idx" "$out/single_text_document.idx" && echo yes || echo NO; }
rate() { echo "$size / 1000000 / $1" | bc -l; }
echo "input: $input ($(echo "$size / 1000000" | bc -l | xargs printf '%.1f') MB), shard size $shard, $(nproc) cores, one tokenizing thread per process"
printf '%-40s %8s %8s %9s %10s %10s\n' run "wall s" "MB/s" "vs peer" "MB/cpu-s" "identical"
row() { printf '%-40s %8.2f %8.2f %8.2fx %10.2f %10s\n' "$1" "$2" "$(rate "$2")" "$(echo "$3 / $2" | bc -l)" \
          "$(echo "$size / 1000000 / $(cpu_of "$5")" | bc -l)" "$4"; }
row "lmforge prep, 1 process (no shards)" "$t_single" "$t_peer1" "ref" 1
row "lmforge prep, mpirun -np 1 (sharded)" "$t_mpi1" "$t_peer1" "$(same mpi1)" 2
row "lmforge prep, mpirun -np 2 (sharded)" "$t_mpi2" "$t_peer2" "$(same mpi2)" 3
row "lmforge prep, 2 static ranks + merge" "$t_static2" "$t_peer2" "$(same static2)" 4
row "megatron-style peer, 1 worker" "$t_peer1" "$t_peer1" "$(same peer1)" 6
row "megatron-style peer, 2 workers" "$t_peer2" "$t_peer2" "$(same peer2)" 7
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'lmforge scaling 1 -> 2 processes (mpirun): %.2fx; merge --shards alone: %.2f s; peer 1 -> 2 workers: %.2fx\n' \
  "$(echo "$t_mpi1 / $t_mpi2" | bc -l)" "$t_merge" "$(echo "$t_peer1 / $t_peer2" | bc -l)"
echo "per-rank report of the mpirun -np 2 run:"
grep -A3 "per-rank report" "$out/mpi2.log" | sed 's/^/  /'
