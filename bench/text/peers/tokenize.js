// defines: the peer side of bench/text/run_tokenizer_bench.sh: GPT-2 ids of a JSONL corpus with Hugging Face
// tokenizers (native Node binding) or tiktoken (WASM), timed, with the same digest and id dump as bench_tokenizer.
//
//   node tokenize.js --lib hf|tiktoken --input corpus.jsonl [--tokenizer-json gpt2.tokenizer.json]
//                    [--repeat 3] [--ids-out ids.bin] [--label hf]
// HF's encodeBatch runs on its rayon pool: the runner sets RAYON_NUM_THREADS (and TOKENIZERS_PARALLELISM=false
// for one thread) before node starts. Only the tokenizer call is timed: not JSON parsing, and for HF not the
// copy of ids from Rust Encoding objects into JS arrays. tiktoken's encode_ordinary returns ids directly.
'use strict';
const fs = require('fs');
const path = require('path');

function parseArgs(argv) {
  const args = {
    lib: 'hf', input: null, repeat: 3, idsOut: null, key: 'text', label: null,
    tokenizerJson: path.join(__dirname, '../../../../shared/data/vocab/gpt2.tokenizer.json'),
  };
  for (let i = 2; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`missing value for ${flag}`);
    if (flag === '--lib') args.lib = value;
    else if (flag === '--input') args.input = value;
    else if (flag === '--repeat') args.repeat = Number(value);
    else if (flag === '--ids-out') args.idsOut = value;
    else if (flag === '--json-key') args.key = value;
    else if (flag === '--tokenizer-json') args.tokenizerJson = value;
    else if (flag === '--label') args.label = value;
    else throw new Error(`unknown flag ${flag}`);
  }
  if (!args.input) throw new Error('--input is required');
  return args;
}

function readTexts(file, key) {
  const texts = [];
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (line.trim() !== '') texts.push(JSON.parse(line)[key]);
  }
  return texts;
}

// FNV-1a over ids, 0xFFFFFFFF after each document: the same digest as bench_tokenizer.
function digest(allIds) {
  let h = 2166136261;
  const step = (v) => { h = Math.imul((h ^ v) >>> 0, 16777619) >>> 0; };
  for (const ids of allIds) {
    for (let i = 0; i < ids.length; i++) step(ids[i] >>> 0);
    step(0xFFFFFFFF);
  }
  return h.toString(16).padStart(8, '0');
}

function writeIds(file, allIds) {
  let total = 0;
  for (const ids of allIds) total += ids.length + 1;
  const out = new Int32Array(total);
  let k = 0;
  for (const ids of allIds) {
    for (let i = 0; i < ids.length; i++) out[k++] = ids[i];
    out[k++] = -1;
  }
  fs.writeFileSync(file, Buffer.from(out.buffer));
}

// User + system CPU of the whole process (all threads), in seconds: robust to a busy machine.
function cpuOf(usage) { return (usage.user + usage.system) / 1e6; }

async function runHf(tokenizer, texts) {
  const batch = 2000;  // documents per encodeBatch call: enough work for the thread pool, bounded memory
  let seconds = 0, cpuSeconds = 0;
  const allIds = [];
  for (let i = 0; i < texts.length; i += batch) {
    const chunk = texts.slice(i, i + batch);
    const t0 = process.hrtime.bigint();
    const cpu0 = process.cpuUsage();
    const encodings = await tokenizer.encodeBatch(chunk, { addSpecialTokens: false });
    seconds += Number(process.hrtime.bigint() - t0) / 1e9;
    cpuSeconds += cpuOf(process.cpuUsage(cpu0));
    for (const e of encodings) allIds.push(e.getIds());
  }
  return { seconds, cpuSeconds, allIds };
}

function runTiktoken(enc, texts) {
  const allIds = new Array(texts.length);
  const t0 = process.hrtime.bigint();
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < texts.length; i++) allIds[i] = enc.encode_ordinary(texts[i]);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  return { seconds, cpuSeconds: cpuOf(process.cpuUsage(cpu0)), allIds };
}

async function main() {
  const args = parseArgs(process.argv);
  const texts = readTexts(args.input, args.key);
  let bytes = 0;
  for (const t of texts) bytes += Buffer.byteLength(t, 'utf8');
  let runOnce, threads = 1, label = args.label || args.lib;
  if (args.lib === 'hf') {
    const { Tokenizer } = require('tokenizers');
    const tokenizer = Tokenizer.fromFile(args.tokenizerJson);
    runOnce = () => runHf(tokenizer, texts);
    if (process.env.TOKENIZERS_PARALLELISM !== 'false') threads = Number(process.env.RAYON_NUM_THREADS || 0) || require('os').cpus().length;
  } else if (args.lib === 'tiktoken') {
    const { get_encoding } = require('tiktoken');
    const enc = get_encoding('gpt2');
    runOnce = async () => runTiktoken(enc, texts);
  } else {
    throw new Error(`--lib must be hf or tiktoken, not ${args.lib}`);
  }
  let best = null, bestDigest = null;
  for (let r = 0; r < Math.max(1, args.repeat); r++) {
    const res = await runOnce();
    const d = digest(res.allIds);
    if (bestDigest !== null && d !== bestDigest) throw new Error('ids differ between runs');
    bestDigest = d;
    if (r === 0 && args.idsOut) writeIds(args.idsOut, res.allIds);
    if (best === null || res.seconds < best.seconds) best = res;
  }
  let tokens = 0;
  for (const ids of best.allIds) tokens += ids.length;
  console.log(`RESULT side=${label} threads=${threads} bytes=${bytes} seconds=${best.seconds.toFixed(4)} ` +
              `mbps=${(bytes / best.seconds / 1e6).toFixed(2)} cpu_seconds=${best.cpuSeconds.toFixed(4)} ` +
              `cpu_mbps=${(bytes / best.cpuSeconds / 1e6).toFixed(2)} tokens=${tokens} ` +
              `mtokps=${(tokens / best.seconds / 1e6).toFixed(3)} digest=${bestDigest}`);
}

main().catch((e) => { console.error(`tokenize.js: error: ${e.message}`); process.exit(1); });
