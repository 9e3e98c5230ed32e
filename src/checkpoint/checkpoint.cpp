// defines: Megatron-style checkpoint directories (atomic save, validating load) and weights-only import of HF files
#include "checkpoint/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <simdjson.h>

#include "util/json_text.h"
#include "checkpoint/safetensors.h"
#include "util/error.h"
#include "util/strings.h"

namespace lmforge::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPointerFile = "latest_checkpointed_iteration.txt";
constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kConfigFile = "config.json";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kStateFile = "trainer_state.json";
constexpr const char* kFormat = "lmforge-checkpoint-1";

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open to fsync: " + errno_text());
  const int rc = ::fsync(fd);
  const std::string why = errno_text();
  ::close(fd);
  if (rc != 0) throw Error(path + ": fsync failed: " + why);
}

void write_text_synced(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(path + ": cannot create: " + errno_text());
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      const std::string why = errno_text();
      ::close(fd);
      throw Error(path + ": write failed: " + why);
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    throw Error(path + ": fsync failed: " + why);
  }
  if (::close(fd) != 0) throw Error(path + ": close failed: " + errno_text());
}

std::string read_text(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw Error(path + ": cannot open: " + errno_text());
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  const bool bad = std::ferror(f);
  std::fclose(f);
  if (bad) throw Error(path + ": read failed");
  return text;
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw Error("cannot rename " + from + " to " + to + ": " + errno_text());
}

std::string strip_prefix(const std::string& name) {
  static const std::string kPrefix = "transformer.";
  return name.rfind(kPrefix, 0) == 0 ? name.substr(kPrefix.size()) : name;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

JsonValue to_value(simdjson::dom::element e) {
  switch (e.type()) {
    case simdjson::dom::element_type::BOOL: return bool(e.get_bool());
    case simdjson::dom::element_type::INT64: return int64_t(e.get_int64());
    case simdjson::dom::element_type::UINT64: return static_cast<double>(uint64_t(e.get_uint64()));
    case simdjson::dom::element_type::DOUBLE: return double(e.get_double());
    case simdjson::dom::element_type::STRING: return std::string(std::string_view(e.get_string()));
    default: return RawJson{simdjson::minify(e)};
  }
}

std::string value_json(const JsonValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>) return json_quote(x);
        else if constexpr (std::is_same_v<T, RawJson>) return x.text;
        else return json_number(x);
      },
      v);
}

// Typed access to trainer_state.json fields with errors naming the file and field.
struct StateReader {
  const std::string& path;
  simdjson::dom::object obj;

  simdjson::dom::element field(std::string_view key) const {
    simdjson::dom::element e;
    if (obj[key].get(e)) throw Error(path + ": missing field '" + std::string(key) + "'");
    return e;
  }
  int64_t integer(std::string_view key) const {
    int64_t v;
    if (field(key).get_int64().get(v)) throw Error(path + ": field '" + std::string(key) + "' is not an integer");
    return v;
  }
  double number(std::string_view key) const {
    double v;
    if (field(key).get_double().get(v)) throw Error(path + ": field '" + std::string(key) + "' is not a number");
    return v;
  }
  std::string string(std::string_view key) const {
    std::string_view v;
    if (field(key).get_string().get(v)) throw Error(path + ": field '" + std::string(key) + "' is not a string");
    return std::string(v);
  }
  StateReader object(std::string_view key) const {
    simdjson::dom::object o;
    if (field(key).get_object().get(o)) throw Error(path + ": field '" + std::string(key) + "' is not an object");
    return StateReader{path, o};
  }
};

std::string trainer_state_json(const TrainerState& s) {
  const optim::SchedulerState& c = s.scheduler;
  std::string out = "{\n";
  out += "  \"format\": " + json_quote(kFormat) + ",\n";
  out += "  \"iteration\": " + json_number(s.iteration) + ",\n";
  out += "  \"consumed_train_samples\": " + json_number(s.consumed_train_samples) + ",\n";
  out += "  \"consumed_valid_samples\": " + json_number(s.consumed_valid_samples) + ",\n";
  out += "  \"scheduler\": {\"max_lr\": " + json_number(c.max_lr) + ", \"min_lr\": " + json_number(c.min_lr) +
         ", \"lr_warmup_steps\": " + json_number(c.lr_warmup_steps) +
         ", \"lr_decay_steps\": " + json_number(c.lr_decay_steps) +
         ", \"lr_decay_style\": " + json_quote(c.lr_decay_style) + ", \"num_steps\": " + json_number(c.num_steps) +
         ", \"start_wd\": " + json_number(c.start_wd) + ", \"end_wd\": " + json_number(c.end_wd) +
         ", \"wd_incr_steps\": " + json_number(c.wd_incr_steps) +
         ", \"wd_incr_style\": " + json_quote(c.wd_incr_style) + "},\n";
  out += "  \"rng\": {";
  bool first = true;
  for (const auto& [k, v] : s.rng) {
    out += (first ? "\n    " : ",\n    ") + json_quote(k) + ": " + json_quote(v);
    first = false;
  }
  out += first ? "},\n" : "\n  },\n";
  out += "  \"args\": {";
  first = true;
  for (const auto& [k, v] : s.args) {
    out += (first ? "\n    " : ",\n    ") + json_quote(k) + ": " + value_json(v);
    first = false;
  }
  out += first ? "}\n" : "\n  }\n";
  out += "}\n";
  return out;
}

TrainerState parse_trainer_state(const std::string& path) {
  const simdjson::padded_string text(read_text(path));
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(text).get(root))
    throw Error(path + ": not valid JSON: " + simdjson::error_message(err));
  simdjson::dom::object obj;
  if (root.get_object().get(obj)) throw Error(path + ": not a JSON object");
  const StateReader r{path, obj};
  if (r.string("format") != kFormat)
    throw Error(path + ": unknown checkpoint format '" + r.string("format") + "' (expected " + kFormat + ")");
  TrainerState s;
  s.iteration = r.integer("iteration");
  s.consumed_train_samples = r.integer("consumed_train_samples");
  s.consumed_valid_samples = r.integer("consumed_valid_samples");
  const StateReader c = r.object("scheduler");
  s.scheduler.max_lr = c.number("max_lr");
  s.scheduler.min_lr = c.number("min_lr");
  s.scheduler.lr_warmup_steps = c.number("lr_warmup_steps");
  s.scheduler.lr_decay_steps = c.integer("lr_decay_steps");
  s.scheduler.lr_decay_style = c.string("lr_decay_style");
  s.scheduler.num_steps = c.integer("num_steps");
  s.scheduler.start_wd = c.number("start_wd");
  s.scheduler.end_wd = c.number("end_wd");
  s.scheduler.wd_incr_steps = c.integer("wd_incr_steps");
  s.scheduler.wd_incr_style = c.string("wd_incr_style");
  for (auto f : r.object("rng").obj) {
    std::string_view v;
    if (f.value.get_string().get(v))
      throw Error(path + ": rng state '" + std::string(f.key) + "' is not a string");
    s.rng[std::string(f.key)] = std::string(v);
  }
  for (auto f : r.object("args").obj) s.args[std::string(f.key)] = to_value(f.value);
  return s;
}

// The shape optimizer state is saved under: the parameter's own shape when the table has it, else flat.
std::vector<int64_t> state_shape(const optim::ParamSpan& p, std::span<const NamedTensor> model) {
  for (const NamedTensor& t : model)
    if (t.name == p.name && t.numel() == p.size) return t.shape;
  return {static_cast<int64_t>(p.size)};
}

// "<host>-<pid>": names this process's temporaries so that cleaning up after dead saves never touches a live
// process's (the same pid may live on another host sharing the directory).
std::string run_suffix() {
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + "-" + std::to_string(::getpid());
}

// The pid of a temporary "<name>.<kind>-<host>-<pid>" of this host whose process is gone, else -1.
long dead_local_pid(const std::string& name, const std::string& kind) {
  const std::string suffix = run_suffix();
  const std::string host_prefix = "." + kind + "-" + suffix.substr(0, suffix.rfind('-') + 1);
  const size_t at = name.rfind(host_prefix);
  if (at == std::string::npos) return -1;
  const std::string digits = name.substr(at + host_prefix.size());
  long pid = -1;
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (r.ec != std::errc() || r.ptr != digits.data() + digits.size() || pid <= 0) return -1;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH ? pid : -1;
}

// What a save killed at any moment leaves, put right (the final names then hold the old whole, the new whole, or
// nothing): "iter_N.old-*" of a dead process is renamed back when iter_N is missing (the kill fell between moving
// the old directory aside and renaming the new one in) and removed otherwise; "iter_N.tmp-*" and pointer
// temporaries of dead processes are removed, so a disk filled by failed saves does not stay full. Failures are
// ignored: another rank may be doing the same.
void recover_dead_saves(const std::string& save_dir) {
  std::error_code ec;
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(save_dir, ec)) entries.push_back(e.path());
  for (const fs::path& p : entries) {
    const std::string name = p.filename().string();
    if (dead_local_pid(name, "old") > 0) {
      const fs::path final_dir = p.parent_path() / name.substr(0, name.rfind(".old-"));
      if (!fs::exists(final_dir, ec)) fs::rename(p, final_dir, ec);
      else fs::remove_all(p, ec);
    }
  }
  for (const fs::path& p : entries)
    if (dead_local_pid(p.filename().string(), "tmp") > 0) fs::remove_all(p, ec);
}

void require_whole(const optim::Optimizer& opt, const std::string& what) {
  if (!opt.holds_all())
    throw Error(what + ": the optimizer holds only a shard of the state; gather the whole state first");
}

// A safetensors file of fp32 tensors written one tensor at a time (see NamedTensor): a tensor with a producer is
// assembled into one reused buffer. A rank that is not the writer only calls the producers (with nullptr), in the
// same order, so the collectives inside them match the writer's.
void write_tensor_file(const std::string& path, std::span<const NamedTensor> tensors,
                       const std::map<std::string, std::string>& metadata, bool writer) {
  std::optional<SafetensorsWriter> out;
  if (writer) {
    std::vector<TensorRef> refs;
    for (const NamedTensor& t : tensors) refs.push_back({t.name, DType::kF32, t.shape, nullptr});
    out.emplace(path, std::move(refs), metadata);
  }
  std::vector<float> buffer;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor& t = tensors[i];
    if (t.produce) {
      if (!writer) {
        t.produce(nullptr);
        continue;
      }
      buffer.resize(t.numel());
      t.produce(buffer.data());
      out->write(i, buffer.data());
    } else if (writer) {
      out->write(i, t.data);
    }
  }
  if (out) out->close(/*sync=*/true);
}

// Reads tensor `info` of `file` into `t` (its buffer, or its consumer through `buffer`, after which the file's
// pages are dropped again). The file may hold fewer rows than t (a padded vocabulary): the rest are zeros.
void read_tensor(const SafetensorsFile& file, const TensorInfo& info, const NamedTensor& t, std::vector<float>& buffer) {
  const size_t n = static_cast<size_t>(info.numel());
  float* dst = t.data;
  if (t.consume) {
    buffer.resize(t.numel());
    dst = buffer.data();
  }
  file.read_f32(info, info.shape, dst);
  // A NaN or infinity in a checkpoint would only resurface iterations later as a diverged loss; it is named here.
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(dst[i]))
      throw Error(file.path() + ": tensor '" + info.name + "' holds a non-finite value (" + std::to_string(dst[i]) +
                  " at element " + std::to_string(i) + "); the checkpoint is corrupt or training diverged before it "
                  "was saved");
  std::fill(dst + n, dst + t.numel(), 0.0f);
  if (t.consume) {
    t.consume(dst);
    file.release(info);
  }
}

}  // namespace

size_t NamedTensor::numel() const {
  size_t n = 1;
  for (const int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

OptimizerCheckpoint optimizer_checkpoint(optim::Optimizer& opt, std::span<const NamedTensor> model) {
  require_whole(opt, "optimizer checkpoint");
  OptimizerCheckpoint out;
  out.kind = std::string(opt.name());
  out.step = opt.steps();
  out.hyperparameters = opt.hyperparameters();
  // <state>.<tensor> for every named state of every tensor (for AdamW: exp_avg.<name>, exp_avg_sq.<name>, the
  // names and bytes of the files written before state was generic).
  for (size_t i = 0; i < opt.params().size(); ++i) {
    const optim::ParamSpan& p = opt.params()[i];
    const auto shape = state_shape(p, model);
    for (size_t k = 0; k < opt.state_names().size(); ++k) {
      // The state is device memory: the file sees it through the Backend's copies, one tensor at a time.
      NamedTensor t{opt.state_names()[k] + "." + p.name, shape, nullptr};
      kernels::Backend* backend = &opt.backend();
      const kernels::Tensor state = opt.state_of(k, i);
      const size_t bytes = (size_t)state.numel() * sizeof(float);
      t.produce = [backend, state, bytes](float* whole) {
        if (whole != nullptr && bytes > 0) backend->copy_to_host(whole, state.data, bytes);
      };
      t.consume = [backend, state, bytes](const float* whole) {
        if (bytes > 0) backend->copy_to_device(state.data, whole, bytes);
      };
      out.tensors.push_back(std::move(t));
    }
  }
  return out;
}

JsonObject parse_json_object(const std::string& text, const std::string& source) {
  const simdjson::padded_string padded(text);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(padded).get(root))
    throw Error(source + ": not valid JSON: " + simdjson::error_message(err));
  simdjson::dom::object obj;
  if (root.get_object().get(obj)) throw Error(source + ": not a JSON object");
  JsonObject out;
  for (auto f : obj) out[std::string(f.key)] = to_value(f.value);
  return out;
}

std::string to_json(const JsonObject& object) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : object) {
    out += (first ? "\n  " : ",\n  ") + json_quote(k) + ": " + value_json(v);
    first = false;
  }
  return out + (first ? "}\n" : "\n}\n");
}

std::vector<std::string> keep_newest_iterations(const std::string& save_dir, int keep) {
  namespace fs = std::filesystem;
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(save_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() < 12 || name.rfind("iter_", 0) != 0 || !e.is_directory()) continue;
    int64_t n = 0;
    const auto [end, err] = std::from_chars(name.data() + 5, name.data() + name.size(), n);
    if (err == std::errc() && end == name.data() + name.size()) found.emplace_back(n, e.path().string());
  }
  if (ec) throw Error(save_dir + ": cannot list the checkpoints (" + ec.message() + ")");
  std::sort(found.begin(), found.end());
  std::vector<std::string> removed;
  for (size_t i = 0; i + (size_t)std::max(keep, 0) < found.size(); i++) {
    fs::remove_all(found[i].second, ec);
    if (ec) throw Error(found[i].second + ": cannot remove an old checkpoint (" + ec.message() + ")");
    removed.push_back(found[i].second);
  }
  return removed;
}

std::string iteration_dir_name(int64_t iteration) {
  if (iteration < 0) throw Error("checkpoint iteration must be >= 0, got " + std::to_string(iteration));
  char buf[32];
  std::snprintf(buf, sizeof buf, "iter_%07lld", static_cast<long long>(iteration));
  return buf;
}

std::string check_save_dir(const std::string& save_dir, uint64_t bytes_per_checkpoint) {
  std::error_code ec;
  fs::create_directories(save_dir, ec);
  if (ec || !fs::is_directory(save_dir))
    throw Error(save_dir + ": --save is not a usable directory (" + (ec ? ec.message() : "not a directory") + ")");
  const std::string probe = (fs::path(save_dir) / (".write-probe-" + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(save_dir + ": --save is not writable (" + errno_text() + ")");
  ::close(fd);
  ::unlink(probe.c_str());
  const fs::space_info space = fs::space(save_dir, ec);
  if (!ec && space.available < bytes_per_checkpoint) {
    char text[256];
    std::snprintf(text, sizeof text, "%s has %.1f GB free, less than one checkpoint (%.1f GB)", save_dir.c_str(),
                  (double)space.available / 1e9, (double)bytes_per_checkpoint / 1e9);
    return text;
  }
  return "";
}

std::unique_ptr<data::WriterLock> lock_save_dir(const std::string& save_dir) {
  std::error_code ec;
  fs::create_directories(save_dir, ec);
  if (ec) throw Error(save_dir + ": cannot create the save directory: " + ec.message());
  std::string dir = save_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return std::make_unique<data::WriterLock>(data::output_prefix_lock_base(dir),
                                            "checkpoint directory (--save) " + save_dir);
}

std::string save_checkpoint(const std::string& save_dir, const SaveRequest& req) {
  const std::string name = iteration_dir_name(req.state.iteration);
  const std::string final_dir = (fs::path(save_dir) / name).string();
  const std::string tmp_dir = final_dir + ".tmp-" + run_suffix();
  // The optimizer's tensors: given as callbacks, or read from a whole optimizer (a save only reads its state).
  std::optional<OptimizerCheckpoint> own;
  const OptimizerCheckpoint* opt = req.optimizer_state;
  if (opt == nullptr && req.optimizer != nullptr) {
    require_whole(*req.optimizer, final_dir);
    opt = &own.emplace(optimizer_checkpoint(const_cast<optim::Optimizer&>(*req.optimizer), req.model));
  }
  std::map<std::string, std::string> opt_meta;
  if (opt != nullptr) {
    opt_meta = opt->hyperparameters;
    opt_meta["optimizer"] = opt->kind;
    opt_meta["step"] = std::to_string(opt->step);
  }
  if (!req.writer) {  // take part in producing the tensors, in the writer's order
    write_tensor_file("", req.model, {}, false);
    if (opt != nullptr) write_tensor_file("", opt->tensors, {}, false);
    return final_dir;
  }
  parse_json_object(req.config_json, "config.json given for " + final_dir);  // a caller bug, caught before writing
  recover_dead_saves(save_dir);
  std::error_code ec;
  fs::create_directories(save_dir, ec);
  if (ec) throw Error(save_dir + ": cannot create the save directory: " + ec.message());
  fs::remove_all(tmp_dir, ec);
  if (!fs::create_directory(tmp_dir, ec) || ec)
    throw Error(tmp_dir + ": cannot create: " + (ec ? ec.message() : "exists"));
  const std::string pointer = (fs::path(save_dir) / kPointerFile).string();
  const std::string pointer_tmp = pointer + ".tmp-" + run_suffix();
  // A save that fails (a full disk, an I/O error, a lost lock) removes its own temporaries before the error is
  // reported: a disk filled by the attempt is not left full until the next run.
  const auto remove_own_temporaries = [&] {
    std::error_code ignored;
    fs::remove_all(tmp_dir, ignored);
    fs::remove(pointer_tmp, ignored);
  };
  try {
    write_tensor_file(tmp_dir + "/" + kModelFile, req.model, {{"format", "pt"}}, true);
    write_text_synced(tmp_dir + "/" + kConfigFile, req.config_json);
    if (opt != nullptr) write_tensor_file(tmp_dir + "/" + kOptimizerFile, opt->tensors, opt_meta, true);
    write_text_synced(tmp_dir + "/" + kStateFile, trainer_state_json(req.state));
    fsync_path(tmp_dir, true);
    if (req.lock) req.lock->check_held();  // lost: the directory is someone else's now, leave it as they have it
  } catch (...) {
    remove_own_temporaries();
    throw;
  }

  // Move an older save of the same iteration aside rather than deleting it first: rename cannot replace a
  // non-empty directory, and the old one must survive until the new one is in place.
  const std::string old_dir = final_dir + ".old-" + run_suffix();
  const bool replacing = fs::exists(final_dir);
  try {
    if (replacing) {
      fs::remove_all(old_dir, ec);
      rename_or_throw(final_dir, old_dir);
    }
    try {
      rename_or_throw(tmp_dir, final_dir);
    } catch (...) {
      if (replacing) std::rename(old_dir.c_str(), final_dir.c_str());  // the old save back under its name
      throw;
    }
  } catch (...) {
    remove_own_temporaries();
    throw;
  }
  fsync_path(save_dir, true);
  if (replacing) fs::remove_all(old_dir, ec);

  try {
    write_text_synced(pointer_tmp, std::to_string(req.state.iteration));
    rename_or_throw(pointer_tmp, pointer);
  } catch (...) {
    remove_own_temporaries();
    throw;
  }
  fsync_path(save_dir, true);
  return final_dir;
}

std::optional<std::string> find_latest_checkpoint(const std::string& load_dir) {
  const fs::path pointer = fs::path(load_dir) / kPointerFile;
  if (!fs::exists(pointer)) return std::nullopt;
  recover_dead_saves(load_dir);
  std::string text = read_text(pointer.string());
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.erase(0, 1);
  std::string dir;
  if (text == "release") {
    dir = "release";
  } else {
    int64_t iteration = -1;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), iteration);
    if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size() || iteration < 0)
      throw Error(pointer.string() + ": expected an iteration number or 'release', found '" + text + "'");
    dir = iteration_dir_name(iteration);
  }
  const fs::path full = fs::path(load_dir) / dir;
  if (!fs::is_directory(full))
    throw Error(pointer.string() + " names " + dir + ", but " + full.string() + " does not exist");
  return full.string();
}

namespace {

// "iter_0000100" (Megatron's iter_{:07d}, also wider) or "release": the iteration directories of a save directory.
bool is_iteration_dir_name(const std::string& name) {
  if (name == "release") return true;
  if (name.size() < 12 || name.rfind("iter_", 0) != 0) return false;
  return std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

ResumeTarget find_resume_checkpoint(const std::string& load) {
  std::error_code ec;
  const fs::file_status status = fs::status(load, ec);
  if (!fs::exists(status)) return {std::nullopt, "no checkpoint found: " + load + " does not exist: starting from scratch"};
  const std::string finetune = "; to start a new run from its weights give --finetune (iteration, optimizer and "
                               "schedule start afresh)";
  if (fs::is_regular_file(status)) {
    const fs::path file(load);
    const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
    if (file.filename() == kModelFile && fs::exists(dir / kStateFile))
      return {dir.string(), "--load " + load + ": resuming from the checkpoint directory holding it, " + dir.string()};
    if (ends_with(load, ".safetensors"))
      throw Error(load + ": a weights file without trainer state (no " + std::string(kStateFile) +
                  " beside it), so there is nothing to resume" + finetune);
    if (ends_with(load, ".pt"))
      throw Error(load + ": a PyTorch checkpoint (fairseq's or Megatron's .pt); lmforge resumes its own checkpoints "
                  "(a --save directory or one of its iter_NNNNNNN directories) and takes safetensors weights with "
                  "--finetune");
    throw Error(load + ": not a checkpoint: --load takes a --save directory or one of its iter_NNNNNNN "
                "directories");
  }
  if (!fs::is_directory(status)) throw Error(load + ": not a checkpoint directory");
  if (fs::exists(fs::path(load) / kPointerFile)) return {find_latest_checkpoint(load), ""};
  if (fs::exists(fs::path(load) / kStateFile))
    return {load, "--load " + load + ": an iteration directory, resumed as given"};
  if (fs::exists(fs::path(load) / kModelFile))
    throw Error(load + ": a model directory (" + std::string(kModelFile) + " without " + kStateFile +
                "), so there is nothing to resume" + finetune);
  std::vector<std::string> iterations, others;
  for (const fs::directory_entry& e : fs::directory_iterator(load, ec)) {
    const std::string name = e.path().filename().string();
    if (is_iteration_dir_name(name) && e.is_directory()) iterations.push_back(name);
    else if (ends_with(name, ".pt") || ends_with(name, ".safetensors")) others.push_back(name);
  }
  if (ec) throw Error(load + ": cannot list the directory (" + ec.message() + ")");
  if (!iterations.empty()) {
    std::sort(iterations.begin(), iterations.end());
    throw Error(load + ": holds checkpoints (" + iterations.back() + (iterations.size() > 1 ? " and others" : "") +
                ") but no " + kPointerFile + " naming the one to resume; give the iteration directory itself (--load " +
                (fs::path(load) / iterations.back()).string() + ") or restore the pointer file");
  }
  if (!others.empty())
    throw Error(load + ": holds " + others.front() + " but no lmforge checkpoint (" + kPointerFile + " or " +
                kStateFile + "); a .safetensors file is loaded with --finetune, a PyTorch .pt file is not read");
  return {std::nullopt, "no checkpoint found in " + load + " (no " + kPointerFile + "): starting from scratch"};
}

LoadedCheckpoint load_checkpoint(const std::string& dir, std::span<const NamedTensor> model,
                                 optim::Optimizer* optimizer) {
  if (optimizer == nullptr) return load_checkpoint_tensors(dir, model, nullptr);
  require_whole(*optimizer, (fs::path(dir) / kOptimizerFile).string());
  OptimizerCheckpoint state = optimizer_checkpoint(*optimizer, model);
  LoadedCheckpoint out = load_checkpoint_tensors(dir, model, &state);
  optimizer->set_steps(state.step);
  return out;
}

LoadedCheckpoint load_checkpoint_tensors(const std::string& dir, std::span<const NamedTensor> model,
                                         OptimizerCheckpoint* optimizer) {
  if (!fs::is_directory(dir)) throw Error(dir + ": no such checkpoint directory");
  const auto require = [&](const char* file) {
    const std::string p = (fs::path(dir) / file).string();
    if (!fs::exists(p)) throw Error(dir + ": incomplete checkpoint: " + file + " is missing");
    return p;
  };
  LoadedCheckpoint out;
  out.dir = dir;
  // Validate everything first; the caller's buffers change only once all files check out.
  const SafetensorsFile weights(require(kModelFile));
  // Every file tensor is one of `tensors` (F32, the expected shape) and every one of `tensors` is in the file.
  const auto check_exactly = [](const SafetensorsFile& file, std::span<const NamedTensor> tensors,
                                const char* owner, const char* stranger) {
    std::set<std::string> expected;
    for (const NamedTensor& t : tensors) {
      const TensorInfo& info = file.at(t.name);
      if (info.shape != t.shape)
        throw Error(file.path() + ": tensor '" + t.name + "' has shape " + shape_string(info.shape) + ", the " +
                    owner + " expects " + shape_string(t.shape));
      if (info.dtype != DType::kF32)
        throw Error(file.path() + ": tensor '" + t.name + "' is " + std::string(dtype_name(info.dtype)) +
                    ", expected F32");
      expected.insert(t.name);
    }
    for (const TensorInfo& info : file.tensors())
      if (!expected.count(info.name)) throw Error(file.path() + ": tensor '" + info.name + "' " + stranger);
  };
  check_exactly(weights, model, "model", "is not a parameter of this model");

  std::optional<SafetensorsFile> opt_file;
  const std::string opt_path = (fs::path(dir) / kOptimizerFile).string();
  out.has_optimizer = fs::exists(opt_path);
  if (optimizer != nullptr) {
    if (!out.has_optimizer)
      throw Error(dir + ": no " + std::string(kOptimizerFile) +
                  " (saved without optimizer state); load with --no-load-optim or --finetune");
    opt_file.emplace(opt_path);
    const auto& meta = opt_file->metadata();
    const auto kind = meta.find("optimizer");
    if (kind == meta.end() || kind->second != optimizer->kind)
      throw Error(opt_path + ": holds " + (kind == meta.end() ? std::string("unlabelled") : "'" + kind->second + "'") +
                  " optimizer state, but this run uses '" + optimizer->kind +
                  "'; resume with the optimizer the checkpoint was trained with (--optimizer), or start a new "
                  "optimizer from its weights with --finetune");
    const auto step = meta.find("step");
    const std::string step_text = step == meta.end() ? "" : step->second;
    int64_t opt_step = 0;
    const auto r = std::from_chars(step_text.data(), step_text.data() + step_text.size(), opt_step);
    if (step_text.empty() || r.ec != std::errc() || r.ptr != step_text.data() + step_text.size() || opt_step < 0)
      throw Error(opt_path + ": metadata 'step' is not a step count: '" + step_text + "'");
    check_exactly(*opt_file, optimizer->tensors, "optimizer", "belongs to no parameter of this optimizer");
    optimizer->step = opt_step;
  }
  out.state = parse_trainer_state(require(kStateFile));
  const std::string leaf = fs::path(dir).filename().string();
  if (leaf.rfind("iter_", 0) == 0 && leaf != iteration_dir_name(out.state.iteration))
    throw Error((fs::path(dir) / kStateFile).string() + ": iteration " + std::to_string(out.state.iteration) +
                " does not match the directory name " + leaf);
  out.config_json = read_text(require(kConfigFile));
  parse_json_object(out.config_json, (fs::path(dir) / kConfigFile).string());

  std::vector<float> buffer;
  for (const NamedTensor& t : model) read_tensor(weights, weights.at(t.name), t, buffer);
  if (optimizer != nullptr)
    for (const NamedTensor& t : optimizer->tensors) read_tensor(*opt_file, opt_file->at(t.name), t, buffer);
  return out;
}

std::string load_weights(const std::string& path, std::span<const NamedTensor> model, const WeightsOptions& options) {
  std::string file = path;
  if (fs::is_directory(path)) {
    if (fs::exists(fs::path(path) / kModelFile)) {
      file = (fs::path(path) / kModelFile).string();
    } else if (const auto latest = find_latest_checkpoint(path)) {
      file = (fs::path(*latest) / kModelFile).string();
    } else if (fs::exists(fs::path(path) / "model.safetensors.index.json")) {
      throw Error(path + ": sharded safetensors (model.safetensors.index.json) are not supported");
    } else {
      throw Error(path + ": neither a model.safetensors nor a " + kPointerFile + " in this directory");
    }
  }
  const SafetensorsFile weights(file);
  std::map<std::string, size_t> by_name;  // table names without the "transformer." prefix
  for (size_t i = 0; i < model.size(); ++i)
    if (!by_name.emplace(strip_prefix(model[i].name), i).second)
      throw Error("parameter table names '" + model[i].name + "' twice (with and without 'transformer.')");
  std::set<std::string> padded;
  for (const std::string& n : options.row_padded) padded.insert(strip_prefix(n));

  std::vector<const TensorInfo*> source(model.size(), nullptr);
  for (const TensorInfo& info : weights.tensors()) {
    const std::string key = strip_prefix(info.name);
    const auto it = by_name.find(key);
    if (it == by_name.end()) {
      // HF's causal-mask buffers and the tied output matrix are not parameters here.
      if (ends_with(key, ".attn.bias") || ends_with(key, ".attn.masked_bias") || key == "lm_head.weight") continue;
      throw Error(file + ": tensor '" + info.name + "' is not a parameter of this model");
    }
    if (source[it->second] != nullptr)
      throw Error(file + ": tensors '" + source[it->second]->name + "' and '" + info.name +
                  "' both provide parameter '" + model[it->second].name + "'");
    const NamedTensor& t = model[it->second];
    const bool rows_ok = padded.count(key) && info.shape.size() == t.shape.size() && !t.shape.empty() &&
                         info.shape[0] <= t.shape[0] &&
                         std::equal(info.shape.begin() + 1, info.shape.end(), t.shape.begin() + 1);
    if (info.shape != t.shape && !rows_ok)
      throw Error(file + ": tensor '" + info.name + "' has shape " + shape_string(info.shape) +
                  ", the model expects " + shape_string(t.shape));
    if (info.dtype != DType::kF32 && info.dtype != DType::kF16 && info.dtype != DType::kBF16 &&
        info.dtype != DType::kF64)
      throw Error(file + ": tensor '" + info.name + "' has non-float dtype " + std::string(dtype_name(info.dtype)));
    source[it->second] = &info;
  }
  for (size_t i = 0; i < model.size(); ++i)
    if (source[i] == nullptr)
      throw Error(file + ": lacks tensor '" + model[i].name + "' " + shape_string(model[i].shape));

  std::vector<float> buffer;  // fewer rows in the file (a padded vocabulary): read_tensor zeroes the rest
  for (size_t i = 0; i < model.size(); ++i) read_tensor(weights, *source[i], model[i], buffer);
  return file;
}

}  // namespace lmforge::checkpoint
