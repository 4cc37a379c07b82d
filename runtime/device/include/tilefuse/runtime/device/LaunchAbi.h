//===- LaunchAbi.h - the kernel launch ABI ----------------------*- C++ -*-===//
//
// The one definition of how a compiled attention kernel is called. Header-only and standard C++
// only, so that every side of the call includes it: codegen's signature lowering (convert-tgpu-to-nvvm
// builds the gpu.func from it), the CUDA runtime (argument packing and launch checks) and the
// AOT header's C launcher (generated from it).
//
// Parameters, in order:
//   q, k, v, o, lse                  device pointers (!llvm.ptr<1>, .u64 in PTX)
//   B, H, Hkv, M, N                  i64 sizes (D is not one: the kernel's static head dim)
//   q_b, q_h, q_m, k_b, k_h, k_n,    i64 element strides of every dimension but the innermost,
//   v_b, v_h, v_n, o_b, o_h, o_m,    which is contiguous
//   lse_b, lse_h
// Q and O are B x H x M x D, K and V are B x Hkv x N x D (the kernel's dtype), LSE is B x H x M
// (f32). Grid programGrid(...) (ceil(M / block_m), H, B; with GQA packing ceil(H / Hkv * M /
// block_m), Hkv, B), block (threads, 1, 1), dynamic shared memory shared_bytes (the kernel's
// metadata).
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_DEVICE_LAUNCHABI_H
#define TILEFUSE_RUNTIME_DEVICE_LAUNCHABI_H

#include <string>

namespace tilefuse::launch_abi {

/// The sizes of the attention problem; every tensor dimension is one of them.
enum class SizeParameter { B, H, Hkv, M, N, D };

constexpr const char *sizeName(SizeParameter parameter) {
  switch (parameter) {
  case SizeParameter::B:
    return "B";
  case SizeParameter::H:
    return "H";
  case SizeParameter::Hkv:
    return "Hkv";
  case SizeParameter::M:
    return "M";
  case SizeParameter::N:
    return "N";
  case SizeParameter::D:
    return "D";
  }
  return "?";
}

inline constexpr int kMaxRank = 4;

/// A tensor parameter: its name in messages ("Q"), its parameter's name in launchers ("q"),
/// per dimension the size that is its extent, and the names of its strides (every dimension
/// but the innermost, which is contiguous).
struct Tensor {
  const char *name;
  const char *parameterName;
  int rank;
  SizeParameter dimensions[kMaxRank];
  const char *strideNames[kMaxRank - 1];
};

/// The tensor parameters, in parameter order.
inline constexpr Tensor kTensors[] = {
    {"Q", "q", 4, {SizeParameter::B, SizeParameter::H, SizeParameter::M, SizeParameter::D},
     {"q_b", "q_h", "q_m"}},
    {"K", "k", 4, {SizeParameter::B, SizeParameter::Hkv, SizeParameter::N, SizeParameter::D},
     {"k_b", "k_h", "k_n"}},
    {"V", "v", 4, {SizeParameter::B, SizeParameter::Hkv, SizeParameter::N, SizeParameter::D},
     {"v_b", "v_h", "v_n"}},
    {"O", "o", 4, {SizeParameter::B, SizeParameter::H, SizeParameter::M, SizeParameter::D},
     {"o_b", "o_h", "o_m"}},
    {"LSE", "lse", 3, {SizeParameter::B, SizeParameter::H, SizeParameter::M}, {"lse_b", "lse_h"}},
};
inline constexpr int kTensorCount = sizeof(kTensors) / sizeof(kTensors[0]);

/// The size parameters, in parameter order.
inline constexpr SizeParameter kSizes[] = {SizeParameter::B, SizeParameter::H,
                                           SizeParameter::Hkv, SizeParameter::M,
                                           SizeParameter::N};
inline constexpr int kSizeCount = sizeof(kSizes) / sizeof(kSizes[0]);

/// The index of `tensor`'s first stride among the strides: each tensor has one per dimension
/// but the innermost.
constexpr int firstStride(int tensor) {
  int index = 0;
  for (int t = 0; t < tensor; ++t)
    index += kTensors[t].rank - 1;
  return index;
}
inline constexpr int kStrideCount = firstStride(kTensorCount);

/// Parameter positions: the tensors' pointers, then the sizes, then the strides.
inline constexpr int kFirstSize = kTensorCount;
inline constexpr int kFirstStride = kFirstSize + kSizeCount;
inline constexpr int kParameterCount = kFirstStride + kStrideCount;

/// The position of size `parameter` among the sizes (-1 for D, which is not passed).
constexpr int sizeIndex(SizeParameter parameter) {
  for (int i = 0; i < kSizeCount; ++i)
    if (kSizes[i] == parameter)
      return i;
  return -1;
}

/// The name of `tensor`'s stride of `dimension` ("q_b", "k_n", "lse_h").
inline std::string strideName(int tensor, int dimension) {
  return kTensors[tensor].strideNames[dimension];
}

/// The name of the stride at `index` among the strides.
inline std::string strideName(int index) {
  int tensor = 0;
  while (tensor + 1 < kTensorCount && firstStride(tensor + 1) <= index)
    ++tensor;
  return strideName(tensor, index - firstStride(tensor));
}

/// The program grid (blockIdx x, y, z). A program is one block_m-row block of one query head's
/// rows; with GQA packing (metadata "pack_gqa": true, TileConfig pack_gqa) its rows are packed
/// rows of the G = H / Hkv query heads that share a key/value head (G·M of them per key/value
/// head), so the grid runs over key/value heads.
struct Grid {
  long long rowBlocks = 0, heads = 0, batch = 0;
};
constexpr Grid programGrid(long long B, long long H, long long Hkv, long long M, long long blockM,
                           bool packGqa) {
  long long rows = packGqa ? H / Hkv * M : M;
  return {(rows + blockM - 1) / blockM, packGqa ? Hkv : H, B};
}

/// Persistent kernels (TileConfig persistent, tgpu-persistent; metadata "persistent": true) take
/// the same parameters but run a one-dimensional grid of programs (blockIdx.x), each looping
/// over the program grid's tiles: persistentPrograms(...) CTAs, the tiles (rowBlocks x heads x
/// batch) or, when fewer, the CTAs the GPU holds at once (its SMs x the kernel's CTAs per SM,
/// cuOccupancyMaxActiveBlocksPerMultiprocessor). Any count of at least one is correct; this one
/// runs every program at once. A varlen kernel's program grid is its sequences x heads x the
/// longest sequence's row blocks, as without persistence; split-KV and paged kernels are not
/// persistent.
constexpr long long persistentPrograms(const Grid &grid, long long multiprocessors,
                                       long long ctasPerSm) {
  long long tiles = grid.rowBlocks * grid.heads * grid.batch;
  long long resident = multiprocessors * ctasPerSm;
  long long programs = resident > 0 && resident < tiles ? resident : tiles;
  return programs > 0 ? programs : 1;
}

/// Paged-KV kernels (tile-paged-kv; metadata "paged_kv": true) read K and V from paged caches,
/// pages x Hkv x page_size x D (vLLM's [pages, page_size, Hkv, D] is k_b = page_size·Hkv·D,
/// k_h = D, k_n = Hkv·D): batch b's key/value row n is row n mod page_size of page
/// page_table[b·table_b + n div page_size], and batch b has kv_lengths[b] rows. N is then an
/// upper bound of the lengths (the launcher sizes its key splits by it; the kernel reads the
/// lengths). They take four parameters after those above (and before the split ones):
///   page_table   i32 pointer, B rows of table_b entries (at least one each)
///   kv_lengths   i32 pointer, B entries, each at most N
///   table_b      i64, the table's row stride in entries
///   page_size    i64, rows per page (>= 1)
inline constexpr const char *kPagedPointerNames[] = {"page_table", "kv_lengths"};
inline constexpr int kPagedPointerCount = 2;
inline constexpr const char *kPagedSizeNames[] = {"table_b", "page_size"};
inline constexpr int kPagedSizeCount = 2;
inline constexpr int kPagedParameterCount = kPagedPointerCount + kPagedSizeCount;

/// Varlen kernels (tile-varlen; metadata "varlen": true) run on packed batches of
/// variable-length sequences (FlashAttention's varlen API, the THD layout): sequence b's query
/// rows are rows cu_seqlens_q[b] up to cu_seqlens_q[b + 1] of Q, O and LSE, its key/value rows
/// those of cu_seqlens_k in K and V, where a tensor's row r of head h is at r * (its row stride)
/// + h * (its head stride); the batch strides are not read. B counts the sequences, M and N
/// bound their query and key lengths (the grid covers M rows a sequence; the kernel reads the
/// lengths from the offsets). They take two parameters after the base ones and the paged ones,
/// and before the split ones (a split varlen kernel's workspace is a padded batch's: partial
/// row s·B + b holds sequence b's rows, M at most):
///   cu_seqlens_q   i32 pointer, B + 1 non-decreasing entries
///   cu_seqlens_k   i32 pointer, B + 1 non-decreasing entries; not read by a paged varlen
///                  kernel (chunked prefill), whose K and V are the paged caches and sequence
///                  b's keys the kv_lengths[b] rows of its pages (may be null there)
inline constexpr const char *kVarlenPointerNames[] = {"cu_seqlens_q", "cu_seqlens_k"};
inline constexpr int kVarlenPointerCount = 2;

/// Split-KV kernels (tile-split-kv; metadata "split_kv": true) take four parameters after
/// those above: the workspace's device pointers o_part, lse_part and counters, then S (i64, the
/// key splits per row block, >= 1). The launcher owns the workspace (splitWorkspace's layout):
///   o_part    [S*B, H, M, D] f32, contiguous    a program's normalized partial O, row s*B + b
///   lse_part  [S*B, H, M] f32, contiguous       its partial logsumexp
///   counters  [grid.batch, grid.heads, grid.rowBlocks] i32   arrivals per program's row
///             block (programGrid): zero before the first launch; every launch leaves them zero
/// and the grid is (grid.rowBlocks * S, grid.heads, B), blockIdx.x = s * grid.rowBlocks + row
/// block.
inline constexpr const char *kSplitPointerNames[] = {"o_part", "lse_part", "counters"};
inline constexpr int kSplitPointerCount = 3;
inline constexpr const char *kSplitCountName = "S";
inline constexpr int kSplitParameterCount = kSplitPointerCount + 1;

/// Where the split workspace's three arrays live in one allocation (each 256-byte aligned).
/// The counters come first: an allocation reused for another shape keeps the counters it has
/// zeroed at its start (every launch leaves them zero), so a launcher zeroes only the counter
/// bytes no earlier launch on the allocation has covered.
struct SplitWorkspace {
  long long countersOffset = 0, outputPartOffset = 0, lsePartOffset = 0, bytes = 0;
  long long counterBytes = 0;
};
constexpr long long alignTo256(long long bytes) { return (bytes + 255) / 256 * 256; }
constexpr SplitWorkspace splitWorkspace(long long S, long long B, long long H, long long Hkv,
                                        long long M, long long D, long long blockM,
                                        bool packGqa) {
  SplitWorkspace w;
  Grid grid = programGrid(B, H, Hkv, M, blockM, packGqa);
  w.counterBytes = grid.batch * grid.heads * grid.rowBlocks * 4;
  w.countersOffset = 0;
  w.outputPartOffset = alignTo256(w.counterBytes);
  w.lsePartOffset = w.outputPartOffset + alignTo256(S * B * H * M * D * 4);
  w.bytes = w.lsePartOffset + alignTo256(S * B * H * M * 4);
  return w;
}

/// TMA kernels (TileConfig warp_specialize; metadata "kv_tma": true) read K and V with the
/// tensor memory accelerator. They take two parameters after all those above (after the split
/// ones), each a CUtensorMap the launcher encodes with cuTensorMapEncodeTiled and passes by
/// value (128 bytes, 64-byte aligned; a `.param` grid constant in the kernel):
///   k_map, v_map   4-D tiled maps of K and V over their base pointers: dimensions, innermost
///                  first, {D, N, Hkv, B}; byte strides {k_n, k_h, k_b} x element bytes (each a
///                  multiple of 16, the base 16-byte aligned); box {tmaBoxColumns(element
///                  bytes), block_n, 1, 1}; element strides 1; no interleave; SWIZZLE_128B;
///                  L2 promotion 256 B; out-of-bounds elements read as zero.
///                  A varlen kernel's maps address a packed row through two dimensions of the
///                  row stride, so that each sequence's rows end in zeros: dimensions {D, N,
///                  Hkv, total_k + 1}, byte strides {k_n, k_h, k_n} x element bytes, over the
///                  base k - N · k_n elements; row r of a sequence of `len` rows from packed
///                  row `start` is (a, b) = (r + N - len, start + len), in bounds (a < N)
///                  exactly while r < len. A paged kernel has no maps.
/// A kernel that also loads Q with TMA (metadata "q_tma": true, which needs "kv_tma"; TileConfig
/// q=shared: tgpu-warp-specialize's producer loads each tile's Q) takes a third map after those
/// two:
///   q_map          the 4-D tiled map of Q over its base pointer: dimensions {D, M, H, B}; byte
///                  strides {q_m, q_h, q_b} x element bytes; box {tmaBoxColumns(element
///                  bytes), block_m, 1, 1}; otherwise as K's. Rows past M read as zeros.
///                  Varlen, packed as K's: dimensions {D, M, H, total_q + 1}, byte strides
///                  {q_m, q_h, q_m} x element bytes, over the base q - M · q_m elements.
/// A kernel that also stores O with TMA (metadata "o_tma": true, which needs "q_tma" and a padded
/// batch; TileConfig o_tma=true: tgpu-store-output-by-tma) takes a fourth map after Q's:
///   o_map          the 4-D tiled map of O over its base pointer: dimensions {D, M, H, B}; byte
///                  strides {o_m, o_h, o_b} x element bytes; box {tmaBoxColumns(element
///                  bytes), kOutputBoxRows, 1, 1}; otherwise as K's. Each consumer warpgroup
///                  stores its own rows of the tile, box by box; rows past M are not written.
/// A box is one 128-byte panel of a `canonical_128b` shared tile (the kernel issues one transfer
/// per panel, at column offsets of tmaBoxColumns), so SWIZZLE_128B writes the panel exactly as
/// wgmma's 128-byte swizzle reads it; rows past N and columns past D arrive as zeros.
inline constexpr const char *kTensorMapNames[] = {"k_map", "v_map", "q_map", "o_map"};
/// The tensor (its index in kTensors) each map maps, in map order.
inline constexpr int kTensorMapTensors[] = {1, 2, 0, 3};
/// The most maps a kernel takes: K's and V's, then Q's where the kernel loads Q with TMA, then
/// O's where it also stores O with TMA.
inline constexpr int kTensorMapCount = 4;
constexpr int tensorMapCount(bool qTma, bool oTma = false) {
  return 2 + (qTma ? 1 : 0) + (qTma && oTma ? 1 : 0);
}
/// Rows of an o_map box: one consumer warpgroup's rows of the tile (a wgmma accumulator's 64).
inline constexpr int kOutputBoxRows = 64;
/// The position among the maps of the map of kernel tensor `tensor` (0 Q, 1 K, 2 V), or -1.
constexpr int tensorMapIndex(int tensor) {
  for (int i = 0; i < kTensorMapCount; ++i)
    if (kTensorMapTensors[i] == tensor)
      return i;
  return -1;
}
inline constexpr int kTensorMapBytes = 128;
inline constexpr int kTensorMapAlignment = 64;
inline constexpr int kTmaBoxBytes = 128;
constexpr int tmaBoxColumns(int elementBytes) { return kTmaBoxBytes / elementBytes; }
/// Transfers (panels) per tile of `columns` columns: the tile's rows padded to whole panels.
constexpr int tmaPanels(long long columns, int elementBytes) {
  return int((columns * elementBytes + kTmaBoxBytes - 1) / kTmaBoxBytes);
}

/// Backward kernels (tile-outline-backward-phases; metadata "backward_phase") are three launches
/// in this order, each a phase of the derived backward: `preprocess` (D = rowsum(dO o O) into
/// its workspace; the dQ accumulator zeroed), `key_gradients` (dK, dV; dQ added to the
/// accumulator atomically) and `query_gradients` (dQ from the accumulator, or, deterministic,
/// by an ordered loop over key blocks). All three take the same parameters:
///   q, k, v, o, do, lse, dq, dk, dv, delta, dq_accum   device pointers
///   B, H, Hkv, M, N                                    i64 sizes
///   the strides of every tensor in that order, all but the innermost (kBackwardTensors)
/// dO and dQ are B x H x M x D, dK and dV B x Hkv x N x D (the kernel's dtype). The launcher
/// owns the two f32 workspaces: delta [B, H, M] and dq_accum [B, H, M, D] (unread by a
/// deterministic backward, which may pass null), laid out as backwardWorkspace says and passed
/// with their contiguous strides. Grids backwardGrid(...); block and shared memory per phase
/// from its metadata.
inline constexpr Tensor kBackwardTensors[] = {
    kTensors[0],
    kTensors[1],
    kTensors[2],
    kTensors[3],
    {"dO", "do", 4, {SizeParameter::B, SizeParameter::H, SizeParameter::M, SizeParameter::D},
     {"do_b", "do_h", "do_m"}},
    kTensors[4],
    {"dQ", "dq", 4, {SizeParameter::B, SizeParameter::H, SizeParameter::M, SizeParameter::D},
     {"dq_b", "dq_h", "dq_m"}},
    {"dK", "dk", 4, {SizeParameter::B, SizeParameter::Hkv, SizeParameter::N, SizeParameter::D},
     {"dk_b", "dk_h", "dk_n"}},
    {"dV", "dv", 4, {SizeParameter::B, SizeParameter::Hkv, SizeParameter::N, SizeParameter::D},
     {"dv_b", "dv_h", "dv_n"}},
    {"D", "delta", 3, {SizeParameter::B, SizeParameter::H, SizeParameter::M},
     {"delta_b", "delta_h"}},
    {"dQ_accum", "dq_accum", 4,
     {SizeParameter::B, SizeParameter::H, SizeParameter::M, SizeParameter::D},
     {"dq_accum_b", "dq_accum_h", "dq_accum_m"}},
};
inline constexpr int kBackwardTensorCount = sizeof(kBackwardTensors) / sizeof(kBackwardTensors[0]);
/// Where the workspaces are among kBackwardTensors.
inline constexpr int kBackwardDeltaTensor = 9;
inline constexpr int kBackwardAccumulatorTensor = 10;

/// The index of the first stride of kBackwardTensors[tensor] among a backward kernel's strides.
constexpr int backwardFirstStride(int tensor) {
  int index = 0;
  for (int t = 0; t < tensor; ++t)
    index += kBackwardTensors[t].rank - 1;
  return index;
}
inline constexpr int kBackwardStrideCount = backwardFirstStride(kBackwardTensorCount);

/// The order in which the public launchers take the caller's tensors' strides
/// (HostAttention::backward, Backward::launch, the C APIs, the AOT header's launcher), as
/// indices of kBackwardTensors: the forward's five in the forward ABI's order (q, k, v, o, lse:
/// Kernel::launch's strides), then dO, dQ, dK and dV. The workspaces' are the launcher's.
inline constexpr int kBackwardPublicOrder[] = {0, 1, 2, 3, 5, 4, 6, 7, 8};
inline constexpr int kBackwardPublicTensorCount =
    sizeof(kBackwardPublicOrder) / sizeof(kBackwardPublicOrder[0]);
inline constexpr int kBackwardPublicStrideCount = backwardFirstStride(kBackwardDeltaTensor);
inline constexpr int kBackwardFirstSize = kBackwardTensorCount;
inline constexpr int kBackwardFirstStride = kBackwardFirstSize + kSizeCount;
inline constexpr int kBackwardParameterCount = kBackwardFirstStride + kBackwardStrideCount;

enum class BackwardPhase { Preprocess, KeyGradients, QueryGradients };
inline constexpr BackwardPhase kBackwardPhases[] = {
    BackwardPhase::Preprocess, BackwardPhase::KeyGradients, BackwardPhase::QueryGradients};
/// The phase's name: its kernel is NAME_backward_<name>, its metadata's "backward_phase".
constexpr const char *backwardPhaseName(BackwardPhase phase) {
  switch (phase) {
  case BackwardPhase::Preprocess:
    return "preprocess";
  case BackwardPhase::KeyGradients:
    return "key_gradients";
  case BackwardPhase::QueryGradients:
    return "query_gradients";
  }
  return "?";
}

/// A phase's grid: (ceil(M / block_m), H, B) for preprocess and query_gradients, (ceil(N /
/// block_n), Hkv, B) for key_gradients (a program per key block of a key/value head).
constexpr Grid backwardGrid(BackwardPhase phase, long long B, long long H, long long Hkv,
                            long long M, long long N, long long blockM, long long blockN) {
  if (phase == BackwardPhase::KeyGradients)
    return {(N + blockN - 1) / blockN, Hkv, B};
  return {(M + blockM - 1) / blockM, H, B};
}

/// Where the backward's workspaces live in one allocation (each 256-byte aligned): delta, then
/// the dQ accumulator (none when deterministic).
struct BackwardWorkspace {
  long long deltaOffset = 0, accumulatorOffset = 0, bytes = 0;
};
constexpr BackwardWorkspace backwardWorkspace(long long B, long long H, long long M, long long D,
                                              bool deterministic) {
  BackwardWorkspace w;
  w.accumulatorOffset = alignTo256(B * H * M * 4);
  w.bytes = w.accumulatorOffset + (deterministic ? 0 : alignTo256(B * H * M * D * 4));
  return w;
}

static_assert(kBackwardTensorCount == 11 && kBackwardStrideCount == 31 &&
                  kBackwardParameterCount == 47 && kBackwardPublicTensorCount == 9 &&
                  kBackwardPublicStrideCount == 26,
              "the backward launch ABI changed: update its comment and the launchers");

static_assert(kTensorCount == 5 && kSizeCount == 5 && kStrideCount == 14 &&
                  kParameterCount == 24,
              "the launch ABI changed: update the file comment and the launchers' texts");

} // namespace tilefuse::launch_abi

#endif
