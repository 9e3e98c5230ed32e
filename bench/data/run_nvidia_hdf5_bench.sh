#!/usr/bin/env bash
# NVIDIA's create_pretraining_data.py (one process, as written) vs `lmforge prep --output-format nvidia-hdf5` with 1
# and 2 workers on the same sentences file, alternating, every output compared dataset by dataset; prints the ratios.
#
#   bash bench/data/run_nvidia_hdf5_bench.sh NVIDIA_BERT_DIR [BUILD_DIR]
#
# NVIDIA_BERT_DIR: DeepLearningExamples' PyTorch/LanguageModeling/BERT at 7a4c4250 (create_pretraining_data.py and
# tokenization.py are copied from it unmodified; its file_utils.py, which imports boto3 and requests for downloads,
# is replaced by a stub that returns the local vocabulary path). Env: INPUT (default the shared sample_sentences.txt),
# DUPE (5, bertPrep.py's), SEQ (128), PRED (20), ROUNDS (1), BEFORE (another lmforge binary, e.g. an earlier
# commit's, run the same way in each round right after this build's, for a before/after in one run).
set -euo pipefail
cd "$(dirname "$0")/../.."
nvidia=${1:?usage: run_nvidia_hdf5_bench.sh NVIDIA_BERT_DIR [BUILD_DIR]}
build=${2:-${BUILD_DIR:-${BUILD:-build}}}
[ -x "$build/lmforge" ] || cmake --build "$build" --target lmforge
input=${INPUT:-../shared/data/nvhdf5/sample_sentences.txt}
vocab=../shared/data/vocab/bert-base-uncased-vocab.txt
dupe=${DUPE:-5} seq=${SEQ:-128} pred=${PRED:-20} rounds=${ROUNDS:-1}
out=bench/out/nvhdf5
rm -rf "$out" && mkdir -p "$out/nvidia"
cp "$nvidia/create_pretraining_data.py" "$nvidia/tokenization.py" "$out/nvidia/"
printf 'def cached_path(path, cache_dir=None):\n    return path  # stub: the vocabulary is a local file\n' \
  > "$out/nvidia/file_utils.py"

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores"
echo "input: $input ($(du -h "$input" | cut -f1)), dupe $dupe, seq $seq, predictions $pred"
secs() { date +%s.%N; }
run_timed() {  # name command...: wall and user+sys seconds to $out/<name>.time
  local name=$1; shift
  local t0 t1
  t0=$(secs)
  /usr/bin/time -f "%U %S" -o "$out/$name.cpu" "$@" > "$out/$name.log" 2>&1
  t1=$(secs)
  echo "$(echo "$t1 - $t0" | bc) $(awk '{print $1 + $2}' "$out/$name.cpu")" > "$out/$name.time"
}
for r in $(seq 1 "$rounds"); do
  echo "round $r: load $(cut -d' ' -f1-3 /proc/loadavg)"
  run_timed nvidia_$r /usr/bin/python3 "$out/nvidia/create_pretraining_data.py" --input_file "$input" \
    --output_file "$out/nvidia_$r.hdf5" --vocab_file "$vocab" --do_lower_case --max_seq_length "$seq" \
    --max_predictions_per_seq "$pred" --masked_lm_prob 0.15 --random_seed 12345 --dupe_factor "$dupe"
  for who in lmforge ${BEFORE:+before}; do
    binary="$build/lmforge"
    [ "$who" = before ] && binary=$BEFORE
    for w in 1 2; do
      run_timed ${who}_w${w}_$r "$binary" prep --input "$input" --output-format nvidia-hdf5 \
        --vocab-file "$vocab" --max-seq-length "$seq" --max-predictions-per-seq "$pred" --masked-lm-prob 0.15 \
        --random-seed 12345 --dupe-factor "$dupe" --workers "$w" --output-prefix "$out/${who}_w${w}_$r"
      /usr/bin/python3 tests/prep/nvidia_pretraining_reference.py compare "$out/${who}_w${w}_$r.hdf5" \
        "$out/nvidia_$r.hdf5" | sed "s/^/  $who workers $w vs NVIDIA: /"
    done
  done
  read -r nv_wall nv_cpu < "$out/nvidia_$r.time"
  echo "  NVIDIA's script: ${nv_wall} s wall, ${nv_cpu} s CPU, $(du -b "$out/nvidia_$r.hdf5" | cut -f1) bytes"
  for who in lmforge ${BEFORE:+before}; do
    for w in 1 2; do
      read -r wall cpu < "$out/${who}_w${w}_$r.time"
      echo "  $who --workers $w: ${wall} s wall, ${cpu} s CPU, $(echo "scale=1; $nv_wall / $wall" | bc)x NVIDIA's" \
        "wall time, $(echo "scale=1; $nv_cpu / $cpu" | bc)x its CPU time, $(du -b "$out/${who}_w${w}_$r.hdf5" | cut -f1) bytes"
    done
  done
done
