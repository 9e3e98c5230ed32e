// .npy reading: an array of a dtype the indices never use (here float64, as another tool might write) is an error
// naming the file, not a bare "unsupported dtype".
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "datasets/npy.h"
#include "test_util.h"
#include "util/error.h"

namespace {

TEST(Npy, UnsupportedDtypeNamesTheFile) {
  lmforge::testing::TempDir tmp;
  const std::string path = tmp.file("document_index.npy");
  // numpy.save of np.zeros(2, dtype=np.float64): format 1.0, header padded so the data starts at a multiple of 64,
  // then 16 data bytes.
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + char(header.size() & 0xff) + char(header.size() >> 8) +
                      header + std::string(16, '\0');
  std::ofstream(path, std::ios::binary) << bytes;
  try {
    lmforge::datasets::read_npy(path);
    ADD_FAILURE() << "a float64 index was accepted";
  } catch (const lmforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("<f8"), std::string::npos) << e.what();
  }
}

}  // namespace
