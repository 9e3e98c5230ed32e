// The model-family registry (families/registry.h): names and lookups, and each entry's pieces agreeing with each
// other — the model it makes has the shape it reports, and writes a config.json whose model_type leads back to it.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <variant>

#include "checkpoint/checkpoint.h"
#include "families/registry.h"
#include "kernels/backend.h"
#include "util/error.h"

namespace {

using lmforge::Error;
using lmforge::families::checkpoint_family;
using lmforge::families::model_families;
using lmforge::families::model_family;
using lmforge::families::ModelFamily;

TEST(ModelFamilies, NamesAreUniqueAndLookedUp) {
  std::set<std::string> names;
  for (const ModelFamily* f : model_families()) {
    EXPECT_TRUE(names.insert(f->name()).second) << f->name();
    EXPECT_FALSE(f->help().empty()) << f->name();
    EXPECT_EQ(&model_family(f->name()), f);
  }
  EXPECT_EQ(names, (std::set<std::string>{"gpt", "bert", "t5", "electra"}));
  try {
    model_family("xlnet");
    ADD_FAILURE() << "no error for an unknown family";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown model type 'xlnet' (lmforge train gpt|bert|t5|electra)"), std::string::npos)
        << e.what();
  }
}

TEST(ModelFamilies, CheckpointTypesLeadToTheirFamily) {
  EXPECT_STREQ(checkpoint_family("gpt2", "c.json").name(), "gpt");
  EXPECT_STREQ(checkpoint_family("", "c.json").name(), "gpt");  // a Hugging Face GPT-2 config may lack the field
  EXPECT_STREQ(checkpoint_family("megatron-bert", "c.json").name(), "bert");
  EXPECT_STREQ(checkpoint_family("bert", "c.json").name(), "bert");
  EXPECT_STREQ(checkpoint_family("lmforge-megatron-t5", "c.json").name(), "t5");
  EXPECT_STREQ(checkpoint_family("electra", "c.json").name(), "electra");
  try {
    checkpoint_family("llama", "c.json");
    ADD_FAILURE() << "no error for an unknown model_type";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.json: model_type \"llama\" is not a model lmforge knows"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(model_family("gpt").generation(), lmforge::families::Generation::CONTINUATION);
  EXPECT_EQ(model_family("bert").generation(), lmforge::families::Generation::NONE);
  EXPECT_EQ(model_family("t5").generation(), lmforge::families::Generation::SPAN_FILLING);
  EXPECT_EQ(model_family("electra").generation(), lmforge::families::Generation::NONE);
}

// Each entry's options -> config, model, shape and config.json agree: the model it makes has the parameters its
// shape counts and is built on the backend it is given, and its config.json's model_type is one of the entry's.
TEST(ModelFamilies, EntryPiecesAgree) {
  for (const ModelFamily* f : model_families()) {
    lmforge::train::TrainOptions o;
    o.model_type = f->name();
    o.num_layers = 2;
    o.hidden_size = 32;
    o.num_attention_heads = 2;
    o.seq_length = 16;
    o.max_position_embeddings = 32;
    o.decoder_seq_length = 8;
    // ELECTRA's vocabulary is the --vocab-file's lines (no [BOS]/[EOS], no padding), whatever the tokenizer counts.
    o.tokenizer.vocab_file = LMFORGE_SHARED_DIR "/data/vocab/bert-base-uncased-vocab.txt";
    const bool electra = std::string(f->name()) == "electra";
    const int64_t vocab = 100;
    const lmforge::train::ModelShape shape = f->shape(o, vocab);
    auto model = f->make_model(o, vocab, lmforge::kernels::cpu_backend(), nullptr, 0);
    EXPECT_EQ(shape.whole_parameters, (int64_t)model->whole_table().whole_numel()) << f->name();
    EXPECT_EQ(shape.whole_parameters, (int64_t)model->table().whole_numel()) << f->name();
    // 100 padded to --make-vocab-size-divisible-by 128; ELECTRA: bert-base-uncased's 30522 lines.
    EXPECT_EQ(shape.padded_vocab, electra ? 30522 : 128) << f->name();
    const auto json = lmforge::checkpoint::parse_json_object(model->config_json(), "config.json");
    const auto it = json.find("model_type");
    ASSERT_NE(it, json.end()) << f->name();
    const std::string* type = std::get_if<std::string>(&it->second);
    ASSERT_NE(type, nullptr) << f->name();
    EXPECT_EQ(&checkpoint_family(*type, "config.json"), f) << *type;
    o.pipeline_model_parallel_size = 2;  // the log's split: one stack halved, or T5's encoder then decoder stages
    // (ELECTRA runs in one stage: its validate() refuses pipeline stages.)
    EXPECT_EQ(f->pipeline_stage_layers(o),
              std::string(f->name()) == "t5" ? "encoder 2 | decoder 2" : electra ? "2" : "1 1");
  }
}

}  // namespace
