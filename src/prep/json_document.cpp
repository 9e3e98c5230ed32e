// defines: JsonDocumentParser
#include "prep/json_document.h"

#include <algorithm>

#include "text/utf8_repair.h"

namespace lmforge::prep {
namespace {

const char* type_name(simdjson::dom::element_type type) {
  using T = simdjson::dom::element_type;
  switch (type) {
    case T::ARRAY: return "an array";
    case T::OBJECT: return "an object";
    case T::INT64:
    case T::UINT64:
    case T::DOUBLE: return "a number";
    case T::STRING: return "a string";
    case T::BOOL: return "a boolean";
    case T::NULL_VALUE: return "null";
  }
  return "an unknown type";
}

bool is_blank(std::string_view line) {
  for (char c : line)
    if (c != ' ' && c != '\t' && c != '\r') return false;
  return true;
}

}  // namespace

JsonDocumentParser::JsonDocumentParser(std::vector<std::string> keys) : keys_(std::move(keys)) {}

std::string JsonDocumentParser::parse(std::string_view line, size_t readable_after, ParsedDocument& doc) {
  doc.invalid_utf8_replaced = 0;
  doc.lone_surrogates_replaced = 0;
  if (is_blank(line)) return "empty line, expected a JSON object";
  simdjson::dom::element root;
  simdjson::error_code error;
  if (readable_after >= simdjson::SIMDJSON_PADDING) {
    error = parser_.parse(line.data(), line.size(), false).get(root);
  } else {
    error = parser_.parse(line.data(), line.size(), true).get(root);
  }
  if (error == simdjson::UTF8_ERROR || error == simdjson::STRING_ERROR) return parse_repaired(line, doc);
  if (error) return parse_normalized(line, std::string("not valid JSON: ") + simdjson::error_message(error), doc);
  return extract(root, doc);
}

// A line simdjson refused may still be JSON to Python (a number out of double/int64 range, NaN, Infinity):
// parse it again with those read as 0; if that fails too, the line is invalid for the first reason.
std::string JsonDocumentParser::parse_normalized(std::string_view json, std::string error, ParsedDocument& doc) {
  if (!numbers_normalized(json, normalized_)) return error;
  simdjson::dom::element root;
  if (parser_.parse(normalized_.data(), normalized_.size(), true).get(root)) return error;
  return extract(root, doc);
}

bool numbers_normalized(std::string_view json, std::string& out) {
  out.clear();
  bool changed = false;
  const size_t n = json.size();
  const auto digit = [&](size_t i) { return i < n && json[i] >= '0' && json[i] <= '9'; };
  for (size_t i = 0; i < n;) {
    const char c = json[i];
    if (c == '"') {  // a string, copied whole (escapes included)
      size_t j = i + 1;
      while (j < n && json[j] != '"') j += json[j] == '\\' ? 2 : 1;
      j = std::min(n, j + 1);
      out.append(json.substr(i, j - i));
      i = j;
      continue;
    }
    size_t end = i;  // one past a number or literal starting at i, or i when there is none
    for (std::string_view literal : {"NaN", "Infinity", "-Infinity"})
      if (json.substr(i, literal.size()) == literal) end = i + literal.size();
    if (end == i && (c == '-' || digit(i))) {
      size_t j = i + (c == '-' ? 1 : 0);
      if (digit(j)) {
        if (json[j] == '0') {
          ++j;  // a leading 0 stands alone ("01" is not JSON: its 1 is copied and fails the parse)
        } else {
          while (digit(j)) ++j;
        }
        if (j < n && json[j] == '.' && digit(j + 1))
          for (++j; digit(j);) ++j;
        if (j < n && (json[j] == 'e' || json[j] == 'E')) {
          size_t k = j + 1;
          if (k < n && (json[k] == '+' || json[k] == '-')) ++k;
          if (digit(k))
            for (j = k; digit(j);) ++j;
        }
        end = j;
      }
    }
    if (end > i) {
      out += '0';
      changed = true;
      i = end;
    } else {
      out += c;
      ++i;
    }
  }
  return changed;
}

// The slow path, taken only for lines with malformed text: repair, then parse the repaired copy.
std::string JsonDocumentParser::parse_repaired(std::string_view json, ParsedDocument& doc) {
  doc.invalid_utf8_replaced = text::repair_utf8(json, repaired_);
  doc.lone_surrogates_replaced = text::repair_lone_surrogate_escapes(repaired_, repaired2_);
  const std::string& input = doc.lone_surrogates_replaced ? repaired2_ : repaired_;
  simdjson::dom::element root;
  if (auto error = parser_.parse(input.data(), input.size(), true).get(root))
    return parse_normalized(input, std::string("not valid JSON: ") + simdjson::error_message(error), doc);
  return extract(root, doc);
}

std::string JsonDocumentParser::extract(const simdjson::dom::element& root, ParsedDocument& doc) {
  simdjson::dom::object object;
  if (root.get_object().get(object)) return std::string("expected a JSON object, found ") + type_name(root.type());
  doc.texts.resize(keys_.size());
  doc.is_list.assign(keys_.size(), 0);
  for (size_t k = 0; k < keys_.size(); ++k) {
    auto& sentences = doc.texts[k];
    sentences.clear();
    // Python's json (and so Megatron) keeps the LAST value of a key given twice; simdjson's at_key finds the first.
    simdjson::dom::element value;
    bool found = false;
    for (const simdjson::dom::key_value_pair field : object)
      if (field.key == keys_[k]) value = field.value, found = true;
    if (!found) return "missing key \"" + keys_[k] + "\"";
    std::string_view text;
    if (!value.get_string().get(text)) {
      sentences.push_back(text);
      continue;
    }
    simdjson::dom::array list;
    if (value.get_array().get(list))
      return "value of \"" + keys_[k] + "\" is " + type_name(value.type()) + ", not a string or a list of strings";
    doc.is_list[k] = 1;
    for (simdjson::dom::element item : list) {  // Megatron: a list holds pre-split sentences
      if (item.get_string().get(text))
        return "list \"" + keys_[k] + "\" holds " + type_name(item.type()) + ", not only strings";
      sentences.push_back(text);
    }
  }
  return {};
}

}  // namespace lmforge::prep
