// defines: the generator of tests/text/hf_fixtures/special.ref.jsonl: Hugging Face's ids with add_special_tokens=true
// (what Megatron's PretrainedFromHF tokenizer(text).input_ids gives) for each fixture family under the post-processor
// that family's real tokenizer.json carries (BERT's [CLS] $A [SEP] template, RoBERTa's RobertaProcessing, Llama's
// <s> $A, T5's $A </s>, ...) plus compositions (Sequence) and multi-id special tokens. Each row holds the
// post_processor JSON; the C++ test puts it in place of the fixture's "post_processor":null.
//
//   node tests/text/hf_fixtures/make_special_refs.js [shared-dir]
// Needs the npm package tokenizers (bench/text/peers/node_modules or NODE_PATH), as make_fixtures.js.
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

const S = (id, type_id = 0) => ({ SpecialToken: { id, type_id } });
const A = (type_id = 0) => ({ Sequence: { id: 'A', type_id } });
const B = (type_id = 1) => ({ Sequence: { id: 'B', type_id } });
const st = (id, ids) => ({ id, ids, tokens: ids.map(() => id) });
const template = (single, pair, specials) => ({ type: 'TemplateProcessing', single, pair,
  special_tokens: Object.fromEntries(specials.map(([n, ids]) => [n, st(n, ids)])) });
const byteLevel = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true };
const roberta = (cls, sep) => ({ type: 'RobertaProcessing', sep, cls, trim_offsets: true, add_prefix_space: true });
const bert = (cls, sep) => ({ type: 'BertProcessing', sep, cls });
const bertTemplate = (cls, sep) => template([S('[CLS]'), A(), S('[SEP]')],
  [S('[CLS]'), A(), S('[SEP]'), B(), S('[SEP]', 1)], [['[CLS]', [cls]], ['[SEP]', [sep]]]);

// family -> fixture file and the post-processors to record (name -> post_processor JSON).
const fixture = (f) => path.join(__dirname, `${f}.tokenizer.json`);
const cases = [
  // bert-base-uncased's own tokenizer.json post_processor, on the shared vocabulary.
  ['bert', path.join(shared, 'data/vocab/bert.tokenizer.json'), { template: bertTemplate(101, 102) }],
  ['wordpiece', fixture('wordpiece'), { bert: bert(['[CLS]', 2], ['[SEP]', 3]), template: bertTemplate(2, 3) }],
  // RoBERTa's and GPT-2's files: RobertaProcessing and ByteLevel.
  ['roberta', fixture('roberta'), { roberta: roberta(['<s>', 0], ['</s>', 2]), bytelevel: byteLevel }],
  // Llama 3: Sequence[ByteLevel, TemplateProcessing "<|begin_of_text|> $A"].
  ['llama3', fixture('llama3'), { sequence: { type: 'Sequence', processors: [byteLevel,
    template([S('<|begin_of_text|>'), A()], [S('<|begin_of_text|>'), A(), S('<|begin_of_text|>', 1), B(1)],
      [['<|begin_of_text|>', [2756]]])] } }],
  // Llama 2: "<s> $A"; T5: "$A </s>"; XLM-R: "<s> $A </s>".
  ['llama2', fixture('llama2'), { template: template([S('<s>'), A()], [S('<s>'), A(), S('<s>', 1), B(1)], [['<s>', [1]]]) }],
  ['t5', fixture('t5'), { template: template([A(), S('</s>')], [A(), S('</s>'), B(1), S('</s>', 1)], [['</s>', [1]]]) }],
  ['t5spm', fixture('t5spm'), { template: template([A(), S('</s>')], [A(), S('</s>'), B(1), S('</s>', 1)], [['</s>', [1]]]) }],
  ['xlmr', fixture('xlmr'), { template: template([S('<s>'), A(), S('</s>')],
    [S('<s>'), A(), S('</s>'), S('</s>'), B(), S('</s>')], [['<s>', [0]], ['</s>', [2]]]) }],
  // Compositions HF allows: special tokens of several ids, the text twice, a Template whose pieces a following
  // Roberta/Bert wrap one by one, and a template producing two encodings that a second template reads as a pair.
  ['subword', fixture('subword'), {
    multi: template([S('X'), A(1), S('Y', 1)], [S('X'), A(), B()], [['X', [5, 6, 7]], ['Y', []]]),
    twice: template([A(), S('X'), A()], [A(), B()], [['X', [9]]]),
    sequence: { type: 'Sequence', processors: [template([S('X'), A(), S('Y')], [A(), B()], [['X', [5, 6]], ['Y', [7]]]),
      roberta(['<s>', 11], ['</s>', 12]), byteLevel, bert(['[CLS]', 13], ['[SEP]', 14])] },
    pair: { type: 'Sequence', processors: [template([A(), S('X')], [S('Y'), B(), A()], [['X', [3]], ['Y', [4]]]),
      template([S('Z'), A()], [B(), S('Z'), A()], [['Z', [8]]])] },
  }],
  ['wordlevel', fixture('wordlevel'), { bert: bert(['<unk>', 0], ['x', 1]) }],
];

const sample = fs.readFileSync(path.join(shared, 'data/sample/sample.jsonl'), 'utf8').split('\n').filter((l) => l)
  .map((l) => JSON.parse(l).text);
const texts = ['', ' ', 'Hello world', 'hello [SEP] <s>a</s> <mask>', sample[7], sample[123].slice(0, 400)];

(async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-special-'));
  const lines = [];
  for (const [family, file, variants] of cases) {
    const json = fs.readFileSync(file, 'utf8');
    if (json.split('"post_processor":null').length !== 2) throw new Error(`${file}: expected one null post_processor`);
    for (const [name, pp] of Object.entries(variants)) {
      const f = path.join(tmp, 't.json');
      fs.writeFileSync(f, json.replace('"post_processor":null', `"post_processor":${JSON.stringify(pp)}`));
      const t = tk.Tokenizer.fromFile(f);
      for (const text of texts) {
        const ids = (await t.encode(text, null, { addSpecialTokens: true })).getIds();
        const plain = (await t.encode(text, null, { addSpecialTokens: false })).getIds();
        lines.push(JSON.stringify({ family, variant: name, post_processor: pp, text, ids, plain }));
      }
    }
  }
  fs.writeFileSync(path.join(__dirname, 'special.ref.jsonl'), lines.join('\n') + '\n');
  fs.rmSync(tmp, { recursive: true });
  console.log(lines.length, 'rows');
})();
