//===- TensorMaps.cpp - the tensor maps of TMA kernels --------------------===//
#include "tilefuse/runtime/cuda/TensorMaps.h"

#include "DriverApi.h"

#include "llvm/ADT/Twine.h"

using namespace tilefuse;
using namespace tilefuse::runtime;
using namespace tilefuse::runtime::cuda;

static_assert(sizeof(detail::CUtensorMap) == launch_abi::kTensorMapBytes &&
                  alignof(detail::CUtensorMap) == launch_abi::kTensorMapAlignment,
              "LaunchAbi.h's tensor map parameters are CUtensorMaps");

llvm::Expected<TensorMapArguments>
tilefuse::runtime::cuda::kvTensorMap(llvm::StringRef tensor, DevicePtr base,
                                     const std::array<int64_t, 4> &extents,
                                     const std::array<int64_t, 3> &strides, ElementType dtype,
                                     int64_t blockN) {
  auto fail = [&](const llvm::Twine &why) {
    return makeError(ErrorKind::InvalidArgument, "the TMA map of " + tensor + ": " + why);
  };
  TensorMapArguments map;
  switch (dtype) {
  case ElementType::BF16:
    map.dataType = detail::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    break;
  case ElementType::F16:
    map.dataType = detail::CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    break;
  case ElementType::F32:
    return fail("TMA kernels take bf16 or f16 tensors, not f32");
  }
  constexpr int64_t elementBytes = 2;

  // The driver's limits (cuTensorMapEncodeTiled in cuda.h).
  constexpr uint64_t addressAlignment = 16, strideAlignment = 16;
  constexpr uint64_t maxDim = uint64_t(1) << 32, strideLimit = uint64_t(1) << 40;
  constexpr int64_t maxBox = 256;
  if (base % addressAlignment != 0)
    return fail("its base address 0x" + llvm::Twine::utohexstr(base) + " is not " +
                llvm::Twine(addressAlignment) + "-byte aligned");
  map.globalAddress = base;

  // Innermost first: D, N, Hkv, B; the strides of N, Hkv and B (Q's and O's: D, M, H, B; m,
  // h, b).
  bool query = tensor == launch_abi::kTensors[0].name;
  bool output = tensor == launch_abi::kTensors[3].name;
  static constexpr const char *keyDimNames[] = {"D", "N", "Hkv", "B"};
  static constexpr const char *queryDimNames[] = {"D", "M", "H", "B"};
  static constexpr const char *keyStrideNames[] = {"row (n)", "head (h)", "batch (b)"};
  static constexpr const char *queryStrideNames[] = {"row (m)", "head (h)", "batch (b)"};
  const char *const *dimNames = query || output ? queryDimNames : keyDimNames;
  const char *const *strideNames = query || output ? queryStrideNames : keyStrideNames;
  for (int d = 0; d < TensorMapArguments::rank; ++d) {
    int64_t extent = extents[TensorMapArguments::rank - 1 - d];
    if (extent < 1 || uint64_t(extent) > maxDim)
      return fail(llvm::Twine("dimension ") + dimNames[d] + " is " + llvm::Twine(extent) +
                  "; tensor maps take 1 to 2^32");
    map.globalDim[d] = uint64_t(extent);
  }
  for (int d = 0; d + 1 < TensorMapArguments::rank; ++d) {
    int64_t stride = strides[TensorMapArguments::rank - 2 - d];
    // Checked before the product, which must not overflow.
    if (stride < 0 || uint64_t(stride) >= strideLimit / elementBytes)
      return fail(llvm::Twine("the ") + strideNames[d] + " stride of " + llvm::Twine(stride) +
                  " elements is outside [0, 2^40) bytes");
    uint64_t bytes = uint64_t(stride) * elementBytes;
    if (bytes % strideAlignment != 0)
      return fail(llvm::Twine("the ") + strideNames[d] + " stride of " + llvm::Twine(stride) +
                  " elements (" + llvm::Twine(bytes) + " bytes) is not a multiple of " +
                  llvm::Twine(strideAlignment) + " bytes");
    map.globalStrides[d] = bytes;
  }

  // A box is one 128-byte panel of block_n rows (Q's: block_m; O's: kOutputBoxRows, a
  // consumer warpgroup's; LaunchAbi.h); the kernel issues one per panel.
  if (blockN < 1 || blockN > maxBox)
    return fail(llvm::Twine("its box of ") +
                (query ? "block_m = " : output ? "" : "block_n = ") + llvm::Twine(blockN) +
                " rows is outside [1, " + llvm::Twine(maxBox) + "]");
  map.boxDim = {uint32_t(launch_abi::tmaBoxColumns(elementBytes)), uint32_t(blockN), 1, 1};
  map.elementStrides = {1, 1, 1, 1};
  map.interleave = detail::CU_TENSOR_MAP_INTERLEAVE_NONE;
  map.swizzle = detail::CU_TENSOR_MAP_SWIZZLE_128B;
  map.l2Promotion = detail::CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  map.oobFill = detail::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
  return map;
}
