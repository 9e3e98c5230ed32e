// defines: Resources, parse_hostfile(), read_hostfile(), filter_resources(), limit_resources(), world_info(),
//          parse_world_info(), is_this_machine(): DeepSpeed's launcher rules for which hosts and slots a job uses
//          (deepspeed/launcher/runner.py: fetch_hostfile, parse_resource_filter, the --num_nodes/--num_gpus cuts)
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace lmforge::launch {

// Hosts in hostfile order, each with its slots (a "GPU" of DeepSpeed: one rank each; on lmforge's CPU training a
// slot is one process).
using Resources = std::vector<std::pair<std::string, std::vector<int>>>;

// DeepSpeed's hostfile: one `HOST slots=N` per line, `#` comments and blank lines skipped. A bad line, a host given
// twice or no host at all is an Error naming `path` and the line.
Resources parse_hostfile(const std::string& text, const std::string& path);
Resources read_hostfile(const std::string& path);

// -i/--include and -e/--exclude: `HOST[:SLOT,SLOT...]@HOST...`. include keeps only what it names (a host alone: all
// its slots), exclude removes it (a host alone: the whole host); both at once, a host not in `all` or a slot the host
// does not have is an Error. Hosts stay in `all`'s order, slots sorted, hosts left with no slot dropped.
Resources filter_resources(const Resources& all, const std::string& include, const std::string& exclude);

// --num_nodes N keeps the first N hosts, --num_gpus G gives each host slots 0..G-1 (DeepSpeed); -1: not given.
Resources limit_resources(const Resources& r, int num_nodes, int num_gpus);

// The resources as one string in the include syntax ("a:0,1@b:0,1"), for the per-host launchers.
std::string world_info(const Resources& r);
Resources parse_world_info(const std::string& text);

// `host` names this machine: localhost, a loopback address, or this machine's host name (full or short).
bool is_this_machine(const std::string& host);

}  // namespace lmforge::launch
