// defines: ShardPlan (a deterministic split of prep's inputs into numbered shards), make_shard_plan(),
//          plan and manifest files under <prefix>.shards/, the check of which shards are complete, InputGuard (an
//          input still holds the plan's content)
//
// Layout of <prefix>.shards/:
//   plan.json                             the plan: id, what it was derived from, every shard's input piece
//   shard-000012_<key>_document.bin/.idx  shard 12's dataset for each JSON key
//   shard-000012.json                     shard 12's manifest, written last (temp + rename): plan id, piece,
//                                         counts. A shard is complete exactly when its manifest is present.
//   tmp-<host>-<pid>[-<token>]/           a running process's files before they are renamed into place
//   claims/                               claim mode (prep/claim_prep.h): leases per shard, plan and assembly,
//                                         each claimer's status file and clock probe
//   assembled.json                        claim mode: written once the final datasets are assembled, with their
//                                         .bin/.idx sizes (prep/shard_assembly.h)
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/lease.h"
#include "prep/prep.h"

namespace lmforge::prep {

constexpr uint64_t kDefaultShardBytes = uint64_t(256) << 20;

struct Shard {
  uint32_t index = 0;
  uint32_t file = 0;   // index into ShardPlan::files
  InputPiece piece;
};

struct ShardPlan {
  std::string id;                        // 16 hex digits: FNV-1a 64 of `description`
  std::vector<std::string> description;  // every fact the output bytes depend on, one per line
  std::vector<std::string> json_keys;
  std::string level = "document";        // dataset_level(): "sentence" with --split-sentences
  std::vector<std::string> files;
  std::vector<Shard> shards;
  uint64_t total_bytes = 0;
};

// Expands the inputs and splits them: a compressed file (by magic bytes) is one shard; a plain file becomes byte
// ranges of about `shard_bytes`, each boundary moved forward to the next line start. The plan depends only on the
// inputs (paths, sizes, mtimes, bytes at the boundaries, a hash of 4 KB samples at the start, middle and end of
// every shard-size region) and the flags that change output bytes (tokenizer and
// its files' contents, JSON keys, --append-eod, --skip-invalid, shard size), so every process derives the same one.
// A new PrepOptions or TokenizerOptions field that changes output bytes must be added to the description.
// With `split` false only the description, id, files and total are filled (no shards): what a process needs to
// check an existing plan against its own flags without reading the inputs' boundaries.
ShardPlan make_shard_plan(const PrepOptions& options, uint64_t shard_bytes, bool split = true);

// The plan's description line of input `index` at `path` as the file is now: "input <index>: <path> size <bytes>
// mtime <s.ns> [compressed] samples <hash>" (the samples as make_shard_plan() takes them, per `shard_bytes`).
std::string describe_input(uint32_t index, const std::string& path, uint64_t shard_bytes, uint64_t* size = nullptr,
                           bool* compressed = nullptr);

// Checks, before a shard is committed, that the input it was cut from still holds the plan's content: an input
// rewritten or replaced under a running prep would otherwise give shards from two contents. A file that stat()
// shows unchanged (device, inode, size, mtime, ctime) since it last matched is not read again; a changed one has
// its line of the plan (size, mtime, content samples) made again and compared, about 12 KB read per shard size.
class InputGuard {
 public:
  InputGuard(const ShardPlan& plan, std::string shard_dir);
  // Error naming the file, what differs and `what` (e.g. "shard-000003 (bytes 0-1048576)") when plan.files[file]
  // no longer matches the plan.
  void check(uint32_t file, const std::string& what);

 private:
  const ShardPlan& plan_;
  std::string shard_dir_;
  uint64_t shard_bytes_ = 0;
  std::vector<std::optional<std::array<int64_t, 7>>> verified_;  // per file: its stat when it last matched
};

std::string shard_dir(const std::string& output_prefix);
std::string shard_name(uint32_t index);  // "shard-000012"
std::string shard_dataset_prefix(const std::string& output_prefix, uint32_t index, const std::string& key);
std::string shard_manifest_path(const std::string& output_prefix, uint32_t index);

// plan.json text and back (parse errors name `path`).
std::string plan_to_json(const ShardPlan& plan);
ShardPlan plan_from_json(const std::string& text, const std::string& path);

// Creates the shard directory and writes plan.json, or, when one is there, checks that it is this plan. A
// different plan is an Error that lists what changed (an input's size or mtime, a flag, the tokenizer files) and
// how to proceed: shards made under other inputs or flags are never reused.
void write_or_check_plan(const std::string& output_prefix, const ShardPlan& plan);
// That Error when `old` (the plan on disk) and `plan` (this run's) differ by id; nothing when they agree.
void check_same_plan(const std::string& output_prefix, const ShardPlan& old, const ShardPlan& plan);
// Reads <prefix>.shards/plan.json (Error if absent: the prep run never started there).
ShardPlan read_plan(const std::string& output_prefix);

struct ShardManifest {
  std::string plan_id;
  uint32_t index = 0;
  std::string path;
  uint64_t begin = 0, end = 0;
  bool whole_file = false;
  PrepSummary counts;   // documents, sequences, tokens, skipped, bytes, replacements, seconds
  std::string host;     // who made it, for the record
  int rank = 0;
};

std::string manifest_to_json(const ShardManifest& m);
ShardManifest manifest_from_json(const std::string& text, const std::string& path);

// The shard's manifest if the shard is complete: manifest present, for this plan and this shard's piece, and each
// key's dataset present with the manifest's counts. A manifest for another plan is an Error (never reused);
// a manifest whose datasets are missing or damaged is removed with a warning, so the shard is made again.
std::optional<ShardManifest> complete_shard(const std::string& output_prefix, const ShardPlan& plan, uint32_t index);

// The same check reading only, for `lmforge inspect`: the manifest when the shard is complete; else std::nullopt
// with `problem` saying why, empty when the shard has no manifest (not done yet). A manifest that does not parse,
// belongs to another plan or whose datasets are missing, damaged or disagree is a problem here (merge refuses
// the first two and remakes the others); nothing is removed and nothing throws.
std::optional<ShardManifest> check_shard(const std::string& output_prefix, const ShardPlan& plan, uint32_t index,
                                         std::string& problem);

// Writes `m` as the shard's manifest (temp file in `tmp_dir`, fsync, rename): the shard becomes complete.
void publish_manifest(const std::string& output_prefix, const std::string& tmp_dir, const ShardManifest& m);

// "<shard dir>/tmp-<host>-<pid>" for this process, created; and the removal of such directories left by dead
// processes of this host (all of them, any host, when `all_hosts`: only once every process is known finished).
std::string make_process_tmp_dir(const std::string& output_prefix);
void remove_stale_tmp_dirs(const std::string& output_prefix, bool all_hosts);

using data::host_name;  // data/lease.h
uint64_t fnv1a64(const void* data, size_t size, uint64_t h = 14695981039346656037ull);

}  // namespace lmforge::prep
