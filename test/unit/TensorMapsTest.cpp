//===- TensorMapsTest.cpp - the tensor maps of TMA kernels ----------------===//
//
// kvTensorMap, the arguments of cuTensorMapEncodeTiled for a TMA kernel's K and V (LaunchAbi.h,
// "TMA kernels"), without a driver: the dimensions innermost first, the byte strides of
// contiguous (BHND) and vLLM-style (BSHD) layouts, the data type of bf16 and f16, the boxes of
// one 128-byte panel whatever the head dim, and the rules the driver would refuse, named.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/runtime/cuda/TensorMaps.h"

#include "cuda/DriverApi.h"

#include <gtest/gtest.h>

#include <array>
#include <string>

using namespace tilefuse;
using namespace tilefuse::runtime;
using namespace tilefuse::runtime::cuda;

namespace {

constexpr DevicePtr base = 0x7f0000001000;

TensorMapArguments mapOf(const std::array<int64_t, 4> &extents,
                         const std::array<int64_t, 3> &strides,
                         ElementType dtype = ElementType::BF16, int64_t blockN = 128,
                         DevicePtr address = base) {
  auto map = kvTensorMap("K", address, extents, strides, dtype, blockN);
  EXPECT_TRUE(bool(map)) << takeReport(map.takeError()).message;
  return map ? *map : TensorMapArguments();
}

/// The message of the refusal of a map `kvTensorMap` should refuse.
std::string refusal(const std::array<int64_t, 4> &extents, const std::array<int64_t, 3> &strides,
                    int64_t blockN = 128, DevicePtr address = base,
                    ElementType dtype = ElementType::BF16) {
  auto map = kvTensorMap("V", address, extents, strides, dtype, blockN);
  if (map)
    return "(accepted)";
  ErrorReport report = takeReport(map.takeError());
  EXPECT_EQ(report.kind, ErrorKind::InvalidArgument);
  return report.message;
}

TEST(TensorMaps, ContiguousBHND) {
  // B = 2, Hkv = 4, N = 1000, D = 128: strides {b, h, n} = {4·1000·128, 1000·128, 128}.
  TensorMapArguments map = mapOf({2, 4, 1000, 128}, {4 * 1000 * 128, 1000 * 128, 128});
  EXPECT_EQ(map.globalAddress, base);
  EXPECT_EQ(map.globalDim, (std::array<uint64_t, 4>{128, 1000, 4, 2}));
  EXPECT_EQ(map.globalStrides, (std::array<uint64_t, 3>{256, 256'000, 1'024'000}));
  EXPECT_EQ(map.boxDim, (std::array<uint32_t, 4>{64, 128, 1, 1}));
  EXPECT_EQ(map.elementStrides, (std::array<uint32_t, 4>{1, 1, 1, 1}));
  EXPECT_EQ(map.dataType, detail::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  EXPECT_EQ(map.interleave, detail::CU_TENSOR_MAP_INTERLEAVE_NONE);
  EXPECT_EQ(map.swizzle, detail::CU_TENSOR_MAP_SWIZZLE_128B);
  EXPECT_EQ(map.l2Promotion, detail::CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  EXPECT_EQ(map.oobFill, detail::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  static_assert(TensorMapArguments::rank == 4);
}

TEST(TensorMaps, BSHDStrides) {
  // vLLM's and FlashAttention's [B, N, Hkv, D]: a row is Hkv·D, a head D, a batch N·Hkv·D.
  TensorMapArguments map = mapOf({3, 8, 500, 64}, {500 * 8 * 64, 64, 8 * 64}, ElementType::F16,
                                 /*blockN=*/64);
  EXPECT_EQ(map.globalDim, (std::array<uint64_t, 4>{64, 500, 8, 3}));
  EXPECT_EQ(map.globalStrides, (std::array<uint64_t, 3>{1024, 128, 512'000}));
  EXPECT_EQ(map.boxDim, (std::array<uint32_t, 4>{64, 64, 1, 1}));
}

TEST(TensorMaps, DataTypeFollowsTheKernel) {
  std::array<int64_t, 3> strides = {64 * 64, 64 * 64, 64};
  EXPECT_EQ(mapOf({1, 1, 64, 64}, strides, ElementType::BF16).dataType,
            detail::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  EXPECT_EQ(mapOf({1, 1, 64, 64}, strides, ElementType::F16).dataType,
            detail::CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
  EXPECT_NE(refusal({1, 1, 64, 64}, strides, 128, base, ElementType::F32)
                .find("TMA kernels take bf16 or f16 tensors, not f32"),
            std::string::npos);
}

TEST(TensorMaps, BoxesAreOnePanelWhateverTheHeadDim) {
  // 2-byte elements: 64 columns a 128-byte panel. D = 96 takes two panels (the second half
  // past D, read as zeros), D = 32 half of one; the box stays one panel.
  ASSERT_EQ(launch_abi::tmaBoxColumns(2), 64);
  for (int64_t d : {96, 32}) {
    TensorMapArguments map = mapOf({2, 2, 300, d}, {2 * 300 * d, 300 * d, d});
    EXPECT_EQ(map.globalDim[0], uint64_t(d));
    EXPECT_EQ(map.globalStrides[0], uint64_t(2 * d));
    EXPECT_EQ(map.boxDim, (std::array<uint32_t, 4>{64, 128, 1, 1})) << "D = " << d;
  }
  EXPECT_EQ(launch_abi::tmaPanels(96, 2), 2);
  EXPECT_EQ(launch_abi::tmaPanels(32, 2), 1);
}

TEST(TensorMaps, RefusesWhatTheDriverWould) {
  const std::array<int64_t, 4> extents = {2, 4, 1000, 128};
  const std::array<int64_t, 3> contiguous = {4 * 1000 * 128, 1000 * 128, 128};
  struct {
    std::string message;
    const char *expected;
  } cases[] = {
      // A row of 100 elements is 200 bytes, not whole 16-byte units.
      {refusal({2, 4, 1000, 100}, {4 * 1000 * 100, 1000 * 100, 100}),
       "the TMA map of V: the row (n) stride of 100 elements (200 bytes) is not a multiple of "
       "16 bytes"},
      {refusal(extents, {4 * 1000 * 128 + 4, 1000 * 128, 128}),
       "the batch (b) stride of 512004 elements (1024008 bytes) is not a multiple of 16"},
      {refusal(extents, contiguous, 128, base + 8),
       "the TMA map of V: its base address 0x7f0000001008 is not 16-byte aligned"},
      {refusal(extents, {int64_t(1) << 39, 1000 * 128, 128}),
       "the batch (b) stride of 549755813888 elements is outside [0, 2^40) bytes"},
      {refusal(extents, {4 * 1000 * 128, -128, 128}), "the head (h) stride of -128 elements"},
      {refusal(extents, contiguous, /*blockN=*/512),
       "its box of block_n = 512 rows is outside [1, 256]"},
      {refusal(extents, contiguous, /*blockN=*/0), "box of block_n = 0 rows"},
      {refusal({2, 4, (int64_t(1) << 32) + 1, 128}, contiguous),
       "dimension N is 4294967297; tensor maps take 1 to 2^32"},
      {refusal({0, 4, 1000, 128}, contiguous), "dimension B is 0"},
  };
  for (const auto &c : cases)
    EXPECT_NE(c.message.find(c.expected), std::string::npos)
        << "message: " << c.message << "\nexpected to contain: " << c.expected;
  // The limits themselves are accepted: 2^32 rows, a stride just below 2^40 bytes, boxes of 256.
  TensorMapArguments edge = mapOf({1, 1, int64_t(1) << 32, 64},
                                  {(int64_t(1) << 39) - 8, 64, 64}, ElementType::BF16, 256);
  EXPECT_EQ(edge.globalDim[1], uint64_t(1) << 32);
  EXPECT_EQ(edge.globalStrides[2], (uint64_t(1) << 40) - 16);
  EXPECT_EQ(edge.boxDim[1], 256u);
}

// Q's map (q_map, LaunchAbi.h): B x H x M x D in boxes of block_m rows; its refusals name Q's
// dimensions and block_m.
TEST(TensorMaps, QueryMapNamesItsDimensions) {
  auto map = kvTensorMap("Q", base, {2, 16, 1000, 128}, {16 * 1000 * 128, 1000 * 128, 128},
                         ElementType::BF16, 192);
  ASSERT_TRUE(bool(map)) << takeReport(map.takeError()).message;
  EXPECT_EQ(map->globalDim, (std::array<uint64_t, 4>{128, 1000, 16, 2}));
  EXPECT_EQ(map->boxDim, (std::array<uint32_t, 4>{64, 192, 1, 1}));
  auto tooMany = kvTensorMap("Q", base, {2, 16, (int64_t(1) << 32) + 1, 128},
                             {16 * 1000 * 128, 1000 * 128, 128}, ElementType::BF16, 512);
  ASSERT_FALSE(bool(tooMany));
  std::string message = takeReport(tooMany.takeError()).message;
  EXPECT_NE(message.find("the TMA map of Q: dimension M is 4294967297"), std::string::npos)
      << message;
  auto wideBox = kvTensorMap("Q", base, {2, 16, 1000, 128}, {16 * 1000 * 128, 1000 * 128, 128},
                             ElementType::BF16, 512);
  ASSERT_FALSE(bool(wideBox));
  message = takeReport(wideBox.takeError()).message;
  EXPECT_NE(message.find("its box of block_m = 512 rows"), std::string::npos) << message;
}

// O's map (o_map, LaunchAbi.h): B x H x M x D as Q's, in boxes of kOutputBoxRows rows, one
// consumer warpgroup's; its refusals name O's dimensions and strides.
TEST(TensorMaps, OutputMapNamesItsDimensions) {
  auto map = kvTensorMap("O", base, {2, 16, 1000, 128}, {16 * 1000 * 128, 1000 * 128, 128},
                         ElementType::F16, launch_abi::kOutputBoxRows);
  ASSERT_TRUE(bool(map)) << takeReport(map.takeError()).message;
  EXPECT_EQ(map->globalDim, (std::array<uint64_t, 4>{128, 1000, 16, 2}));
  EXPECT_EQ(map->globalStrides, (std::array<uint64_t, 3>{256, 256'000, 4'096'000}));
  EXPECT_EQ(map->boxDim, (std::array<uint32_t, 4>{64, 64, 1, 1}));
  EXPECT_EQ(map->dataType, detail::CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
  EXPECT_EQ(map->swizzle, detail::CU_TENSOR_MAP_SWIZZLE_128B);
  auto tooMany = kvTensorMap("O", base, {2, 16, (int64_t(1) << 32) + 1, 128},
                             {16 * 1000 * 128, 1000 * 128, 128}, ElementType::BF16,
                             launch_abi::kOutputBoxRows);
  ASSERT_FALSE(bool(tooMany));
  std::string message = takeReport(tooMany.takeError()).message;
  EXPECT_NE(message.find("the TMA map of O: dimension M is 4294967297"), std::string::npos)
      << message;
  auto oddRows = kvTensorMap("O", base, {2, 16, 1000, 100}, {16 * 1000 * 100, 1000 * 100, 100},
                             ElementType::BF16, launch_abi::kOutputBoxRows);
  ASSERT_FALSE(bool(oddRows));
  message = takeReport(oddRows.takeError()).message;
  EXPECT_NE(message.find("the TMA map of O: the row (m) stride of 100 elements (200 bytes)"),
            std::string::npos)
      << message;
  auto wideBox = kvTensorMap("O", base, {2, 16, 1000, 128}, {16 * 1000 * 128, 1000 * 128, 128},
                             ElementType::BF16, 512);
  ASSERT_FALSE(bool(wideBox));
  message = takeReport(wideBox.takeError()).message;
  EXPECT_NE(message.find("its box of 512 rows"), std::string::npos) << message;
}

} // namespace
