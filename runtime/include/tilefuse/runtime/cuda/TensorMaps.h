//===- TensorMaps.h - the tensor maps of TMA kernels ------------*- C++ -*-===//
//
// A TMA kernel (metadata "kv_tma") reads K and V, and Q where it says "q_tma", and stores O
// where it says "o_tma", through CUtensorMaps its launcher encodes with
// cuTensorMapEncodeTiled (LaunchAbi.h, "TMA kernels", has the layout). kvTensorMap() works out
// that call's arguments and checks them against the driver's documented rules, so that a launch
// the driver would refuse is refused here first, with a message that names the tensor; it calls
// no driver and runs on any machine.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_CUDA_TENSORMAPS_H
#define TILEFUSE_RUNTIME_CUDA_TENSORMAPS_H

#include "tilefuse/runtime/HostView.h"
#include "tilefuse/runtime/cuda/Driver.h"
#include "tilefuse/runtime/device/LaunchAbi.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>

namespace tilefuse::runtime::cuda {

/// The arguments of one cuTensorMapEncodeTiled call, but the map: the enums hold cuda.h's
/// values (runtime/lib/cuda/DriverApi.h declares them).
struct TensorMapArguments {
  static constexpr int rank = launch_abi::kMaxRank;
  int dataType = 0; ///< CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 or _FLOAT16
  DevicePtr globalAddress = 0;
  /// Innermost first: {D, N, Hkv, B}.
  std::array<uint64_t, rank> globalDim{};
  /// In bytes, of the dimensions but the innermost: {n, h, b} x element bytes.
  std::array<uint64_t, rank - 1> globalStrides{};
  /// {tmaBoxColumns(element bytes), block_n, 1, 1}: one 128-byte panel of block_n rows.
  std::array<uint32_t, rank> boxDim{};
  std::array<uint32_t, rank> elementStrides{};
  int interleave = 0;  ///< CU_TENSOR_MAP_INTERLEAVE_NONE
  int swizzle = 0;     ///< CU_TENSOR_MAP_SWIZZLE_128B
  int l2Promotion = 0; ///< CU_TENSOR_MAP_L2_PROMOTION_L2_256B
  int oobFill = 0;     ///< CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: out-of-bounds elements read 0
};

/// The map of K or V (`tensor`, for messages: "K", "V") at `base`, a B x Hkv x N x D tensor
/// with `extents` {B, Hkv, N, D} and element strides `strides` {b, h, n} (D contiguous), of
/// `dtype` (bf16 or f16), read in boxes of `blockN` rows; or of Q ("Q": B x H x M x D, strides
/// {b, h, m}, boxes of block_m rows); or of O ("O": as Q, boxes of launch_abi::kOutputBoxRows
/// rows). Errors are ErrorKind::InvalidArgument and say which tensor and what the driver would
/// refuse: a base that is not 16-byte aligned, a byte stride that is not a multiple of 16 or
/// not below 2^40, a box dimension (its rows) outside [1, 256], a dimension outside [1, 2^32].
llvm::Expected<TensorMapArguments> kvTensorMap(llvm::StringRef tensor, DevicePtr base,
                                               const std::array<int64_t, 4> &extents,
                                               const std::array<int64_t, 3> &strides,
                                               ElementType dtype, int64_t blockN);

} // namespace tilefuse::runtime::cuda

#endif
