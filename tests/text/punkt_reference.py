# NLTK punkt as Megatron's --split-sentences calls it, for tests/text/test_sentence_splitter.cpp: reads JSON lines
# {"text": ...}, prints per line [sentences of splitter.tokenize(text), sentences with Megatron's CustomLanguageVars
# (--keep-newlines)]. Empty PunktParameters: no learned abbreviations, so the texts used test the framing.
import json
import sys

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


params = punkt.PunktParameters()
plain = punkt.PunktSentenceTokenizer(params)
keep = punkt.PunktSentenceTokenizer(params, lang_vars=CustomLanguageVars())
for line in open(sys.argv[1], encoding="utf-8"):
    text = json.loads(line)["text"]
    print(json.dumps([plain.tokenize(text), keep.tokenize(text)]))
