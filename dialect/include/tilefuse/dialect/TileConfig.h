//===- TileConfig.h - the typed kernel configuration ------------*- C++ -*-===//
//
// The one definition of how a GPU kernel is configured: the block sizes and the code generation
// choices the GPU lowering exposes. The CLI's --config, compileToPTX's options, the kernel cache key,
// the autotuner's space and the tuning database all read and write it, and a kernel module
// carries it as `tile.config = #tile.config<"TEXT">` (written by tile-specialize, read by the
// passes: tilefuse/dialect/TileConfigAttr.h), so a setting added here reaches every one of them.
//
// It needs nothing but LLVMSupport (target TilefuseConfig): the dialect, the passes, codegen and
// the runtime all link it.
//
// Text form (print/parse), KEY=VALUE pairs separated by commas, in this order:
//
//   Br=64,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=2,pack_gqa=false
//
// and, where set, warp_specialize=true|false (the producer/consumer kernel; unset: the head
// dimension's default), softmax_overlap=true|false (a warp-specialized kernel's rotated key loop),
// pingpong=true|false (its consumer warpgroups taking turns), persistent=true|false (its CTAs
// looping over tiles), row_order=ascending|descending|grouped|paired (RowOrder: the order of a
// grid's row blocks) and q_tma=true|false (a warp-specialized shared Q loaded by the producer's
// TMA or copied by the consumers; unset: TMA where it applies), prefetch_values=true|false (the
// cp.async kernel's value blocks in a ring as deep as its key blocks') and ctas_per_sm=N (the
// register budget: not part of a complete configuration, whose kernels get no budget beyond the
// hardware's), then overlap_tiles=true|false (a persistent consumer's tile boundaries overlapped:
// tgpu-overlap-tiles) and row_align=start|end. row_sum_mma=true|false (P's row sums by wgmma:
// tgpu-row-sum-on-tensor-cores) prints after o_tma; key_tail=N (a key block's softmax on its first
// N columns where the keys past them are out of range: tgpu-narrow-key-tail) prints last.
//
// A field may be unset ("the tuned default": defaultTileConfig for the head dimension and chip);
// print() leaves unset fields out, so "" is the all-default configuration. parse() also takes the
// spellings of the older options (block_m / block-m, block_n, rows-per-warp, q_operand /
// q-operand, copy-issue).
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_DIALECT_TILECONFIG_H
#define TILEFUSE_DIALECT_TILECONFIG_H

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace tilefuse {

/// The matrix instruction: mma.sync (any sm_80+) or warpgroup MMAs (sm_90a).
enum class MmaKind { Sync, Wgmma };
/// Where the Q block lives: registers (loaded once) or shared memory (copied by cp.async; read by
/// ldmatrix per k-step with mma.sync, by descriptor with wgmma, also in the warp-specialized
/// kernel, whose producer loads it with TMA: loadsQWithTma).
enum class QOperand { Registers, Shared };
/// When key/value copies into a buffer with pending readers start: eager (barrier, then copy) or
/// at the next barrier (one barrier fewer per block).
enum class CopyIssue { Eager, AtBarrier };
/// The order in which a kernel's row blocks run: its grid's programs (tile-order-row-blocks), or
/// a persistent kernel's tiles (tgpu-persistent).
enum class RowOrder {
  /// Row block 0 first, as the grid lists them; a persistent kernel's tile loop runs a head's
  /// row blocks together.
  Ascending,
  /// Last first (tile-order-row-blocks): the program with block index x takes row block
  /// R - 1 - x, so the GPU, which starts CTAs in index order, starts each head's last row blocks
  /// first. Under a causal mask those have the most key blocks, and the short ones then fill
  /// the tail of the launch. A persistent kernel's tile loop (tgpu-persistent) runs every
  /// head's last row block before any second-to-last one.
  Descending,
  /// Descending within L2-sized groups (tile-order-row-blocks; a one-tile-per-CTA grid): the
  /// launch order visits the (batch, head) pairs in groups whose K and V fit in L2 together,
  /// and within a group every pair's last row block before any pair's second-to-last
  /// (FlashAttention-3's single-tile longest-first scheduler). Under a causal mask row block r
  /// costs the same r + 1 key blocks in every pair, so each group runs longest first, while
  /// the CTAs in flight read the K and V of one group.
  Grouped,
  /// Descending row blocks dealt in twos (tgpu-persistent; a persistent kernel's tile loop):
  /// each (batch, head) pair's row blocks in the sequence R - 1, 0, R - 2, 1, ... (alternate
  /// pairs reversed where R is odd), dealt to the programs two at a time, so a program's
  /// consecutive tiles are row blocks i and R - 1 - i of one pair. Under a causal mask those
  /// cost R + 1 key blocks together whatever i is: every program gets equal work, and the
  /// programs in flight cover a few pairs head by head, whose K and V stay in L2.
  Paired,
};

llvm::StringRef mmaKindName(MmaKind kind);
llvm::StringRef qOperandName(QOperand operand);
llvm::StringRef copyIssueName(CopyIssue issue);
llvm::StringRef rowOrderName(RowOrder order);

struct TileConfig {
  std::optional<int64_t> blockM;      ///< Br: rows of Q per program, multiple of 16, <= 256
  std::optional<int64_t> blockN;      ///< Bc: keys per block, multiple of 16
  std::optional<int64_t> rowsPerWarp; ///< rows of Q per warp: 16 or 32
  std::optional<MmaKind> mma;
  std::optional<QOperand> qOperand;
  std::optional<CopyIssue> copyIssue;
  /// Key ring stages (tgpu-pipeline): copies run stages - 1 key blocks ahead of the one read;
  /// 2 to 4. Every stage costs one key block of shared memory.
  std::optional<int64_t> stages;
  /// GQA packing (tile-tiling): the query heads that share a key/value head are the rows of one
  /// program's tile (G heads x M rows as G·M packed rows), so the group's keys are read once per
  /// program instead of once per query head; the grid is (B, Hkv, ceil(G·M / Br)).
  std::optional<bool> packGqa;
  /// The register budget: CTAs one SM must hold at once, 1 to 4 (PTX .minnctapersm), so ptxas
  /// keeps a thread's registers within 65536 / (threads · ctas_per_sm). Unset (and outside
  /// isComplete): no budget but the hardware's. A kernel just over a budget's bound (a varlen
  /// kernel's sequence offsets add three live registers to the padded kernel's 166) runs one
  /// CTA an SM fewer without it; one far over it spills with it.
  std::optional<int64_t> ctasPerSm;
  /// Warp specialization (tgpu-warp-specialize, sm_90a): a producer warpgroup loads K and V with
  /// TMA into rings of `stages` stages guarded by mbarriers, and Br / 64 consumer warpgroups run
  /// the wgmma and softmax work; setmaxnreg moves the producer's registers to the consumers. The
  /// CTA has 128 threads more. Needs mma=wgmma. Unset (and outside isComplete): false.
  std::optional<bool> warpSpecialize;
  /// Intra-warpgroup overlap (tgpu-overlap-softmax; warp-specialized kernels only): the key loop
  /// is rotated so that the softmax of key block j runs while the tensor cores compute P·V of
  /// block j - 1 (FlashAttention-3's two-stage GEMM-softmax pipelining). Costs the registers of
  /// one P block carried across iterations. Unset (and outside isComplete): off; a resolved
  /// warp-specialized configuration sets it (on where it fits the registers: 3·D / 4 + Bc <= 232).
  std::optional<bool> softmaxOverlap;
  /// Ping-pong (tgpu-pingpong; warp-specialized kernels with two or more consumer warpgroups):
  /// the consumer warpgroups issue their GEMMs in turn, ordered by named barriers, so one's
  /// softmax overlaps the other's GEMMs (FlashAttention-3's inter-warpgroup schedule). Unset
  /// (and outside isComplete): off.
  std::optional<bool> pingpong;
  /// Persistent programs (tgpu-persistent; warp-specialized kernels of whole K and V tensors):
  /// the launcher starts as many CTAs as the GPU holds at once, and each loops over (batch,
  /// head, row block) tiles in the row order's sense (descending: longest first across heads,
  /// dealt serpentine; else a head's row blocks together), so a CTA's mbarriers, setmaxnreg and
  /// producer run on across tiles and the next tile's loads overlap this one's epilogue. Unset
  /// (and outside isComplete): off; resolved, on where the producer loads Q with TMA, the row
  /// blocks are equal work and the regions take no registers (defaultTileConfig).
  std::optional<bool> persistent;
  /// The order of the row blocks (RowOrder). Unset (and outside isComplete): the kernel's
  /// default, descending where its mask compares rows with columns on sm_90a for padded batches
  /// (defaultTileConfig's rowBlocksUnequal), else ascending.
  std::optional<RowOrder> rowOrder;
  /// Q by TMA (tgpu-warp-specialize; warp-specialized kernels with Q in shared memory): the
  /// producer loads each tile's Q through the launch ABI's q_map into a one-stage channel, or,
  /// false, the consumers copy it with cp.async (the kernel before this step, kept for the
  /// ablation). Unset (and outside isComplete): TMA wherever it applies (loadsQWithTma).
  std::optional<bool> qTma;
  /// Value blocks prefetched (tile-pipeline; kernels without warp roles): each iteration of
  /// the key loop requests the next value block with the next key block, into a ring of value
  /// buffers as deep as the key ring (tgpu-pipeline), so the P·V of block j reads a value block
  /// that travelled during iteration j - 1 (or earlier). Without it the value block is requested at the top of its own iteration
  /// and its copy's latency, less the scores' and the softmax's time, is waited for in every
  /// iteration: what bounds a memory-bound decode kernel's few key blocks a CTA. Costs one value
  /// block of shared memory. Unset (and outside isComplete): off.
  std::optional<bool> prefetchValues;
  /// O by TMA (tgpu-store-output-by-tma; kernels whose producer loads Q with TMA): the consumers
  /// write each tile's normalized O into a shared buffer and one thread stores it through the
  /// launch ABI's o_map (FlashAttention-3's epilogue), instead of every thread storing its
  /// accumulator fragments to global memory, so a persistent CTA's consumers leave the epilogue
  /// once the buffer is written. Unset (and outside isComplete): off.
  std::optional<bool> oTma;
  /// Tile boundaries overlapped (tgpu-overlap-tiles; persistent, warp-specialized, rotated
  /// kernels): each tile's last P·V and epilogue run inside the next tile's first key block,
  /// beside its first softmax, so the tensor cores do not idle across the boundary. Q gets a
  /// second stage (the next tile's Q is loaded while this one computes). Unset (and outside
  /// isComplete): off.
  std::optional<bool> overlapTiles;
  /// Row blocks aligned to the rows' end (tile-tiling; row_align=end): row block r covers rows
  /// [r·Br - s, (r + 1)·Br - s), s = ceil(M / Br)·Br - M, the first clipped to start at row 0
  /// (it computes the second block's first s rows again and stores only its own). The partial
  /// row block is then the first, to which a causal mask gives the fewest keys, not the last,
  /// to which it gives the most: Br = 192 over Bc = 128 visits 12.5% fewer blocks at M = N =
  /// 1k, 5.2% at 4k and 1.5% at 16k. Per sequence on a packed batch. Unset (and outside
  /// isComplete): start (row block r at r·Br).
  std::optional<bool> alignRowsToEnd;
  /// Row sums on the tensor cores (tgpu-row-sum-on-tensor-cores; warp-specialized kernels): the
  /// softmax's l' = alpha·l + rowsum(P) becomes 8 more columns of P·V's accumulator, an
  /// m64n8k16 wgmma of the same P registers against a block of ones after each k-step, rescaled
  /// with O and read once after the key loop, instead of an add a score and shuffles a row in the
  /// softmax. The sum is of P as P·V reads it (rounded to bf16 / f16). Unset (and outside
  /// isComplete): off, the default: the key loop runs 8-14% fewer instructions, yet the kernels
  /// measured 0-6% slower at every head dim from 4k (H100, docs/perf.md, thirty-fourth
  /// session). The overlapped d128 tiles spill with it (384 bytes).
  std::optional<bool> rowSumMma;
  /// The narrow key tail (tgpu-narrow-key-tail; wgmma kernels): a masked key block whose keys
  /// from column N on are all past the key bound (the last block of a length that Bc does not
  /// divide, with at most N keys left) runs its mask and softmax on its first N columns alone
  /// (a multiple of 16 below Bc) and hands P·V zeros for the others. The softmax bounds the key
  /// loop, and a partial last block costs a full block's softmax and mask (1.4 full blocks at
  /// d128, N = 4096, Bc = 176 by the thirtieth session's probe; narrowed, the kernel measured
  /// +0.9% there, thirty-eighth session). 0 or unset (and outside isComplete): off; the
  /// defaults set it where it measured ahead (keyTailByDefault).
  std::optional<int64_t> keyTail;

  /// Whether P's row sums go to the tensor cores (row_sum_mma in a warp-specialized kernel).
  bool sumsRowsOnTensorCores() const;
  /// Every field set (ctasPerSm aside) (what compileToPTX compiles, what the tuner enumerates and stores).
  bool isComplete() const;
  /// Nothing set.
  bool empty() const;
  /// The canonical text (see the file comment): set fields only, in a fixed order.
  std::string print() const;
  /// The inverse of print(); errors name the item and what is allowed. An empty text is the
  /// empty configuration. Values are checked one by one, not together (that is verify()).
  static llvm::Expected<TileConfig> parse(llvm::StringRef text);
  /// Sets one field from its KEY and VALUE as parse() reads them (a pass option's name and
  /// value: `set("q-operand", "shared")`); the error names the key as given.
  llvm::Error set(llvm::StringRef key, llvm::StringRef value);
  /// This configuration with the fields `other` sets replaced by other's.
  TileConfig overriddenBy(const TileConfig &other) const;
  /// The fields' ranges and how they combine (Br a multiple of rows_per_warp; wgmma needs Br a
  /// multiple of 64, rows_per_warp 16, Q in registers and chip sm_90a; stages 2 to 4). Unset fields are not
  /// checked. `chip` empty: any chip.
  llvm::Error verify(llvm::StringRef chip = "") const;
  /// Threads per block (one warp per rows_per_warp rows, and a producer warpgroup with
  /// warp_specialize); needs blockM and rowsPerWarp.
  int64_t threads() const;
  /// Whether the producer loads each tile's Q with TMA (launch_abi's q_map; metadata "q_tma"):
  /// a warp-specialized kernel with Q in shared memory, unless q_tma=false. A packed batch's
  /// map addresses each sequence's rows as K's and V's do (LaunchAbi.h), so that its rows end
  /// at the sequence's end.
  bool loadsQWithTma() const {
    return warpSpecialize.value_or(false) && qOperand == QOperand::Shared && qTma.value_or(true);
  }
  /// Whether the consumers store O through shared memory by TMA (o_tma=true; launch ABI o_map,
  /// metadata "o_tma"): needs the producer's Q by TMA, a padded batch (the o_map bounds B x M
  /// rows) and a kernel that stores O once, where the tile stored it (not split-KV).
  bool storesOWithTma(bool packed, bool splitKv) const {
    return oTma.value_or(false) && loadsQWithTma() && !packed && !splitKv;
  }
  /// Whether the last row blocks run first (the longest, under a causal mask): descending, and
  /// the grouped and paired orders, which deal the descending row blocks in their own way.
  bool longestFirst() const { return rowOrder && *rowOrder != RowOrder::Ascending; }
  /// Threads of the producer warpgroup (warp_specialize) or 0.
  int64_t producerThreads() const { return warpSpecialize.value_or(false) ? 128 : 0; }
  /// Registers a producer thread keeps (setmaxnreg); the rest go to the consumers. It only
  /// issues TMA and waits (FlashAttention-3's 24 for two consumer warpgroups).
  static constexpr int64_t kProducerRegisters = 24;

  bool operator==(const TileConfig &other) const;
  bool operator!=(const TileConfig &other) const { return !(*this == other); }
};

/// For uniquing it inside an MLIR attribute (#tile.config).
llvm::hash_code hash_value(const TileConfig &config);

/// Where a kernel reads its keys and values: whole K and V tensors, padded or a packed varlen
/// batch's rows (both of which TMA loads tile by tile), or rows it gathers (a paged cache's
/// pages), which only cp.async copies read. A warp-specialized kernel (TMA producer) needs one of
/// the first two.
enum class KeyLayout { Tensors, PackedRows, Gathered };

/// The tuned default for a head dimension and target chip (complete): warpgroup MMAs (wgmma) on
/// sm_90a, mma.sync elsewhere; on sm_90a at head dims 96 to 192 for keys in tensors (padded or
/// packed), and at 256 for padded batches, the warp-specialized kernel with its key loop rotated
/// (Br = 128; Bc = 160 and 128 at d96 and d128 with Q in registers; Q in shared memory from d192
/// for padded batches, Bc = 112 at d192 and 80 at d256; packed d192: Q in registers, Bc = 80).
/// At d64, for padded and packed batches whose row blocks are equal work (not
/// `rowBlocksUnequal`), three consumer warpgroups (Br = 192, Bc = 128, Q in shared memory:
/// FlashAttention-3's d64 tile). Where the producer then loads Q with TMA (Q in shared memory)
/// on a padded batch and the mask leaves the row blocks equal work (not `rowBlocksUnequal`),
/// persistent programs, for kernels whose regions take no registers (`regionRegisters` 0).
/// The autotuner's baseline.
///
/// `regionRegisters` is what the kernel's score and mask regions take per consumer thread beyond
/// a plain kernel's registers (scoreRegionRegisters in tilefuse/passes/ScoreRegionCost.h; 0, the
/// plain kernels, leaves the tuned defaults as they are). On sm_90a it shrinks the key block
/// where the register model says the kernel would spill: the warp-specialized kernel keeps its
/// loop rotated with the largest key block that fits, down to half the tuned one, and below that
/// runs unrotated with the tuned key block; the one-warpgroup kernel (keys in tensors) takes the
/// largest key block that fits. A packed batch's one-warpgroup kernel at head dims up to 64
/// without region registers holds 3 CTAs an SM (ctas_per_sm = 3).
///
/// `rowBlocksUnequal`: the kernel's mask compares rows with columns (maskComparesRowsWithColumns
/// in tilefuse/passes/ScoreRegionCost.h), so after block pruning its row blocks visit different
/// numbers of key blocks (causal: r + 1). On sm_90a, for keys in tensors, such kernels run their
/// row blocks last first (row_order=descending): the longest programs start first instead of
/// running alone at the end of the launch, +5.5-5.7% at d128 N = 16k causal on the H200, within
/// -1.5..+1.2% elsewhere (docs/perf.md, 2026-12-01, fifteenth session). Packed batches keep the
/// ascending order (measured -0.9..+2.3%).
///
/// `shortSequences`: the kernel is compiled for sequences of at most kShortSequenceKeys keys
/// (isShortSequence of a runtime kernel spec's seqLen or of `compile --seq-len`); false where
/// the length is unknown. Only d64 under a causal-like mask tells the two apart: its
/// three-warpgroup tile (Br = 192) gains 8.8% at 4k and 16k over the one-warpgroup kernel and
/// loses 6.7% at 1k, where a 192-row block visits 14% more key blocks (H100, docs/perf.md,
/// 2026-12-06, thirtieth session).
TileConfig defaultTileConfig(int64_t headDim, llvm::StringRef chip = "sm_90a",
                             KeyLayout keys = KeyLayout::Tensors, int64_t regionRegisters = 0,
                             bool rowBlocksUnequal = false, bool shortSequences = false);

/// The longest sequence (keys) that defaultTileConfig's `shortSequences` covers: eight key blocks
/// of 128, where a tile's fixed costs and the diagonal's blocks weigh most.
inline constexpr int64_t kShortSequenceKeys = 1024;
/// Whether a kernel for sequences of `length` keys takes the short-sequence defaults (0:
/// unknown, the long ones).
inline bool isShortSequence(int64_t length) {
  return length > 0 && length <= kShortSequenceKeys;
}

/// The warp-specialized kernel's tuned key block (Bc) at `headDim` with Q in `q`, before the
/// score and mask regions' registers shrink it (defaultTileConfig): with Q in shared memory at
/// d128, 176 where the row blocks are equal work and 128 under a causal-like mask
/// (`rowBlocksUnequal`); elsewhere the same for both. The autotuner takes the other mask's key
/// block as a neighbour of the default (addDefaultCandidates).
int64_t warpSpecializedKeyBlock(int64_t headDim, QOperand q, bool rowBlocksUnequal);

/// What a split-KV (decode) kernel sets over defaultTileConfig, under what the caller set in
/// `requested` (whose fields win): GQA packing (a key/value head's keys read once for all its
/// query heads), no warp specialization, and on sm_90a at head dims up to 128 key blocks of 128
/// (fewer, longer loads in flight per CTA; docs/perf.md, 2026-11-30, fifth session), 64 for
/// keys gathered from a paged cache, with the value blocks prefetched (prefetch_values, unless
/// `requested` asks for warp roles).
TileConfig splitKvTileConfig(int64_t headDim, llvm::StringRef chip = "sm_90a",
                             const TileConfig &requested = TileConfig(),
                             KeyLayout keys = KeyLayout::Tensors);

/// The complete configuration compileToPTX compiles for `requested`: its set fields, the rest
/// from defaultTileConfig (from the mma.sync table when a set field rules wgmma out), then
/// verified. Errors say which setting is wrong.
/// The warp-specialized default is taken only where nothing requested rules it out (mma=sync,
/// pack_gqa=true, warp_specialize=false, prefetch_values=true, gathered keys). A
/// warp-specialized kernel's rotation, unless requested, is on where the key block chosen fits
/// the registers with the score and mask regions' `regionRegisters` (as in defaultTileConfig);
/// an explicit Bc is never changed.
/// The default row order (defaultTileConfig's `rowBlocksUnequal`) applies to persistent kernels
/// too, whose tile loop it orders.
llvm::Expected<TileConfig> resolveTileConfig(const TileConfig &requested, int64_t headDim,
                                             llvm::StringRef chip,
                                             KeyLayout keys = KeyLayout::Tensors,
                                             int64_t regionRegisters = 0,
                                             bool rowBlocksUnequal = false,
                                             bool shortSequences = false);

} // namespace tilefuse

#endif
