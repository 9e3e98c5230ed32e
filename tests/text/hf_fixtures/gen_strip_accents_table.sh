#!/usr/bin/env bash
# Prints the ranges of src/text/hf_unicode_tables.cpp: every Unicode 14 combining mark (Python 3.11's unicodedata)
# that Hugging Face's StripAccents normalizer removes, found by running it (npm tokenizers) on "a" + mark.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -c "
import unicodedata
print('\n'.join(str(c) for c in range(0x110000) if unicodedata.category(chr(c)) in ('Mn', 'Mc', 'Me')))" > "$tmp/marks"
TOKENIZERS="$here/../../../bench/text/peers/node_modules/tokenizers" node -e "
const tk = require(process.env.TOKENIZERS), n = tk.stripAccentsNormalizer();
const cps = require('fs').readFileSync('$tmp/marks', 'utf8').trim().split('\n').map(Number);
console.log(JSON.stringify(cps.filter((c) => n.normalizeString('a' + String.fromCodePoint(c)) === 'a')));" |
python3 -c "
import json, sys
r = []
for c in json.load(sys.stdin):
    if r and r[-1][1] == c - 1: r[-1][1] = c
    else: r.append([c, c])
print(' '.join('{0x%X, 0x%X},' % (a, b) for a, b in r))"
