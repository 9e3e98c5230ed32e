// defines: the Hugging Face side of tests/text/bert_codepoint_digests.txt: HF tokenizers' (native Node binding,
// bench/text/peers) BERT ids of every code point's probe text, digested per block exactly as bert_google_reference.py.
//
//   node scripts/bert_hf_codepoint_digests.js SHARED_DIR/data/vocab/bert.tokenizer.json
// Cased: the same tokenizer.json with BertNormalizer lowercase=false, strip_accents=null.
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require(path.join(__dirname, '../bench/text/peers/node_modules/tokenizers'));

const probe = (c) => 'a' + c + 'b ' + c + '\u03a3 A' + c + '\u03a3 A\u03a3' + c + 'B';

async function digests(tokenizer, name) {
  for (let block = 0; block < 0x110; block++) {
    const texts = [];
    for (let cp = block << 12; cp < (block + 1) << 12; cp++) {
      if (cp >= 0xD800 && cp < 0xE000) continue;
      texts.push(probe(String.fromCodePoint(cp)));
    }
    let h = 2166136261;
    const step = (v) => { h = Math.imul((h ^ v) >>> 0, 16777619) >>> 0; };
    if (texts.length) {
      for (const e of await tokenizer.encodeBatch(texts, { addSpecialTokens: false })) {
        for (const id of e.getIds()) step(id >>> 0);
        step(0xFFFFFFFF);
      }
    }
    console.log(`${name} ${block.toString(16)} ${h.toString(16).padStart(8, '0')}`);
  }
}

(async () => {
  const json = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  await digests(Tokenizer.fromString(JSON.stringify(json)), 'hf-uncased');
  json.normalizer.lowercase = false;
  json.normalizer.strip_accents = null;
  await digests(Tokenizer.fromString(JSON.stringify(json)), 'hf-cased');
})().catch((e) => { console.error(e); process.exit(1); });
