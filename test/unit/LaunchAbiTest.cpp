//===- LaunchAbiTest.cpp - the launch ABI's one definition ----------------===//
//
// The parameter list of tilefuse/runtime/device/LaunchAbi.h, as the launchers document it, and
// the CUDA runtime's views of it (abiTensors, AttentionStrides) agreeing with it.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/runtime/cuda/CudaKernel.h"
#include "tilefuse/runtime/device/LaunchAbi.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace tilefuse;

TEST(LaunchAbi, ParameterPositions) {
  EXPECT_EQ(launch_abi::kFirstSize, 5);
  EXPECT_EQ(launch_abi::kFirstStride, 10);
  EXPECT_EQ(launch_abi::kParameterCount, 24);
  EXPECT_EQ(launch_abi::sizeIndex(launch_abi::SizeParameter::B), 0);
  EXPECT_EQ(launch_abi::sizeIndex(launch_abi::SizeParameter::N), 4);
  EXPECT_EQ(launch_abi::sizeIndex(launch_abi::SizeParameter::D), -1); // the kernel's head dim
}

TEST(LaunchAbi, StrideNamesInParameterOrder) {
  std::vector<std::string> names;
  for (int i = 0; i < launch_abi::kStrideCount; ++i)
    names.push_back(launch_abi::strideName(i));
  EXPECT_EQ(names, (std::vector<std::string>{"q_b", "q_h", "q_m", "k_b", "k_h", "k_n", "v_b",
                                             "v_h", "v_n", "o_b", "o_h", "o_m", "lse_b",
                                             "lse_h"}));
}

TEST(LaunchAbi, TheCudaRuntimeViewsIt) {
  namespace cuda = runtime::cuda;
  ASSERT_EQ(cuda::abiTensors().size(), size_t(launch_abi::kTensorCount));
  for (int t = 0; t < launch_abi::kTensorCount; ++t) {
    const cuda::AbiTensor &tensor = cuda::abiTensors()[t];
    EXPECT_EQ(tensor.name, launch_abi::kTensors[t].name);
    ASSERT_EQ(int(tensor.dimensions.size()), launch_abi::kTensors[t].rank);
    for (int d = 0; d < launch_abi::kTensors[t].rank; ++d)
      EXPECT_EQ(tensor.dimensions[d], launch_abi::kTensors[t].dimensions[d]);
  }
  // AttentionStrides' fields are the strides in parameter order.
  cuda::AttentionStrides strides;
  strides.kN = 7;
  strides.lseB = 9;
  std::array<int64_t, cuda::AttentionStrides::count> values = strides.toArray();
  EXPECT_EQ(values[launch_abi::firstStride(1) + 2], 7);
  EXPECT_EQ(values[launch_abi::firstStride(4)], 9);
}
