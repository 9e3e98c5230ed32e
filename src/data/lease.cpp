// defines: ServerClock, read_lease(), Lease, commit_no_clobber(), on_fuse()
#include "data/lease.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

#include "data/file_util.h"
#include "util/error.h"

namespace lmforge::data {
namespace {

constexpr long kFuseSuperMagic = 0x65735546;

double mtime_of(const struct stat& st) { return double(st.st_mtim.tv_sec) + double(st.st_mtim.tv_nsec) * 1e-9; }

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Writes `text` to `tmp` and links it to `path`: true when `path` was created, false when it already existed.
// The link makes the create exclusive and the content complete the moment the name appears.
bool create_exclusive(const std::string& path, const std::string& tmp, const std::string& text) {
  {
    UniqueFd fd = open_write_truncate(tmp);
    write_all(fd.get(), text.data(), text.size(), tmp);
  }
  const int rc = ::link(tmp.c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp.c_str());
  if (rc == 0) return true;
  if (err == EEXIST) return false;
  errno = err;
  throw Error(os_error(path, "cannot create it (link from " + tmp + ")"));
}

LeaseOwner parse_owner(const std::string& text) {
  LeaseOwner o;
  std::istringstream in(text);
  in >> o.host >> o.pid >> o.token >> o.process_space;
  return o;
}

}  // namespace

std::string LeaseOwner::text() const {
  return host + " " + std::to_string(pid) + " " + token + (process_space.empty() ? "" : " " + process_space);
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string this_process_space() {
  // The boot id is random per boot of a kernel (so per machine); the PID namespace tells containers and
  // `unshare --pid` children on that kernel apart. Together they say where a pid means this process table.
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(boot >> id)) return "";
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) != 0) return "";
  return id + ":" + std::to_string(static_cast<unsigned long long>(st.st_ino));
}

bool owner_is_dead(const LeaseOwner& owner) {
  if (owner.process_space.empty() || owner.pid <= 0 || owner.process_space != this_process_space()) return false;
  if (::kill(static_cast<pid_t>(owner.pid), 0) != 0) return errno == ESRCH;
  // A zombie (exited, not yet reaped — e.g. a killed MPI rank whose launcher ended before reaping it, in a container
  // whose init reaps late) still answers kill(0) but will never renew its lease.
  std::ifstream stat("/proc/" + std::to_string(owner.pid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');  // the command name may hold spaces and parentheses
  return close != std::string::npos && close + 2 < text.size() && (text[close + 2] == 'Z' || text[close + 2] == 'X');
}

LeaseOwner this_process_owner() {
  std::random_device rd;
  char token[17];
  std::snprintf(token, sizeof token, "%08x%08x", rd(), rd());
  return LeaseOwner{host_name(), static_cast<long>(::getpid()), token, this_process_space()};
}

std::string lease_file(const std::string& base, uint32_t generation) { return base + "." + std::to_string(generation); }

ServerClock::ServerClock(std::string probe_path) : probe_(std::move(probe_path)) {
  UniqueFd fd = open_write_truncate(probe_);
}

ServerClock::~ServerClock() { ::unlink(probe_.c_str()); }

double ServerClock::now() {
  // A NULL time tells the file system to stamp its own current time (on NFS the server's).
  if (::utimensat(AT_FDCWD, probe_.c_str(), nullptr, 0) != 0) {
    // Removed by another process while this one was stopped long enough to look dead: make it again.
    if (errno != ENOENT) throw Error(os_error(probe_, "cannot touch the clock probe"));
    UniqueFd fd = open_write_truncate(probe_);
  }
  struct stat st {};
  if (::stat(probe_.c_str(), &st) != 0) throw Error(os_error(probe_, "cannot stat the clock probe"));
  return mtime_of(st);
}

std::optional<LeaseState> read_lease(const std::string& base, ServerClock& clock) {
  return read_lease(base, [&clock] { return clock.now(); });
}

std::optional<LeaseState> read_lease(const std::string& base, const std::function<double()>& now) {
  // Generations are few (one per takeover): find the newest by probing upwards.
  uint32_t g = 0;
  if (!exists(lease_file(base, 0))) return std::nullopt;
  while (exists(lease_file(base, g + 1))) ++g;
  for (;;) {
    const std::string path = lease_file(base, g);
    // open() before fstat(): NFS revalidates attributes on open (close-to-open consistency), so the mtime is
    // the server's, not one cached by this client for up to a minute.
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == ENOENT) return std::nullopt;  // removed while reading (the whole directory was cleaned)
      throw Error(os_error(path, "cannot open lease file"));
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw Error(os_error(path, "cannot stat lease file"));
    char buf[512];
    const size_t n = read_some(fd.get(), buf, sizeof buf - 1, path);
    if (exists(lease_file(base, g + 1))) {  // taken over meanwhile: read the newer one
      ++g;
      continue;
    }
    LeaseState s;
    s.generation = g;
    s.owner = parse_owner(std::string(buf, n));
    s.age_seconds = now() - mtime_of(st);
    return s;
  }
}

Lease::Lease(std::string base, uint32_t generation, std::optional<LeaseState> took_over)
    : base_(std::move(base)), path_(lease_file(base_, generation)), generation_(generation),
      took_over_(std::move(took_over)) {}

std::optional<Lease> Lease::try_acquire(const std::string& base, double lease_seconds, ServerClock& clock,
                                        const LeaseOwner& owner, std::optional<LeaseState>* seen) {
  const std::optional<LeaseState> now = read_lease(base, clock);
  if (seen) *seen = now;
  if (now && now->age_seconds <= lease_seconds) return std::nullopt;
  const uint32_t g = now ? now->generation + 1 : 0;
  const std::string path = lease_file(base, g);
  if (!create_exclusive(path, path + ".new-" + owner.token, owner.text() + "\n")) {
    if (seen) *seen = read_lease(base, clock);  // the winner of the race
    return std::nullopt;
  }
  return Lease(base, g, now);
}

bool Lease::held() const { return exists(path_) && !exists(lease_file(base_, generation_ + 1)); }

bool Lease::heartbeat() {
  if (::utimensat(AT_FDCWD, path_.c_str(), nullptr, 0) != 0) {
    if (errno == ENOENT) return false;
    throw Error(os_error(path_, "cannot touch lease file (heartbeat)"));
  }
  return !exists(lease_file(base_, generation_ + 1));
}

CommitResult commit_no_clobber(const std::string& from, const std::string& to) {
  if (::link(from.c_str(), to.c_str()) != 0) {
    if (errno == EEXIST) return CommitResult::AlreadyThere;
    throw Error(os_error(to, "cannot publish " + from + " under this name (link)"));
  }
  ::unlink(from.c_str());
  fsync_parent_dir(to);
  return CommitResult::Committed;
}

bool on_fuse(const std::string& path) {
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0) throw Error(os_error(path, "cannot statfs"));
  return static_cast<long>(fs.f_type) == kFuseSuperMagic;
}

std::string join_claim_plan(const std::string& dir, const std::string& plan, const std::string& outputs) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(dir + ": cannot create (" + ec.message() + ")");
  if (on_fuse(dir))
    throw Error(dir + ": on a FUSE file system (gcsfuse, s3fs, ...), which gives no atomic exclusive create; claim "
                "mode needs a POSIX shared file system (NFS, Lustre, GPFS, CephFS, local disk)");
  const std::string plan_path = dir + "/plan.txt";
  const LeaseOwner owner = this_process_owner();
  const std::string tag = owner.host + "-" + std::to_string(owner.pid) + "-" + owner.token;
  const std::string tmp = plan_path + ".tmp-" + tag;
  std::ofstream(tmp) << plan;
  if (::link(tmp.c_str(), plan_path.c_str()) != 0 && errno != EEXIST)
    throw Error(plan_path + ": cannot create (" + std::string(std::strerror(errno)) + ")");
  ::unlink(tmp.c_str());
  std::ifstream in(plan_path);
  std::stringstream theirs;
  theirs << in.rdbuf();
  if (theirs.str() != plan)
    throw Error(plan_path + ": the claimers already running were started with other inputs or flags; this process "
                "would write different " + outputs + ", so it does not join (plan there:\n" + theirs.str() + ")");
  return tag;
}

}  // namespace lmforge::data
