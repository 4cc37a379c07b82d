//===- CudaKernel.h - compiled attention kernels on the GPU -----*- C++ -*-===//
//
// Loads the PTX the compiler emits for one kernel and launches it by the kernel ABI:
//
//   - one PTX module per kernel, with one `.entry` named like the kernel, and a JSON sidecar
//     {"name", "block_m", "block_n", "threads", "head_dim", "dtype", "shared_bytes",
//      "declared_sizes"} (KernelMetadata);
//   - the parameters, their order and the grid: tilefuse/runtime/device/LaunchAbi.h, the one
//     definition (abiTensors() here is its view for this runtime);
//   - every size the kernel's signature fixes (DeclaredSizes) must be launched with exactly that
//     value.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_CUDA_CUDAKERNEL_H
#define TILEFUSE_RUNTIME_CUDA_CUDAKERNEL_H

#include "tilefuse/runtime/HostView.h"
#include "tilefuse/runtime/cuda/Driver.h"
#include "tilefuse/runtime/device/LaunchAbi.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace tilefuse::runtime::cuda {

/// The size parameters of the launch ABI (LaunchAbi.h; D is not passed: it is the kernel's head
/// dim).
using SizeParameter = launch_abi::SizeParameter;
llvm::StringRef sizeParameterName(SizeParameter parameter);

/// A tensor parameter of the launch ABI: its name and, per dimension, the size parameter that is
/// its extent.
struct AbiTensor {
  llvm::StringRef name;
  llvm::ArrayRef<SizeParameter> dimensions;
};

/// Q, K, V, O, LSE in parameter order: Q, O are B x H x M x D, K, V are B x Hkv x N x D, LSE is
/// B x H x M.
llvm::ArrayRef<AbiTensor> abiTensors();
constexpr int abiTensorCount = launch_abi::kTensorCount;
constexpr int abiMaxRank = launch_abi::kMaxRank;

/// Every static size the kernel's signature declares, per ABI tensor and dimension (`dynamic`
/// where the signature says `?`): gqa's Q, memref<?x8x?x64x...>, declares H = 8 and D = 64.
/// A kernel computes wrong results, silently, when launched with other sizes, so the launch
/// metadata records them ("declared_sizes") and every launch path checks them (validateLaunch,
/// and the AOT header's launcher on the host).
struct DeclaredSizes {
  static constexpr int64_t dynamic = -1;
  /// The sidecar key.
  static constexpr llvm::StringLiteral jsonKey = "declared_sizes";

  /// [tensor][dimension] in abiTensors() order; entries past a tensor's rank are `dynamic`.
  std::array<std::array<int64_t, abiMaxRank>, abiTensorCount> sizes;

  DeclaredSizes(); ///< nothing declared
  bool operator==(const DeclaredSizes &other) const { return sizes == other.sizes; }

  /// {"Q": [null, 8, null, 64], "K": [...], "V": [...], "O": [...], "LSE": [null, 8, null]}:
  /// one array per tensor with one entry per dimension, null for `dynamic`.
  llvm::json::Value toJson() const;
  /// The inverse of toJson(): every tensor present with its rank, each entry null or a positive
  /// integer, nothing else. Errors are ErrorKind::InvalidArgument, prefixed with `origin`.
  static llvm::Expected<DeclaredSizes> fromJson(const llvm::json::Value &value,
                                                const llvm::Twine &origin);
};

/// The JSON sidecar of a compiled kernel.
struct KernelMetadata {
  std::string name; ///< the PTX `.entry` and the variant (attention, causal, ...)
  ElementType dtype = ElementType::BF16; ///< of Q, K, V and O: bf16 or f16
  int64_t blockM = 0, blockN = 0;        ///< rows of Q / of K and V per block
  int64_t threads = 0;                   ///< per block
  int64_t headDim = 0;                   ///< D
  int64_t sharedBytes = 0;               ///< dynamic shared memory per block
  /// The softmax scale the kernel applies, when the sidecar states it (optional key "scale");
  /// informational: the kernel has it built in.
  std::optional<double> scale;
  /// The sizes the kernel's signature fixes, checked at every launch.
  DeclaredSizes declaredSizes;
  /// A split-KV kernel (tile-split-kv; optional key "split_kv"): it takes LaunchAbi.h's split
  /// parameters, and each launch chooses the key splits S.
  bool splitKv = false;
  /// GQA packing (optional key "pack_gqa"): a program's rows are the packed rows of a key/value
  /// head's query heads, which sets the grid (launch_abi::programGrid).
  bool packGqa = false;
  /// A paged-KV kernel (tile-paged-kv; optional key "paged_kv"): K and V are paged caches, and
  /// launches pass LaunchAbi.h's paged parameters (a PagedKV).
  bool pagedKv = false;
  /// A paged kernel's fixed page size (optional key "page_size"; 0: any): launches must pass it.
  int64_t pageSize = 0;
  /// A varlen kernel (tile-varlen; optional key "varlen"): the views are packed batches, and
  /// launches pass LaunchAbi.h's varlen parameters (a Varlen).
  bool varlen = false;
  /// A TMA kernel (TileConfig warp_specialize; optional key "kv_tma"): it reads K and V through
  /// LaunchAbi.h's tensor maps, which each launch encodes (TensorMaps.h), padded or packed
  /// (varlen); not paged; split-KV may be.
  bool kvTma = false;
  /// A TMA kernel that also loads Q with TMA (optional key "q_tma", which needs "kv_tma"):
  /// launches pass LaunchAbi.h's q_map after K's and V's (packed as theirs where varlen).
  bool qTma = false;
  /// A TMA kernel that also stores O with TMA (optional key "o_tma", which needs "q_tma" and a
  /// padded kernel that is not split-KV): launches pass LaunchAbi.h's o_map after Q's.
  bool oTma = false;
  /// A persistent kernel (TileConfig persistent; optional key "persistent"): launches start
  /// launch_abi::persistentPrograms CTAs on a one-dimensional grid. Neither split, paged nor
  /// varlen.
  bool persistent = false;
  /// A derived backward's phase (optional key "backward_phase", launch_abi::backwardPhaseName;
  /// empty: a forward kernel), launched by CudaBackwardKernel with the backward launch ABI.
  std::string backwardPhase;
  /// The backward's dQ by its ordered key loop (optional key "deterministic"): no accumulator.
  bool deterministic = false;

  /// Parses and checks a sidecar; `origin` (e.g. its path) prefixes error messages. A sidecar
  /// without "declared_sizes" (written before launches checked them) is rejected, with a message
  /// that says to compile the kernel again: read as "declaring nothing" it would let a launch
  /// with the wrong head counts compute wrong results without an error.
  static llvm::Expected<KernelMetadata> parse(llvm::StringRef json, llvm::StringRef origin);
};

llvm::StringRef dtypeName(ElementType type);

struct AttentionShape {
  int64_t B = 1, H = 1, Hkv = 1, M = 1, N = 1, D = 64;

  int64_t size(SizeParameter parameter) const;
};

/// Success when `shape` has every size `declared` fixes; otherwise ErrorKind::InvalidArgument
/// naming the first other one: "<prefix>Q dimension 1 (H) is 6 but the kernel declares 8".
llvm::Error checkDeclaredSizes(const DeclaredSizes &declared, const AttentionShape &shape,
                               const llvm::Twine &prefix);

/// Element strides in the ABI's parameter order. The innermost dimensions (D of Q, K, V, O; M of
/// LSE) are contiguous and have no entry.
struct AttentionStrides {
  int64_t qB = 0, qH = 0, qM = 0;
  int64_t kB = 0, kH = 0, kN = 0;
  int64_t vB = 0, vH = 0, vN = 0;
  int64_t oB = 0, oH = 0, oM = 0;
  int64_t lseB = 0, lseH = 0;

  static constexpr int count = launch_abi::kStrideCount;
  /// Row-major B x H x M x D etc. with no padding.
  static AttentionStrides contiguous(const AttentionShape &shape);
  /// From `count` values in parameter order.
  static AttentionStrides fromArray(const int64_t *values);
  std::array<int64_t, count> toArray() const;
};

/// Device addresses of the five tensors.
struct AttentionBuffers {
  DevicePtr q = 0, k = 0, v = 0, o = 0, lse = 0;
};

/// Checks a launch against the kernel and the ABI without touching the GPU: positive sizes, the
/// sizes the kernel declares (metadata.declaredSizes), H % Hkv == 0, D == head_dim, the grid
/// within the device's limits, non-negative strides, non-null pointers aligned to their element
/// type. Errors are ErrorKind::InvalidArgument; a declared-size mismatch names the tensor, the
/// dimension (index and size parameter), the given and the declared size.
/// A paged kernel (metadata.pagedKv) needs `paged` (device pointers; N is then an upper bound
/// of its lengths, K and V are paged caches with strides k_b, k_h, k_n of page, head and row),
/// any other none; the table's entries are the caller's to keep within the caches' pages (they
/// live on the device, unread here). A varlen kernel (metadata.varlen) needs `varlen` (device
/// pointers; B counts sequences, M and N bound their lengths, the batch strides are not read,
/// and the tensors have varlen->totalQ / totalK rows), any other none. A TMA kernel
/// (metadata.kvTma) takes neither, and K and V (Q with metadata.qTma, O with metadata.oTma) must
/// make valid tensor maps (kvTensorMap).
llvm::Error validateLaunch(const KernelMetadata &metadata, const AttentionBuffers &buffers,
                           const AttentionShape &shape, const AttentionStrides &strides,
                           const PagedKV *paged = nullptr, const Varlen *varlen = nullptr);

/// One kernel loaded into the context current at load time.
class CudaKernel {
public:
  /// JIT-compiles `ptx` (cuModuleLoadDataEx); errors carry the driver's JIT log.
  static llvm::Expected<std::unique_ptr<CudaKernel>> load(llvm::StringRef ptx,
                                                           KernelMetadata metadata);
  /// Reads <name>.ptx and its sidecar; an empty `jsonPath` means `ptxPath` with .json for .ptx.
  static llvm::Expected<std::unique_ptr<CudaKernel>> loadFiles(llvm::StringRef ptxPath,
                                                                llvm::StringRef jsonPath = "");
  ~CudaKernel();
  CudaKernel(const CudaKernel &) = delete;
  CudaKernel &operator=(const CudaKernel &) = delete;

  /// Validates (validateLaunch) and enqueues the kernel on `stream` (nullptr: the legacy default
  /// stream). Asynchronous: faults inside the kernel surface at the next synchronization.
  /// Thread-safe. The context current on the calling thread must be the one it was loaded in, or
  /// none (then that one is made current).
  ///
  /// A split-KV kernel (metadata.splitKv) runs with `kvSplits` key splits per row block (0:
  /// chosen by splitCountFor), in a workspace the kernel object owns (LaunchAbi.h's layout,
  /// grown on demand). Launches on one stream use it in order; a launch on another stream
  /// first waits for the previous one's stream, so concurrent streams stay correct.
  ///
  /// A paged-KV kernel (metadata.pagedKv) reads K and V through `paged`, a varlen kernel
  /// (metadata.varlen) its packed sequences through `varlen` (validateLaunch). For a TMA kernel
  /// (metadata.kvTma) each launch encodes K's and V's tensor maps, then Q's and O's where the
  /// kernel takes them (cuTensorMapEncodeTiled, CUDA 12.0: an older driver gets
  /// ErrorKind::NoDriver).
  llvm::Error launch(CUstream_st *stream, const AttentionBuffers &buffers,
                     const AttentionShape &shape, const AttentionStrides &strides,
                     int64_t kvSplits = 0, const PagedKV *paged = nullptr,
                     const Varlen *varlen = nullptr) const;

  /// The key splits a launch of this kernel on `shape` uses when none is asked for:
  /// chooseKeySplits over the grid's programs, the CTAs the GPU holds at once (SMs times this
  /// kernel's occupancy) and the key blocks; 1 for a kernel that is not split-KV.
  int64_t splitCountFor(const AttentionShape &shape) const;
  /// The split policy: 1 when `programs` fill the `slots` (CTAs resident at once); else the
  /// S (each split at least one of the `keyBlocks`, at most 128) with the least time in waves
  /// of S·programs CTAs times a split's key blocks plus a CTA's fixed cost, plus the merge's
  /// one partial per split; the fewest splits among equals. Decode: 64 programs on 264 slots take S = 4 (256 CTAs, one wave), not 5
  /// (320 CTAs, a second wave of 56).
  static int64_t chooseKeySplits(int64_t programs, int64_t slots, int64_t keyBlocks);

  const KernelMetadata &metadata() const;
  /// The JIT's info log (ptxas: registers, spills, shared memory).
  llvm::StringRef jitLog() const;
  int registersPerThread() const;
  /// Local memory per thread (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES): non-zero when registers
  /// spilled (or the kernel keeps an array on its stack); the autotuner drops such kernels.
  int localBytesPerThread() const;

private:
  struct Impl;
  explicit CudaKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace tilefuse::runtime::cuda

#endif
