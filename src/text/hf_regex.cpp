// defines: HfRegex on PCRE2 (pattern translation from Oniguruma's dialect, JIT matching)
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/hf_regex.h"

#include <pcre2.h>

#include "text/unicode_classes.h"
#include "util/error.h"

namespace lmforge::text {

namespace {

constexpr const char* kSpaceClass = "\\t-\\r\\x{85}\\p{Z}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

// Per-thread match data and JIT stack, shared by every pattern a thread runs.
struct ThreadMatch {
  pcre2_match_data* data = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  ThreadMatch() {
    data = pcre2_match_data_create(32, nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~ThreadMatch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

ThreadMatch& thread_match() {
  thread_local ThreadMatch m;
  return m;
}

// Code points that Unicode 16 (unicode_classes.h, HF's tables) puts in `cls` but PCRE2's older tables do not
// match with `property`, as class ranges ("\x{10D50}-\x{10D65}...") to add next to the property.
std::string missing_ranges(const char* property, CharClass cls) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(property), PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &off, nullptr);
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  std::string out;
  int64_t lo = -1, hi = -1;
  auto flush = [&] {
    if (lo < 0) return;
    char buf[48];
    std::snprintf(buf, sizeof buf, "\\x{%llX}-\\x{%llX}", static_cast<long long>(lo), static_cast<long long>(hi));
    out += buf;
    lo = hi = -1;
  };
  for (uint32_t cp = 0x80; cp < 0x40000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    if (char_class(cp) != cls) continue;
    char u[4];
    int n;
    if (cp < 0x800) {
      u[0] = char(0xC0 | (cp >> 6)), u[1] = char(0x80 | (cp & 0x3F)), n = 2;
    } else if (cp < 0x10000) {
      u[0] = char(0xE0 | (cp >> 12)), u[1] = char(0x80 | ((cp >> 6) & 0x3F)), u[2] = char(0x80 | (cp & 0x3F)), n = 3;
    } else {
      u[0] = char(0xF0 | (cp >> 18)), u[1] = char(0x80 | ((cp >> 12) & 0x3F)), u[2] = char(0x80 | ((cp >> 6) & 0x3F));
      u[3] = char(0x80 | (cp & 0x3F)), n = 4;
    }
    if (pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(u), size_t(n), 0, 0, md, nullptr) >= 0) continue;
    if (hi + 1 == int64_t(cp)) {
      hi = cp;
    } else {
      flush();
      lo = hi = cp;
    }
  }
  flush();
  pcre2_match_data_free(md);
  pcre2_code_free(re);
  return out;
}

const std::string& extra_letters() {
  static const std::string s = missing_ranges("\\p{L}", kLetter);
  return s;
}
const std::string& extra_numbers() {
  static const std::string s = missing_ranges("\\p{N}", kNumber);
  return s;
}

}  // namespace

std::string HfRegex::translate(std::string_view p, const std::string& where) {
  std::string out;
  out.reserve(p.size() + 32);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      ++i;
      if (e == 's') {
        out += in_class ? std::string(kSpaceClass) : "[" + std::string(kSpaceClass) + "]";
      } else if (e == 'S') {
        if (in_class)
          throw Error(where + ": regex \"" + std::string(p) + "\": \\S inside a character class is not supported");
        out += "[^" + std::string(kSpaceClass) + "]";
      } else if ((e == 'p') && (p.substr(i + 1, 3) == "{L}" || p.substr(i + 1, 3) == "{N}")) {
        // HF's Oniguruma knows Unicode 16's letters and numbers; add those PCRE2 10.42 lacks.
        const std::string prop = std::string("\\p") + std::string(p.substr(i + 1, 3));
        const std::string& extra = p[i + 2] == 'L' ? extra_letters() : extra_numbers();
        out += in_class ? prop + extra : "[" + prop + extra + "]";
        i += 3;
      } else if (e == 'h' || e == 'H' || e == 'R' || e == 'X') {
        throw Error(where + ": regex \"" + std::string(p) + "\": \\" + e +
                    " means something else in Oniguruma than in PCRE2; not supported");
      } else {
        out.push_back('\\');
        out.push_back(e);
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal in both dialects.
      if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
      if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);
      continue;
    }
    if (c == '[' && in_class) {
      if (i + 1 < p.size() && p[i + 1] == ':') {  // POSIX class [:alpha:] inside a class
        const size_t close = p.find(":]", i + 2);
        if (close != std::string_view::npos) {
          out.append(p.substr(i, close + 2 - i));
          i = close + 1;
          continue;
        }
      }
      throw Error(where + ": regex \"" + std::string(p) + "\": nested character classes are not supported");
    }
    if (c == ']' && in_class) in_class = false;
    out.push_back(c);
  }
  return out;
}

HfRegex::HfRegex(std::string_view pattern, const std::string& where) : where_(where) {
  const std::string translated = translate(pattern, where);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  auto* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                             PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NO_UTF_CHECK, &err, &err_off, nullptr);
  if (code == nullptr)
    throw Error(where + ": regex \"" + std::string(pattern) + "\" does not compile (PCRE2, as \"" + translated +
                "\", offset " + std::to_string(err_off) + "): " + pcre2_message(err));
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
  code_ = code;
}

HfRegex::~HfRegex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void HfRegex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const {
  matches.clear();
  ThreadMatch& tm = thread_match();
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0;
  while (at <= text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), at, PCRE2_NO_UTF_CHECK, tm.data, tm.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0 && rc != 0) throw Error(where_ + ": regex match failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(tm.data);
    const size_t b = ov[0], e = ov[1];
    matches.emplace_back(b, e);
    if (e > b) {
      at = e;
    } else {  // empty match: step over one character
      if (e >= text.size()) break;
      size_t n = e + 1;
      while (n < text.size() && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) ++n;
      at = n;
    }
  }
}

}  // namespace lmforge::text
