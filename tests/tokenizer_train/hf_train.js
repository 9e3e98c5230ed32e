// Trains a tokenizer with Hugging Face's Rust trainer through the npm `tokenizers` binding, or encodes with a
// tokenizer.json, so tests/tokenizer_train can compare lmforge's files with HF's own.
//   node hf_train.js train ByteLevelBPE|ByteLevelBPELowercase|WordPiece|WordPieceCased|WordPiece:SWITCHES CORPUS.txt[,MORE.txt...] OUT_DIR
//     WordPiece:SWITCHES sets the BertNormalizer's options, e.g. WordPiece:stripAccents=false,handleChineseChars=false
//     (cleanText, handleChineseChars, stripAccents, lowercase; the others keep HF's defaults).
//     The binding trains with the model's default trainer only (vocab 30000, min frequency 0, no special tokens,
//     no initial alphabet; WordPiece: "##" continuation). Writes OUT_DIR/tokenizer.json (HF's own save) and, from
//     it, vocab.json + merges.txt (BPE, in BPE::save's format) or vocab.txt (WordPiece).
//   node hf_train.js encode TOKENIZER.json TEXT_FILE
//     Prints the ids of each line of TEXT_FILE (line ending kept, no special tokens), one JSON array per line.
// NODE_PATH must reach the `tokenizers` package.
const fs = require('fs');
const path = require('path');
const tk = require('tokenizers');

async function main() {
  const [mode, a, b, c] = process.argv.slice(2);
  if (mode === 'train') {
    let tokenizer;
    if (a === 'ByteLevelBPE' || a === 'ByteLevelBPELowercase') {
      tokenizer = new tk.Tokenizer(tk.BPE.empty());
      if (a === 'ByteLevelBPELowercase') tokenizer.setNormalizer(tk.lowercase());
      tokenizer.setPreTokenizer(tk.byteLevelPreTokenizer(false, true));
    } else if (a === 'WordPiece' || a === 'WordPieceCased' || a.startsWith('WordPiece:')) {
      tokenizer = new tk.Tokenizer(tk.WordPiece.empty());
      const cased = a === 'WordPieceCased';
      const switches = {};
      for (const kv of a.startsWith('WordPiece:') ? a.slice(10).split(',') : []) {
        const [k, v] = kv.split('=');
        switches[k] = v === 'true';
      }
      tokenizer.setNormalizer(cased ? tk.bertNormalizer({lowercase: false, stripAccents: false})
                                    : tk.bertNormalizer(switches));
      tokenizer.setPreTokenizer(tk.bertPreTokenizer());
    } else {
      throw new Error('unknown model ' + a);
    }
    const start = process.hrtime.bigint();
    tokenizer.train(b.split(','));  // several files: comma-separated
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    console.error('hf train seconds ' + seconds.toFixed(2));
    fs.mkdirSync(c, {recursive: true});
    const file = path.join(c, 'tokenizer.json');
    tokenizer.save(file, true);
    const model = JSON.parse(fs.readFileSync(file, 'utf8')).model;
    const byId = Object.entries(model.vocab).sort((x, y) => x[1] - y[1]);
    if (!a.startsWith('WordPiece')) {
      // Insertion order of integer-like keys is not kept by JS objects, so vocab.json is written by hand.
      const body = byId.map(([t, i]) => JSON.stringify(t) + ':' + i).join(',');
      fs.writeFileSync(path.join(c, 'vocab.json'), '{' + body + '}');
      const merges = model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m) + '\n').join('');
      fs.writeFileSync(path.join(c, 'merges.txt'), '#version: 0.2\n' + merges);
    } else {
      fs.writeFileSync(path.join(c, 'vocab.txt'), byId.map(([t]) => t + '\n').join(''));
    }
  } else if (mode === 'encode') {
    const tokenizer = tk.Tokenizer.fromFile(a);
    const text = fs.readFileSync(b, 'utf8');
    const lines = text.split(/(?<=\n)/);
    const out = [];
    for (const line of lines) {
      const enc = await tokenizer.encode(line, null, {addSpecialTokens: false});
      out.push(JSON.stringify(enc.getIds()));
    }
    process.stdout.write(out.join('\n') + '\n');
  } else {
    throw new Error('usage: hf_train.js train|encode ...');
  }
}
main().catch((e) => { console.error(e.message || e); process.exit(1); });
