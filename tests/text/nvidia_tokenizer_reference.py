# defines: ids of NVIDIA's tokenizer (DeepLearningExamples' tokenization.py, re-stated in
#   tests/prep/nvidia_pretraining_reference.py) for one text per code point, "x<c>y <c>Z [SEP]<c>", for every code
#   point of the ranges given (surrogates skipped); one line "<cp> id id ..." each. Usage: VOCAB LO HI [cased]
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'prep'))
from nvidia_pretraining_reference import load_vocab, tokenize  # noqa: E402

vocab = load_vocab(sys.argv[1])
lo, hi = int(sys.argv[2], 0), int(sys.argv[3], 0)
lower = len(sys.argv) < 5
out = []
for cp in range(lo, hi + 1):
    if 0xD800 <= cp <= 0xDFFF:
        continue
    c = chr(cp)
    out.append(f"{cp} " + " ".join(str(vocab[t]) for t in tokenize(f"x{c}y {c}Z [SEP]{c}", vocab, lower)))
print("\n".join(out))
