// defines: Python's str whitespace (str.isspace), str.strip(), str.split() and text-mode universal newlines on UTF-8
//          text, for inputs read as Python scripts read them (NVIDIA's create_pretraining_data.py, word-level scripts)
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace lmforge::text {

// str.isspace() for one code point (Unicode 14, as Python 3.11): \t \n \v \f \r, U+001C-U+001F, space, U+0085,
// U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
bool is_python_whitespace(uint32_t cp);

// Offset of the first byte of `s` that does not start a valid UTF-8 sequence (Python's strict decoder: no overlong
// forms, no surrogates, nothing above U+10FFFF), or npos when all of `s` is valid.
size_t find_invalid_utf8(std::string_view s);

// str.strip() of valid UTF-8 text.
std::string_view python_strip(std::string_view s);

// str.split() of valid UTF-8 text: maximal runs of non-whitespace, appended to `out`.
void python_split(std::string_view s, std::vector<std::string_view>& out);

// The lines a text-mode readline() returns for `raw`, the bytes of one '\n'-terminated line without its '\n' (or a
// file's last bytes): universal newlines also end a line at a lone '\r', and "\r\n" is one line end. Each piece is
// passed to `f` without its terminator; `raw` that is empty gives one empty line.
template <class F>
void for_each_universal_line(std::string_view raw, F&& f) {
  size_t start = 0;
  for (;;) {
    const size_t cr = raw.find('\r', start);
    if (cr == std::string_view::npos) {
      // A piece after a final '\r' is empty and no line of its own: that '\r' ended the line (before '\n' or EOF).
      if (start < raw.size() || start == 0) f(raw.substr(start));
      return;
    }
    f(raw.substr(start, cr - start));
    start = cr + 1;
  }
}

}  // namespace lmforge::text
