// defines: tests that overwriting a dataset never exposes a mix: the directory events of a finish() over an older
//          dataset (watched with inotify) never leave the final names holding the new .bin beside the old .idx or
//          the reverse, so a kill at any moment leaves the old dataset whole, the new one whole, or none
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "data/indexed_dataset.h"
#include "test_util.h"

namespace {

using lmforge::data::DType;
using lmforge::data::IndexedDatasetWriter;
using lmforge::testing::TempDir;

void write_dataset(const std::string& prefix, int32_t token) {
  IndexedDatasetWriter w(prefix, DType::Int32);
  const std::vector<int32_t> ids{token, token, token};
  w.add_sequence(ids);
  w.end_document();
  w.finish();
}

// The sequence of states the final names go through, from the directory's events: 'o' old, 'n' new, '-' none.
std::vector<std::string> states_while_overwriting(const TempDir& dir) {
  write_dataset(dir.file("d"), 1);
  const int fd = ::inotify_init1(IN_NONBLOCK);
  EXPECT_GE(fd, 0);
  ::inotify_add_watch(fd, dir.path().c_str(), IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE);
  write_dataset(dir.file("d"), 2);
  std::string state = "oo";  // .bin, .idx
  std::vector<std::string> states{state};
  alignas(inotify_event) char buf[1 << 16];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) {
    for (char* p = buf; p < buf + n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(p);
      const std::string name = e->len ? e->name : "";
      const int slot = name == "d.bin" ? 0 : name == "d.idx" ? 1 : -1;
      if (slot >= 0 && (e->mask & (IN_DELETE | IN_MOVED_FROM))) state[(size_t)slot] = '-';
      if (slot >= 0 && (e->mask & IN_MOVED_TO)) state[(size_t)slot] = 'n';
      if (slot >= 0) states.push_back(state);
      p += sizeof(inotify_event) + e->len;
    }
  }
  ::close(fd);
  return states;
}

TEST(DatasetPublish, OverwritingNeverPairsTheNewBinWithTheOldIdx) {
  TempDir dir;
  const std::vector<std::string> states = states_while_overwriting(dir);
  std::string seen;
  for (const auto& s : states) seen += s + " ";
  for (const auto& s : states) {
    EXPECT_NE(s, "no") << "new .bin beside the old .idx: " << seen;
    EXPECT_NE(s, "on") << "old .bin beside the new .idx: " << seen;
  }
  EXPECT_EQ(states.back(), "nn") << seen;
  auto ds = lmforge::data::IndexedDataset::open(dir.file("d"));
  std::vector<int32_t> out;
  ds->read_sequence(0, out);
  EXPECT_EQ(out, (std::vector<int32_t>{2, 2, 2}));
}

}  // namespace
