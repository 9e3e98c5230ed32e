// defines: the generator of tests/text/hf_fixtures: small tokenizer.json files of the main families, trained and
// assembled with Hugging Face tokenizers (npm `tokenizers`, the Rust library), and HF's own ids for a slice of the
// shared sample corpus plus every edge case. The C++ tests compare lmforge with these ids; nothing here is ours.
//
//   node tests/text/hf_fixtures/make_fixtures.js [shared-dir]
// Needs the npm package: bench/text/peers/node_modules/tokenizers (npm ci in bench/text/peers) or tokenizers on NODE_PATH,
// and Debian's python3-sentencepiece for the nmt_nfkc charsmap (gen_charsmap.py).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

let tk;
try {
  tk = require('tokenizers');
} catch (e) {
  tk = require(path.join(__dirname, '../../../bench/text/peers/node_modules/tokenizers'));
}
const shared = process.argv[2] || path.join(__dirname, '../../../../shared');
const outDir = __dirname;

const readJsonl = (f) => fs.readFileSync(f, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
const sample = readJsonl(path.join(shared, 'data/sample/sample.jsonl'));
const edges = readJsonl(path.join(shared, 'data/edge/edge_cases.jsonl'));

// Training text: every 4th document; reference texts: every 40th document (a different residue) + all edges.
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-fixtures-'));
const trainFile = path.join(tmp, 'train.txt');
fs.writeFileSync(trainFile, sample.filter((_, i) => i % 4 === 0).map((d) => d.text.replace(/\n/g, ' ')).join('\n'));
const refs = [];
// Sample rows are named by line number (the corpus's own ids repeat across its sources).
sample.forEach((d, i) => { if (i % 40 === 1) refs.push({ src: 'sample', id: String(i), text: d.text }); });
for (const e of edges) refs.push({ src: 'edge', id: e.id, text: e.text });
// Added tokens written in the text (matched even without special tokens), lstrip, and piece-start effects.
const extras = ['Hello <mask> world</s>', '<s>a</s>', '  <mask>  x', 'x<|end_of_text|>y <|begin_of_text|>', '<unk><unk>',
  '[CLS] hi [SEP][MASK]', 'a</s> b', '<s> </s>', '<pad>', 'über<mask>', '<mask', '1234567 99.5%',
  'foo foobar barfoo foo. _foo', 'zz   next zz', 'a <extra_0> b<extra_0>', '<extra_0>', 'A NEW THING, new thing!',
  'Ｆｕｌｌｗｉｄｔｈ １２３ ﬁ ① ™ … ＡＢＣ ｶﾀｶﾅ', 'tab\there\u0000nul\u200bzw\u00adsoft \u3000ideo', 'e\u0301\u0323 \u1100\u1161\u11a8 🇩🇪👍🏽'];
extras.forEach((text, i) => refs.push({ src: 'extra', id: `x${i}`, text }));

function trained(model, setup) {
  const t = new tk.Tokenizer(model);
  setup(t);
  t.train([trainFile]);
  const f = path.join(tmp, 'trained.json');
  t.save(f);
  return JSON.parse(fs.readFileSync(f, 'utf8')).model;
}

// A BPE model cut to its first `keep` merges (a valid BPE: the alphabet plus those merges' results).
function pruneBpe(model, keep, extra) {
  const merges = model.merges.slice(0, keep).map((m) => (Array.isArray(m) ? m : m.split(' ')));
  const tokens = [];
  const seen = new Set();
  const add = (t) => { if (!seen.has(t)) { seen.add(t); tokens.push(t); } };
  for (const t of extra) add(t);
  const alphabet = Object.entries(model.vocab).sort((a, b) => a[1] - b[1]).map(([t]) => t)
    .filter((t) => [...t].length === 1);
  for (const t of alphabet) add(t);
  for (const [a, b] of merges) add(a + b);
  const vocab = {};
  tokens.forEach((t, i) => { vocab[t] = i; });
  return { vocab, merges };
}

const byteLevelAlphabet = tk.byteLevelAlphabet();
const added = (id, content, o = {}) => ({
  id, content, single_word: !!o.single_word, lstrip: !!o.lstrip, rstrip: !!o.rstrip,
  normalized: !!o.normalized, special: o.special !== false,
});
const base = (o) => ({ version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
  pre_tokenizer: null, post_processor: null, decoder: null, ...o });
const bpeModel = (p, o = {}) => ({ type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
  end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false, ...o,
  vocab: p.vocab, merges: p.merges });

const families = {};

// 1. RoBERTa-style: byte-level BPE with a prefix space, <s> </s> <pad> <unk> and an lstrip <mask>.
const byteBpe = trained(tk.BPE.empty(), (t) => t.setPreTokenizer(tk.byteLevelPreTokenizer(false)));
{
  const p = pruneBpe(byteBpe, 3000, ['<s>', '<pad>', '</s>', '<unk>', ...byteLevelAlphabet]);
  const n = Object.keys(p.vocab).length;
  p.vocab['<mask>'] = n;
  families.roberta = base({
    added_tokens: [added(0, '<s>'), added(1, '<pad>'), added(2, '</s>'), added(3, '<unk>'),
      added(n, '<mask>', { lstrip: true }), added(n + 1, 'foo', { single_word: true, special: false }),
      added(n + 2, 'zz', { rstrip: true, special: false })],
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: bpeModel(p),
  });
}

// 2. Llama-3-style: Split with the Llama 3 regex, then ByteLevel without its regex; ignore_merges.
{
  const p = pruneBpe(byteBpe, 2500, byteLevelAlphabet);
  const n = Object.keys(p.vocab).length;
  families.llama3 = base({
    added_tokens: [added(n, '<|begin_of_text|>'), added(n + 1, '<|end_of_text|>')],
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" },
        behavior: 'Isolated', invert: false },
      { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }] },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: bpeModel(p, { ignore_merges: true }),
  });
}

// 3. Llama-2-style (SentencePiece BPE converted): Prepend + Replace normalizer, no pre-tokenizer, byte fallback.
{
  const spBpe = trained(tk.BPE.empty(), (t) => t.setPreTokenizer(tk.metaspacePreTokenizer('▁', 'always', true)));
  const bytes = [];
  for (let b = 0; b < 256; b++) bytes.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
  const p = pruneBpe(spBpe, 2500, ['<unk>', '<s>', '</s>', ...bytes]);
  // Keep only the alphabet characters the kept merges use, plus ASCII: the rest takes the byte fallback.
  const used = new Set();
  for (const [a, b] of p.merges) { for (const c of a + b) used.add(c); }
  for (const t of Object.keys(p.vocab)) {
    if ([...t].length === 1 && !used.has(t) && t.codePointAt(0) > 127 && t !== '▁') delete p.vocab[t];
  }
  const toks = Object.entries(p.vocab).sort((a, b) => a[1] - b[1]).map(([t]) => t);
  p.vocab = {};
  toks.forEach((t, i) => { p.vocab[t] = i; });
  families.llama2 = base({
    added_tokens: [added(0, '<unk>'), added(1, '<s>'), added(2, '</s>'),
      added(Object.keys(p.vocab).length, '<extra_0>', { normalized: true, special: false })],
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' },
      { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] },
    decoder: { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { String: '▁' }, content: ' ' },
      { type: 'ByteFallback' }, { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
    model: bpeModel(p, { unk_token: '<unk>', fuse_unk: true, byte_fallback: true }),
  });
}

// 4. T5-style Unigram (NFKC instead of the Precompiled charsmap, which lmforge reports as unsupported).
const uni = trained(tk.Unigram.empty(), (t) => {
  t.setNormalizer(tk.nfkcNormalizer());
  t.setPreTokenizer(tk.metaspacePreTokenizer('▁', 'always', true));
});
{
  const pieces = uni.vocab.slice(0, 3000).filter(([p]) => p !== '<pad>' && p !== '</s>' && p !== '<unk>');
  const vocab = [['<pad>', 0], ['</s>', 0], ['<unk>', 0], ...pieces];
  families.t5 = base({
    added_tokens: [added(0, '<pad>'), added(1, '</s>'), added(2, '<unk>')],
    normalizer: { type: 'Sequence', normalizers: [{ type: 'NFKC' },
      { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' }] },
    pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true },
    decoder: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true },
    model: { type: 'Unigram', unk_id: 2, vocab, byte_fallback: false },
  });
  // The same with SentencePiece's real nmt_nfkc charsmap (Precompiled), as HF's T5 conversion writes it.
  const charsmap = require('child_process').execFileSync(process.env.PYTHON || '/usr/bin/python3',
    [path.join(__dirname, 'gen_charsmap.py')], { maxBuffer: 1 << 26 }).toString().trim();
  families.t5spm = base({ ...families.t5,
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Precompiled', precompiled_charsmap: charsmap },
      { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' }] } });
  // XLM-R-like variant: WhitespaceSplit then Metaspace "first", byte fallback for characters without a piece.
  const bytes = [];
  for (let b = 0; b < 256; b++) bytes.push([`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`, 0]);
  const v2 = [['<s>', 0], ['<pad>', 0], ['</s>', 0], ['<unk>', 0], ...bytes, ...pieces.slice(0, 2000)];
  families.xlmr = base({
    added_tokens: [added(0, '<s>'), added(1, '<pad>'), added(2, '</s>'), added(3, '<unk>'),
      added(v2.length, '<mask>', { lstrip: true })],
    normalizer: { type: 'NFC' },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' },
      { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: true }] },
    decoder: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: true },
    model: { type: 'Unigram', unk_id: 3, vocab: [...v2, ['<mask>', 0]], byte_fallback: true },
  });
}

// 5. WordPiece with a composed pipeline: NFD + Lowercase + StripAccents; Whitespace, Digits, Punctuation.
{
  const wp = trained(tk.WordPiece.empty(), (t) => {
    t.setNormalizer(tk.bertNormalizer({ lowercase: true }));
    t.setPreTokenizer(tk.bertPreTokenizer());
  });
  const toks = Object.entries(wp.vocab).sort((a, b) => a[1] - b[1]).map(([t]) => t).slice(0, 3000);
  const vocab = { '[PAD]': 0, '[UNK]': 1, '[CLS]': 2, '[SEP]': 3, '[MASK]': 4 };
  for (const t of toks) if (!(t in vocab)) vocab[t] = Object.keys(vocab).length;
  families.wordpiece = base({
    added_tokens: [added(0, '[PAD]'), added(1, '[UNK]'), added(2, '[CLS]'), added(3, '[SEP]'), added(4, '[MASK]'),
      added(Object.keys(vocab).length, 'New Thing', { normalized: true, special: false })],
    normalizer: { type: 'Sequence', normalizers: [{ type: 'NFD' }, { type: 'Lowercase' }, { type: 'StripAccents' }] },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Whitespace' },
      { type: 'Digits', individual_digits: true }, { type: 'Punctuation', behavior: 'Isolated' }] },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100,
      vocab },
  });
}

// 6. Word-internal BPE with continuing_subword_prefix "##" and end_of_word_suffix "</w>" (the trainer here is a
// plain pair-counting loop: HF's own trainer is not reachable with these options from Node; validity is all that
// matters, the reference ids come from HF), unk without byte fallback, and a Split/Punctuation/Digits pipeline.
{
  const P = '##', S = '</w>';
  const counts = new Map();
  for (const line of fs.readFileSync(trainFile, 'utf8').split('\n').slice(0, 1500)) {
    for (const w of line.normalize('NFKC').toLowerCase().split(/\s+/)) {
      if (w && [...w].length <= 20) counts.set(w, (counts.get(w) || 0) + 1);
    }
  }
  const words = [...counts.entries()].map(([w, n]) => {
    const cs = [...w];
    return { n, sym: cs.map((c, i) => (i > 0 ? P : '') + c + (i === cs.length - 1 ? S : '')) };
  });
  const vocab = { '<unk>': 0 };
  const addTok = (t) => { if (!(t in vocab)) vocab[t] = Object.keys(vocab).length; };
  for (const w of words) for (const t of w.sym) addTok(t);
  const merges = [];
  for (let m = 0; m < 1200; m++) {
    const pairs = new Map();
    for (const w of words) {
      for (let i = 0; i + 1 < w.sym.length; i++) {
        const k = w.sym[i] + ' ' + w.sym[i + 1];
        pairs.set(k, (pairs.get(k) || 0) + w.n);
      }
    }
    let best = null, bestN = 0;
    for (const [k, n] of pairs) if (n > bestN) { best = k; bestN = n; }
    if (!best) break;
    const [a, b] = best.split(' ');
    const merged = a + b.slice(P.length);
    merges.push([a, b]);
    addTok(merged);
    for (const w of words) {
      const out = [];
      for (let i = 0; i < w.sym.length; i++) {
        if (i + 1 < w.sym.length && w.sym[i] === a && w.sym[i + 1] === b) { out.push(merged); i++; } else out.push(w.sym[i]);
      }
      w.sym = out;
    }
  }
  families.subword = base({
    added_tokens: [added(0, '<unk>')],
    normalizer: { type: 'Sequence', normalizers: [{ type: 'NFKC' }, { type: 'Lowercase' },
      { type: 'Strip', strip_left: true, strip_right: true }] },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' },
      { type: 'Split', pattern: { String: '-' }, behavior: 'MergedWithNext', invert: false },
      { type: 'Punctuation', behavior: 'Contiguous' }, { type: 'Digits', individual_digits: false },
      { type: 'Split', pattern: { Regex: '[aeiou]{2,}' }, behavior: 'MergedWithPrevious', invert: false }] },
    decoder: { type: 'BPEDecoder', suffix: S },
    model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: P, end_of_word_suffix: S,
      fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges },
  });
}

// 7. WordLevel with the Nmt normalizer and CharDelimiterSplit: the 2,000 most frequent words of the training text.
{
  const counts = new Map();
  for (const line of fs.readFileSync(trainFile, 'utf8').split('\n').slice(0, 1500)) {
    for (const w of line.normalize('NFKD').toLowerCase().split(' ')) if (w) counts.set(w, (counts.get(w) || 0) + 1);
  }
  const vocab = { '<unk>': 0 };
  [...counts.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, 2000)
    .forEach(([w]) => { if (!(w in vocab)) vocab[w] = Object.keys(vocab).length; });
  families.wordlevel = base({
    added_tokens: [added(0, '<unk>')],
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Nmt' }, { type: 'NFKD' }, { type: 'Lowercase' }] },
    pre_tokenizer: { type: 'CharDelimiterSplit', delimiter: ' ' },
    model: { type: 'WordLevel', vocab, unk_token: '<unk>' },
  });
}

// Reference ids (encode without special tokens: added tokens in the text are still matched), the vocabulary size
// with added tokens, and decoded text of the edge cases.
(async () => {
  const meta = {};
  for (const [name, json] of Object.entries(families)) {
    const file = path.join(outDir, `${name}.tokenizer.json`);
    fs.writeFileSync(file, JSON.stringify(json));
    const t = tk.Tokenizer.fromFile(file);
    const lines = [];
    for (const r of refs) {
      const enc = await t.encode(r.text, null, { addSpecialTokens: false });
      const ids = enc.getIds();
      const row = { src: r.src, id: r.id, ids };
      if (r.src !== 'sample') row.decoded = await t.decode(ids, false);
      if (r.src === 'extra') row.text = r.text;
      lines.push(JSON.stringify(row));
    }
    fs.writeFileSync(path.join(outDir, `${name}.ref.jsonl`), lines.join('\n') + '\n');
    meta[name] = { vocab_size: t.getVocabSize(true), model_vocab_size: t.getVocabSize(false) };
    console.log(name, meta[name], fs.statSync(file).size, 'bytes');
  }
  fs.writeFileSync(path.join(outDir, 'meta.json'), JSON.stringify(meta, null, 1) + '\n');
  fs.rmSync(tmp, { recursive: true });
})();
