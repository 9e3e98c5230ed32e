// defines: libFuzzer target for the safetensors reader: the input is a whole file; SafetensorsFile must refuse a
//          malformed or malicious header (sizes, offsets, dtypes, shapes overflowing) with an Error, and the
//          tensors of a file it accepts must be readable as fp32 within the file
#include <cstdint>
#include <vector>

#include "checkpoint/safetensors.h"
#include "fuzz_util.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmforge::fuzz::FileGuard file{lmforge::fuzz::input_file(data, size, ".safetensors")};
  try {
    lmforge::checkpoint::SafetensorsFile f(file.path);
    std::vector<float> out;
    for (const auto& t : f.tensors()) {
      if (t.numel() > (1u << 20)) continue;
      out.resize(t.numel());
      f.read_f32(t, t.shape, out.data());
    }
  } catch (const lmforge::Error&) {
  }
  return 0;
}
