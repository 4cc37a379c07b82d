//===- LaunchAbiTest.cpp - the launch ABI's one definition ----------------===//
//
// The parameter list of tilefuse/runtime/device/LaunchAbi.h, as the launchers document it, and
// the CUDA runtime's views of it (abiTensors, AttentionStrides) agreeing with it.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/runtime/cuda/CudaBackwardKernel.h"
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

// The split-KV workspace (tile-split-kv): counters first (a reused allocation keeps the zeroed
// counters at its start), then the partial O and LSE, each 256-byte aligned and large enough.
TEST(LaunchAbi, SplitWorkspaceLayout) {
  constexpr auto w = launch_abi::splitWorkspace(/*S=*/5, /*B=*/2, /*H=*/3, /*Hkv=*/3, /*M=*/17,
                                                /*D=*/64, /*blockM=*/16, /*packGqa=*/false);
  static_assert(w.countersOffset == 0);
  EXPECT_EQ(w.counterBytes, 2 * 3 * 2 * 4); // ceil(17 / 16) = 2 row blocks
  EXPECT_EQ(w.outputPartOffset % 256, 0);
  EXPECT_GE(w.outputPartOffset, w.counterBytes);
  EXPECT_EQ(w.lsePartOffset % 256, 0);
  EXPECT_GE(w.lsePartOffset - w.outputPartOffset, 5 * 2 * 3 * 17 * 64 * 4);
  EXPECT_GE(w.bytes - w.lsePartOffset, 5 * 2 * 3 * 17 * 4);
  EXPECT_EQ(launch_abi::kSplitParameterCount, 4);
}

// The program grid: one program per row block of a query head, or (GQA packing) per row block
// of the G·M packed rows of a key/value head; packed split counters follow the packed grid.
TEST(LaunchAbi, ProgramGrid) {
  constexpr auto plain = launch_abi::programGrid(/*B=*/2, /*H=*/32, /*Hkv=*/8, /*M=*/1,
                                                 /*blockM=*/64, /*packGqa=*/false);
  static_assert(plain.rowBlocks == 1 && plain.heads == 32 && plain.batch == 2);
  constexpr auto packed = launch_abi::programGrid(2, 32, 8, 1, 64, true);
  static_assert(packed.rowBlocks == 1 && packed.heads == 8 && packed.batch == 2);
  // 4 heads x 17 rows = 68 packed rows: 5 blocks of 16, where each head alone needs 2.
  constexpr auto odd = launch_abi::programGrid(1, 8, 2, 17, 16, true);
  static_assert(odd.rowBlocks == 5 && odd.heads == 2);
  constexpr auto w = launch_abi::splitWorkspace(3, 1, 8, 2, 17, 64, 16, true);
  EXPECT_EQ(w.counterBytes, 1 * 2 * 5 * 4);
  EXPECT_GE(w.lsePartOffset - w.outputPartOffset, 3 * 8 * 17 * 64 * 4);
}

// A persistent kernel's programs: the tiles, or when fewer the CTAs the GPU holds at once; never
// none (a driver that cannot say how many CTAs fit still launches every tile).
TEST(LaunchAbi, PersistentPrograms) {
  constexpr auto grid = launch_abi::programGrid(/*B=*/16, /*H=*/16, /*Hkv=*/16, /*M=*/1024,
                                                /*blockM=*/128, /*packGqa=*/false);
  static_assert(launch_abi::persistentPrograms(grid, /*multiprocessors=*/132, 1) == 132);
  static_assert(launch_abi::persistentPrograms(grid, 132, 2) == 264);
  constexpr auto small = launch_abi::programGrid(1, 2, 2, 300, 128, false);
  static_assert(launch_abi::persistentPrograms(small, 132, 1) == 6);
  static_assert(launch_abi::persistentPrograms(grid, 0, 0) == 16 * 16 * 8);
  constexpr auto empty = launch_abi::programGrid(1, 1, 1, 0, 128, false);
  static_assert(launch_abi::persistentPrograms(empty, 132, 1) == 1);
}

// The sidecar's "persistent": read, and refused beside split or paged (a varlen kernel may be
// persistent).
TEST(LaunchAbi, SidecarSaysPersistent) {
  namespace cuda = runtime::cuda;
  std::string sidecar = R"({"name": "attention", "block_m": 128, "block_n": 128,
    "threads": 384, "head_dim": 64, "dtype": "bf16", "shared_bytes": 0, "kv_tma": true,
    "persistent": true,
    "declared_sizes": {"Q": [null, null, null, 64], "K": [null, null, null, 64],
                       "V": [null, null, null, 64], "O": [null, null, null, 64],
                       "LSE": [null, null, null]}})";
  auto metadata = cuda::KernelMetadata::parse(sidecar, "persistent.json");
  ASSERT_TRUE(bool(metadata)) << llvm::toString(metadata.takeError());
  EXPECT_TRUE(metadata->persistent);
  std::string split = sidecar;
  split.insert(split.find("\"persistent\""), "\"split_kv\": true, ");
  auto refused = cuda::KernelMetadata::parse(split, "persistent.json");
  ASSERT_FALSE(bool(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("a persistent kernel"), std::string::npos);
  std::string varlen = sidecar;
  varlen.insert(varlen.find("\"persistent\""), "\"varlen\": true, ");
  auto packed = cuda::KernelMetadata::parse(varlen, "persistent.json");
  ASSERT_TRUE(bool(packed)) << llvm::toString(packed.takeError());
  EXPECT_TRUE(packed->persistent && packed->varlen);
}

// The sidecar's "q_tma": read, and refused without "kv_tma"; beside "varlen" Q's map addresses
// the packed rows as K's and V's do.
TEST(LaunchAbi, SidecarSaysQueryTma) {
  namespace cuda = runtime::cuda;
  std::string sidecar = R"({"name": "attention", "block_m": 128, "block_n": 128,
    "threads": 384, "head_dim": 64, "dtype": "bf16", "shared_bytes": 0, "kv_tma": true,
    "q_tma": true,
    "declared_sizes": {"Q": [null, null, null, 64], "K": [null, null, null, 64],
                       "V": [null, null, null, 64], "O": [null, null, null, 64],
                       "LSE": [null, null, null]}})";
  auto metadata = cuda::KernelMetadata::parse(sidecar, "q.json");
  ASSERT_TRUE(bool(metadata)) << llvm::toString(metadata.takeError());
  EXPECT_TRUE(metadata->qTma && metadata->kvTma);
  std::string changed = std::string(sidecar).replace(sidecar.find("\"kv_tma\": true"), 14,
                                                     "\"kv_tma\": false");
  auto refused = cuda::KernelMetadata::parse(changed, "q.json");
  ASSERT_FALSE(bool(refused)) << changed;
  EXPECT_NE(llvm::toString(refused.takeError()).find("loads Q with TMA"), std::string::npos);

  // Packed: Q's map lies over a base M rows before q (LaunchAbi.h), which must not wrap.
  auto packed = cuda::KernelMetadata::parse(
      std::string(sidecar).insert(sidecar.find("\"q_tma\""), "\"varlen\": true, "), "q.json");
  ASSERT_TRUE(bool(packed)) << llvm::toString(packed.takeError());
  EXPECT_TRUE(packed->varlen && packed->qTma);
  cuda::AttentionShape shape{1, 4, 4, 100, 256, 64};
  cuda::AttentionStrides strides = cuda::AttentionStrides::contiguous(shape);
  int32_t offsets[2] = {0, 100};
  runtime::Varlen varlen = runtime::Varlen::of(offsets, offsets, 100, 100);
  // M rows of q's row stride: 100 x 64 x 2 bytes = 0x3200.
  cuda::AttentionBuffers buffers{0x3200, 0x10000, 0x20000, 0x30000, 0x40000};
  llvm::Error accepted = cuda::validateLaunch(*packed, buffers, shape, strides, nullptr, &varlen);
  EXPECT_FALSE(bool(accepted)) << llvm::toString(std::move(accepted));
  buffers.q = 0x3100;
  llvm::Error wraps = cuda::validateLaunch(*packed, buffers, shape, strides, nullptr, &varlen);
  ASSERT_TRUE(bool(wraps));
  std::string message = llvm::toString(std::move(wraps));
  EXPECT_NE(message.find("a packed Q below address 12800 (M rows)"), std::string::npos)
      << message;
  static_assert(launch_abi::tensorMapCount(false) == 2 && launch_abi::tensorMapCount(true) == 3);
  static_assert(launch_abi::tensorMapIndex(1) == 0 && launch_abi::tensorMapIndex(2) == 1 &&
                launch_abi::tensorMapIndex(0) == 2 && launch_abi::tensorMapIndex(4) == -1);
}

// The sidecar's "o_tma": read, and refused without "q_tma", beside "varlen" (O's map is a
// padded batch's) or beside "split_kv" (a split kernel stores partial outputs, not O).
TEST(LaunchAbi, SidecarSaysOutputTma) {
  namespace cuda = runtime::cuda;
  std::string sidecar = R"({"name": "attention", "block_m": 128, "block_n": 128,
    "threads": 384, "head_dim": 64, "dtype": "bf16", "shared_bytes": 0, "kv_tma": true,
    "q_tma": true, "o_tma": true,
    "declared_sizes": {"Q": [null, null, null, 64], "K": [null, null, null, 64],
                       "V": [null, null, null, 64], "O": [null, null, null, 64],
                       "LSE": [null, null, null]}})";
  auto metadata = cuda::KernelMetadata::parse(sidecar, "o.json");
  ASSERT_TRUE(bool(metadata)) << llvm::toString(metadata.takeError());
  EXPECT_TRUE(metadata->oTma && metadata->qTma && metadata->kvTma);
  for (std::string changed : {std::string(sidecar).replace(sidecar.find("\"q_tma\": true"),
                                                           13, "\"q_tma\": false"),
                              std::string(sidecar).insert(sidecar.find("\"o_tma\""),
                                                          "\"split_kv\": true, "),
                              std::string(sidecar).insert(sidecar.find("\"o_tma\""),
                                                          "\"varlen\": true, ")}) {
    auto refused = cuda::KernelMetadata::parse(changed, "o.json");
    ASSERT_FALSE(bool(refused)) << changed;
    EXPECT_NE(llvm::toString(refused.takeError()).find("stores O with TMA"), std::string::npos)
        << changed;
  }
  std::string without = sidecar;
  without.erase(without.find(" \"o_tma\": true,"), 15);
  auto plain = cuda::KernelMetadata::parse(without, "o.json");
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  EXPECT_FALSE(plain->oTma);
  EXPECT_TRUE(plain->qTma);

  // A launch builds O's map too (B x H x M x D, as Q's): what the driver would refuse of it is
  // refused before anything runs, naming O and its dimensions; without "o_tma" O has no map.
  cuda::AttentionShape shape{2, 4, 4, 100, 256, 64};
  cuda::AttentionStrides strides = cuda::AttentionStrides::contiguous(shape);
  cuda::AttentionBuffers buffers{0x10000, 0x20000, 0x30000, 0x40000, 0x50000};
  llvm::Error accepted = cuda::validateLaunch(*metadata, buffers, shape, strides);
  EXPECT_FALSE(bool(accepted)) << llvm::toString(std::move(accepted));
  cuda::AttentionBuffers shifted = buffers;
  shifted.o += 8; // aligned for the kernel's element pairs, not for a tensor map
  llvm::Error misaligned = cuda::validateLaunch(*metadata, shifted, shape, strides);
  ASSERT_TRUE(bool(misaligned));
  std::string message = llvm::toString(std::move(misaligned));
  EXPECT_NE(message.find("the TMA map of O: its base address 0x40008 is not 16-byte aligned"),
            std::string::npos)
      << message;
  llvm::Error withoutMap = cuda::validateLaunch(*plain, shifted, shape, strides);
  EXPECT_FALSE(bool(withoutMap)) << llvm::toString(std::move(withoutMap));
  cuda::AttentionStrides padded = strides;
  padded.oM = 68; // 136-byte rows: even, but not whole 16 bytes
  padded.oH = 100 * 68;
  padded.oB = 4 * 100 * 68;
  llvm::Error oddRows = cuda::validateLaunch(*metadata, buffers, shape, padded);
  ASSERT_TRUE(bool(oddRows));
  message = llvm::toString(std::move(oddRows));
  EXPECT_NE(message.find("the TMA map of O: the row (m) stride of 68 elements (136 bytes)"),
            std::string::npos)
      << message;
  // O's map is the fourth, after Q's, and only beside Q's.
  static_assert(launch_abi::tensorMapCount(true, true) == 4 &&
                launch_abi::tensorMapCount(false, true) == 2 &&
                launch_abi::tensorMapCount(true, false) == 3);
  static_assert(launch_abi::tensorMapIndex(3) == 3 &&
                launch_abi::kTensorMapCount == launch_abi::tensorMapCount(true, true));
}

TEST(LaunchAbi, SidecarSaysSplitKV) {
  namespace cuda = runtime::cuda;
  std::string sidecar = R"({"name": "attention", "block_m": 64, "block_n": 64, "threads": 128,
    "head_dim": 64, "dtype": "bf16", "shared_bytes": 0, "split_kv": true,
    "declared_sizes": {"Q": [null, null, null, 64], "K": [null, null, null, 64],
                       "V": [null, null, null, 64], "O": [null, null, null, 64],
                       "LSE": [null, null, null]}})";
  auto metadata = cuda::KernelMetadata::parse(sidecar, "split.json");
  ASSERT_TRUE(bool(metadata)) << llvm::toString(metadata.takeError());
  EXPECT_TRUE(metadata->splitKv);
  std::string bad = sidecar;
  bad.replace(bad.find("true"), 4, "\"yes\"");
  auto refused = cuda::KernelMetadata::parse(bad, "split.json");
  ASSERT_FALSE(bool(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("\"split_kv\" must be true or false"),
            std::string::npos);
}

// The launcher's split count (CudaKernel::chooseKeySplits): one wave of CTAs where it can, never
// a split for a grid that fills the GPU, at least one key block per split.
TEST(LaunchAbi, KeySplitPolicy) {
  using runtime::cuda::CudaKernel;
  // Decode, B = 8 x 8 KV heads packed: 64 programs on 132 SMs x 2. S = 4 is one wave of 256;
  // S = 5 would add a second wave of 56 CTAs.
  EXPECT_EQ(CudaKernel::chooseKeySplits(64, 264, 512), 4);
  EXPECT_EQ(CudaKernel::chooseKeySplits(64, 264, 64), 4);
  // B = 1: 8 programs, one wave whatever S up to 33; the merge's cost (half a key block per
  // split) against the split length decides. Measured (Bc = 128): at 32k (256 key blocks) S = 16
  // beat S = 32 by 9%, at 4k (32 key blocks) S = 8 beat S = 4 by 20%.
  EXPECT_EQ(CudaKernel::chooseKeySplits(8, 264, 256), 20);
  EXPECT_EQ(CudaKernel::chooseKeySplits(8, 264, 32), 8);
  // Short keys: at most one split per key block; measured (B = 8, 512 keys, 4 key blocks of
  // 128): 2 splits beat 1 by 8%.
  EXPECT_EQ(CudaKernel::chooseKeySplits(8, 264, 16), 4);
  EXPECT_EQ(CudaKernel::chooseKeySplits(8, 264, 3), 3);
  EXPECT_EQ(CudaKernel::chooseKeySplits(64, 264, 4), 2);
  EXPECT_EQ(CudaKernel::chooseKeySplits(64, 264, 1), 1);
  // A full grid is not split.
  EXPECT_EQ(CudaKernel::chooseKeySplits(264, 264, 4096), 1);
  EXPECT_EQ(CudaKernel::chooseKeySplits(1000, 264, 4096), 1);
  // At most 128.
  EXPECT_EQ(CudaKernel::chooseKeySplits(1, 1000, 100000), 128);
}

// The backward's launch form (LaunchAbi.h): the nine tensors, then the two workspaces, the
// sizes and every tensor's strides; the phases' grids; the workspaces' layout.
TEST(LaunchAbi, BackwardParameters) {
  EXPECT_EQ(launch_abi::kBackwardFirstSize, 11);
  EXPECT_EQ(launch_abi::kBackwardFirstStride, 16);
  EXPECT_EQ(launch_abi::kBackwardParameterCount, 47);
  std::vector<std::string> names;
  for (const launch_abi::Tensor &t : launch_abi::kBackwardTensors)
    names.push_back(t.parameterName);
  EXPECT_EQ(names, (std::vector<std::string>{"q", "k", "v", "o", "do", "lse", "dq", "dk", "dv",
                                             "delta", "dq_accum"}));
  // dO's strides follow O's, the workspaces' the gradients'.
  EXPECT_EQ(launch_abi::backwardFirstStride(4), 12);
  EXPECT_EQ(launch_abi::backwardFirstStride(launch_abi::kBackwardDeltaTensor), 26);
  EXPECT_EQ(launch_abi::backwardFirstStride(launch_abi::kBackwardAccumulatorTensor), 28);
}

TEST(LaunchAbi, BackwardGridsAndWorkspace) {
  using launch_abi::BackwardPhase;
  // Preprocess and dQ over query row blocks of every head; dK/dV over key blocks of every
  // key/value head.
  auto pre = launch_abi::backwardGrid(BackwardPhase::Preprocess, 2, 8, 2, 300, 129, 64, 64);
  EXPECT_EQ(pre.rowBlocks, 5);
  EXPECT_EQ(pre.heads, 8);
  EXPECT_EQ(pre.batch, 2);
  auto keys = launch_abi::backwardGrid(BackwardPhase::KeyGradients, 2, 8, 2, 300, 129, 64, 64);
  EXPECT_EQ(keys.rowBlocks, 3);
  EXPECT_EQ(keys.heads, 2);
  auto w = launch_abi::backwardWorkspace(2, 8, 300, 64, /*deterministic=*/false);
  EXPECT_EQ(w.deltaOffset, 0);
  EXPECT_EQ(w.accumulatorOffset, launch_abi::alignTo256(2 * 8 * 300 * 4));
  EXPECT_EQ(w.bytes, w.accumulatorOffset + launch_abi::alignTo256(2 * 8 * 300 * 64 * 4));
  EXPECT_EQ(launch_abi::backwardWorkspace(2, 8, 300, 64, /*deterministic=*/true).bytes,
            w.accumulatorOffset);
  EXPECT_STREQ(launch_abi::backwardPhaseName(BackwardPhase::KeyGradients), "key_gradients");
}

TEST(LaunchAbi, BackwardStridesAreTheTensorsInOrder) {
  namespace cuda = runtime::cuda;
  cuda::AttentionShape shape{2, 8, 2, 300, 129, 64};
  cuda::BackwardStrides s = cuda::BackwardStrides::contiguous(shape);
  // Q, then K (Hkv heads of N rows), ..., dV.
  EXPECT_EQ(s.values[0], 8 * 300 * 64);
  EXPECT_EQ(s.values[2], 64);
  EXPECT_EQ(s.values[3], 2 * 129 * 64);
  EXPECT_EQ(s.values[15], 8 * 300); // lse_b
  EXPECT_EQ(s.values[16], 300);     // lse_h
  EXPECT_EQ(s.values[23], 2 * 129 * 64); // dv_b
  EXPECT_EQ(cuda::BackwardStrides::count, 26);
}

TEST(LaunchAbi, SidecarSaysBackwardPhase) {
  namespace cuda = runtime::cuda;
  std::string sidecar = R"({"name": "causal_backward_key_gradients", "block_m": 64,
    "block_n": 64, "threads": 128, "head_dim": 64, "dtype": "bf16", "shared_bytes": 65536,
    "backward_phase": "key_gradients", "deterministic": true,
    "declared_sizes": {"Q": [null, null, null, 64], "K": [null, null, null, 64],
                       "V": [null, null, null, 64], "O": [null, null, null, 64],
                       "LSE": [null, null, null]}})";
  auto metadata = cuda::KernelMetadata::parse(sidecar, "backward.json");
  ASSERT_TRUE(bool(metadata)) << llvm::toString(metadata.takeError());
  EXPECT_EQ(metadata->backwardPhase, "key_gradients");
  EXPECT_TRUE(metadata->deterministic);
  std::string bad = sidecar;
  bad.replace(bad.find("\"key_gradients\""), 15, "\"dq\"");
  auto refused = cuda::KernelMetadata::parse(bad, "backward.json");
  ASSERT_FALSE(bool(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("must be preprocess, key_gradients or"),
            std::string::npos);
  // A forward launch refuses a backward phase.
  cuda::AttentionShape shape{1, 1, 1, 64, 64, 64};
  llvm::Error error = cuda::validateLaunch(*metadata, {1, 1, 1, 1, 1}, shape,
                                           cuda::AttentionStrides::contiguous(shape));
  ASSERT_TRUE(bool(error));
  EXPECT_NE(llvm::toString(std::move(error)).find("launch the three phases with"),
            std::string::npos);
  // The backward launcher wants its three phases in order.
  auto wrong = cuda::CudaBackwardKernel::load("", {*metadata});
  ASSERT_FALSE(bool(wrong));
  EXPECT_NE(llvm::toString(wrong.takeError()).find("three phases"), std::string::npos);
}

TEST(LaunchAbi, BackwardStridesFromThePublicOrder) {
  namespace cuda = runtime::cuda;
  // q, k, v, o, lse, then dO, dQ, dK, dV: each value its position.
  std::array<int64_t, 26> publicOrder;
  for (int i = 0; i < 26; ++i)
    publicOrder[i] = i;
  cuda::BackwardStrides s = cuda::BackwardStrides::fromPublicOrder(publicOrder.data());
  EXPECT_EQ(s.values[9], 9);   // o_b
  EXPECT_EQ(s.values[12], 14); // do_b, after lse's two
  EXPECT_EQ(s.values[15], 12); // lse_b
  EXPECT_EQ(s.values[17], 17); // dq_b
  EXPECT_EQ(s.values[25], 25); // dv_n
}
