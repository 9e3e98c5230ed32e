// defines: lmforge::kernels::guarded::GuardedBackend (the GUARDED test device: CPU kernels over memory the process
//          can touch only inside the backend's own calls), Opened (its operands made accessible for one call),
//          guarded_backend(), register_kernels(). Private to the kernels module.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"

namespace lmforge::kernels {
class KernelTable;
}

namespace lmforge::kernels::guarded {

// Every allocation is its own page-aligned anonymous mapping, kept PROT_NONE except while one of the backend's
// memory calls (copies, fill_zero) or an op dispatched to the device runs on it; the ops are the CPU's, wrapped
// (dispatch_guarded.cpp). Any other access from the host — code outside kernels/ reading a device pointer as if it
// were host memory — is a segmentation fault at the access.
class GuardedBackend final : public Backend {
 public:
  Device device() const override { return Device::GUARDED; }
  const char* name() const override { return "guarded"; }
  std::string info() const override;
  void* alloc(size_t bytes) override;
  void free(void* p) override;
  void copy_to_device(void* dst_device, const void* src_host, size_t bytes) override;
  void copy_to_host(void* dst_host, const void* src_device, size_t bytes) override;
  void copy_on_device(void* dst_device, const void* src_device, size_t bytes) override;
  void fill_zero(void* p, size_t bytes) override;
  void synchronize() override {}
  // The CPU's threads run the kernels.
  void set_num_threads(int n) override { cpu_backend().set_num_threads(n); }
  int num_threads() const override { return cpu_backend().num_threads(); }

  // Makes the allocations holding these addresses readable and writable until the matching close(); an allocation
  // opened several times (an operand passed twice, calls from several threads) is protected again when the last
  // close() comes. nullptr (an absent operand) is skipped; an address outside every allocation is an
  // lmforge::Error (a host pointer labelled with this device).
  void open(const std::vector<const void*>& addresses);
  void close(const std::vector<const void*>& addresses);

 private:
  struct Region {
    size_t bytes;  // mapped: a whole number of pages
    int opened;    // open() calls not yet closed
  };
  // The first address and the region of the allocation holding p (mutex_ held); lmforge::Error for none.
  std::pair<uintptr_t, Region*> region_of(const void* p);

  std::mutex mutex_;
  std::map<uintptr_t, Region> regions_;  // by first address
};

// The allocations of `addresses` open for the lifetime of this object.
class Opened {
 public:
  Opened(GuardedBackend& backend, std::initializer_list<const void*> addresses);
  Opened(GuardedBackend& backend, std::vector<const void*> addresses);
  ~Opened();
  Opened(const Opened&) = delete;
  Opened& operator=(const Opened&) = delete;

 private:
  GuardedBackend& backend_;
  std::vector<const void*> addresses_;
};

GuardedBackend& guarded_backend();

// Registers, for every entry point and dtype the CPU implements, the same kernel with its operands opened around
// the call (after the CPU's registration).
void register_kernels(KernelTable& table);

}  // namespace lmforge::kernels::guarded
