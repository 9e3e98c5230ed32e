// defines: PythonRandom: CPython's random.Random (Mersenne Twister MT19937 with CPython's seeding) for the calls
//          NVIDIA's create_pretraining_data.py makes — random(), randint(), shuffle() — reproduced draw for draw.
//
// Why not <random>: std::mt19937(seed) seeds with init_genrand(seed) where CPython uses init_by_array(key of the
// seed's 32-bit words); random() is built from two outputs (27 + 26 bits), not std::generate_canonical; and
// randint/shuffle use rejection sampling on getrandbits(bit_length(n)), which no std distribution does. One wrong
// draw and every later instance differs (../shared/docs/nvidia-hdf5-creation-notes.md §4).
#pragma once
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace lmforge::prep {

class PythonRandom {
 public:
  // random.Random(seed) for an int seed: the key is |seed|'s 32-bit words, least significant first.
  explicit PythonRandom(int64_t seed);

  // One tempered 32-bit output (genrand_uint32). regenerate() tempers the whole block of 624 at once (a loop the
  // compiler vectorizes), so a draw is a load.
  uint32_t next32() {
    if (index_ >= kN) regenerate();
    return tempered_[index_++];
  }
  // random(): 53 random bits as a double in [0, 1).
  double random() {
    const uint32_t a = next32() >> 5, b = next32() >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
  }
  // random() < 0.5, drawing what random() draws: random() is (a * 2^26 + b) / 2^53 with a = first output >> 5 (27
  // bits) and b < 2^26, so it is below 2^52 / 2^53 exactly when a < 2^26, i.e. when the first output's top bit is 0.
  // The truncation's coin flip, without the floating-point product.
  bool random_below_half() {
    const uint32_t a = next32();
    next32();
    return (a >> 31) == 0;
  }
  // _randbelow(n), n >= 1: getrandbits(n.bit_length()) until below n (bit_length of n, not n - 1). Inline: the
  // masking's shuffle calls it for every candidate position, the hottest call of the replay.
  uint64_t randbelow(uint64_t n) {
    const int bits = std::bit_width(n);  // int.bit_length()
    if (bits > 32) return randbelow_wide(n, bits);
    const int shift = 32 - bits;
    uint64_t r = next32() >> shift;
    while (r >= n) r = next32() >> shift;
    return r;
  }
  // randint(a, b) = a + _randbelow(b - a + 1).
  int64_t randint(int64_t a, int64_t b) { return a + static_cast<int64_t>(randbelow(static_cast<uint64_t>(b - a) + 1)); }
  // shuffle(x): for i from len-1 down to 1, swap x[i] with x[_randbelow(i + 1)]. The masking's shuffles are most
  // of the replay's draws, so the loop is written for speed: the block position is kept in a local (x's stores could
  // otherwise alias it), and a rejected draw (getrandbits(k) >= i + 1, about one in four) does not branch: it swaps
  // x[i] with itself and leaves i as it is, where a mispredicted retry loop cost more than the draw. The draws of
  // one bit length k (i + 1 in [2^(k-1), 2^k)) share their shift, so the loop carries only i -= (j <= i) from draw
  // to draw (a compare and a subtract), not the bit length of i + 1 as well.
  template <class T>
  void shuffle(std::vector<T>& x) {
    if (x.size() > (uint64_t(1) << 32)) {  // i + 1 needs more than 32 bits: getrandbits of several words
      for (size_t i = x.size(); i-- > 1;) std::swap(x[i], x[static_cast<size_t>(randbelow(i + 1))]);
      return;
    }
    T* data = x.data();
    int index = index_;
    for (size_t i = x.size() > 0 ? x.size() - 1 : 0; i > 0;) {
      const int shift = std::countl_zero(static_cast<uint32_t>(i + 1));  // getrandbits((i + 1).bit_length())
      const size_t last = (size_t(1) << (31 - shift)) - 1;               // the smallest i of this bit length
      while (i >= last && i > 0) {
        if (index >= kN) {
          regenerate();
          index = 0;
        }
        const size_t j = tempered_[index++] >> shift;
        const size_t accept = j <= i;  // j < i + 1, as arithmetic, which compilers keep branch-free
        const size_t k = i ^ ((i ^ j) & (size_t(0) - accept));
        std::swap(data[i], data[k]);
        i -= accept;
      }
    }
    index_ = index;
  }

 private:
  static constexpr int kN = 624, kM = 397;
  void regenerate();
  uint64_t randbelow_wide(uint64_t n, int bits);
  std::array<uint32_t, kN> state_{};
  std::array<uint32_t, kN> tempered_{};  // the current block's outputs
  int index_ = kN;
};

}  // namespace lmforge::prep
