// defines: typed reads of a config.json's top-level fields (config_int, config_positive_int, config_number,
//          config_string, config_bool) and shortest_decimal(): the one set of rules every model's config reader
//          (GPT, BERT, T5) follows
#pragma once
#include <cstdint>
#include <string>

#include "checkpoint/checkpoint.h"

namespace lmforge::checkpoint {

// A required integer; Error naming `source` and the key when it is missing or not an integer.
int64_t config_int(const JsonObject& o, const std::string& key, const std::string& source);
// A required size the models hold as int: outside [1, INT_MAX] is an Error, never truncated (n_layer 2^32 + 2
// would otherwise load as 2 layers).
int config_positive_int(const JsonObject& o, const std::string& key, const std::string& source);
// Optional fields: `fallback` when absent or JSON null; an Error naming the key when present with another type
// (a "hidden_act": 5 is a broken file, not a request for the default).
double config_number(const JsonObject& o, const std::string& key, double fallback, const std::string& source);
std::string config_string(const JsonObject& o, const std::string& key, const std::string& fallback,
                          const std::string& source);
bool config_bool(const JsonObject& o, const std::string& key, bool fallback, const std::string& source);

// A float as the shortest decimal that reads back as the same float (0.02, not 0.0199999996), for writing;
// NaN and infinities come back as themselves.
double shortest_decimal(float x);

}  // namespace lmforge::checkpoint
