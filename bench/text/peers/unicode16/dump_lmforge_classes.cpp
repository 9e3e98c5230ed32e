// defines: writes lmforge's pre-tokenizer class of every code point to ours.bin (input of verify_against_hf.js).
// Build: g++ -O2 -std=c++20 -I../../../../src dump_lmforge_classes.cpp ../../../../build/src/liblmforge_text.a -lutf8proc
#include <cstdio>
#include "text/unicode_classes.h"
int main() {
  FILE* f = fopen("ours.bin", "wb");
  for (uint32_t c = 0; c < 0x110000; ++c) { uint8_t v = lmforge::text::char_class(c); fwrite(&v, 1, 1, f); }
  fclose(f);
}
