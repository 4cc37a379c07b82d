//===- HostView.h - a strided view of host memory ---------------*- C++ -*-===//
#ifndef TILEFUSE_RUNTIME_HOSTVIEW_H
#define TILEFUSE_RUNTIME_HOSTVIEW_H

#include <array>
#include <cstdint>

namespace tilefuse::runtime {

/// Storage element types a kernel reads and writes.
enum class ElementType { BF16, F16, F32 };

/// A rank-3 or rank-4 view of memory: sizes and strides counted in elements.
struct HostView {
  void *data = nullptr;
  int rank = 4;
  std::array<int64_t, 4> sizes{};
  std::array<int64_t, 4> strides{};

  /// A contiguous row-major view.
  static HostView contiguous(void *data, std::array<int64_t, 4> sizes, int rank = 4) {
    HostView v;
    v.data = data;
    v.rank = rank;
    v.sizes = sizes;
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; --i) {
      v.strides[i] = s;
      s *= sizes[i];
    }
    return v;
  }
};

} // namespace tilefuse::runtime

#endif
