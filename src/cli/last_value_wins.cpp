// defines: take_last_values(), keep_last_list_occurrences() (argparse's last-occurrence semantics on CLI11)
#include "cli/last_value_wins.h"

#include <cctype>
#include <map>

namespace lmforge::cli {
namespace {

// A token that starts an option ("--name", "--name=value", "-x"), not a negative number such as -1 or -.5.
bool looks_like_option(const std::string& t) {
  if (t.size() < 2 || t[0] != '-') return false;
  if (t == "--") return false;
  const char c = t[1];
  return !(std::isdigit((unsigned char)c) || c == '.');
}

std::string option_name(const std::string& token) {
  const size_t eq = token.find('=');
  return eq == std::string::npos ? token : token.substr(0, eq);
}

// A list-valued option: more than one value per occurrence (CLI11's vector options expect 1..unbounded).
// (Options marked repeatable() append across occurrences instead.)
bool is_list(const CLI::Option* o) {
  return o->get_items_expected_max() > 1 && o->get_multi_option_policy() != CLI::MultiOptionPolicy::TakeAll;
}

}  // namespace

CLI::Option* repeatable(CLI::Option* option) { return option->multi_option_policy(CLI::MultiOptionPolicy::TakeAll); }

void take_last_values(CLI::App& app) {
  for (CLI::Option* o : app.get_options())
    if (!is_list(o) && o->get_expected_max() <= 1) o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) take_last_values(*sub);
}

std::vector<std::string> keep_last_list_occurrences(const CLI::App& app, const std::vector<std::string>& args) {
  // 1. Which App each token is parsed by: subcommand names switch to the subcommand (CLI11 looks at the current
  //    App's subcommands first, then the parents').
  struct Occurrence {
    size_t begin, end;  // token range: the option and its values
  };
  std::map<std::pair<const CLI::App*, const CLI::Option*>, std::vector<Occurrence>> lists;
  const CLI::App* current = &app;
  size_t i = 0;
  while (i < args.size()) {
    const std::string& t = args[i];
    if (t == "--") break;
    if (!looks_like_option(t)) {
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
    const std::string name = option_name(t);
    const CLI::Option* opt = nullptr;
    for (const CLI::App* a = current; a != nullptr && opt == nullptr; a = a->get_parent())
      opt = a->get_option_no_throw(name);
    size_t end = i + 1;
    const bool inline_value = t.find('=') != std::string::npos;
    if (opt != nullptr && is_list(opt) && !inline_value) {
      while (end < args.size() && !looks_like_option(args[end]) && args[end] != "--") end++;
    } else if (opt != nullptr && opt->get_type_size_max() > 0 && !inline_value && end < args.size()) {
      end++;  // a single value, never a subcommand name
    }
    if (opt != nullptr && is_list(opt)) lists[{current, opt}].push_back({i, end});
    i = end;
  }
  // 2. Drop every occurrence of a list option but its last.
  std::vector<bool> drop(args.size(), false);
  for (const auto& [key, occurrences] : lists)
    for (size_t k = 0; k + 1 < occurrences.size(); k++)
      for (size_t j = occurrences[k].begin; j < occurrences[k].end; j++) drop[j] = true;
  std::vector<std::string> out;
  for (size_t j = 0; j < args.size(); j++)
    if (!drop[j]) out.push_back(args[j]);
  return out;
}

}  // namespace lmforge::cli
