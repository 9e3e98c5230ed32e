// defines: expand_abbreviations(), imitated_program_flags() (see the header)
#include "cli/flags/abbreviations.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace lmforge::cli {
namespace {

// tools/preprocess_data.py of Megatron-LM and Megatron-DeepSpeed as the seed projects ran it (BigScience's adds
// --tokenizer-name-or-path; Megatron-LM's later versions --lang and --tokenizer-model). None has another --vocab...
// flag, so `--vocab` is --vocab-file there, although lmforge's prep also takes --vocab-extra-ids.
const char* const kPreprocessData[] = {
    "--input",        "--json-keys",    "--split-sentences", "--keep-newlines", "--tokenizer-type",
    "--vocab-file",   "--merge-file",   "--append-eod",      "--lang",          "--tokenizer-name-or-path",
    "--tokenizer-model", "--output-prefix", "--dataset-impl", "--workers",      "--log-interval"};
// tools/merge_preprocessed_data.py (Megatron-DeepSpeed).
const char* const kMergePreprocessedData[] = {"--datasets", "--output-prefix"};
// `lmforge train`'s flags that none of the imitated programs has (Megatron's pretrain_*.py, Megatron v1 and
// Megatron-DeepSpeed, fairseq-train, NVIDIA's run_pretraining.py): every other flag of the command is one of theirs.
const char* const kTrainLmforgeOnly[] = {
    "--device", "--threads", "--print-samples", "--balance-data-parallel", "--balance-interval",
    "--lamb-all-tensors", "--bert-post-layernorm", "--no-special-tokens", "--eod-token"};

bool is_long_flag(const std::string& t) { return t.size() > 2 && t[0] == '-' && t[1] == '-'; }

// A token that starts an option, not a negative number (-1, -.5) and not "--".
bool starts_option(const std::string& t) {
  if (t.size() < 2 || t[0] != '-' || t == "--") return false;
  return !(std::isdigit((unsigned char)t[1]) || t[1] == '.');
}

// "prep", "train gpt": the command's names below the root.
std::string command_path(const CLI::App& command) {
  std::string path;
  for (const CLI::App* a = &command; a != nullptr && a->get_parent() != nullptr; a = a->get_parent())
    path = a->get_name() + (path.empty() ? "" : " " + path);
  return path;
}

// Every long name of the command's options ("--vocab-file") with its option.
std::vector<std::pair<std::string, const CLI::Option*>> long_names(const CLI::App& command) {
  std::vector<std::pair<std::string, const CLI::Option*>> names;
  for (const CLI::Option* o : command.get_options())
    for (const std::string& n : o->get_lnames()) names.push_back({"--" + n, o});
  return names;
}

// The distinct settings among `matches`: names of one option count once (a name the command lacks is its own).
size_t distinct(const std::vector<std::string>& matches, const CLI::App& command) {
  std::set<const void*> options;
  std::set<std::string> unknown;
  for (const std::string& m : matches) {
    const CLI::Option* o = command.get_option_no_throw(m);
    if (o != nullptr) options.insert(o);
    else unknown.insert(m);
  }
  return options.size() + unknown.size();
}

[[noreturn]] void ambiguous(const CLI::App& command, const std::string& prefix, const std::vector<std::string>& matches,
                            const std::string& where) {
  std::string list;
  for (const std::string& m : matches) list += (list.empty() ? "" : ", ") + m;
  throw CLI::ParseError("lmforge " + command_path(command) + ": ambiguous option: " + prefix + " could match " + list +
                            " (" + where + "; give more of the name)",
                        CLI::ExitCodes::ArgumentMismatch);
}

// The full name of the abbreviated flag `prefix` on `command`, or "" when nothing starts with it.
std::string resolve(const CLI::App& command, const std::string& prefix) {
  const auto starting = [&prefix](const std::vector<std::string>& names) {
    std::vector<std::string> out;
    for (const std::string& n : names)
      if (n.size() > prefix.size() && n.compare(0, prefix.size(), prefix) == 0) out.push_back(n);
    return out;
  };
  const std::vector<std::string> program = imitated_program_flags(command);
  std::vector<std::string> matches = starting(program);
  if (!matches.empty()) {
    if (distinct(matches, command) > 1) ambiguous(command, prefix, matches, "flags of the program it imitates");
    return matches.front();
  }
  std::vector<std::string> own;
  for (const auto& [name, option] : long_names(command)) own.push_back(name);
  matches = starting(own);
  if (matches.empty()) return "";
  if (distinct(matches, command) > 1) ambiguous(command, prefix, matches, "lmforge's flags");
  return matches.front();
}

}  // namespace

std::vector<std::string> imitated_program_flags(const CLI::App& command) {
  const std::string path = command_path(command);
  if (path == "prep") return {std::begin(kPreprocessData), std::end(kPreprocessData)};
  if (path == "merge") return {std::begin(kMergePreprocessedData), std::end(kMergePreprocessedData)};
  std::vector<std::string> flags;
  if (path.rfind("train ", 0) == 0)
    for (const auto& [name, option] : long_names(command))
      if (std::find(std::begin(kTrainLmforgeOnly), std::end(kTrainLmforgeOnly), name) == std::end(kTrainLmforgeOnly))
        flags.push_back(name);
  return flags;
}

std::vector<std::string> expand_abbreviations(const CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> out = args;
  const CLI::App* current = &app;
  size_t i = 0;
  while (i < out.size()) {
    const std::string& t = out[i];
    if (t == "--") break;
    if (!starts_option(t)) {  // a subcommand name switches the command, as CLI11 looks it up
      for (const CLI::App* a = current; a != nullptr; a = a->get_parent()) {
        const CLI::App* sub = nullptr;
        try {
          sub = const_cast<CLI::App*>(a)->get_subcommand(t);
        } catch (const CLI::OptionNotFound&) {
        }
        if (sub != nullptr) {
          current = sub;
          break;
        }
      }
      i++;
      continue;
    }
    const size_t eq = t.find('=');
    std::string name = eq == std::string::npos ? t : t.substr(0, eq);
    const CLI::Option* opt = nullptr;
    for (const CLI::App* a = current; a != nullptr && opt == nullptr; a = a->get_parent())
      opt = a->get_option_no_throw(name);
    if (opt == nullptr && is_long_flag(name)) {
      const std::string full = resolve(*current, name);
      if (!full.empty()) {
        name = full;
        out[i] = full + (eq == std::string::npos ? "" : t.substr(eq));
        opt = current->get_option_no_throw(full);
      }
    }
    // Skip the option's values so that none is taken for a subcommand name or a flag.
    const bool inline_value = eq != std::string::npos;
    size_t end = i + 1;
    if (opt != nullptr && !inline_value && opt->get_items_expected_max() > 1) {
      while (end < out.size() && !starts_option(out[end]) && out[end] != "--") end++;
    } else if (opt != nullptr && !inline_value && opt->get_type_size_max() > 0 && end < out.size()) {
      end++;
    }
    i = end;
  }
  return out;
}

}  // namespace lmforge::cli
