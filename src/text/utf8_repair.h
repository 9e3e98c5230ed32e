// defines: repair_utf8() and repair_lone_surrogate_escapes(): how lmforge turns malformed text into valid text
// instead of failing a whole corpus on one bad byte. Both replace with U+FFFD and report how many replacements.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace lmforge::text {

// Replaces every maximal ill-formed subsequence of `bytes` with U+FFFD (EF BF BD) — the Unicode "maximal subpart"
// practice, identical to Python's bytes.decode("utf-8", errors="replace") — and returns how many were replaced.
// Surrogate code points encoded in UTF-8 (ED A0..BF ..) and overlongs are ill-formed, as in Python.
size_t repair_utf8(std::string_view bytes, std::string& out);
// The same, appending to `out` instead of replacing it (decoders build their text piece by piece).
size_t append_repaired_utf8(std::string_view bytes, std::string& out);

// In raw JSON text, rewrites each \uD800–\uDFFF escape that is not part of a high+low surrogate pair into
// \uFFFD, so the JSON decodes to valid UTF-8. Python's json.loads would keep the lone surrogate in a str that
// cannot be encoded to UTF-8 (Megatron then fails); Rust-based tokenizers cannot represent it at all.
// Returns the number of escapes rewritten; `out` is left untouched when it returns 0.
size_t repair_lone_surrogate_escapes(std::string_view json, std::string& out);

}  // namespace lmforge::text
