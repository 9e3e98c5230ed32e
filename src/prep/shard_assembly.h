// defines: assemble_shards() (complete shards to the final <prefix>_<key>_<level>.bin/.idx, streaming),
//          merge_shards() (`lmforge merge --shards <prefix>`: check every shard, then assemble), the claim-mode
//          assembled.json marker (write_assembled_marker(), assembled_problem())
#pragma once
#include <string>
#include <vector>

#include "prep/prep.h"
#include "prep/shard_plan.h"

namespace lmforge::prep {

// Concatenates the shards' datasets in plan order into <prefix>_<key>_<plan.level>.{bin,idx} (temp names, renamed
// when complete). The result is byte-identical to run_prep() over the same inputs: .bin is the shards' .bin files
// back to back (copy_file_range), and the .idx is written in its three sections by streaming over the shards'
// .idx files, so memory does not grow with the corpus. The output prefix's WriterLock (data/writer_lock.h, as
// run_prep takes it) keeps two processes from writing the same prefix at once. Returns the totals of the
// manifests, with outputs set.
PrepSummary assemble_shards(const std::string& output_prefix, const ShardPlan& plan,
                            const std::vector<ShardManifest>& manifests);

// Writes <prefix>.shards/assembled.json (temp name `tmp`, then rename): who assembled and the size of every output
// .bin/.idx, so that a later run or `inspect` can tell whether the datasets are still what was assembled.
void write_assembled_marker(const std::string& output_prefix, const ShardPlan& plan, const std::string& assembled_by,
                            const std::string& tmp);
// Empty when assembled.json is there and every output it names is there with its recorded sizes (a marker written
// before the sizes were recorded: every output opens as a valid dataset); otherwise why the datasets are not
// assembled ("<prefix>_text_document.bin is missing", ...). Reads only.
std::string assembled_problem(const std::string& output_prefix, const ShardPlan& plan);

// Reads <prefix>.shards/plan.json, checks that every shard is complete (Error listing the missing ones and how
// to finish them) and assembles. Progress and the result go to stderr/`summary`.
PrepSummary merge_shards(const std::string& output_prefix);

}  // namespace lmforge::prep
