// defines: tiny_vocab_data(): Megatron's GPT-2 sample dataset with a vocabulary of 1,001 ids, and
//          tiny_bert_vocab(): its BERT sentence-level sample with a 2,996-word vocabulary, for the tests that train
//          tiny models to compare layouts, resumes, devices, precisions and spellings with one another
#pragma once
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "test_util.h"

namespace lmforge::testing {

// Each GPT-2 id taken modulo 1000, GPT-2's end of text (50256) the NullTokenizer's end of document (1000): train
// with --tokenizer-type NullTokenizer --vocab-size 1000 (kTinyVocabSize). The documents, sequences and so the
// samples are the sample's own (its .idx is copied); only the ids differ. With GPT-2's 50,257 ids the LM head and
// cross-entropy over 50,304 columns were nearly all of every tiny run; 1,024 padded columns (still padded, still
// cut in parts by tensor parallelism) keep every path those tests cover.
// Written once per build tree (<build>/tests/tiny-vocab/), one path for every test and every rank of a job (their
// flags must agree); each file goes to a temporary name and is renamed, .idx last, so a test running beside the
// writer sees the whole dataset or none (and then writes the same bytes itself).
inline constexpr int64_t kTinyVocabSize = 1000;

// `source`'s .bin with every uint16 id mapped, and its .idx, written as <build>/tests/tiny-vocab/<name>.{bin,idx}
// (temporary names renamed, .idx last); the prefix.
template <class Map>
std::string mapped_dataset(const std::string& source, const std::string& name, Map map) {
  const std::string directory = std::string(LMFORGE_BINARY_DIR) + "/tests/tiny-vocab";
  const std::string prefix = directory + "/" + name;
  if (std::filesystem::exists(prefix + ".idx")) return prefix;
  std::filesystem::create_directories(directory);
  std::string bin = read_file(source + ".bin");  // uint16 ids (its .idx says so; the runs reading it check)
  for (size_t at = 0; at + 2 <= bin.size(); at += 2) {
    uint16_t id;
    std::memcpy(&id, bin.data() + at, 2);
    id = map(id);
    std::memcpy(bin.data() + at, &id, 2);
  }
  const std::string tmp = ".tmp-" + std::to_string(::getpid());
  write_file(prefix + ".bin" + tmp, bin);
  write_file(prefix + ".idx" + tmp, read_file(source + ".idx"));
  std::filesystem::rename(prefix + ".bin" + tmp, prefix + ".bin");
  std::filesystem::rename(prefix + ".idx" + tmp, prefix + ".idx");
  return prefix;
}

inline std::string tiny_vocab_data() {
  return mapped_dataset(shared_path("data/sample/sample_gpt2_text_document"), "sample_gpt2_ids_mod_1000",
                        [](uint16_t id) { return id == 50256 ? uint16_t(kTinyVocabSize) : uint16_t(id % kTinyVocabSize); });
}

// bert-base-uncased's first 2,996 lines ([PAD], [unused*], [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103, single
// characters, then words from "the" at 1996) and Megatron's BERT sentence-level sample with every word id from 1996
// on taken to 1996 + (id - 1996) % 1000: the special ids keep their places, the documents and sentences (so the
// samples maps) are the sample's own. train bert/t5 with vocab_file (BertWordPieceLowerCase) and data_prefix.
struct TinyBertVocab {
  std::string vocab_file, data_prefix;
};

inline TinyBertVocab tiny_bert_vocab() {
  TinyBertVocab t;
  const std::string directory = std::string(LMFORGE_BINARY_DIR) + "/tests/tiny-vocab";
  t.vocab_file = directory + "/bert-base-uncased-first-2996.txt";
  if (!std::filesystem::exists(t.vocab_file)) {
    std::filesystem::create_directories(directory);
    const std::string whole = read_file(shared_path("data/vocab/bert-base-uncased-vocab.txt"));
    size_t end = 0;
    for (int line = 0; line < 2996; ++line) end = whole.find('\n', end) + 1;
    const std::string tmp = t.vocab_file + ".tmp-" + std::to_string(::getpid());
    write_file(tmp, whole.substr(0, end));
    std::filesystem::rename(tmp, t.vocab_file);
  }
  t.data_prefix = mapped_dataset(shared_path("data/sample/sample_bert_text_sentence"), "sample_bert_ids_2996",
                                 [](uint16_t id) { return id < 1996 ? id : uint16_t(1996 + (id - 1996) % 1000); });
  return t;
}

}  // namespace lmforge::testing
