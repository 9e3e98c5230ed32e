// defines: Source, Transform, Alias, alias_table(), flag_names(), GivenFlags, add_alias_flags(), resolve_aliases(),
//          show_number(): the one table of the spellings other tools' scripts use for lmforge's (today's Megatron)
//          settings, Megatron v1, Megatron-DeepSpeed flags, DeepSpeed JSON keys, fairseq and argparse's second option
//          strings, and the one "given twice with different values" check every source goes through
#pragma once
#include <initializer_list>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace lmforge::cli {

// Where a spelling comes from (its --help group follows it).
enum class Source {
  kMegatron,       // today's Megatron: a second name of the same option (--encoder-seq-length)
  kMegatronV1,     // Megatron-LM v1.x (DeepSpeedExamples' copies): --batch-size, --checkpoint-activations, ...
  kDeepSpeedFlag,  // Megatron-DeepSpeed's command-line flags: --pipe-parallel-size, --zero-reduce-bucket-size
  kDeepSpeedJson,  // keys of a --deepspeed_config JSON file (dotted paths)
  kFairseq,        // fairseq-train's flags on `lmforge train bert`
  kArgparse,       // a second option string of one argparse dest (--config_file): the last occurrence wins
};
// The --help group of a source's flags.
const char* help_group(Source source);

// How a spelling's value becomes the canonical setting's.
enum class Transform {
  kSame,         // the value as given (an own option on the command line, or a config key)
  kOtherName,    // another name of the canonical option itself (CLI11 names; argparse: the last occurrence wins)
  kZeroIsOne,    // DeepSpeed's --pipe-parallel-size: 0 means one stage
  kFlagMeans,    // a bare flag meaning the canonical set to Alias::value
  kPairFirst,    // fairseq's "(b1, b2)" string: b1
  kPairSecond,   //   and b2
  kPowerOfTwo,   // DeepSpeed's fp16.initial_scale_power p: a scale of 2^p (applied by the JSON reader)
  kComputed,     // derived from other settings by the source's own reader (fairseq's --update-freq: global batch =
                 // micro batch x update-freq x data-parallel ranks; DeepSpeed's batch arithmetic)
};

// One row: `spelling` (from `source`) sets the setting lmforge calls `canonical`.
struct Alias {
  std::string_view canonical, spelling;
  Source source;
  Transform transform = Transform::kSame;
  std::string_view value = {};  // kFlagMeans: the canonical's value
  bool exclusive = false;       // Megatron refuses both spellings on one command line, even with equal values
  std::string_view needs = {};  // a flag this spelling only goes with (Megatron v1's --checkpoint-num-layers)
  std::string_view check = {};  // own-option rows: "positive", "non-negative" or "" (none)
  std::string_view help = {};   // own-option rows: the --help text, naming the canonical ("= --micro-batch-size")
};

// Every row, in the order resolve_aliases() applies them.
std::span<const Alias> alias_table();

// The row of `spelling` from `source`, or nullptr.
const Alias* find_alias(std::string_view spelling, Source source);

// The CLI11 name list of a canonical option: "--canonical" and its kOtherName spellings ("--seq-length,
// --encoder-seq-length" on `lmforge train t5`; `with` limits the sources taken).
std::string flag_names(std::string_view canonical, std::initializer_list<Source> with);

// The shortest of 15..17 significant digits that reads back as x (2e-4, not 0.00020000000000000001).
std::string show_number(double x);

// Which spelling gave each setting, from every source, and the one check of a setting given twice: a second
// spelling giving a different value is an Error naming both spellings and both values; an equal value is accepted
// (except for the rows Megatron marks exclusive).
class GivenFlags {
 public:
  // `spelling` gave `canonical`; `shown` is its value as the user wrote it (empty: the canonical's current value).
  void note(const std::string& canonical, const std::string& spelling, const std::string& shown = "");
  bool given(const std::string& canonical) const { return by_.count(canonical) > 0; }
  // The spelling that gave `canonical` first ("" when none did), and whether `spelling` gave it (too).
  std::string who(const std::string& canonical) const;
  bool gave(const std::string& canonical, const std::string& spelling) const {
    return all_.count({canonical, spelling}) > 0;
  }

  // The check: `spelling` (with `shown` value, from `file` when a config key, else "") gives `canonical`, which
  // another spelling gave already with the value `earlier`; `same` says whether the two values are equal.
  // Error when they differ (or the row is exclusive); otherwise `spelling` is noted.
  void check(const std::string& canonical, const std::string& spelling, const std::string& shown, bool same,
             const std::string& earlier, const std::string& file = "", bool exclusive = false);

  // The check, then `field = value`: for readers that set typed fields (DeepSpeed JSON, fairseq's derived values).
  template <class T>
  void set(const std::string& canonical, const std::string& spelling, const std::string& shown, const T& value,
           T& field, const std::string& file = "") {
    if (given(canonical)) check(canonical, spelling, shown, field == value, show(field), file);
    else note(canonical, spelling, shown);
    field = value;
  }

  static std::string show(double v) { return show_number(v); }
  static std::string show(int64_t v) { return std::to_string(v); }
  static std::string show(int v) { return std::to_string(v); }
  static std::string show(bool v) { return v ? "true" : "false"; }
  static std::string show(const std::string& v) { return v; }

 private:
  struct By {
    std::string spelling, shown;
  };
  std::map<std::string, By, std::less<>> by_;
  std::set<std::pair<std::string, std::string>> all_;
};

// Declares on `cmd` the own-option rows of `sources` whose canonical option `cmd` has, each in its source's --help
// group with the row's help and "= <canonical>".
void add_alias_flags(CLI::App* cmd, std::initializer_list<Source> sources);

// After parsing, before validation: notes every option given on `cmd`'s command line, then applies the own-option
// rows given (transform, the given-twice check, the value fed to the canonical option so that its own conversion
// and checks run) and the exclusive and `needs` rules of the kOtherName and own-option rows.
void resolve_aliases(CLI::App* cmd, GivenFlags& given);

}  // namespace lmforge::cli
