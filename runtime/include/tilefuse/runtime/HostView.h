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

/// The addressing of a paged key/value cache (kernels compiled with paged KV, tile-paged-kv):
/// K and V are pages x Hkv x pageSize x D views, and batch b's key/value row n is row
/// n % pageSize of page pageTable[b * tableStride + n / pageSize]; batch b has kvLengths[b] rows.
/// The pointers are host pointers for the CPU backend, device pointers for a GPU launch.
struct PagedKV {
  const int32_t *pageTable = nullptr; ///< B x pagesPerSequence, row stride tableStride
  int64_t pagesPerSequence = 0;
  int64_t tableStride = 0;
  const int32_t *kvLengths = nullptr; ///< B
  /// Rows per page and pages of the K and V caches. A GPU launch takes them from here (its K
  /// and V are bare pointers, and N is an upper bound of kvLengths); the CPU backend reads them
  /// from the cache views, which they must match when set.
  int64_t pageSize = 0, pages = 0;

  /// The fields in the order of the C APIs' paged launches (tilefuse.h, tilefuse_cuda.h).
  static PagedKV of(const int32_t *pageTable, int64_t pagesPerSequence, int64_t tableStride,
                    const int32_t *kvLengths, int64_t pageSize, int64_t pages) {
    PagedKV paged;
    paged.pageTable = pageTable;
    paged.pagesPerSequence = pagesPerSequence;
    paged.tableStride = tableStride;
    paged.kvLengths = kvLengths;
    paged.pageSize = pageSize;
    paged.pages = pages;
    return paged;
  }
};

/// A packed batch of variable-length sequences (kernels compiled with varlen, tile-varlen; the
/// THD layout of FlashAttention's varlen API): Q, O and LSE hold the sequences' query rows one
/// after another, K and V their key/value rows; sequence b's query rows are cuSeqlensQ[b] up to
/// cuSeqlensQ[b + 1] (its keys: cuSeqlensK). The views are B x H x L x D (LSE B x H x L): B
/// counts sequences, L bounds their lengths (the longest, as FlashAttention's max_seqlen), and
/// the batch stride is not used: tokens() and lse() build them. The pointers are host pointers
/// for the CPU backend, device pointers for a GPU launch.
struct Varlen {
  const int32_t *cuSeqlensQ = nullptr; ///< B + 1, non-decreasing
  const int32_t *cuSeqlensK = nullptr; ///< B + 1, non-decreasing
  /// Rows of the packed tensors: Q, O and LSE have totalQ, K and V totalK (at least the last
  /// offsets). A GPU launch bounds the kernels' 32-bit offsets by them (the offsets live on the
  /// device, unread); the CPU backend checks the offsets against them.
  int64_t totalQ = 0, totalK = 0;

  /// The fields in the order of the C APIs' varlen launches (tilefuse.h, tilefuse_cuda.h).
  static Varlen of(const int32_t *cuSeqlensQ, const int32_t *cuSeqlensK, int64_t totalQ,
                   int64_t totalK) {
    Varlen varlen;
    varlen.cuSeqlensQ = cuSeqlensQ;
    varlen.cuSeqlensK = cuSeqlensK;
    varlen.totalQ = totalQ;
    varlen.totalK = totalK;
    return varlen;
  }

  /// The view of a packed [tokens, heads, D] tensor (THD, contiguous) holding `sequences`
  /// sequences of at most `maxLength` rows.
  static HostView tokens(void *data, int64_t sequences, int64_t heads, int64_t maxLength,
                         int64_t headDim) {
    HostView v;
    v.data = data;
    v.sizes = {sequences, heads, maxLength, headDim};
    v.strides = {0, headDim, heads * headDim, 1};
    return v;
  }

  /// The view of a packed [heads, totalTokens] logsumexp (FlashAttention's varlen LSE layout).
  static HostView lse(float *data, int64_t sequences, int64_t heads, int64_t maxLength,
                      int64_t totalTokens) {
    HostView v;
    v.data = data;
    v.rank = 3;
    v.sizes = {sequences, heads, maxLength, 0};
    v.strides = {0, totalTokens, 1, 0};
    return v;
  }
};

} // namespace tilefuse::runtime

#endif
