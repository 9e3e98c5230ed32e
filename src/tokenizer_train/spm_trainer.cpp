// train_sentencepiece(): libsentencepiece's own trainer (SentencePieceTrainer::Train with spm_train's flags), fed
// the corpus through lmforge's readers by a SentenceIterator, so its pieces are spm_train's for the same lines and
// flags. spm reads a text file's lines without the '\n'; here each training line (corpus.h) loses its '\n' the
// same way. The corpus is streamed: a reader thread hands sentences to spm in order through a small bounded
// queue, so memory holds what spm keeps (every sentence, or the input_sentence_size it samples), not the corpus.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "tokenizer_train/corpus.h"
#include "tokenizer_train/hf_files.h"
#include "tokenizer_train/train.h"
#include "util/error.h"

namespace lmforge::tokenizer_train {
namespace {

// spm_train's default --num_threads, which the unigram trainer always uses (see train_sentencepiece).
constexpr int kUnigramThreads = 16;

// Batches of sentences from the reader thread to spm's iterator. The reader blocks while kMaxBatches wait; a
// closed queue (spm gave up) makes the reader stop.
class SentenceQueue {
 public:
  static constexpr size_t kMaxBatches = 8, kBatchLines = 4096;
  // Reader side: false once the consumer has closed the queue.
  bool push(std::vector<std::string>&& batch) {
    std::unique_lock lock(mutex_);
    space_.wait(lock, [&] { return closed_ || batches_.size() < kMaxBatches; });
    if (closed_) return false;
    batches_.push_back(std::move(batch));
    ready_.notify_one();
    return true;
  }
  void finish(std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    finished_ = true;
    error_ = error;
    ready_.notify_all();
  }
  // Consumer side: the next batch, or false at the end.
  bool pop(std::vector<std::string>& batch) {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return finished_ || !batches_.empty(); });
    if (batches_.empty()) return false;
    batch = std::move(batches_.front());
    batches_.pop_front();
    space_.notify_one();
    return true;
  }
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    space_.notify_all();
  }
  std::exception_ptr error() {
    std::lock_guard lock(mutex_);
    return error_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_, space_;
  std::deque<std::vector<std::string>> batches_;
  bool finished_ = false, closed_ = false;
  std::exception_ptr error_;
};

// Thrown through the reader when spm has stopped pulling sentences (its own error is the one to report).
struct ReadingStopped : std::exception {
  const char* what() const noexcept override { return "SentencePiece stopped reading its input"; }
};

class QueueSink final : public LineSink {
 public:
  explicit QueueSink(SentenceQueue& queue) : queue_(queue) {}
  void add_line(std::string_view line) override {
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    batch_.emplace_back(line);
    if (batch_.size() >= SentenceQueue::kBatchLines) flush();
  }
  void flush() {
    if (batch_.empty()) return;
    if (!queue_.push(std::move(batch_))) throw ReadingStopped();
    batch_ = {};
  }

 private:
  SentenceQueue& queue_;
  std::vector<std::string> batch_;
};

// spm pulls sentences: done() / value() / Next() over the queue's batches.
class QueueIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit QueueIterator(SentenceQueue& queue) : queue_(queue) { advance(); }
  bool done() const override { return at_end_; }
  void Next() override {
    if (++i_ >= batch_.size()) advance();
  }
  const std::string& value() const override { return batch_[i_]; }
  sentencepiece::util::Status status() const override {
    if (!failed_) return {};
    return sentencepiece::util::Status(sentencepiece::util::StatusCode::kDataLoss, "lmforge's reader failed");
  }

 private:
  void advance() {
    i_ = 0;
    batch_.clear();
    while (batch_.empty()) {
      if (!queue_.pop(batch_)) {
        at_end_ = true;
        failed_ = queue_.error() != nullptr;
        return;
      }
    }
  }
  SentenceQueue& queue_;
  std::vector<std::string> batch_;
  size_t i_ = 0;
  bool at_end_ = false, failed_ = false;
};

std::string format_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

TrainSummary train_sentencepiece(const TokenizerTrainOptions& options) {
  std::unordered_map<std::string, std::string> kwargs;
  // spm_train's own flags first, so that the named lmforge flags below win over a --spm-option that repeats them.
  for (const std::string& option : options.spm_options) {
    const size_t eq = option.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("--spm-option " + option + ": expected name=value (an spm_train flag without its dashes)");
    std::string name = option.substr(0, eq);
    if (name == "input" || name == "model_prefix" || name == "model_type" || name == "vocab_size" ||
        name == "num_threads" || name == "random_seed")
      throw Error("--spm-option " + option + ": set by lmforge's own flags (--input, --output-dir, --type, "
                  "--vocab-size, --threads, --random-seed)");
    kwargs[name] = option.substr(eq + 1);
  }
  kwargs["model_type"] = options.type == ModelType::kSentencePieceBpe ? "bpe" : "unigram";
  kwargs["vocab_size"] = std::to_string(options.vocab_size);
  // libsentencepiece's unigram EM sums its expectations in one chunk per thread (sentence i to thread i mod n) and
  // adds the chunks, so its scores move with the thread count (up to 1e-3 between 1 and 2 threads). The unigram
  // trainer therefore always runs spm_train's default 16 threads: the model is the same on every machine and for
  // every --threads, and equals spm_train's run with its default. BPE's result does not depend on the threads.
  const int threads = options.corpus.threads > 0 ? options.corpus.threads : int(std::thread::hardware_concurrency());
  kwargs["num_threads"] = options.type == ModelType::kSentencePieceUnigram ? std::to_string(kUnigramThreads)
                                                                           : std::to_string(std::max(1, threads));
  if (options.character_coverage) kwargs["character_coverage"] = format_double(*options.character_coverage);
  if (options.byte_fallback) kwargs["byte_fallback"] = *options.byte_fallback ? "true" : "false";
  if (options.special_tokens && !options.special_tokens->empty()) {
    std::string joined;
    for (const std::string& token : *options.special_tokens) {
      if (token.find(',') != std::string::npos)
        throw Error("--special-tokens " + token + ": SentencePiece lists user_defined_symbols with commas, so a "
                    "token cannot contain one");
      joined += (joined.empty() ? "" : ",") + token;
    }
    kwargs["user_defined_symbols"] = joined;
  }

  OutputFiles files(options.output_dir);
  const std::string prefix = files.temporary_path("tokenizer");
  kwargs["model_prefix"] = prefix;
  TrainSummary summary;
  auto start = std::chrono::steady_clock::now();
  CorpusOptions corpus = options.corpus;
  corpus.ordered = true;  // spm samples and breaks ties by sentence order
  // Registered before training, so that a failure removes whatever spm wrote.
  files.adopt("tokenizer.model", prefix + ".model");
  files.adopt("tokenizer.vocab", prefix + ".vocab");
  SentenceQueue queue;
  std::thread reader([&] {
    std::exception_ptr error;
    try {
      std::vector<std::unique_ptr<LineSink>> sinks;
      summary.corpus = read_corpus(corpus, [&] { return std::make_unique<QueueSink>(queue); }, sinks);
      for (auto& sink : sinks) static_cast<QueueSink&>(*sink).flush();
    } catch (const ReadingStopped&) {
      // spm failed first; its status says why
    } catch (...) {
      error = std::current_exception();
    }
    queue.finish(error);
  });
  sentencepiece::util::Status status;
  {
    QueueIterator iterator(queue);
    // spm_train's --random_seed is no TrainerSpec field: its main() seeds libsentencepiece's process-wide
    // generator, which sampling, shuffling and unigram's EM draw from. The same call here gives spm_train's run.
    if (options.random_seed) sentencepiece::SetRandomGeneratorSeed(*options.random_seed);
    status = sentencepiece::SentencePieceTrainer::Train(kwargs, &iterator);
  }
  queue.close();  // a reader still blocked (spm stopped early) ends
  reader.join();
  if (std::exception_ptr error = queue.error()) std::rethrow_exception(error);  // file:line of bad input
  if (!status.ok()) throw Error(std::string("SentencePiece training failed: ") + status.ToString());
  summary.count_seconds = summary.corpus.seconds;
  summary.train_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - summary.count_seconds;
  summary.vocab_size = options.vocab_size;
  summary.outputs = files.commit();
  return summary;
}

}  // namespace lmforge::tokenizer_train
