//===- TileConfig.cpp - the typed kernel configuration --------------------===//
#include "tilefuse/dialect/TileConfig.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace tilefuse;

static llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::StringRef tilefuse::mmaKindName(MmaKind kind) {
  return kind == MmaKind::Wgmma ? "wgmma" : "sync";
}
llvm::StringRef tilefuse::qOperandName(QOperand operand) {
  return operand == QOperand::Shared ? "shared" : "registers";
}
llvm::StringRef tilefuse::copyIssueName(CopyIssue issue) {
  return issue == CopyIssue::AtBarrier ? "at-barrier" : "eager";
}
llvm::StringRef tilefuse::rowOrderName(RowOrder order) {
  switch (order) {
  case RowOrder::Ascending:
    return "ascending";
  case RowOrder::Descending:
    return "descending";
  case RowOrder::Grouped:
    return "grouped";
  case RowOrder::Paired:
    return "paired";
  }
  llvm_unreachable("unknown row order");
}

bool TileConfig::isComplete() const {
  return blockM && blockN && rowsPerWarp && mma && qOperand && copyIssue && stages && packGqa;
}

bool TileConfig::empty() const {
  return !blockM && !blockN && !rowsPerWarp && !mma && !qOperand && !copyIssue && !stages &&
         !packGqa && !ctasPerSm && !warpSpecialize && !softmaxOverlap && !pingpong && !persistent &&
         !rowOrder && !qTma && !prefetchValues && !oTma && !overlapTiles && !alignRowsToEnd &&
         !rowSumMma && !keyTail;
}

bool TileConfig::operator==(const TileConfig &other) const {
  return blockM == other.blockM && blockN == other.blockN && rowsPerWarp == other.rowsPerWarp &&
         mma == other.mma && qOperand == other.qOperand && copyIssue == other.copyIssue &&
         stages == other.stages && packGqa == other.packGqa && ctasPerSm == other.ctasPerSm &&
         warpSpecialize == other.warpSpecialize && softmaxOverlap == other.softmaxOverlap &&
         pingpong == other.pingpong && persistent == other.persistent &&
         rowOrder == other.rowOrder && qTma == other.qTma &&
         prefetchValues == other.prefetchValues && oTma == other.oTma &&
         overlapTiles == other.overlapTiles && alignRowsToEnd == other.alignRowsToEnd &&
         rowSumMma == other.rowSumMma && keyTail == other.keyTail;
}

llvm::hash_code tilefuse::hash_value(const TileConfig &config) {
  return llvm::hash_combine(config.blockM, config.blockN, config.rowsPerWarp, config.mma,
                            config.qOperand, config.copyIssue, config.stages, config.packGqa,
                            config.ctasPerSm, config.warpSpecialize, config.softmaxOverlap,
                            config.pingpong, config.persistent, config.rowOrder, config.qTma,
                            config.prefetchValues, config.oTma, config.overlapTiles,
                            config.alignRowsToEnd, config.rowSumMma, config.keyTail);
}

std::string TileConfig::print() const {
  llvm::SmallVector<std::string> items;
  if (blockM)
    items.push_back("Br=" + std::to_string(*blockM));
  if (blockN)
    items.push_back("Bc=" + std::to_string(*blockN));
  if (rowsPerWarp)
    items.push_back("rows_per_warp=" + std::to_string(*rowsPerWarp));
  if (mma)
    items.push_back(("mma=" + mmaKindName(*mma)).str());
  if (qOperand)
    items.push_back(("q=" + qOperandName(*qOperand)).str());
  if (copyIssue)
    items.push_back(("copy_issue=" + copyIssueName(*copyIssue)).str());
  if (stages)
    items.push_back("stages=" + std::to_string(*stages));
  if (packGqa)
    items.push_back(*packGqa ? "pack_gqa=true" : "pack_gqa=false");
  if (warpSpecialize)
    items.push_back(*warpSpecialize ? "warp_specialize=true" : "warp_specialize=false");
  if (softmaxOverlap)
    items.push_back(*softmaxOverlap ? "softmax_overlap=true" : "softmax_overlap=false");
  if (pingpong)
    items.push_back(*pingpong ? "pingpong=true" : "pingpong=false");
  if (persistent)
    items.push_back(*persistent ? "persistent=true" : "persistent=false");
  if (rowOrder)
    items.push_back(("row_order=" + rowOrderName(*rowOrder)).str());
  if (qTma)
    items.push_back(*qTma ? "q_tma=true" : "q_tma=false");
  if (prefetchValues)
    items.push_back(*prefetchValues ? "prefetch_values=true" : "prefetch_values=false");
  if (oTma)
    items.push_back(*oTma ? "o_tma=true" : "o_tma=false");
  if (rowSumMma)
    items.push_back(*rowSumMma ? "row_sum_mma=true" : "row_sum_mma=false");
  if (ctasPerSm)
    items.push_back("ctas_per_sm=" + std::to_string(*ctasPerSm));
  if (overlapTiles)
    items.push_back(*overlapTiles ? "overlap_tiles=true" : "overlap_tiles=false");
  if (alignRowsToEnd)
    items.push_back(*alignRowsToEnd ? "row_align=end" : "row_align=start");
  if (keyTail)
    items.push_back("key_tail=" + std::to_string(*keyTail));
  return llvm::join(items, ",");
}

llvm::Error TileConfig::set(llvm::StringRef key, llvm::StringRef value) {
  key = key.trim();
  value = value.trim();
  auto integer = [&](std::optional<int64_t> &field) -> llvm::Error {
    int64_t v = 0;
    if (value.getAsInteger(10, v))
      return fail(key + " needs an integer, not '" + value + "'");
    field = v;
    return llvm::Error::success();
  };
  auto choice = [&](auto &field, auto first, llvm::StringRef firstName, auto second,
                    llvm::StringRef secondName) -> llvm::Error {
    if (value == firstName)
      field = first;
    else if (value == secondName)
      field = second;
    else
      return fail(key + " must be " + firstName + " or " + secondName + ", not '" + value + "'");
    return llvm::Error::success();
  };
  if (key == "Br" || key == "block_m" || key == "block-m")
    return integer(blockM);
  if (key == "Bc" || key == "block_n" || key == "block-n")
    return integer(blockN);
  if (key == "rows_per_warp" || key == "rows-per-warp")
    return integer(rowsPerWarp);
  if (key == "mma")
    return choice(mma, MmaKind::Sync, "sync", MmaKind::Wgmma, "wgmma");
  if (key == "q" || key == "q_operand" || key == "q-operand")
    return choice(qOperand, QOperand::Registers, "registers", QOperand::Shared, "shared");
  if (key == "copy_issue" || key == "copy-issue")
    return choice(copyIssue, CopyIssue::Eager, "eager", CopyIssue::AtBarrier, "at-barrier");
  if (key == "stages")
    return integer(stages);
  if (key == "pack_gqa" || key == "pack-gqa")
    return choice(packGqa, false, "false", true, "true");
  if (key == "ctas_per_sm" || key == "ctas-per-sm")
    return integer(ctasPerSm);
  if (key == "warp_specialize" || key == "warp-specialize")
    return choice(warpSpecialize, false, "false", true, "true");
  if (key == "softmax_overlap" || key == "softmax-overlap")
    return choice(softmaxOverlap, false, "false", true, "true");
  if (key == "pingpong" || key == "ping_pong" || key == "ping-pong")
    return choice(pingpong, false, "false", true, "true");
  if (key == "persistent")
    return choice(persistent, false, "false", true, "true");
  if (key == "row_order" || key == "row-order") {
    for (RowOrder order :
         {RowOrder::Ascending, RowOrder::Descending, RowOrder::Grouped, RowOrder::Paired})
      if (value == rowOrderName(order)) {
        rowOrder = order;
        return llvm::Error::success();
      }
    return fail(key + " must be ascending, descending, grouped or paired, not '" + value + "'");
  }
  if (key == "q_tma" || key == "q-tma")
    return choice(qTma, false, "false", true, "true");
  if (key == "prefetch_values" || key == "prefetch-values")
    return choice(prefetchValues, false, "false", true, "true");
  if (key == "o_tma" || key == "o-tma")
    return choice(oTma, false, "false", true, "true");
  if (key == "overlap_tiles" || key == "overlap-tiles")
    return choice(overlapTiles, false, "false", true, "true");
  if (key == "row_align" || key == "row-align")
    return choice(alignRowsToEnd, false, "start", true, "end");
  if (key == "row_sum_mma" || key == "row-sum-mma")
    return choice(rowSumMma, false, "false", true, "true");
  if (key == "key_tail" || key == "key-tail")
    return integer(keyTail);
  return fail("unknown setting '" + key +
              "' (Br, Bc, rows_per_warp, mma, q, copy_issue, stages, pack_gqa, ctas_per_sm, "
              "warp_specialize, softmax_overlap, pingpong, persistent, row_order, q_tma, "
              "prefetch_values, o_tma, overlap_tiles, row_align, row_sum_mma, key_tail)");
}

llvm::Expected<TileConfig> TileConfig::parse(llvm::StringRef text) {
  TileConfig config;
  llvm::SmallVector<llvm::StringRef> items;
  text.split(items, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef item : items) {
    if (!item.contains('='))
      return fail("'" + item.trim() + "' is not KEY=VALUE");
    auto [key, value] = item.split('=');
    if (llvm::Error error = config.set(key, value))
      return std::move(error);
  }
  return config;
}

TileConfig TileConfig::overriddenBy(const TileConfig &other) const {
  TileConfig out = *this;
  if (other.blockM)
    out.blockM = other.blockM;
  if (other.blockN)
    out.blockN = other.blockN;
  if (other.rowsPerWarp)
    out.rowsPerWarp = other.rowsPerWarp;
  if (other.mma)
    out.mma = other.mma;
  if (other.qOperand)
    out.qOperand = other.qOperand;
  if (other.copyIssue)
    out.copyIssue = other.copyIssue;
  if (other.stages)
    out.stages = other.stages;
  if (other.packGqa)
    out.packGqa = other.packGqa;
  if (other.ctasPerSm)
    out.ctasPerSm = other.ctasPerSm;
  if (other.warpSpecialize)
    out.warpSpecialize = other.warpSpecialize;
  if (other.softmaxOverlap)
    out.softmaxOverlap = other.softmaxOverlap;
  if (other.pingpong)
    out.pingpong = other.pingpong;
  if (other.persistent)
    out.persistent = other.persistent;
  if (other.rowOrder)
    out.rowOrder = other.rowOrder;
  if (other.qTma)
    out.qTma = other.qTma;
  if (other.prefetchValues)
    out.prefetchValues = other.prefetchValues;
  if (other.oTma)
    out.oTma = other.oTma;
  if (other.overlapTiles)
    out.overlapTiles = other.overlapTiles;
  if (other.alignRowsToEnd)
    out.alignRowsToEnd = other.alignRowsToEnd;
  if (other.rowSumMma)
    out.rowSumMma = other.rowSumMma;
  if (other.keyTail)
    out.keyTail = other.keyTail;
  return out;
}

llvm::Error TileConfig::verify(llvm::StringRef chip) const {
  if (blockM && (*blockM <= 0 || *blockM % 16 || *blockM > 256))
    return fail("block-m must be a multiple of 16 up to 256 (16 rows per warp), got " +
                llvm::Twine(*blockM));
  if (blockN && (*blockN <= 0 || *blockN % 16))
    return fail("block-n must be a positive multiple of 16, got " + llvm::Twine(*blockN));
  if (rowsPerWarp && *rowsPerWarp != 16 && *rowsPerWarp != 32)
    return fail("rows-per-warp must be 16 or 32, got " + llvm::Twine(*rowsPerWarp));
  if (blockM && rowsPerWarp && *blockM % *rowsPerWarp)
    return fail("block-m (" + llvm::Twine(*blockM) + ") must be a multiple of rows-per-warp (" +
                llvm::Twine(*rowsPerWarp) + ")");
  // 2 is tile-to-tgpu's ring; past 4 the key blocks in flight outgrow what the copies can hide
  // and the shared memory a second CTA per SM needs.
  if (stages && (*stages < 2 || *stages > 4))
    return fail("stages must be 2, 3 or 4, got " + llvm::Twine(*stages));
  if (ctasPerSm && (*ctasPerSm < 1 || *ctasPerSm > 4))
    return fail("ctas_per_sm must be 1 to 4, got " + llvm::Twine(*ctasPerSm));
  // Packed Q rows (one head each) are gathered by the register load; the shared-memory copy
  // moves whole rows of one head.
  if (packGqa == true && qOperand == QOperand::Shared)
    return fail("pack_gqa=true needs q=registers (packed rows are not copied to shared memory)");
  // The consumers are warpgroups issuing wgmma; the producer's TMA panels are wgmma's 128-byte
  // swizzle (LaunchAbi.h). Packed GQA rows stay in the consumers' register load of Q (the check
  // above keeps them out of shared memory), so the producer loads K and V of the group's one
  // key/value head only. With q=shared the consumers copy Q themselves (cp.async, as the
  // one-warpgroup kernel does) where the producer's tensor maps are K's and V's only
  // (LaunchAbi.h).
  if (warpSpecialize == true &&
      (mma == MmaKind::Sync || (!chip.empty() && chip != "sm_90a")))
    return fail("warp_specialize=true needs mma=wgmma (chip sm_90a)");
  if (warpSpecialize == true && qOperand == QOperand::Shared && mma != MmaKind::Wgmma)
    return fail("warp_specialize=true with q=shared needs mma=wgmma (Q read by descriptor)");
  // The rotation reorders the consumers' mbarrier waits and wgmma groups, which only the
  // warp-specialized kernel has (a one-warpgroup kernel's cp.async ring is read in place).
  if (softmaxOverlap == true && !warpSpecialize.value_or(false))
    return fail("softmax_overlap=true needs warp_specialize=true");
  // Turns need a second consumer warpgroup: Br / 64 of them.
  if (pingpong == true && (!warpSpecialize.value_or(false) || (blockM && *blockM < 128)))
    return fail("pingpong=true needs warp_specialize=true and Br >= 128 (two consumer "
                "warpgroups)");
  // The tile loop runs the producer's and the consumers' mbarrier rings on across tiles.
  if (persistent == true && !warpSpecialize.value_or(false))
    return fail(rowOrder == RowOrder::Paired
                    ? "row_order=paired deals a persistent kernel's tiles, and persistent=true "
                      "needs warp_specialize=true"
                    : "persistent=true needs warp_specialize=true");
  // Only the producer issues TMA, and only into a Q buffer in shared memory.
  if (qTma == true && (!warpSpecialize.value_or(false) || qOperand != QOperand::Shared))
    return fail("q_tma=true needs warp_specialize=true and q=shared");
  // O goes out through the same kind of map as Q came in: the producer's Q map bounds a padded
  // batch's rows, which is what lets the store clip a last row block at M.
  if (oTma == true && (!warpSpecialize.value_or(false) || qOperand != QOperand::Shared ||
                       qTma == false))
    return fail("o_tma=true needs warp_specialize=true, q=shared and Q by TMA (q_tma)");
  // The next tile's first key block runs the previous tile's last P·V beside its softmax: the
  // rotated key loop of a persistent consumer. StoreOutputByTma moves the epilogue's stores
  // into a shared buffer the overlap does not carry; ping-pong orders the GEMMs by turns.
  if (overlapTiles == true &&
      (!warpSpecialize.value_or(false) || softmaxOverlap != true || persistent != true))
    return fail("overlap_tiles=true needs warp_specialize=true, softmax_overlap=true and "
                "persistent=true");
  if (overlapTiles == true && (pingpong == true || oTma == true))
    return fail("overlap_tiles=true does not go with pingpong=true or o_tma=true");
  // O's map stores a tile's whole box: the first row block's box would also write the rows
  // the second stores.
  // The sums are a second product on P's registers, beside P·V's wgmma.
  if (rowSumMma == true && !warpSpecialize.value_or(false))
    return fail("row_sum_mma=true needs warp_specialize=true");
  // The narrow columns are whole m16k16 A fragments and fewer than the block's; the layouts
  // that keep an element's place when columns are dropped are the accumulators' (wgmma's here:
  // the mma.sync kernels keep their one softmax).
  if (keyTail && *keyTail != 0) {
    if (*keyTail < 0 || *keyTail % 16)
      return fail("key_tail must be 0 or a positive multiple of 16, got " + llvm::Twine(*keyTail));
    if (blockN && *keyTail >= *blockN)
      return fail("key_tail (" + llvm::Twine(*keyTail) + ") must be below Bc (" +
                  llvm::Twine(*blockN) + ")");
    if (mma && *mma != MmaKind::Wgmma)
      return fail("key_tail needs mma=wgmma");
  }
  if (alignRowsToEnd == true && oTma == true)
    return fail("row_align=end does not go with o_tma=true (the first row block's box would "
                "overwrite the second's rows)");
  // The grouped order permutes a one-tile-per-CTA grid's programs; a persistent kernel's tile
  // loop has an order of its own (tgpu-persistent).
  if (rowOrder == RowOrder::Grouped && persistent == true)
    return fail("row_order=grouped orders a one-tile-per-CTA grid: a persistent kernel's tile "
                "loop has its own order (persistent=false, or row_order=descending)");
  // The paired order deals a persistent kernel's tile loop; a one-tile-per-CTA grid has none.
  if (rowOrder == RowOrder::Paired && persistent != true)
    return fail("row_order=paired orders a persistent kernel's tile loop (persistent=true)");
  // The producer's rings already hold the value blocks ahead. (With stages > 2 tgpu-pipeline
  // deepens the value ring with the key ring.)
  if (prefetchValues == true && warpSpecialize.value_or(false))
    return fail("prefetch_values=true is the cp.async kernel's (warp_specialize=false): the "
                "producer's rings already load value blocks ahead");
  if (mma == MmaKind::Wgmma) {
    // the GPU lowering's constraints for warpgroup MMAs (its message), checked here so the tuner
    // never compiles a configuration the pass would refuse.
    // Q in shared memory is read by descriptor (K-major, the 128-byte swizzle), as the
    // backward reads Q and dO: the one-warpgroup kernel at head dim 256 then holds no Q
    // fragments (docs/perf.md, "Q in shared memory at d256").
    if ((!chip.empty() && chip != "sm_90a") || (blockM && *blockM % 64) ||
        (rowsPerWarp && *rowsPerWarp != 16))
      return fail("mma=wgmma needs chip=sm_90a, rows-per-warp=16 and block-m a multiple of 64");
  }
  return llvm::Error::success();
}

int64_t TileConfig::threads() const {
  return blockM && rowsPerWarp ? 32 * (*blockM / *rowsPerWarp) + producerThreads() : 0;
}

/// Warp specialization as the default: measured on the H200 at head dims 96, 128 and 192 (1.03x to
/// 1.43x the one-warpgroup kernel, docs/perf.md, 2026-12-01, ninth session). At 256 it needs Q
/// in shared memory (warpSpecializedQuery), measured for padded batches only. At 64 two consumer
/// warpgroups were 7-14% slower (the softmax's issue bound, not the loads); three over Br = 192
/// with Q in shared memory (FlashAttention-3's d64 tile) are +11% at 4k and +19% at 16k full,
/// -2% at 1k, on padded batches (sixteenth session). Under a mask whose row blocks differ in work
/// (`rowBlocksUnequal`: causal) they are +4% / +15% at 4k / 16k but -17% at 1k, where a 192-row
/// block crosses the diagonal over two to three key blocks; those keep the one-warpgroup kernel.
/// Packed (varlen) batches take the same d64 tile with Q loaded by TMA through the packed q_map,
/// one tile a CTA: against the one-warpgroup kernel with three CTAs an SM, full masks +12% at
/// max 4096 and +15% at 16384, -1% at 1024; causal +2% / +16% at 4096 / 16384 but -19% at 1024
/// (H100, docs/perf.md, 2026-12-06, twenty-ninth session), so causal-like masks keep the
/// one-warpgroup kernel there too.
///
/// Padded causal-like d64 kernels without region registers take it beyond short sequences:
/// persistent and paired, with the row blocks aligned to the rows' end (alignRowsByDefault),
/// the 192-row tile is +8.8% at 4k and +8.7% at 16k over the one-warpgroup kernel and -6.7% at
/// 1k (H100, docs/perf.md, 2026-12-06, thirtieth session), so sequences of up to 1024 keys
/// (`shortSequences`) keep the one-warpgroup kernel. Kernels whose regions take registers spill
/// at Br = 192 under them (alibi, gqa_head_window: 276-356 bytes) and keep it too.
static bool warpSpecializedByDefault(int64_t headDim, llvm::StringRef chip, KeyLayout keys,
                                     bool rowBlocksUnequal, int64_t regionRegisters,
                                     bool shortSequences) {
  if (chip != "sm_90a" || keys == KeyLayout::Gathered)
    return false;
  if (headDim > 48 && headDim <= 64)
    return !rowBlocksUnequal ||
           (keys == KeyLayout::Tensors && regionRegisters == 0 && !shortSequences);
  return headDim >= 96 && (headDim <= 192 || (headDim <= 256 && keys == KeyLayout::Tensors));
}

/// The short-sequence d96 form (warpSpecializedQuery): Q in shared memory by TMA, Bc = 128,
/// persistent, tile boundaries overlapped, for kernels whose regions take no registers.
static bool d96ShortTile(int64_t headDim, KeyLayout keys, int64_t regionRegisters,
                         bool shortSequences) {
  return shortSequences && headDim > 64 && headDim <= 96 && keys == KeyLayout::Tensors &&
         regionRegisters == 0;
}

/// A packed batch's persistent tile list by default (tgpu-persistent's loop over the
/// sequences, each sequence's row blocks dealt in turn, no empty ones): at d128 under a full
/// mask (Q in shared memory by TMA, Bc = 176, two consumer warpgroups) it measured +9.0% / +6.4%
/// / +0.3% over one tile a CTA at max lengths 1024 / 4096 / 16384 (H100, docs/perf.md,
/// thirty-eighth session). Not under causal-like masks, where its static deal of tiles of
/// unequal work lost 8-20% from max 4096 (ascending or each sequence's longest first), nor at
/// d64, whose producer beside three consumer warpgroups spills the sequence loop's state (32
/// bytes, ptxas), nor with score or mask regions that take registers (not measured).
static bool packedTileListByDefault(int64_t headDim, bool rowBlocksUnequal,
                                    int64_t regionRegisters) {
  return headDim == 128 && !rowBlocksUnequal && regionRegisters == 0;
}

/// Where the warp-specialized default keeps Q: in shared memory from head dim 192 for padded
/// batches (the consumers copy it, wgmma reads it by descriptor), which frees D / 4 registers
/// a consumer thread for a wider key block: on the H200 d192 at Bc = 112 is +4-9% over Q in
/// registers at Bc = 80, d256 at Bc = 80 +31-80% over the one-warpgroup kernel (docs/perf.md,
/// 2026-12-01, sixteenth session). At d128 the same step measured within -3..+3%, so Q stays in
/// registers there. At d64 Q in shared memory is what lets three consumer warpgroups fit
/// (warpSpecializedTiles), padded or packed.
///
/// At d128 under a mask whose row blocks are equal work, for kernels whose regions take no
/// registers, Q in shared memory takes FlashAttention-3's 128 x 176 tile (the rotated loop fits
/// it: ptxas -v, no spills) and, loaded by TMA, persistent tiles: +14% at 1k, +5% at 4k and +4%
/// at 16k over Q in registers at Bc = 128 (docs/perf.md, 2026-12-02, nineteenth session). Under a
/// causal mask the same tile lost 1-8% from 1k to 4k, and alibi and gqa_head_window spill at
/// Bc = 176 (their regions), so those keep Q in registers. Under a causal mask Q in shared memory
/// at Bc = 128, persistent (the tile loop longest first), is +6% at 1k and +9% at 4k over Q in
/// registers and within 1% at 16k (docs/perf.md, 2026-12-03, twentieth session), so masks whose
/// row blocks differ in work take it too.
///
/// At d96 for short sequences (`shortSequences`) Q in shared memory takes the tile boundaries
/// overlapped at Bc = 128, persistent (d96ShortTile): +11.4% full and +16.8% causal at 1k over Q
/// in registers at Bc = 160 one tile a CTA, which stays the default beyond (the same tile lost
/// 1-9% from 4k; H100, docs/perf.md, thirty-sixth session).
static QOperand warpSpecializedQuery(int64_t headDim, KeyLayout keys, bool rowBlocksUnequal,
                                     int64_t regionRegisters, bool shortSequences = false) {
  // Packed batches: the d64 tile as padded (Q by TMA through the packed q_map). At d128 Q in
  // shared memory one tile a CTA measured within ±3% of Q in registers (H100, twenty-ninth
  // session); under a full mask it is the persistent tile list's (persistentByDefault), which
  // needs Q by TMA. Registers elsewhere, as from d192, where packed batches were not measured
  // with Q in shared memory.
  if (keys == KeyLayout::PackedRows &&
      (headDim <= 64 || packedTileListByDefault(headDim, rowBlocksUnequal, regionRegisters)))
    return QOperand::Shared;
  if (keys != KeyLayout::Tensors)
    return QOperand::Registers;
  if (d96ShortTile(headDim, keys, regionRegisters, shortSequences))
    return QOperand::Shared;
  if (headDim >= 192 || headDim <= 64)
    return QOperand::Shared;
  return headDim == 128 && regionRegisters == 0 ? QOperand::Shared : QOperand::Registers;
}

/// Whether the warp-specialized default's Q operand at `headDim` depends on the kernel (d128:
/// shared memory without score or mask regions that take registers, registers with them), so
/// that either operand asked for keeps the warp roles.
static bool queryDependsOnKernel(int64_t headDim, KeyLayout keys) {
  return warpSpecializedQuery(headDim, keys, /*rowBlocksUnequal=*/false,
                              /*regionRegisters=*/0) !=
         warpSpecializedQuery(headDim, keys, /*rowBlocksUnequal=*/false, /*regionRegisters=*/1);
}

/// The warp-specialized kernel's rows: three consumer warpgroups (Br = 192) at head dims up to 64
/// with Q in shared memory (with Q in registers they spill 144 bytes and serialize the wgmmas),
/// else two (Br = 128).
static int64_t warpSpecializedRows(int64_t headDim, QOperand q) {
  return headDim <= 64 && q == QOperand::Shared ? 192 : 128;
}

/// The warp-specialized kernel's tuned key block for Q in `q` (docs/perf.md, tenth, sixteenth and
/// nineteenth sessions): Q in registers d96 160 (+5-6% over 128 from 4k), d128 128 (144: within
/// 3%, slower at 1k), d192 80 (rotated: +5-10% over Bc = 128 unrotated from 4k); Q in shared
/// memory d128 176 (+4-5% over 128 from 4k, persistent; 144 and 160 in between; 128 under a
/// causal-like mask), d192 112, d256
/// 80 (+4-9% over 64); d64 128 and d256 with Q in registers 64, the one-warpgroup kernel's (not
/// defaults).
int64_t tilefuse::warpSpecializedKeyBlock(int64_t headDim, QOperand q, bool rowBlocksUnequal) {
  bool shared = q == QOperand::Shared;
  // d128 under a causal-like mask: Bc = 128 with Q in shared memory, persistent, against 176:
  // +11% at 1k, +2% at 4k, -4% at 16k (docs/perf.md, twentieth session).
  return headDim <= 64 ? 128 : headDim <= 96 ? 160
       : headDim <= 128 ? (shared && !rowBlocksUnequal ? 176 : 128)
       : headDim <= 192 ? (shared ? 112 : 80) : (shared ? 80 : 64);
}

/// The registers a consumer thread of the warp-specialized kernel holds in its rotated key loop
/// (softmax_overlap), against the budget it fits without spilling. A thread of two consumer
/// warpgroups (64 rows each) holds O (D / 2 registers), Q (D / 4), the scores (Bc / 2) and two
/// packed P blocks (Bc / 4 each): 3·D / 4 + Bc, plus what the score and mask regions take
/// (scoreRegionRegisters: 9 per op they run per score element), within 232. ptxas -v
/// (2026-12-01), plain kernels: no spills at 224 (d128 Bc 128, d192 Bc 80) and 232 (d96 Bc 160);
/// 48 bytes spilled at d192 Bc 96 (240), 256 and more spill and serialize the wgmma groups. With
/// regions (docs/perf.md, "region cost"): alibi and gqa_head_window (4 ops, 36) spill at 236 (d96
/// Bc 128), gqa_head_window also at 244 (d128 Bc 112, d192 Bc 64), neither at 228 (d128 Bc 96,
/// d192 Bc 48) or 220 (d96 Bc 112); softcap (3 ops, 27) spills at 235 (d192 Bc 64), not at 219
/// (Bc 48). The count is conservative in places (alibi: none at d128 Bc 112).
///
/// With Q in shared memory there is no Q, and the key block weighs more than one register per
/// column: D / 2 + 5·Bc / 4 + regions within 248 is what ptxas -v showed (fifteenth and sixteenth
/// sessions): no spills at d192 Bc 112 (236) and Bc 96 with softcap (243), d256 Bc 80 (228) and
/// Bc 64 with alibi (244); alibi at d192 Bc 96 (252) spills 8 bytes in the key loop. (By the
/// count without the weight the last two are both 228.)
///
/// Up to d128 with Q in shared memory the key block weighs less: O (D / 2), the scores (Bc / 2)
/// and a packed P block (Bc / 4), D / 2 + 3·Bc / 4 within 196 without regions (ptxas -v,
/// nineteenth session: d128 no spills at Bc 144, 160 and 176, 196). Regions are not counted
/// there: alibi spills at d128 Bc 128 (12 bytes) and gqa_head_window at 160, where softcap does
/// not at 176, so a kernel with regions keeps Q in registers at d128 (warpSpecializedQuery).
///
/// Three consumer warpgroups (Br = 192) hold 160 registers a thread after setmaxnreg: at d64
/// with Q in shared memory, D / 2 + Bc + regions within 187 (ptxas -v, sixteenth session: Bc 128
/// no spills plain or with softcap, 187; alibi and gqa_head_window spill 276-356 bytes, 196;
/// both none at Bc 112, 180). With Q in registers they do not fit.
static bool rotatedLoopFits(int64_t headDim, int64_t blockM, int64_t blockN,
                            int64_t regionRegisters, QOperand q) {
  if (blockM > 128)
    return q == QOperand::Shared && headDim / 2 + blockN + regionRegisters <= 187;
  if (q == QOperand::Shared && headDim <= 128)
    return regionRegisters == 0 && headDim / 2 + 3 * blockN / 4 <= 196;
  if (q == QOperand::Shared)
    return headDim / 2 + 5 * blockN / 4 + regionRegisters <= 248;
  return 3 * headDim / 4 + blockN + regionRegisters <= 232;
}

/// The one-warpgroup kernel (Br = 64, no rotation, up to 255 registers a thread): O (D / 2), Q
/// (D / 4), the scores (Bc / 2) and one packed P block (Bc / 4), plus the regions' registers.
/// Only a region cost moves its key block: ptxas -v at d256 (2026-12-01), alibi and
/// gqa_head_window (36) spill 4-8 bytes at Bc 48 (264) and none at Bc 32 (252), softcap (27) none
/// at Bc 32 (243). The plain kernels at d256 Bc 64 (240 by this count) spill 32-60 bytes, which
/// this count misses; their configuration is left as measured (docs/perf.md).
static bool oneWarpgroupFits(int64_t headDim, int64_t blockN, int64_t regionRegisters) {
  return 3 * headDim / 4 + 3 * blockN / 4 + regionRegisters <= 252;
}

/// The largest key block, a multiple of 16 from `tuned` down to `smallest`, that `fits`; 0 if
/// none does.
static int64_t largestFittingKeyBlock(int64_t tuned, int64_t smallest,
                                      llvm::function_ref<bool(int64_t)> fits) {
  for (int64_t blockN = tuned / 16 * 16; blockN >= std::max<int64_t>(smallest, 16); blockN -= 16)
    if (fits(blockN))
      return blockN;
  return 0;
}

/// The one-warpgroup kernel's key block with the regions' registers: the largest from `tuned`
/// down that fits, else `tuned`.
static int64_t oneWarpgroupKeyBlock(int64_t headDim, int64_t tuned, int64_t regionRegisters) {
  int64_t fitting = largestFittingKeyBlock(tuned, 16, [&](int64_t blockN) {
    return oneWarpgroupFits(headDim, blockN, regionRegisters);
  });
  return fitting ? fitting : tuned;
}

/// defaultTileConfig's row order: longest programs first where row blocks differ in work, on
/// sm_90a for keys in tensors (measured on padded batches only: docs/perf.md, 2026-12-01,
/// fifteenth session). Unset otherwise: the ascending grid.
static std::optional<RowOrder> defaultRowOrder(llvm::StringRef chip, KeyLayout keys,
                                               bool rowBlocksUnequal) {
  if (chip == "sm_90a" && keys == KeyLayout::Tensors && rowBlocksUnequal)
    return RowOrder::Descending;
  return std::nullopt;
}

/// The warp-specialized kernel's tiles with Q in `q`: two or three consumer warpgroups
/// (warpSpecializedRows) and the largest key block whose rotated loop fits the registers. Score
/// and mask regions that take registers keep the rotation with a smaller key block, down to half
/// the tuned one; below that (not measured on the H200) the per-block overhead is taken to outweigh
/// the overlap, and the loop runs unrotated with the tuned key block, which does not spill (one
/// score block in flight).
static void warpSpecializedTiles(TileConfig &c, int64_t headDim, QOperand q,
                                 int64_t regionRegisters, bool rowBlocksUnequal) {
  int64_t tuned = warpSpecializedKeyBlock(headDim, q, rowBlocksUnequal);
  int64_t rows = warpSpecializedRows(headDim, q);
  int64_t rotated = largestFittingKeyBlock(tuned, tuned / 2, [&](int64_t blockN) {
    return rotatedLoopFits(headDim, rows, blockN, regionRegisters, q);
  });
  c.blockM = rows;
  c.qOperand = q;
  c.warpSpecialize = true;
  c.blockN = rotated ? rotated : tuned;
  c.softmaxOverlap = rotated != 0;
}

/// Persistent programs by default (tgpu-persistent) where the producer loads Q with TMA on a
/// padded batch (loadsQWithTma with Q in shared memory, the d64 Br = 192, d128 Bc = 176, d192
/// and d256 defaults) and every row block is the same work (no causal-like mask). There the
/// next tile's Q and first key blocks load while the consumers finish this one. Measured on the H200 against
/// the one-tile-per-CTA grid (docs/perf.md, 2026-12-02, eighteenth session, two runs), full
/// masks: +9% at d64 and +4% at d192 and d256 at 1k; +0.5 to +3.5% at 4k; d64 +2% and d192, d256
/// -0.7% at 16k. Under a causal mask the static schedule loses 3-13% at 1k (its longest-first
/// order reads every head's keys at once), and at d128 with Q in registers it loses 2-4% from
/// 4k. Only kernels whose score and mask regions take no registers: measured so, and before the
/// persistent producer kept 32 registers the tile loop's state spilled on top of the regions'
/// (softcap at d64: 284 bytes, ptxas -v; none since). At d128 with Q loaded by TMA the causal
/// tiles are persistent too: +6% at 1k and +9% at 4k, within 1% at 16k (twentieth session; at
/// d192 and d256 persistence under a causal mask lost 3-13% at 1k in the serpentine order,
/// eighteenth session). Dealt paired (persistentRowOrder) the causal tiles are persistent from
/// d128: against the one-tile grid, d192 and d256 +2.6-3.5% at 1k and +4.6-8.4% at 4k, -3% at
/// 16k (H100, docs/perf.md, 2026-12-06), which brings every causal row from 4k over cuDNN there.
///
/// Packed batches (varlen) at d128 under a full mask take the persistent tile list
/// (packedTileListByDefault).
static bool persistentByDefault(const TileConfig &c, KeyLayout keys, int64_t regionRegisters,
                                bool rowBlocksUnequal, int64_t headDim) {
  // Under a causal-like mask d64's three-warpgroup tile is persistent and paired too (the
  // tuner's form measured so, +5-8% from 4k; twenty-ninth and thirtieth sessions); d96 holds Q
  // in registers.
  if (keys == KeyLayout::PackedRows)
    return c.loadsQWithTma() && packedTileListByDefault(headDim, rowBlocksUnequal, regionRegisters);
  return regionRegisters == 0 && keys == KeyLayout::Tensors && c.loadsQWithTma();
}

/// Ping-pong between the two consumer warpgroups (tgpu-pingpong) by default on the d128 full-mask
/// tile for longer sequences (Br = 128, Bc = 176, Q in shared memory by TMA, persistent, no
/// overlapped boundaries): since O leaves in 16-byte stores it measured +3.2 / +2.3 / +1.2 /
/// +0.8% and +5.4 / +1.9 / +2.1 / +0.5% at 2k / 4k / 8k / 16k in two runs beside the same
/// kernel without it (H100, docs/perf.md, thirty-fifth session; before the stores change it
/// lost up to 4% from 4k). On the d192 and d256 full-mask tiles too (below); under causal masks
/// it measured -0.3..-1.2% from 4k at d128 to d256 (thirty-sixth session), and the tuner
/// toggles it everywhere.
static bool pingpongByDefault(const TileConfig &c, int64_t headDim, KeyLayout keys,
                              bool rowBlocksUnequal, int64_t regionRegisters,
                              bool shortSequences) {
  if (keys != KeyLayout::Tensors || rowBlocksUnequal || regionRegisters != 0 ||
      c.blockM != 128 || c.qOperand != QOperand::Shared || c.warpSpecialize != true ||
      c.persistent != true || c.overlapTiles == true)
    return false;
  // d192 and d256 at their tuned key blocks (112, 80), any length: +3.9% / +2.4% at 1k, +1.2% /
  // -0.3% at 4k, +0.1% / +0.2% at 16k (H100, docs/perf.md, thirty-sixth session).
  if ((headDim == 192 || headDim == 256) &&
      c.blockN == warpSpecializedKeyBlock(headDim, QOperand::Shared, /*rowBlocksUnequal=*/false))
    return true;
  return headDim == 128 && !shortSequences && c.blockN == 176;
}

/// The narrow key tail's columns by default (key_tail; tgpu-narrow-key-tail), or 0: the
/// warp-specialized full-mask tiles without score regions, of keys in tensors, where it measured
/// ahead (H100, docs/perf.md, thirty-eighth session, against the same kernels without it): Q in
/// shared memory at d128 (Bc = 176: +0.9% / +0.8% at 4k / 16k) and d192 (Bc = 112: +1.2 / +0.8 /
/// +0.4% at 1k / 4k / 16k) with 64 columns, d96's Q in registers (Bc = 160: +0.7% / +0.4%) with
/// 96. Not d256 (Bc = 80: within ±0.1%, so not worth a second softmax body), nor the overlapped
/// short-sequence forms (d96 and d128 at Bc = 128), nor packed batches (varlen: -2% to -7% at
/// d128, the same run).
static int64_t keyTailByDefault(const TileConfig &c, int64_t headDim, KeyLayout keys,
                                bool rowBlocksUnequal, int64_t regionRegisters) {
  if (keys != KeyLayout::Tensors || rowBlocksUnequal || regionRegisters != 0 ||
      c.overlapTiles == true || c.mma != MmaKind::Wgmma || c.warpSpecialize != true ||
      !c.blockN)
    return 0;
  int64_t columns = 0;
  if (headDim == 96 && c.qOperand == QOperand::Registers)
    columns = 96;
  else if ((headDim == 128 || headDim == 192) && c.qOperand == QOperand::Shared)
    columns = 64;
  return columns < *c.blockN ? columns : 0;
}

/// Row blocks aligned to the rows' end (row_align=end) by default under a causal-like mask
/// where Br is not a power of two (192: three consumer warpgroups at d64): at lengths that are
/// powers of two its last row block is the partial one and, aligned to the start, the one with
/// the most keys. Aligned to the end the partial block is the first: 12.5% fewer key blocks at
/// 1k, 5.2% at 4k, 1.5% at 16k, measured +7.1% / +3.4% / +0.4% on the d64 paired persistent
/// tile (H100, docs/perf.md, 2026-12-06, thirtieth session). Not beside O by TMA (verify).
/// Padded batches only, where it was measured and run on the GPU: a packed batch's kernels take
/// it per sequence when asked (row_align=end), tested on the CPU.
static bool alignRowsByDefault(const TileConfig &c, KeyLayout keys, bool rowBlocksUnequal) {
  return keys == KeyLayout::Tensors && rowBlocksUnequal && c.blockM &&
         !llvm::isPowerOf2_64(*c.blockM) && c.oTma != true;
}

/// A persistent kernel's longest-first default dealt paired (tgpu-persistent): each program
/// runs row blocks i and R - 1 - i of one (batch, head), head by head, so K and V come from L2
/// where the serpentine deal read them from DRAM once per row block. Causal d128 against
/// serpentine: +33% at 1k, +1.5% at 4k, -1.7% at 16k (H100, docs/perf.md, 2026-12-06).
static std::optional<RowOrder> persistentRowOrder(std::optional<RowOrder> order) {
  return order == RowOrder::Descending ? RowOrder::Paired : order;
}

/// Tile boundaries overlapped by default (tgpu-overlap-tiles) on the persistent causal d128
/// kernel, where verify admits them (persistent, warp roles, rotated, no ping-pong or O by TMA):
/// Br = Bc = 128 with two stages and Q in shared memory by TMA, whose second Q stage fits (Bc =
/// 176 under full masks, d192 and d256 leave no room), and no region registers (softcap spills
/// 8 bytes under it, ptxas -v). Its short tiles (causal row blocks average half the keys) are
/// where idle tensor cores across a boundary cost most: +7.3% at 1k, +3.7% at 4k, -0.9% at 16k
/// against the same kernel without (H100, docs/perf.md, 2026-12-06, twenty-eighth session).
///
/// Under full masks for short sequences (`shortSequences`: tiles of at most eight key blocks)
/// too: d64's 192 x 128 tile +7.2% at 1k (-0.1% at 4k, -2.7% at 16k), d128 at Bc = 128
/// (whose second Q stage fits, where 176 leaves no room) +2.6% at 1k over the Bc = 176 default
/// (-1.4% at 4k) (H100, docs/perf.md, twenty-eighth and twenty-ninth sessions); d96's short
/// form (d96ShortTile) under either mask, +11.4% full and +16.8% causal at 1k (thirty-sixth).
static bool overlapTilesByDefault(const TileConfig &c, int64_t headDim, KeyLayout keys,
                                  bool rowBlocksUnequal, int64_t regionRegisters,
                                  bool shortSequences) {
  // (A varlen kernel's tile loops run per sequence: tgpu-overlap-tiles refuses them.)
  if (keys != KeyLayout::Tensors || regionRegisters != 0 || c.qOperand != QOperand::Shared ||
      c.qTma == false || c.stages != 2)
    return false;
  // The measured tiles: d128's 128 x 128 (causal, or full for short sequences), d64's 192 x
  // 128 (full, short sequences) and d96's 128 x 128 (short sequences).
  bool d128Tile = headDim == 128 && c.blockM == 128 && c.blockN == 128;
  bool d64Tile = headDim > 48 && headDim <= 64 && c.blockM == 192 && c.blockN == 128;
  bool d96Tile = d96ShortTile(headDim, keys, regionRegisters, shortSequences) &&
                 c.blockM == 128 && c.blockN == 128;
  if (!d96Tile && (rowBlocksUnequal ? !d128Tile : !(shortSequences && (d128Tile || d64Tile))))
    return false;
  TileConfig overlapped = c;
  overlapped.overlapTiles = true;
  if (llvm::Error error = overlapped.verify()) {
    llvm::consumeError(std::move(error));
    return false;
  }
  return true;
}

bool TileConfig::sumsRowsOnTensorCores() const {
  return rowSumMma.value_or(false) && warpSpecialize.value_or(false);
}

TileConfig tilefuse::defaultTileConfig(int64_t headDim, llvm::StringRef chip, KeyLayout keys,
                                       int64_t regionRegisters, bool rowBlocksUnequal,
                                       bool shortSequences) {
  TileConfig c;
  c.qOperand = QOperand::Registers;
  c.copyIssue = CopyIssue::Eager;
  c.stages = 2;
  // Packing pays where a key/value head's query rows would otherwise be spread over programs that
  // each read its keys (decode); the split-KV kernels ask for it (splitKvTileConfig).
  c.packGqa = false;
  // Measured on the H200 (docs/perf.md, 2026-11-29). sm_90a: one warpgroup (Br = 64) with
  // wgmma; Bc = 128 at D <= 64, 64 at D = 128 (the best of 64/128 x 64/128 over N = 4k, 16k).
  if (chip == "sm_90a") {
    c.blockM = 64;
    c.blockN = headDim <= 64 ? 128 : 64;
    c.rowsPerWarp = 16;
    c.mma = MmaKind::Wgmma;
    c.rowOrder = defaultRowOrder(chip, keys, rowBlocksUnequal);
    if (warpSpecializedByDefault(headDim, chip, keys, rowBlocksUnequal, regionRegisters,
                                 shortSequences)) {
      warpSpecializedTiles(c, headDim,
                           warpSpecializedQuery(headDim, keys, rowBlocksUnequal, regionRegisters,
                                                shortSequences),
                           regionRegisters, rowBlocksUnequal);
      // d128 under a full mask for short sequences: the causal mask's key block, whose tile
      // boundaries can overlap (overlapTilesByDefault).
      if (shortSequences && !rowBlocksUnequal && headDim == 128 && keys == KeyLayout::Tensors &&
          regionRegisters == 0 && c.qOperand == QOperand::Shared)
        c.blockN = warpSpecializedKeyBlock(headDim, QOperand::Shared, /*rowBlocksUnequal=*/true);
      // d96 for short sequences: the key block whose overlapped boundaries were measured.
      if (d96ShortTile(headDim, keys, regionRegisters, shortSequences))
        c.blockN = 128;
      if (persistentByDefault(c, keys, regionRegisters, rowBlocksUnequal, headDim)) {
        c.persistent = true;
        c.rowOrder = persistentRowOrder(c.rowOrder);
        if (overlapTilesByDefault(c, headDim, keys, rowBlocksUnequal, regionRegisters,
                                  shortSequences))
          c.overlapTiles = true;
        if (pingpongByDefault(c, headDim, keys, rowBlocksUnequal, regionRegisters,
                              shortSequences))
          c.pingpong = true;
      }
      if (alignRowsByDefault(c, keys, rowBlocksUnequal))
        c.alignRowsToEnd = true;
      if (int64_t columns = keyTailByDefault(c, headDim, keys, rowBlocksUnequal, regionRegisters))
        c.keyTail = columns;
    } else if (regionRegisters > 0 && keys != KeyLayout::Gathered) {
      // Gathered (paged) keys keep their key block: its page-size constraints are their own.
      c.blockN = oneWarpgroupKeyBlock(headDim, *c.blockN, regionRegisters);
    } else if (keys == KeyLayout::PackedRows && headDim <= 64 && regionRegisters == 0) {
      // A packed batch's grid holds many programs with no rows (each sequence is as long as the
      // longest in the grid; here under a causal-like mask, or at d32): a third CTA an SM hides
      // them, 1.12-1.37x on the H200 (docs/perf.md, 2026-12-01, eighth session; again
      // 1.18-1.29x at d64 in the eleventh). The plain kernels
      // fit it without spills (164-168 registers, ptxas -v); the regions' registers would not
      // (alibi: 152 bytes).
      c.ctasPerSm = 3;
    }
    return c;
  }
  // mma.sync: at D <= 64 two m16 tiles per warp (Br = 128 on 4 warps) reach FA2; at D = 128
  // they spill (Q lives in registers), so one. (The region cost is not applied here: its budget
  // was measured on sm_90a's warpgroup layouts only.)
  c.mma = MmaKind::Sync;
  c.blockN = 64;
  c.blockM = headDim <= 64 ? 128 : 64;
  c.rowsPerWarp = headDim <= 64 ? 32 : 16;
  return c;
}

TileConfig tilefuse::splitKvTileConfig(int64_t headDim, llvm::StringRef chip,
                                       const TileConfig &requested, KeyLayout keys) {
  TileConfig c;
  c.packGqa = true;
  // The warp-specialized split kernel measured 5-8% slower from 32k keys and +1-2% at 4k
  // (docs/perf.md, twentieth session): not the default, also where a caller turns packing off.
  c.warpSpecialize = false;
  if (chip == "sm_90a" && headDim <= 128) {
    // A paged cache's rows are gathered through the table, whose reads and address arithmetic
    // one warp a scheduler (one CTA an SM at Bc = 128) cannot hide: key blocks of 64, two CTAs
    // an SM, read at 0.97-0.99x of the contiguous kernel from 4k keys with a fixed page size of
    // 16 or 128 rows and 0.95-0.98x with one given at launch, where Bc = 128 read 0.87x at 32k
    // in 16-row pages (docs/perf.md, twenty-first session).
    c.blockN = keys == KeyLayout::Gathered ? 64 : 128;
    // The value blocks prefetched (one CTA an SM at 128 KiB, the launcher's S = 2 at 4k keys):
    // +3.7-3.9% at KV 4k, +5% at 1k, +0.3% at 32k over the value block waited for in its own
    // iteration, and ahead of Bc = 64, 80, 96, 112, 160 and 192 so prefetched (docs/perf.md,
    // twenty-first session). A request for warp roles, which it cannot go with (verify), takes
    // it away; a deeper ring (stages > 2) deepens the value ring with the key ring.
    if (requested.warpSpecialize != true)
      c.prefetchValues = true;
  }
  return c.overriddenBy(requested);
}

llvm::Expected<TileConfig> tilefuse::resolveTileConfig(const TileConfig &requested,
                                                       int64_t headDim, llvm::StringRef chip,
                                                       KeyLayout keys, int64_t regionRegisters,
                                                       bool rowBlocksUnequal,
                                                       bool shortSequences) {
  // The fields one by one first, so a bad value is named as such, not as a bad combination.
  TileConfig alone;
  alone.blockM = requested.blockM;
  alone.blockN = requested.blockN;
  alone.rowsPerWarp = requested.rowsPerWarp;
  alone.stages = requested.stages;
  alone.ctasPerSm = requested.ctasPerSm;
  if (llvm::Error error = alone.verify())
    return std::move(error);
  // wgmma's constraints (warpgroups of 16-row warps) rule it out as the default when a set field
  // contradicts them; an explicit mma=wgmma is checked as is. q=shared alone keeps meaning the
  // mma.sync kernel that reads Q by ldmatrix (what it meant before wgmma could read a shared
  // A): with wgmma it is asked for as mma=wgmma,q=shared.
  bool syncOnly = requested.mma == MmaKind::Sync || requested.rowsPerWarp == 32 ||
                  (requested.qOperand == QOperand::Shared && requested.mma != MmaKind::Wgmma) ||
                  (requested.blockM && *requested.blockM % 64);
  // The warp-specialized default only where nothing asked for rules it out. A Q operand other
  // than that default's is the one-warpgroup kernel's (Q in shared memory at d96, where the
  // warp-specialized kernel was not measured; in registers at d256, where its loop would spill),
  // unless warp_specialize=true is asked too.
  // Packed GQA rows are gathered by the register load (verify), so packing keeps Q there.
  QOperand defaultQuery = requested.packGqa == true
                              ? QOperand::Registers
                              : warpSpecializedQuery(headDim, keys, rowBlocksUnequal,
                                                     regionRegisters, shortSequences);
  // Where the default operand depends on the kernel (d128: Q in shared memory without regions
  // that take registers, in registers with them) either one is a warp-specialized default, so
  // asking for the other keeps the warp roles and takes that operand's tiles.
  bool eitherQuery = queryDependsOnKernel(headDim, keys);
  bool otherQuery = requested.qOperand && *requested.qOperand != defaultQuery &&
                    requested.warpSpecialize != true && !eitherQuery;
  // Value blocks prefetched by the kernel's own copies are the one-warpgroup kernel's (verify).
  bool noWarpRoles = syncOnly || requested.packGqa == true || requested.warpSpecialize == false ||
                     requested.prefetchValues == true || otherQuery;
  llvm::StringRef baseChip = syncOnly ? llvm::StringRef("sm_80") : chip;
  KeyLayout baseKeys = noWarpRoles ? KeyLayout::Gathered : keys;
  TileConfig base = defaultTileConfig(headDim, baseChip, baseKeys, regionRegisters,
                                      rowBlocksUnequal, shortSequences);
  // Gathered stands in for "no warp roles" above; a one-warpgroup kernel of keys in tensors
  // still fits its key block to the regions' registers, as defaultTileConfig's does (d256 with
  // warp_specialize=false or Q in registers).
  if (noWarpRoles && !syncOnly && baseChip == "sm_90a" && keys != KeyLayout::Gathered &&
      regionRegisters > 0)
    base.blockN = oneWarpgroupKeyBlock(headDim, *base.blockN, regionRegisters);
  // The row order from the kernel's own keys (baseKeys may stand in for "no warp roles"); in a
  // persistent kernel it orders the tile loop (tgpu-persistent).
  base.rowOrder = defaultRowOrder(baseChip, keys, rowBlocksUnequal);
  // Warp-specialized on request: its tiles for the Q operand asked for (warpSpecializedRows'
  // consumer warpgroups unless Br is set).
  bool requeried = eitherQuery && requested.qOperand && *requested.qOperand != defaultQuery &&
                   base.warpSpecialize.value_or(false);
  // The packed one-warpgroup default's third CTA an SM (ctas_per_sm=3) is that kernel's
  // register budget; warp roles take their own unless one is asked for.
  if ((requested.warpSpecialize == true || requeried) && !syncOnly) {
    warpSpecializedTiles(base, headDim, requested.qOperand.value_or(defaultQuery),
                         regionRegisters, rowBlocksUnequal);
    base.ctasPerSm.reset();
  }
  TileConfig tiles = base.overriddenBy(requested);
  // Rotated where it fits the key block actually chosen (an explicit Bc may not), unless asked.
  if (tiles.warpSpecialize.value_or(false) && !requested.softmaxOverlap)
    tiles.softmaxOverlap =
        rotatedLoopFits(headDim, *tiles.blockM, *tiles.blockN, regionRegisters, *tiles.qOperand);
  // Unrotated on request, the regions' registers meet no second score block in flight: the
  // tuned key block, which the default shrank only to keep the rotation.
  if (requested.softmaxOverlap == false && !requested.blockN && base.softmaxOverlap == true)
    tiles.blockN = warpSpecializedKeyBlock(headDim, *tiles.qOperand, rowBlocksUnequal);
  // Persistent by default where the kernel actually built loads Q with TMA (a request for Q in
  // registers, q_tma=false or no warp roles takes the default's persistence away), unless asked.
  // A grouped row order (one tile a CTA, verify) takes it away too.
  // A paired row order (a persistent tile loop's, verify) asks for persistence.
  if (!requested.persistent && requested.rowOrder == RowOrder::Paired)
    tiles.persistent = true;
  else if (!requested.persistent)
    tiles.persistent =
        requested.rowOrder != RowOrder::Grouped &&
                persistentByDefault(tiles, keys, regionRegisters, rowBlocksUnequal, headDim)
            ? std::optional<bool>(true)
            : std::nullopt;
  // The default row order of what turned out persistent; one-tile grids keep descending (and
  // a persistence that verify refuses, without warp roles, is refused as asked for).
  if (!requested.rowOrder)
    tiles.rowOrder = tiles.persistent == true && tiles.warpSpecialize == true
                         ? persistentRowOrder(base.rowOrder)
                         : base.rowOrder;
  // Overlapped tile boundaries where the kernel actually built is the default's shape for them
  // (a request for another key block, one tile a CTA, ping-pong or O by TMA takes them away).
  if (!requested.overlapTiles)
    tiles.overlapTiles =
        overlapTilesByDefault(tiles, headDim, keys, rowBlocksUnequal, regionRegisters,
                              shortSequences)
            ? std::optional<bool>(true)
            : std::nullopt;
  // Ping-pong where the kernel built is the measured d128 tile, unless asked.
  if (!requested.pingpong)
    tiles.pingpong = pingpongByDefault(tiles, headDim, keys, rowBlocksUnequal, regionRegisters,
                                       shortSequences)
                         ? std::optional<bool>(true)
                         : std::nullopt;
  // Row blocks aligned to the end where the tile actually built is the default's shape for it
  // (an explicit Br, or O by TMA, may take it away), unless asked.
  if (!requested.alignRowsToEnd)
    tiles.alignRowsToEnd =
        alignRowsByDefault(tiles, keys, rowBlocksUnequal) ? std::optional<bool>(true)
                                                          : std::nullopt;
  // The narrow key tail where the kernel built is a measured shape for it, unless asked.
  if (!requested.keyTail) {
    int64_t columns = keyTailByDefault(tiles, headDim, keys, rowBlocksUnequal, regionRegisters);
    tiles.keyTail = columns ? std::optional<int64_t>(columns) : std::nullopt;
  }
  if (!requested.rowsPerWarp && *tiles.blockM % *tiles.rowsPerWarp)
    tiles.rowsPerWarp = 16; // an explicit Br the default rows-per-warp does not divide
  // The chip is left to convert-tgpu-to-nvvm, whose message names it.
  if (llvm::Error error = tiles.verify())
    return std::move(error);
  return tiles;
}
