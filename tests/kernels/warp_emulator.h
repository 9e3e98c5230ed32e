// defines: a CPU emulator of the part of the CUDA execution model that the tensor-core attention kernels
//          (src/kernels/cuda/attention_mma.cuh) use, so their own source runs in a test without a GPU: every thread
//          of a block is a std::thread, __syncthreads() a barrier of the block, and the warp-collective primitives
//          of src/kernels/cuda/warp_mma.cuh (ldmatrix_x4[_trans], mma_16816, shfl_xor) exchanges between the 32
//          threads of a warp that follow the PTX ISA's register layouts (restated in warp_mma.cuh); cp.async copies
//          at once. emu::bf16 and emu::f16 stand for __nv_bfloat16 and __half; launch() runs a grid's blocks one
//          after another.
//
// Include it before the kernels: it defines LMFORGE_WARP_EMULATION (so warp_mma.cuh defines nothing) and the CUDA
// qualifiers as nothing. It stops the process, naming the access, where a GPU would fault: ldmatrix rows and cp.async
// destinations outside the block's shared memory or off 16 bytes, cp.async sources off 16 bytes (global reads
// outside the operands show under the sanitizer build). What it cannot show: speed, bank conflicts, and races that
// the real cp.async's latency would expose (compute-sanitizer's racecheck on a GPU covers those). A kernel whose
// lanes disagree on a collective hangs here as on a GPU; the test's CTest timeout ends it.
#pragma once
#define LMFORGE_WARP_EMULATION 1

#include <array>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "kernels/cpu/lowp.h"  // the f16 conversions

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define LMFORGE_UNROLL
#define LMFORGE_SMEM(name) unsigned char* name = ::lmforge::emu::state().block->smem.data()
#define threadIdx (::lmforge::emu::state().thread_idx)
#define blockIdx (::lmforge::emu::state().block_idx)
#define blockDim (::lmforge::emu::state().block_dim)
#define gridDim (::lmforge::emu::state().grid_dim)

namespace lmforge::emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// What one lane publishes for a collective: mma's four A and two B registers, or one address, or one float.
using Slot = std::array<uint64_t, 6>;

struct Warp {
  std::barrier<> barrier{32};
  std::array<Slot, 32> slots{};
};

struct Block {
  Block(int threads, size_t smem_bytes) : barrier(threads), smem(smem_bytes, 0xFF) {  // NaN bytes, not zeros
    for (int w = 0; w < threads / 32; w++) warps.push_back(std::make_unique<Warp>());
  }
  std::barrier<> barrier;
  std::vector<unsigned char> smem;
  std::vector<std::unique_ptr<Warp>> warps;
};

struct ThreadState {
  Dim3 thread_idx, block_idx, block_dim, grid_dim;
  Block* block = nullptr;
};
inline ThreadState& state() {
  thread_local ThreadState s;
  return s;
}

// Publishes this lane's slot, waits for the warp, hands every lane's slots to `use`, and waits again (so no lane
// overwrites its slot before the others have read it).
template <class Use>
void exchange(const Slot& mine, Use&& use) {
  ThreadState& s = state();
  Warp& w = *s.block->warps[s.thread_idx.x / 32];
  w.slots[s.thread_idx.x % 32] = mine;
  w.barrier.arrive_and_wait();
  use(w.slots, (int)(s.thread_idx.x % 32));
  w.barrier.arrive_and_wait();
}

struct bf16 {
  uint16_t bits;
};
struct f16 {
  uint16_t bits;
};
inline float to_float(bf16 x) {
  const uint32_t u = (uint32_t)x.bits << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float to_float(f16 x) { return kernels::cpu::f16_to_f32(x.bits); }
// Round to nearest even (finite inputs).
inline bf16 to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return bf16{(uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16)};
}
inline f16 to_f16(float f) { return f16{kernels::cpu::f32_to_f16(f)}; }
template <class T>
T from_float(float f);
template <>
inline bf16 from_float<bf16>(float f) {
  return to_bf16(f);
}
template <>
inline f16 from_float<f16>(float f) {
  return to_f16(f);
}

// Runs body() as the grid's blocks, one after another, each with `threads` std::threads and smem_bytes of shared
// memory.
inline void launch(Dim3 grid, int threads, size_t smem_bytes, const std::function<void()>& body) {
  for (unsigned z = 0; z < grid.z; z++)
    for (unsigned y = 0; y < grid.y; y++)
      for (unsigned x = 0; x < grid.x; x++) {
        Block block(threads, smem_bytes);
        std::vector<std::thread> lanes;
        for (int t = 0; t < threads; t++)
          lanes.emplace_back([&, t] {
            ThreadState& s = state();
            s.thread_idx = Dim3{(unsigned)t, 0, 0};
            s.block_idx = Dim3{x, y, z};
            s.block_dim = Dim3{(unsigned)threads, 1, 1};
            s.grid_dim = grid;
            s.block = &block;
            body();
          });
        for (std::thread& lane : lanes) lane.join();
      }
}

}  // namespace lmforge::emu

namespace lmforge::emu {
// What the GPU would fault on: a shared-memory access outside the block's allocation or off its alignment.
inline void check_shared(const void* p, size_t bytes, size_t align, const char* what) {
  const Block& b = *state().block;
  const auto* c = static_cast<const unsigned char*>(p);
  if (c < b.smem.data() || c + bytes > b.smem.data() + b.smem.size() || (uintptr_t)p % align != 0) {
    std::fprintf(stderr, "warp emulator: %s at shared offset %td (%zu bytes, alignment %zu) outside or misaligned in "
                         "%zu bytes\n", what, c - b.smem.data(), bytes, align, b.smem.size());
    std::abort();
  }
}
}  // namespace lmforge::emu

inline void __syncthreads() { ::lmforge::emu::state().block->barrier.arrive_and_wait(); }
inline void __syncwarp() {
  ::lmforge::emu::ThreadState& s = ::lmforge::emu::state();
  s.block->warps[s.thread_idx.x / 32]->barrier.arrive_and_wait();
}

namespace lmforge::kernels::cuda {

// Register i of lane l: tile i's row l/4 (its address from lane 8i + l/4), elements 2(l%4) and 2(l%4) + 1.
inline void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  emu::check_shared(row, 16, 16, "ldmatrix row");
  emu::exchange({(uint64_t)(uintptr_t)row}, [&](const std::array<emu::Slot, 32>& slots, int lane) {
    for (int i = 0; i < 4; i++)
      std::memcpy(&r[i], reinterpret_cast<const unsigned char*>(slots[8 * i + lane / 4][0]) + 4 * (lane % 4), 4);
  });
}
// .trans: register i of lane l holds tile i's column l/4 at rows 2(l%4) (low half) and 2(l%4) + 1 (high half).
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  emu::check_shared(row, 16, 16, "ldmatrix row");
  emu::exchange({(uint64_t)(uintptr_t)row}, [&](const std::array<emu::Slot, 32>& slots, int lane) {
    for (int i = 0; i < 4; i++) {
      auto row = [&](int k) { return reinterpret_cast<const unsigned char*>(slots[8 * i + k][0]) + 2 * (lane / 4); };
      uint16_t lo, hi;
      std::memcpy(&lo, row(2 * (lane % 4)), 2);
      std::memcpy(&hi, row(2 * (lane % 4) + 1), 2);
      r[i] = (uint32_t)lo | ((uint32_t)hi << 16);
    }
  });
}

// d += A·B with A 16×16 and B 16×8 gathered from the warp's registers (layouts in warp_mma.cuh); the products are
// exact in double, the sum rounded to fp32 once.
template <class T>
void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  emu::exchange({a[0], a[1], a[2], a[3], b0, b1}, [&](const std::array<emu::Slot, 32>& slots, int lane) {
    auto half = [](uint64_t reg, int which) { return emu::to_float(T{(uint16_t)(reg >> (16 * which))}); };
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
      const int g = l / 4, c = l % 4;
      for (int e = 0; e < 2; e++) {
        A[g][2 * c + e] = half(slots[l][0], e);
        A[g + 8][2 * c + e] = half(slots[l][1], e);
        A[g][2 * c + 8 + e] = half(slots[l][2], e);
        A[g + 8][2 * c + 8 + e] = half(slots[l][3], e);
        B[2 * c + e][g] = half(slots[l][4], e);
        B[2 * c + 8 + e][g] = half(slots[l][5], e);
      }
    }
    const int g = lane / 4, c = lane % 4;
    for (int i = 0; i < 4; i++) {
      const int row = g + 8 * (i / 2), col = 2 * c + i % 2;
      double sum = d[i];
      for (int k = 0; k < 16; k++) sum += (double)A[row][k] * B[k][col];
      d[i] = (float)sum;
    }
  });
}

template <class T>
uint32_t pack2(float lo, float hi) {
  return (uint32_t)emu::from_float<T>(lo).bits | ((uint32_t)emu::from_float<T>(hi).bits << 16);
}

inline void cp_async_16(void* dst, const void* src, bool full) {
  emu::check_shared(dst, 16, 16, "cp.async destination");
  if (full && (uintptr_t)src % 16 != 0) {
    std::fprintf(stderr, "warp emulator: cp.async source %p is not 16-byte aligned\n", src);
    std::abort();
  }
  if (full) std::memcpy(dst, src, 16);
  else std::memset(dst, 0, 16);
}
inline void cp_async_commit() {}
inline void cp_async_wait_all() {}

inline float shfl_xor(float v, int mask) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  float r = 0.0f;
  emu::exchange({bits}, [&](const std::array<emu::Slot, 32>& slots, int lane) {
    const uint32_t theirs = (uint32_t)slots[lane ^ mask][0];
    std::memcpy(&r, &theirs, 4);
  });
  return r;
}

inline float to_f32(emu::bf16 x) { return emu::to_float(x); }
inline float to_f32(emu::f16 x) { return emu::to_float(x); }

// ex2.approx: std::exp2 (the device's result is within about 2⁻²² of it).
inline float fast_exp2(float x) { return std::exp2(x); }

}  // namespace lmforge::kernels::cuda
