# Prints, base64, the precompiled_charsmap SentencePiece builds for its nmt_nfkc normalization rule (the one T5,
# ALBERT and XLNet models carry): trains a throwaway model on a few lines and reads its normalizer_spec. Needs Debian's
# python3-sentencepiece (and python3-protobuf). Used by make_fixtures.js for the t5spm family.
import base64
import os
import sys
import tempfile

import sentencepiece as spm
import sentencepiece.sentencepiece_model_pb2 as model_pb2

lines = ["The quick brown fox jumps over the lazy dog.", "Ｆｕｌｌｗｉｄｔｈ １２３ ﬁ ① ™ …", "Grüße aus Köln!"] * 50
with tempfile.TemporaryDirectory() as tmp:
    with open(os.path.join(tmp, "in.txt"), "w") as f:
        f.write("\n".join(lines))
    spm.SentencePieceTrainer.train(input=os.path.join(tmp, "in.txt"), model_prefix=os.path.join(tmp, "m"),
                                   vocab_size=46, normalization_rule_name="nmt_nfkc", minloglevel=2,
                                   hard_vocab_limit=False)
    proto = model_pb2.ModelProto()
    with open(os.path.join(tmp, "m.model"), "rb") as f:
        proto.ParseFromString(f.read())
sys.stdout.write(base64.b64encode(proto.normalizer_spec.precompiled_charsmap).decode())
