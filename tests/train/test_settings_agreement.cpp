// The settings every rank must agree on (train/settings_agreement.h): their text names each flag with its value,
// the first difference is named with both values (job entries first), and the exchange over a real communicator
// (Gloo, ranks as threads) ends every rank with the same message when any rank differs, and leaves agreeing ranks
// ready for the next collective.
#include "train/settings_agreement.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <future>

#include "util/error.h"

namespace {

using namespace lmforge;
using namespace std::chrono_literals;

train::TrainOptions tiny() {
  train::TrainOptions o;
  o.num_layers = 2;
  o.hidden_size = 32;
  o.num_attention_heads = 2;
  o.seq_length = 32;
  o.micro_batch_size = 1;
  o.global_batch_size = 4;
  o.schedule.lr = 0.003;
  o.schedule.train_iters = 20;
  o.data_path = {"data/x_text_document"};
  return o;
}

std::string text_of(const train::TrainOptions& o) { return train::settings_text(train::agreed_settings(o)); }

TEST(SettingsAgreement, FirstDifferenceNamesTheFlagAndBothValues) {
  const train::TrainOptions a = tiny();
  EXPECT_EQ(train::first_difference(text_of(a), 0, text_of(a), 1), "");
  train::TrainOptions b = a;
  b.seed = 5;
  EXPECT_EQ(train::first_difference(text_of(a), 0, text_of(b), 3), "--seed is 1234 on rank 0 but 5 on rank 3");
  b = a;
  b.schedule.lr = 0.01;
  EXPECT_EQ(train::first_difference(text_of(a), 0, text_of(b), 1), "--lr is 0.003 on rank 0 but 0.01 on rank 1");
  b = a;
  b.schedule.train_iters.reset();
  b.schedule.train_samples = 80;
  EXPECT_EQ(train::first_difference(text_of(a), 0, text_of(b), 1), "--train-iters is 20 on rank 0 but unset on rank 1");
  b = a;
  b.disc_weight = 20.0;
  EXPECT_EQ(train::first_difference(text_of(a), 0, text_of(b), 1), "--disc-weight is 50 on rank 0 but 20 on rank 1");
  b = a;
  b.precision.bf16 = true;
  EXPECT_EQ(train::first_difference(text_of(a), 0, text_of(b), 1), "--bf16 is off on rank 0 but on on rank 1");
  // The job's entries come first: a rank of another job is named as such even when its flags differ too.
  b = a;
  b.seed = 5;
  b.save = "elsewhere";
  EXPECT_EQ(train::first_difference(text_of(a), 0, text_of(b), 1), "--save is unset on rank 0 but elsewhere on rank 1");
}

TEST(SettingsAgreement, ValuesWithSpacesTabsAndNewlinesSurviveTheText) {
  train::TrainOptions a = tiny(), b = tiny();
  a.data_path = {"0.3", "my data/a", "0.7", "b\tc"};
  b.data_path = {"0.3", "my data/a", "0.7", "b\nc"};
  EXPECT_EQ(train::first_difference(text_of(a), 0, text_of(b), 1),
            "--data-path is '0.3 my data/a 0.7 b\tc' on rank 0 but '0.3 my data/a 0.7 b\nc' on rank 1");
  // A setting one rank does not send (another lmforge version) is named too.
  const std::string full = text_of(a), fewer = full.substr(full.find('\n') + 1);
  EXPECT_EQ(train::first_difference(full, 0, fewer, 1),
            "settings format is 1 on rank 0 but not sent by rank 1 (another lmforge version?)");
}

TEST(SettingsAgreement, PerRankFlagsMayDiffer) {
  train::TrainOptions a = tiny(), b = tiny();
  b.threads = 3;
  b.log_interval = 7;
  b.tensorboard_dir = "tb";
  b.data_cache_path = "cache-on-this-host";
  b.keep_interval_checkpoints = 2;
  EXPECT_EQ(text_of(a), text_of(b));
}

TEST(SettingsAgreement, SizesOfTheFilesTheFlagsNameAreCompared) {
  const std::string dir = ::testing::TempDir() + "settings_agreement_sizes";
  std::filesystem::create_directories(dir);
  const std::string prefix = dir + "/d_text_document";
  std::ofstream(prefix + ".bin") << "12345678";
  std::ofstream(prefix + ".idx") << "idx";
  train::TrainOptions a = tiny();
  a.data_path = {prefix};
  const std::string before = text_of(a);
  std::ofstream(prefix + ".bin", std::ios::app) << "9";  // another copy of the dataset under the same path
  EXPECT_EQ(train::first_difference(before, 0, text_of(a), 1),
            "size of " + prefix + ".bin (bytes) is 8 on rank 0 but 9 on rank 1");
  std::filesystem::remove_all(dir);
}

// Runs check_settings_agree on n Gloo ranks (threads), rank r with options(r), then a collective; returns each
// rank's error ("" when none).
std::vector<std::string> agree_on_ranks(int n, const std::function<train::TrainOptions(int)>& options) {
  const int port = [] {
    dist::TcpStoreServer probe(0, 1);
    return probe.port();
  }();
  std::vector<std::future<std::string>> ranks;
  for (int r = 0; r < n; r++)
    ranks.push_back(std::async(std::launch::async, [=] {
      try {
        auto comm = dist::make_gloo_communicator({{"127.0.0.1", port}, r, n, 20000ms});
        train::check_settings_agree(*comm, options(r));
        double x = 1.0;  // agreeing ranks go on with the job's collectives
        comm->all_reduce_sum(&x, 1);
        if (x != (double)n) return std::string("all-reduce after the check gave ") + std::to_string(x);
        return std::string();
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
    }));
  std::vector<std::string> out;
  for (auto& f : ranks) out.push_back(f.get());
  return out;
}

TEST(SettingsAgreement, EveryRankEndsWithTheDifferenceAndAgreeingRanksGoOn) {
  const auto agree = agree_on_ranks(3, [](int) { return tiny(); });
  for (const std::string& e : agree) EXPECT_EQ(e, "");

  const auto one = agree_on_ranks(3, [](int r) {
    train::TrainOptions o = tiny();
    if (r == 2) o.hidden_size = 64;
    return o;
  });
  for (int r = 0; r < 3; r++)
    EXPECT_EQ(one[(size_t)r].find("the ranks' settings differ: --hidden-size is 32 on rank 0 but 64 on rank 2; every "
                                  "rank of a job must be given the same training flags"),
              0u)
        << "rank " << r << ": " << one[(size_t)r];

  const auto two = agree_on_ranks(3, [](int r) {
    train::TrainOptions o = tiny();
    if (r > 0) o.model_type = "bert";
    return o;
  });
  for (int r = 0; r < 3; r++)
    EXPECT_EQ(two[(size_t)r].find("the ranks' settings differ: command is 'lmforge train gpt' on rank 0 but 'lmforge "
                                  "train bert' on rank 1 (ranks 1, 2 all differ from rank 0); is rank 1 from another "
                                  "job at the same rendezvous?"),
              0u)
        << "rank " << r << ": " << two[(size_t)r];
}

}  // namespace
