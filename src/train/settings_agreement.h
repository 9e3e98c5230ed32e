// defines: lmforge::train::AgreedSetting, agreed_settings(), settings_text(), first_difference(),
//          check_settings_agree() (every rank of a training job trains with the same settings, checked at start-up)
//
// Ranks are separate processes started with their own command lines (mpirun runs one, but tcp:// and torchrun
// ranks are started one by one, and an MPMD mpirun can give each its own). Ranks that disagree on a setting run
// collectives of different shapes (a different --hidden-size or --train-iters: a crash inside the transport, or a
// hang) or, worse, the same shapes with different numbers (a different --seed or --lr: replicas that silently
// diverge). So before the first collective whose shape depends on the settings, every rank compares its
// settings with every other's, and a job whose ranks differ ends on every rank with the first differing setting
// and both values.
#pragma once
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "train/train_options.h"

namespace lmforge::train {

// One thing every rank of a job must agree on, as text.
struct AgreedSetting {
  std::string name;   // the flag ("--seed"), or what else it is ("size of data.bin (bytes)", "command")
  std::string value;  // canonical text: shortest round-trip numbers, "unset" for a flag not given
  bool job = false;   // identifies the job rather than its training (the command, torchrun's run id, --save):
                      // a rank that differs here most likely belongs to another job at the same rendezvous
};

// What must agree, in a fixed order (job entries first): the command, torchrun's run id (TORCHELASTIC_RUN_ID)
// and the --save directory; the model's shape; tokenizer and data (paths, split, and the sizes of the files they
// name, so a rank reading another copy is caught); seeds; batch sizes and iterations; optimizer and learning-rate
// schedule; evaluation and checkpoint intervals (each a collective); --load and its latest iteration; device and
// precision; parallel layout and recomputation. Left out, because ranks may differ there harmlessly: --threads,
// --log-interval, --tensorboard-dir, --data-cache-path, --keep-interval-updates (only one rank acts on them) and
// the per-rank launcher flags (--distributed-rank, --device-id, ...).
std::vector<AgreedSetting> agreed_settings(const TrainOptions& options);

// "name\tvalue\n" for each setting (tabs, newlines and backslashes in either escaped): what ranks exchange.
std::string settings_text(const std::vector<AgreedSetting>& settings);

// The first setting of `a` (rank `rank_a`'s text) whose value differs in `b` (rank `rank_b`'s), as
// "--seed is 1234 on rank 0 but 5 on rank 1" (a setting one text lacks: "... but not sent by rank 1"), or ""
// when the texts agree.
std::string first_difference(const std::string& a, int rank_a, const std::string& b, int rank_b);

// Collective over `world` (every rank calls it once, before any collective whose shape depends on `options`):
// every rank learns every rank's digest of its settings and of its job identity from a fixed-size header (so the
// exchange itself has the same shape whatever the settings); if any differ from rank 0's, rank 0's text and the
// first differing rank's are broadcast (their lengths known from the headers) and every rank throws
// lmforge::Error naming the first differing setting, both values and the ranks that differ. One process: nothing.
void check_settings_agree(dist::Communicator& world, const TrainOptions& options);

}  // namespace lmforge::train
