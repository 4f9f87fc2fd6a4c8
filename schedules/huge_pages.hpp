#pragma once
// An allocator for the largest arrays of schedule generation and of the engine: each rank's
// op list, the zero-bubble greedy's tables, a compiled schedule's ops and inputs, a run's
// arrival slots. At 65,536 micro-batches on pp 64 they are hundreds of MB, and in 4 KiB
// pages a third of `bmpipe simulate`'s time went to the kernel's page-fault path and much
// of the rest to TLB misses (perf, issue 20, item 7). A block of at least one huge page is
// aligned to 2 MiB and its whole 2 MiB pages are marked MADV_HUGEPAGE, so that Linux backs
// them with transparent huge pages (Debian's default THP mode, "madvise", gives them only
// to marked regions). 1F1B at that size: 0.36-0.60x the wall time, 1.10x the peak memory
// (docs/simulate.md). Smaller blocks, and systems without madvise, take the ordinary path.
// Stateless: no global state.

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace bmpipe {

template <class T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;  // x86-64 and arm64 (4K base)
  static constexpr std::size_t kMinBytes = kHugePage;             // below: not one huge page

  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kMinBytes) return std::allocator<T>{}.allocate(n);
    // Aligned, not rounded up: the whole 2 MiB pages of the block get huge pages and its
    // tail ordinary ones, so a block costs no more memory than it holds.
    void* p = nullptr;
    if (::posix_memalign(&p, kHugePage, bytes) != 0) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    ::madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice: a refusal is harmless
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < kMinBytes)
      std::allocator<T>{}.deallocate(p, n);
    else
      std::free(p);
  }

  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

/// A vector whose large buffers live on huge pages.
template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace bmpipe
