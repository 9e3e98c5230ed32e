#!/usr/bin/python3
"""NLTK punkt as Megatron's preprocess_data.py uses it for --split-sentences (splitter.tokenize(text) on
1,000,000-character pieces; with --keep-newlines a PunktSentenceTokenizer over the same parameters with Megatron's
CustomLanguageVars, whose period context ends in \\s*). Megatron loads tokenizers/punkt/english.pickle, which cannot
be downloaded here, so the parameters are trained unsupervised (PunktTrainer, as punkt's models were made) on the
input itself; training time is not counted. Writes each document's sentences as a JSON list per line.

usage: punkt_split_peer.py INPUT.jsonl OUTPUT.jsonl [--keep-newlines]
"""
import json
import sys
import time

from nltk.tokenize import punkt


class CustomLanguageVars(punkt.PunktLanguageVars):  # Megatron's tools/preprocess_data.py, in our words
    _period_context_fmt = r"""
        \S*                          # some word material
        %(SentEndChars)s             # a potential sentence ending
        \s*                          # the whitespace after it stays with the sentence
        (?=(?P<after_tok>
            %(NonWord)s              # either other punctuation
            |
            (?P<next_tok>\S+)        # or the next word, right here
        ))"""


def main():
    inp, outp = sys.argv[1:3]
    keep = len(sys.argv) > 3 and sys.argv[3] == "--keep-newlines"
    texts = [json.loads(line)["text"] for line in open(inp, encoding="utf-8")]
    trainer = punkt.PunktTrainer()
    trainer.train("\n\n".join(texts), finalize=True)
    params = trainer.get_params()
    splitter = punkt.PunktSentenceTokenizer(params, lang_vars=CustomLanguageVars()) if keep else \
        punkt.PunktSentenceTokenizer(params)
    max_len = 1000000
    t0 = time.perf_counter()
    out = [[s for i in range(0, len(t), max_len) for s in splitter.tokenize(t[i:i + max_len])] for t in texts]
    seconds = time.perf_counter() - t0
    with open(outp, "w", encoding="utf-8") as f:
        for doc in out:
            f.write(json.dumps(doc, ensure_ascii=False) + "\n")
    size = sum(len(t.encode("utf-8")) for t in texts)
    print("NLTK punkt (trained on the input): %d docs, %d sentences, %.3f s, %.2f MB/s (one process)"
          % (len(texts), sum(map(len, out)), seconds, size / seconds / 1e6))


if __name__ == "__main__":
    main()
