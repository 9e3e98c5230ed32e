# Reference ids for Megatron's SentencePieceTokenizer (M23 megatron/tokenizer/tokenizer.py,
# _SentencePieceTokenizer): its special-token table and tokenize() re-stated on Python's sentencepiece.
# Run: /usr/bin/python3 make_megatron_reference.py tiny_unigram.model texts.txt 2 > texts.megatron_x2.ids
import sys
import sentencepiece

model, texts, extra_ids = sys.argv[1], sys.argv[2], int(sys.argv[3])
sp = sentencepiece.SentencePieceProcessor(model_file=model)
vocab = {sp.id_to_piece(i): i for i in range(len(sp))}
special = {}


def add(t):
    if t not in vocab:
        vocab[t] = len(vocab)
    special[t] = vocab[t]


def piece_or(i, fallback):
    try:
        return sp.id_to_piece(i)
    except IndexError:
        return fallback


for t in ['<CLS>', '<SEP>', '<EOD>', '<MASK>']:
    add(t)
add(piece_or(sp.pad_id(), '<PAD>'))
add(piece_or(sp.bos_id(), '<BOS>'))
add(piece_or(sp.eos_id(), '<EOS>'))
for i in range(extra_ids):
    add('<extra_id_{}>'.format(i))


def tokenize(text):
    ids, idx = [], 0
    while True:
        indices = {}
        for token in special:
            try:
                indices[token] = text[idx:].index(token)
            except ValueError:
                continue
        if not indices:
            break
        nxt = min(indices, key=indices.get)
        at = idx + indices[nxt]
        ids.extend(sp.encode_as_ids(text[idx:at]))
        ids.append(special[nxt])
        idx = at + len(nxt)
    ids.extend(sp.encode_as_ids(text[idx:]))
    return ids


print('# vocab_size', len(vocab), 'eod', special['<EOD>'])
with open(texts, encoding='utf-8') as f:
    for line in f.read().split('\n')[:-1]:
        print(' '.join(map(str, tokenize(line))))
