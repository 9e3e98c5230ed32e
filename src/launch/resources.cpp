// defines: parse_hostfile(), read_hostfile(), filter_resources(), limit_resources(), world_info(),
//          parse_world_info(), is_this_machine()
#include "launch/resources.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include "util/error.h"

namespace lmforge::launch {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) out.push_back(part);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

int slot_number(const std::string& text, const std::string& where) {
  if (text.empty() || text.size() > 6 || text.find_first_not_of("0123456789") != std::string::npos)
    throw Error(where + ": '" + text + "' is not a slot number");
  return std::stoi(text);
}

std::vector<int>* find(Resources& r, const std::string& host) {
  for (auto& [h, slots] : r)
    if (h == host) return &slots;
  return nullptr;
}
const std::vector<int>* find(const Resources& r, const std::string& host) {
  for (const auto& [h, slots] : r)
    if (h == host) return &slots;
  return nullptr;
}

}  // namespace

Resources parse_hostfile(const std::string& text, const std::string& path) {
  static const std::regex entry(R"(^(\S+)\s+slots=(\d+)\s*$)");
  Resources out;
  std::istringstream in(text);
  std::string line;
  for (uint64_t number = 1; std::getline(in, line); number++) {
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    line = line.substr(first);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    std::smatch m;
    if (!std::regex_match(line, m, entry))
      throw Error(input_location(path, number) + ": '" + line + "' is not a hostfile entry (`HOST slots=N`)");
    if (find(out, m[1]))
      throw Error(input_location(path, number) + ": host " + m[1].str() + " is listed twice");
    const int slots = slot_number(m[2], input_location(path, number));
    std::vector<int> ids((size_t)slots);
    for (int i = 0; i < slots; i++) ids[(size_t)i] = i;
    out.emplace_back(m[1], ids);
  }
  if (out.empty()) throw Error(path + ": the hostfile lists no host (`HOST slots=N` lines)");
  return out;
}

Resources read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open the hostfile");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_hostfile(text.str(), path);
}

Resources filter_resources(const Resources& all, const std::string& include, const std::string& exclude) {
  if (!include.empty() && !exclude.empty())
    throw Error("-i/--include and -e/--exclude cannot be given together (DeepSpeed: mutually exclusive)");
  if (include.empty() && exclude.empty()) return all;
  const std::string& rules = include.empty() ? exclude : include;
  const std::string flag = include.empty() ? "--exclude" : "--include";
  Resources kept = include.empty() ? all : Resources{};
  for (const std::string& node : split(rules, '@')) {
    const size_t colon = node.find(':');
    const std::string host = node.substr(0, colon);
    const std::vector<int>* has = find(all, host);
    if (!has) throw Error(flag + " " + rules + ": host '" + host + "' is not in the hostfile");
    std::vector<int> slots;
    if (colon == std::string::npos) {
      slots = *has;
    } else {
      for (const std::string& s : split(node.substr(colon + 1), ',')) {
        const int slot = slot_number(s, flag + " " + rules);
        if (std::find(has->begin(), has->end(), slot) == has->end())
          throw Error(flag + " " + rules + ": host '" + host + "' has no slot " + s + " (it has " +
                      std::to_string(has->size()) + ")");
        slots.push_back(slot);
      }
    }
    std::vector<int>* entry = find(kept, host);
    if (!include.empty()) {
      if (!entry) {
        kept.emplace_back(host, std::vector<int>{});
        entry = &kept.back().second;
      }
      entry->insert(entry->end(), slots.begin(), slots.end());
    } else if (entry) {
      for (int s : slots) entry->erase(std::remove(entry->begin(), entry->end(), s), entry->end());
    }
  }
  // The hostfile's order of hosts (ranks are numbered in it), slots sorted once each, empty hosts dropped.
  Resources out;
  for (const auto& [host, unused] : all) {
    std::vector<int>* slots = find(kept, host);
    if (!slots) continue;
    std::sort(slots->begin(), slots->end());
    slots->erase(std::unique(slots->begin(), slots->end()), slots->end());
    if (!slots->empty()) out.emplace_back(host, *slots);
  }
  if (out.empty()) throw Error(flag + " " + rules + " leaves no slot to run on");
  return out;
}

Resources limit_resources(const Resources& r, int num_nodes, int num_gpus) {
  Resources out;
  for (const auto& [host, slots] : r) {
    if (num_nodes >= 0 && (int)out.size() == num_nodes) break;
    std::vector<int> s = slots;
    if (num_gpus >= 0) {
      s.resize((size_t)num_gpus);
      for (int i = 0; i < num_gpus; i++) s[(size_t)i] = i;
    }
    out.emplace_back(host, s);
  }
  return out;
}

std::string world_info(const Resources& r) {
  std::string out;
  for (const auto& [host, slots] : r) {
    if (!out.empty()) out += '@';
    out += host + ":";
    for (size_t i = 0; i < slots.size(); i++) {
      if (i) out += ',';
      out += std::to_string(slots[i]);
    }
  }
  return out;
}

Resources parse_world_info(const std::string& text) {
  Resources out;
  for (const std::string& node : split(text, '@')) {
    const size_t colon = node.find(':');
    if (colon == std::string::npos || colon == 0) throw Error("--world_info " + text + ": expected HOST:SLOTS@...");
    std::vector<int> slots;
    for (const std::string& s : split(node.substr(colon + 1), ',')) slots.push_back(slot_number(s, "--world_info"));
    out.emplace_back(node.substr(0, colon), slots);
  }
  return out;
}

bool is_this_machine(const std::string& host) {
  if (host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0) return true;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return false;
  const std::string full = name;
  return host == full || host == full.substr(0, full.find('.'));
}

}  // namespace lmforge::launch
