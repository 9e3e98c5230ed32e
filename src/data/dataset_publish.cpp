// defines: publish_dataset() and recover_interrupted_publish() of indexed_dataset.h: replacing a .bin/.idx pair so
//          that a kill at any moment leaves the older dataset whole or the new one whole
//
// Two files cannot be renamed in one atomic step, so an older pair is never deleted before the new pair is whole
// (the scheme of checkpoint saves, src/checkpoint: move the old directory aside, rename the new one in, remove the
// old; the next run renames a dead save's ".old-*" back when the final name is missing). Here the states the final
// names pass through are, with o = older and n = new:
//   (o.bin, o.idx) -> (o.bin, -) -> (-, -) -> (n.bin, -) -> (n.bin, n.idx) -> older pair removed
// while the older pair sits under "<final>.old-<host>-<pid>" from the second state to the last. A process killed
// anywhere in between leaves either both final names filled (the new dataset is whole: the older pair is only
// garbage) or at least one missing (the older pair goes back). Readers see a dataset only when both names are
// there, so during the swap they see none, never a new .bin beside an older .idx.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "data/file_util.h"
#include "data/indexed_dataset.h"
#include "data/lease.h"
#include "util/error.h"

namespace lmforge::data {
namespace {

bool present(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

std::string dir_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "<final>.old-<host>-<pid>" of this process.
std::string old_name(const std::string& final_path) {
  return final_path + ".old-" + host_name() + "-" + std::to_string(::getpid());
}

// The pid in "<base>.old-<this host>-<pid>" when that process is gone; -1 for other names, other hosts (whose
// processes this one cannot see) and live processes (a publish in progress).
long dead_publisher(const std::string& name, const std::string& base) {
  const std::string head = base + ".old-" + host_name() + "-";
  if (name.size() <= head.size() || name.compare(0, head.size(), head) != 0) return -1;
  char* end = nullptr;
  const long pid = std::strtol(name.c_str() + head.size(), &end, 10);
  if (pid <= 0 || *end != '\0') return -1;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH ? pid : -1;
}

}  // namespace

bool recover_interrupted_publish(const std::string& prefix) {
  const std::string bin_final = prefix + ".bin", idx_final = prefix + ".idx";
  const std::string bin_base = base_of(bin_final), idx_base = base_of(idx_final);
  // pid -> its leftover older .bin / .idx (either may be missing: the kill fell between the two renames aside, or
  // there was only one of them)
  std::map<long, std::pair<std::string, std::string>> dead;
  DIR* d = ::opendir(dir_of(bin_final).c_str());
  if (d == nullptr) return false;
  for (dirent* e; (e = ::readdir(d)) != nullptr;) {
    const std::string name = e->d_name;
    if (const long pid = dead_publisher(name, bin_base); pid > 0) dead[pid].first = dir_of(bin_final) + "/" + name;
    if (const long pid = dead_publisher(name, idx_base); pid > 0) dead[pid].second = dir_of(idx_final) + "/" + name;
  }
  ::closedir(d);
  bool changed = false;
  for (const auto& [pid, old] : dead) {
    if (present(bin_final) && present(idx_final)) {
      // Both names filled: the dead process's new pair was complete (or a later publish replaced it); its older
      // pair is garbage.
      if (!old.first.empty()) changed |= ::unlink(old.first.c_str()) == 0;
      if (!old.second.empty()) changed |= ::unlink(old.second.c_str()) == 0;
      continue;
    }
    // A name is missing: the swap did not finish. The older pair goes back (over a new .bin left alone), .bin
    // first so that the pair is whole only once both are back.
    std::fprintf(stderr, "lmforge: %s: restoring the dataset that a publish by pid %ld (killed before it finished) "
                 "moved aside\n", prefix.c_str(), pid);
    if (!old.first.empty()) changed |= ::rename(old.first.c_str(), bin_final.c_str()) == 0;
    if (!old.second.empty()) changed |= ::rename(old.second.c_str(), idx_final.c_str()) == 0;
  }
  if (changed) fsync_parent_dir(bin_final);
  return changed;
}

void publish_dataset(const std::string& bin_tmp, const std::string& idx_tmp, const std::string& bin_final,
                     const std::string& idx_final) {
  const auto fail = [&](const std::string& msg) {
    ::unlink(bin_tmp.c_str());
    ::unlink(idx_tmp.c_str());
    throw Error(msg);
  };
  // A dead publisher's leftovers first: its older pair must not be taken for ours, nor stay behind.
  if (bin_final.size() > 4 && bin_final.compare(bin_final.size() - 4, 4, ".bin") == 0 &&
      idx_final == bin_final.substr(0, bin_final.size() - 4) + ".idx")
    recover_interrupted_publish(bin_final.substr(0, bin_final.size() - 4));
  const std::string bin_old = old_name(bin_final), idx_old = old_name(idx_final);
  // The older pair aside, .idx first: from then on no reader pairs anything with it.
  bool had_idx = true, had_bin = true;
  if (::rename(idx_final.c_str(), idx_old.c_str()) != 0) {
    if (errno != ENOENT) fail(os_error(idx_final, "cannot move the older dataset's index aside to " + idx_old));
    had_idx = false;
  }
  if (::rename(bin_final.c_str(), bin_old.c_str()) != 0) {
    if (errno != ENOENT) {
      const std::string msg = os_error(bin_final, "cannot move the older dataset's data aside to " + bin_old);
      if (had_idx) ::rename(idx_old.c_str(), idx_final.c_str());
      fail(msg);
    }
    had_bin = false;
  }
  const auto put_back_older = [&] {
    if (had_bin) ::rename(bin_old.c_str(), bin_final.c_str());
    if (had_idx) ::rename(idx_old.c_str(), idx_final.c_str());
  };
  if (had_idx || had_bin) fsync_parent_dir(idx_final);
  // The new .bin, then its .idx: a reader finds the new dataset only once the .idx (written last) is there.
  if (::rename(bin_tmp.c_str(), bin_final.c_str()) != 0) {
    const std::string msg = os_error(bin_final, "cannot rename " + bin_tmp + " to it");
    put_back_older();
    fail(msg);
  }
  if (::rename(idx_tmp.c_str(), idx_final.c_str()) != 0) {
    const std::string msg = os_error(idx_final, "cannot rename " + idx_tmp + " to it");
    ::unlink(bin_final.c_str());
    put_back_older();
    fail(msg);
  }
  fsync_parent_dir(idx_final);
  // The new pair is whole and durable: the older one can go.
  if (had_bin) ::unlink(bin_old.c_str());
  if (had_idx) ::unlink(idx_old.c_str());
}

}  // namespace lmforge::data
