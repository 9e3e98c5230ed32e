// defines: OutputFormat, output_formats(), find_output_format(): the formats `lmforge prep --output-format` writes,
//          one entry each (name, the --input-format values it reads, its flags, what runs it). A new format is one
//          more entry in output_formats.cpp plus its own options in PrepOptions.
#pragma once
#include <span>
#include <string>
#include <vector>

#include "prep/prep.h"

namespace lmforge::prep {

struct OutputFormat {
  std::string name;                        // --output-format value
  std::string summary;                     // one sentence for --help
  std::vector<std::string> input_formats;  // --input-format values it reads; the first is its default
  std::vector<std::string> own_flags;      // flags only this format takes (others refuse them)
  PrepSummary (*run)(const PrepOptions&);  // single-process run
};

std::span<const OutputFormat> output_formats();
// Error listing the valid names.
const OutputFormat& find_output_format(const std::string& name);

}  // namespace lmforge::prep
