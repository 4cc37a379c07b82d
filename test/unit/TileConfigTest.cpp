//===- TileConfigTest.cpp - the typed kernel configuration ----------------===//
#include "DiagnosedSource.h"
#include "TestUtil.h"
#include "tilefuse/kernels/Registry.h"
#include "tilefuse/passes/ScoreRegionCost.h"
#include "tilefuse/runtime/Compiler.h"
#include "tilefuse/runtime/TileConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <map>

using namespace tilefuse;
using namespace tilefuse::runtime;

static TileConfig parsed(llvm::StringRef text) {
  auto config = TileConfig::parse(text);
  if (!config) {
    ADD_FAILURE() << text.str() << ": " << llvm::toString(config.takeError());
    return {};
  }
  return *config;
}

static std::string parseError(llvm::StringRef text) {
  auto config = TileConfig::parse(text);
  if (config) {
    ADD_FAILURE() << text.str() << " parsed as " << config->print();
    return "";
  }
  return llvm::toString(config.takeError());
}

/// The sm_90a default at head dim `d` as resolveTileConfig gives it for an empty request.
static TileConfig resolvedDefault(int64_t d, bool rowBlocksUnequal, bool shortSequences,
                                  int64_t regionRegisters = 0,
                                  KeyLayout keys = KeyLayout::Tensors) {
  auto c = resolveTileConfig(parsed(""), d, "sm_90a", keys, regionRegisters, rowBlocksUnequal,
                             shortSequences);
  EXPECT_TRUE(bool(c)) << llvm::toString(c.takeError());
  return c ? *c : TileConfig();
}

/// Why `text` is not a valid configuration: its parse error, else its verify() error, else "".
static std::string problemWith(llvm::StringRef text) {
  auto config = TileConfig::parse(text);
  if (!config)
    return llvm::toString(config.takeError());
  if (llvm::Error e = config->verify())
    return llvm::toString(std::move(e));
  return "";
}

TEST(TileConfig, PrintParseRoundTrip) {
  TileConfig c;
  EXPECT_EQ(c.print(), "");
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(parsed(""), c);
  c.blockM = 64;
  c.blockN = 128;
  c.rowsPerWarp = 16;
  c.mma = MmaKind::Wgmma;
  c.qOperand = QOperand::Registers;
  c.copyIssue = CopyIssue::AtBarrier;
  EXPECT_FALSE(c.isComplete()) << "stages unset";
  c.stages = 3;
  EXPECT_FALSE(c.isComplete()) << "pack_gqa unset";
  c.packGqa = true;
  EXPECT_TRUE(c.isComplete());
  EXPECT_EQ(c.print(), "Br=64,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,"
                       "copy_issue=at-barrier,stages=3,pack_gqa=true");
  EXPECT_EQ(parsed(c.print()), c);
  // Partial configurations print only what they set, and come back the same.
  TileConfig partial;
  partial.blockN = 32;
  partial.qOperand = QOperand::Shared;
  EXPECT_EQ(partial.print(), "Bc=32,q=shared");
  EXPECT_EQ(parsed(partial.print()), partial);
  EXPECT_FALSE(partial.isComplete());
}

TEST(TileConfig, ParseTakesOlderSpellingsAndSpaces) {
  TileConfig c = parsed(" block_m=128 , block-n=64,rows-per-warp=32,q-operand=shared,"
                        "copy-issue=eager,mma=sync");
  EXPECT_EQ(c.print(), "Br=128,Bc=64,rows_per_warp=32,mma=sync,q=shared,copy_issue=eager");
}

TEST(TileConfig, ParseErrors) {
  EXPECT_NE(parseError("Q=1").find("unknown setting 'Q'"), std::string::npos);
  EXPECT_NE(parseError("Br=sixty").find("Br needs an integer, not 'sixty'"), std::string::npos);
  EXPECT_NE(parseError("mma=tensor").find("mma must be sync or wgmma, not 'tensor'"),
            std::string::npos);
  EXPECT_NE(parseError("q=global").find("q must be registers or shared"), std::string::npos);
  EXPECT_NE(parseError("copy_issue=late").find("eager or at-barrier"), std::string::npos);
  EXPECT_NE(parseError("Br").find("'Br' is not KEY=VALUE"), std::string::npos);
  EXPECT_NE(parseError("stages=deep").find("stages needs an integer"), std::string::npos);
}

TEST(TileConfig, VerifyChecksRangesAndCombinations) {
  auto problem = [](llvm::StringRef text, llvm::StringRef chip = "") {
    llvm::Error e = parsed(text).verify(chip);
    return e ? llvm::toString(std::move(e)) : std::string();
  };
  EXPECT_EQ(problem("Br=64,Bc=128,rows_per_warp=16,mma=wgmma,q=registers", "sm_90a"), "");
  EXPECT_NE(problem("Br=72").find("block-m must be a multiple of 16"), std::string::npos);
  EXPECT_NE(problem("Br=512").find("up to 256"), std::string::npos);
  EXPECT_NE(problem("Bc=0").find("block-n must be a positive multiple of 16"), std::string::npos);
  EXPECT_NE(problem("rows_per_warp=8").find("rows-per-warp must be 16 or 32"), std::string::npos);
  EXPECT_NE(problem("Br=48,rows_per_warp=32").find("multiple of rows-per-warp"),
            std::string::npos);
  for (const char *bad : {"mma=wgmma,rows_per_warp=32", "mma=wgmma,Br=32"})
    EXPECT_NE(problem(bad).find("mma=wgmma needs chip=sm_90a"), std::string::npos) << bad;
  // wgmma reads a shared Q by descriptor, warp-specialized too (its consumers copy Q).
  EXPECT_EQ(problem("Br=64,mma=wgmma,q=shared", "sm_90a"), "");
  EXPECT_EQ(problem("Br=128,mma=wgmma,q=shared,warp_specialize=true", "sm_90a"), "");
  // Packed GQA rows stay in the consumers' register load of Q (split-KV decode).
  EXPECT_EQ(problem("Br=64,mma=wgmma,pack_gqa=true,warp_specialize=true", "sm_90a"), "");
  EXPECT_NE(problem("mma=wgmma,q=shared,pack_gqa=true,warp_specialize=true", "sm_90a")
                .find("pack_gqa=true needs q=registers"),
            std::string::npos);
  EXPECT_NE(problem("mma=wgmma", "sm_80").find("mma=wgmma needs"), std::string::npos);
  EXPECT_EQ(problem("stages=4"), "");
  for (const char *bad : {"stages=1", "stages=5"})
    EXPECT_NE(problem(bad).find("stages must be 2, 3 or 4"), std::string::npos) << bad;
  EXPECT_EQ(problem("ctas_per_sm=3"), "");
  for (const char *bad : {"ctas_per_sm=0", "ctas_per_sm=5"})
    EXPECT_NE(problem(bad).find("ctas_per_sm must be 1 to 4"), std::string::npos) << bad;
}

/// The register budget is asked for, never part of a complete configuration: a default kernel
/// gets none, and printing leaves it out unless set.
TEST(TileConfig, RegisterBudgetOnlyWhereAskedFor) {
  auto resolved = resolveTileConfig(parsed(""), 128, "sm_90a");
  ASSERT_TRUE(bool(resolved)) << llvm::toString(resolved.takeError());
  EXPECT_TRUE(resolved->isComplete());
  EXPECT_FALSE(resolved->ctasPerSm);
  EXPECT_EQ(resolved->print().find("ctas_per_sm"), std::string::npos);
  auto budget = resolveTileConfig(parsed("ctas_per_sm=3"), 128, "sm_90a");
  ASSERT_TRUE(bool(budget)) << llvm::toString(budget.takeError());
  EXPECT_EQ(budget->ctasPerSm, 3);
  TileConfig budgeted = *resolved;
  budgeted.ctasPerSm = 3;
  EXPECT_EQ(budget->print(), budgeted.print());
  EXPECT_EQ(parsed(budget->print()), *budget);
  EXPECT_NE(hash_value(*budget), hash_value(*resolved));
}

/// Warp specialization is asked for too: it adds a producer warpgroup's 128 threads, takes two
/// consumer warpgroups (Br = 128; three at d64 with Q in shared memory) unless Br is set, and
/// needs warpgroup MMAs on sm_90a. At d64 it is the default for padded batches, under a
/// causal-like mask (rowBlocksUnequal) except for short sequences.
TEST(TileConfig, WarpSpecializeAddsAProducerWarpgroup) {
  auto plain = resolveTileConfig(parsed(""), 64, "sm_90a", KeyLayout::Tensors, 0,
                                 /*rowBlocksUnequal=*/true, /*shortSequences=*/true);
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  EXPECT_FALSE(plain->warpSpecialize);
  EXPECT_EQ(plain->print().find("warp_specialize"), std::string::npos);
  auto longCausal = resolveTileConfig(parsed(""), 64, "sm_90a", KeyLayout::Tensors, 0,
                                      /*rowBlocksUnequal=*/true);
  ASSERT_TRUE(bool(longCausal)) << llvm::toString(longCausal.takeError());
  EXPECT_EQ(longCausal->warpSpecialize, true);
  EXPECT_EQ(longCausal->threads(), 384 + 128);
  auto ws = resolveTileConfig(parsed("warp_specialize=true,q=registers"), 64, "sm_90a");
  ASSERT_TRUE(bool(ws)) << llvm::toString(ws.takeError());
  EXPECT_EQ(ws->blockM, 128);
  EXPECT_EQ(ws->mma, MmaKind::Wgmma);
  EXPECT_EQ(ws->threads(), 256 + 128);
  auto three = resolveTileConfig(parsed("warp_specialize=true"), 64, "sm_90a",
                                 KeyLayout::Tensors, 0, /*rowBlocksUnequal=*/true);
  ASSERT_TRUE(bool(three)) << llvm::toString(three.takeError());
  EXPECT_EQ(three->blockM, 192);
  EXPECT_EQ(three->qOperand, QOperand::Shared);
  EXPECT_EQ(three->threads(), 384 + 128);
  auto padded = resolveTileConfig(parsed(""), 64, "sm_90a");
  ASSERT_TRUE(bool(padded)) << llvm::toString(padded.takeError());
  EXPECT_EQ(padded->blockM, 192);
  EXPECT_EQ(padded->blockN, 128);
  EXPECT_EQ(padded->warpSpecialize, true);
  EXPECT_EQ(padded->softmaxOverlap, true);
  EXPECT_EQ(parsed(ws->print()), *ws);
  EXPECT_NE(hash_value(*ws), hash_value(*plain));
  auto br64 = resolveTileConfig(parsed("warp_specialize=true,Br=64"), 64, "sm_90a");
  ASSERT_TRUE(bool(br64)) << llvm::toString(br64.takeError());
  EXPECT_EQ(br64->threads(), 128 + 128);
  // Packing keeps Q in registers under warp roles (where the d128 default would take it to
  // shared memory), with the producer loading only K and V.
  auto packed = resolveTileConfig(parsed("warp_specialize=true,Br=64,pack_gqa=true"), 128,
                                  "sm_90a");
  ASSERT_TRUE(bool(packed)) << llvm::toString(packed.takeError());
  EXPECT_EQ(packed->qOperand, QOperand::Registers);
  EXPECT_FALSE(packed->loadsQWithTma());
  EXPECT_EQ(packed->threads(), 128 + 128);
  for (const char *bad : {"warp_specialize=true,mma=sync", "warp_specialize=maybe"}) {
    std::string message = problemWith(bad);
    EXPECT_NE(message.find("warp_specialize"), std::string::npos) << bad << ": " << message;
  }
  auto onAmpere = resolveTileConfig(parsed("warp_specialize=true"), 128, "sm_80");
  // The d128 default is warp-specialized already.
  auto d128 = resolveTileConfig(parsed(""), 128, "sm_90a");
  ASSERT_TRUE(bool(d128));
  EXPECT_EQ(d128->warpSpecialize, true);
  EXPECT_EQ(d128->threads(), 384);
  ASSERT_FALSE(bool(onAmpere));
  EXPECT_NE(llvm::toString(onAmpere.takeError()).find("sm_90a"), std::string::npos);
}

/// Q in shared memory: alone it keeps meaning the mma.sync kernel (ldmatrix of Q); with
/// mma=wgmma it is the one-warpgroup wgmma kernel reading Q by descriptor where the
/// warp-specialized default keeps Q in registers (d128), and that default itself where it keeps
/// Q in shared memory (d256, padded); the one-warpgroup kernel is then asked for with
/// warp_specialize=false, and the warp-specialized one at d128 with warp_specialize=true (its
/// consumers copy Q, the producer K and V). Q in registers at d256 is the one-warpgroup kernel.
TEST(TileConfig, SharedQueryWithWarpgroupMmas) {
  auto alone = resolveTileConfig(parsed("q=shared"), 256, "sm_90a");
  ASSERT_TRUE(bool(alone)) << llvm::toString(alone.takeError());
  EXPECT_EQ(alone->mma, MmaKind::Sync);
  auto d256 = resolveTileConfig(parsed("mma=wgmma,q=shared"), 256, "sm_90a");
  ASSERT_TRUE(bool(d256)) << llvm::toString(d256.takeError());
  EXPECT_EQ(*d256, defaultTileConfig(256, "sm_90a"));
  EXPECT_EQ(d256->warpSpecialize, true);
  auto registers = resolveTileConfig(parsed("q=registers"), 256, "sm_90a");
  ASSERT_TRUE(bool(registers)) << llvm::toString(registers.takeError());
  EXPECT_EQ(registers->warpSpecialize.value_or(false), false);
  EXPECT_EQ(registers->threads(), 128);
  EXPECT_EQ(registers->blockN, 64);
  for (auto [d, text] : {std::pair<int64_t, const char *>{96, "mma=wgmma,q=shared"},
                         {256, "mma=wgmma,q=shared,warp_specialize=false"}}) {
    auto wgmma = resolveTileConfig(parsed(text), d, "sm_90a");
    ASSERT_TRUE(bool(wgmma)) << d << ": " << llvm::toString(wgmma.takeError());
    EXPECT_EQ(wgmma->mma, MmaKind::Wgmma) << d;
    EXPECT_EQ(wgmma->qOperand, QOperand::Shared) << d;
    EXPECT_EQ(wgmma->warpSpecialize.value_or(false), false) << d;
    EXPECT_EQ(wgmma->threads(), 128) << d;
    EXPECT_EQ(parsed(wgmma->print()), *wgmma) << d;
  }
  for (int64_t d : {96, 128, 256}) {
    auto roles = resolveTileConfig(parsed("mma=wgmma,q=shared,warp_specialize=true"), d,
                                   "sm_90a");
    ASSERT_TRUE(bool(roles)) << d << ": " << llvm::toString(roles.takeError());
    EXPECT_EQ(roles->qOperand, QOperand::Shared) << d;
    EXPECT_EQ(roles->warpSpecialize, true) << d;
    EXPECT_EQ(roles->blockM, 128) << d; // two consumer warpgroups
    EXPECT_EQ(roles->threads(), 384) << d;
  }
  auto sync = resolveTileConfig(parsed("mma=sync,q=shared,warp_specialize=true"), 128, "sm_90a");
  ASSERT_FALSE(bool(sync));
  EXPECT_NE(llvm::toString(sync.takeError()).find("mma=wgmma"), std::string::npos);
}

/// Ping-pong by default on the persistent full-mask tiles where it measured ahead: d128 at Bc =
/// 176 beyond short sequences, d192 and d256 at their tuned key blocks at any length; not under
/// causal masks, with regions that take registers, or on packed batches.
TEST(TileConfig, PingPongDefaults) {
  EXPECT_EQ(resolvedDefault(128, false, false).pingpong, true);
  EXPECT_FALSE(resolvedDefault(128, false, true).pingpong);
  for (int64_t d : {192, 256})
    for (bool shortSequences : {false, true}) {
      TileConfig full = resolvedDefault(d, false, shortSequences);
      EXPECT_EQ(full.pingpong, true) << d;
      EXPECT_EQ(full.blockN, d == 192 ? 112 : 80);
      EXPECT_EQ(full, defaultTileConfig(d, "sm_90a", KeyLayout::Tensors, 0, false,
                                        shortSequences));
      EXPECT_FALSE(resolvedDefault(d, true, shortSequences).pingpong) << d;
      EXPECT_FALSE(resolvedDefault(d, false, shortSequences, 27).pingpong) << d;
      EXPECT_FALSE(
          resolvedDefault(d, false, shortSequences, 0, KeyLayout::PackedRows).pingpong)
          << d;
    }
  // Another key block asked for leaves it off.
  auto narrow = resolveTileConfig(parsed("Bc=64"), 192, "sm_90a");
  ASSERT_TRUE(bool(narrow)) << llvm::toString(narrow.takeError());
  EXPECT_FALSE(narrow->pingpong);
}

/// Ping-pong and persistent programs are warp-specialized kernels' options: they round-trip, and
/// without warp specialization (or, for ping-pong, with one consumer warpgroup) are refused.
TEST(TileConfig, PingPongAndPersistentNeedWarpSpecialization) {
  auto both = resolveTileConfig(parsed("pingpong=true,persistent=true"), 128, "sm_90a");
  ASSERT_TRUE(bool(both)) << llvm::toString(both.takeError());
  EXPECT_EQ(both->pingpong, true);
  EXPECT_EQ(both->persistent, true);
  EXPECT_EQ(parsed(both->print()), *both);
  auto plain = resolveTileConfig(parsed(""), 96, "sm_90a");
  ASSERT_TRUE(bool(plain));
  EXPECT_FALSE(plain->pingpong);
  EXPECT_FALSE(plain->persistent);
  EXPECT_NE(hash_value(*both), hash_value(*plain));
  for (const char *bad :
       {"persistent=true", "pingpong=true", "warp_specialize=true,Br=64,pingpong=true"}) {
    // d64 under a causal mask, short sequences: the one-warpgroup default.
    auto config = resolveTileConfig(parsed(bad), 64, "sm_90a", KeyLayout::Tensors, 0,
                                    /*rowBlocksUnequal=*/true, /*shortSequences=*/true);
    ASSERT_FALSE(bool(config)) << bad;
    std::string message = llvm::toString(config.takeError());
    EXPECT_NE(message.find("needs warp_specialize=true"), std::string::npos) << message;
  }
}

/// persistent=true on the d64 causal short-sequence default (one warpgroup, no warp roles) is
/// refused for what was asked, not for the paired deal a persistent causal kernel would take by
/// default.
TEST(TileConfig, PersistenceWithoutWarpRolesRefusedAsAsked) {
  auto config = resolveTileConfig(parsed("persistent=true"), 64, "sm_90a", KeyLayout::Tensors, 0,
                                  /*rowBlocksUnequal=*/true, /*shortSequences=*/true);
  ASSERT_FALSE(bool(config));
  std::string why = llvm::toString(config.takeError());
  EXPECT_NE(why.find("persistent=true needs warp_specialize=true"), std::string::npos) << why;
  EXPECT_EQ(why.find("paired"), std::string::npos) << why;
}

/// Persistent by default where the producer loads Q with TMA: d64 (Br = 192), d128 (Bc = 176
/// full, 128 causal), d192 and d256 on padded batches, under causal-like masks too (paired); not
/// at d96 or with Q in registers, not d64's short-sequence causal kernel (one warpgroup), not on
/// packed batches, and not once a request takes Q by TMA away.
TEST(TileConfig, PersistentWhereQueryLoadsByTma) {
  auto resolved = [](const char *text, int64_t d, bool unequal = false,
                     KeyLayout keys = KeyLayout::Tensors) {
    auto config = resolveTileConfig(parsed(text), d, "sm_90a", keys, 0, unequal);
    EXPECT_TRUE(bool(config)) << llvm::toString(config.takeError());
    return *config;
  };
  for (int64_t d : {64, 128, 192, 256}) {
    EXPECT_EQ(resolved("", d).persistent, true) << d;
    EXPECT_EQ(defaultTileConfig(d, "sm_90a").persistent, true) << d;
    // Causal-like masks: persistent, the tiles paired; d64's short-sequence causal default has
    // one warpgroup.
    EXPECT_EQ(resolved("", d, /*unequal=*/true).persistent, true) << d;
    EXPECT_EQ(resolveTileConfig(parsed(""), d, "sm_90a", KeyLayout::Tensors, 0, true, true)
                  ->persistent.value_or(false),
              d >= 128)
        << d;
    EXPECT_FALSE(resolved("q_tma=false", d).persistent) << d;
    EXPECT_EQ(resolved("persistent=false", d).persistent, false) << d;
  }
  EXPECT_FALSE(resolved("", 96).persistent);
  EXPECT_FALSE(resolved("q=registers", 128).persistent);
  EXPECT_EQ(resolved("mma=wgmma,q=shared,warp_specialize=true", 128).persistent, true);
  EXPECT_FALSE(resolved("warp_specialize=false", 192).persistent);
  EXPECT_FALSE(resolved("q=registers,warp_specialize=true", 256).persistent);
  EXPECT_FALSE(resolved("", 192, false, KeyLayout::PackedRows).persistent);
  // Score and mask regions that take registers: the tile loop's state would spill them.
  auto softcap = resolveTileConfig(parsed(""), 64, "sm_90a", KeyLayout::Tensors, 9, false);
  ASSERT_TRUE(bool(softcap)) << llvm::toString(softcap.takeError());
  EXPECT_FALSE(softcap->persistent);
  EXPECT_FALSE(defaultTileConfig(192, "sm_90a", KeyLayout::Tensors, 9).persistent);
  // Asked for, it stays, also where the default would not take it.
  EXPECT_EQ(resolved("persistent=true", 128, /*unequal=*/true).persistent, true);
}

/// Q by TMA is the default of a warp-specialized shared-Q kernel, padded or packed; q_tma=false
/// (the ablation's kernel) keys a kernel of its own whose consumers copy Q, and q_tma=true where
/// no producer or no shared Q buffer exists is refused.
TEST(TileConfig, QueryTmaSwitch) {
  auto d192 = resolveTileConfig(parsed(""), 192, "sm_90a");
  ASSERT_TRUE(bool(d192)) << llvm::toString(d192.takeError());
  EXPECT_FALSE(d192->qTma);
  EXPECT_TRUE(d192->loadsQWithTma());
  auto copied = resolveTileConfig(parsed("q_tma=false"), 192, "sm_90a");
  ASSERT_TRUE(bool(copied)) << llvm::toString(copied.takeError());
  EXPECT_FALSE(copied->loadsQWithTma());
  EXPECT_EQ(parsed(copied->print()), *copied);
  EXPECT_NE(copied->print().find("q_tma=false"), std::string::npos);
  EXPECT_NE(hash_value(*copied), hash_value(*d192));
  // d96's default holds Q in registers: nothing to load.
  for (const char *bad : {"q_tma=true", "warp_specialize=false,q_tma=true"}) {
    auto config = resolveTileConfig(parsed(bad), 96, "sm_90a");
    ASSERT_FALSE(bool(config)) << bad;
    std::string message = llvm::toString(config.takeError());
    EXPECT_NE(message.find("q_tma=true needs warp_specialize=true and q=shared"),
              std::string::npos)
        << message;
  }
  auto parsedBad = TileConfig::parse("q_tma=maybe");
  ASSERT_FALSE(bool(parsedBad));
  EXPECT_NE(llvm::toString(parsedBad.takeError()).find("q_tma must be false or true"),
            std::string::npos);
}

/// O by TMA (o_tma) is asked for, never a default: it keys a kernel of its own, applies where
/// the producer loads Q with TMA on a padded batch and the kernel is not split, and is refused
/// without that producer (no warp roles, Q in registers, or Q copied by the consumers).
TEST(TileConfig, OutputTmaSwitch) {
  auto plain = resolveTileConfig(parsed(""), 128, "sm_90a");
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  EXPECT_FALSE(plain->oTma);
  EXPECT_FALSE(plain->storesOWithTma(/*packed=*/false, /*splitKv=*/false));
  auto stored = resolveTileConfig(parsed("o_tma=true"), 128, "sm_90a");
  ASSERT_TRUE(bool(stored)) << llvm::toString(stored.takeError());
  EXPECT_TRUE(stored->storesOWithTma(/*packed=*/false, /*splitKv=*/false));
  EXPECT_FALSE(stored->storesOWithTma(/*packed=*/true, /*splitKv=*/false));
  EXPECT_FALSE(stored->storesOWithTma(/*packed=*/false, /*splitKv=*/true));
  EXPECT_EQ(parsed(stored->print()), *stored);
  EXPECT_NE(stored->print().find("o_tma=true"), std::string::npos);
  EXPECT_NE(hash_value(*stored), hash_value(*plain));
  EXPECT_EQ(plain->overriddenBy(parsed("o_tma=true")).oTma, true);
  for (const char *bad : {"o_tma=true,warp_specialize=false", "o_tma=true,q=registers",
                          "o_tma=true,q_tma=false", "o_tma=true,mma=sync"}) {
    auto config = resolveTileConfig(parsed(bad), 128, "sm_90a");
    ASSERT_FALSE(bool(config)) << bad;
    std::string message = llvm::toString(config.takeError());
    EXPECT_NE(message.find("o_tma=true needs warp_specialize=true, q=shared and Q by TMA"),
              std::string::npos)
        << bad << ": " << message;
  }
  auto parsedBad = TileConfig::parse("o_tma=1");
  ASSERT_FALSE(bool(parsedBad));
  EXPECT_NE(llvm::toString(parsedBad.takeError()).find("o_tma must be false or true"),
            std::string::npos);
}

/// Tile boundaries overlapped (overlap_tiles) are asked for, never a default: they key a kernel
/// of their own, print last (the printed configurations before them unchanged), and are refused
/// without a persistent rotated warp-specialized consumer, or beside ping-pong or O by TMA.
TEST(TileConfig, OverlapTilesSwitch) {
  auto plain = resolveTileConfig(parsed("persistent=true"), 128, "sm_90a");
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  EXPECT_FALSE(plain->overlapTiles);
  EXPECT_EQ(plain->print().find("overlap_tiles"), std::string::npos);
  auto overlapped = resolveTileConfig(parsed("persistent=true,overlap_tiles=true"), 128, "sm_90a");
  ASSERT_TRUE(bool(overlapped)) << llvm::toString(overlapped.takeError());
  EXPECT_EQ(overlapped->overlapTiles, true);
  EXPECT_EQ(parsed(overlapped->print()), *overlapped);
  // (The plain tile's default ping-pong does not go with overlapped boundaries: the
  // overlapped one is the plain one without it.)
  EXPECT_EQ(plain->pingpong, true);
  TileConfig unpingponged = *plain;
  unpingponged.pingpong.reset();
  // (nor does the narrow key tail, which the overlapped tiles were not measured with)
  EXPECT_EQ(plain->keyTail, 64);
  unpingponged.keyTail.reset();
  unpingponged.overlapTiles = true;
  EXPECT_EQ(overlapped->print(), unpingponged.print());
  EXPECT_NE(hash_value(*overlapped), hash_value(*plain));
  EXPECT_NE(*overlapped, *plain);
  EXPECT_EQ(plain->overriddenBy(parsed("overlap_tiles=true")).overlapTiles, true);
  EXPECT_FALSE(parsed("overlap_tiles=false").empty());
  EXPECT_EQ(parsed("overlap-tiles=true").overlapTiles, true);
  for (const char *bad :
       {"overlap_tiles=true,persistent=false", "overlap_tiles=true,warp_specialize=false",
        "overlap_tiles=true,persistent=true,softmax_overlap=false"}) {
    auto config = resolveTileConfig(parsed(bad), 128, "sm_90a");
    ASSERT_FALSE(bool(config)) << bad;
    std::string message = llvm::toString(config.takeError());
    EXPECT_NE(message.find("overlap_tiles=true needs warp_specialize=true, softmax_overlap=true "
                           "and persistent=true"),
              std::string::npos)
        << bad << ": " << message;
  }
  for (const char *bad : {"overlap_tiles=true,persistent=true,pingpong=true",
                          "overlap_tiles=true,persistent=true,o_tma=true"}) {
    auto config = resolveTileConfig(parsed(bad), 128, "sm_90a");
    ASSERT_FALSE(bool(config)) << bad;
    std::string message = llvm::toString(config.takeError());
    EXPECT_NE(message.find("overlap_tiles=true does not go with pingpong=true or o_tma=true"),
              std::string::npos)
        << bad << ": " << message;
  }
  EXPECT_NE(parseError("overlap_tiles=1").find("overlap_tiles must be false or true"),
            std::string::npos);
}

/// The short-sequence defaults (up to 1024 keys): d64 under a causal-like mask keeps the
/// one-warpgroup kernel; under full masks d64's tile and d128 at Bc = 128 overlap their tile
/// boundaries, and d96 under either mask takes Q in shared memory at Bc = 128, persistent and
/// overlapped; nothing else changes (regions, packed batches, other head dims, long sequences).
TEST(TileConfig, ShortSequenceDefaults) {
  EXPECT_TRUE(isShortSequence(1));
  EXPECT_TRUE(isShortSequence(kShortSequenceKeys));
  EXPECT_FALSE(isShortSequence(kShortSequenceKeys + 1));
  EXPECT_FALSE(isShortSequence(0)); // unknown: the long defaults
  TileConfig d64 = resolvedDefault(64, false, true);
  EXPECT_EQ(d64.blockM, 192);
  EXPECT_EQ(d64.overlapTiles, true);
  EXPECT_EQ(d64, defaultTileConfig(64, "sm_90a", KeyLayout::Tensors, 0, false, true));
  EXPECT_FALSE(resolvedDefault(64, false, false).overlapTiles);
  TileConfig d128 = resolvedDefault(128, false, true);
  EXPECT_EQ(d128.blockN, 128);
  EXPECT_EQ(d128.overlapTiles, true);
  EXPECT_EQ(d128.persistent, true);
  EXPECT_EQ(resolvedDefault(128, false, false).blockN, 176);
  EXPECT_FALSE(resolvedDefault(128, false, false).overlapTiles);
  // The causal d128 default is the same for both.
  EXPECT_EQ(resolvedDefault(128, true, true), resolvedDefault(128, true, false));
  for (bool unequal : {false, true}) {
    TileConfig d96 = resolvedDefault(96, unequal, true);
    EXPECT_EQ(d96.qOperand, QOperand::Shared);
    EXPECT_EQ(d96.blockM, 128);
    EXPECT_EQ(d96.blockN, 128);
    EXPECT_EQ(d96.persistent, true);
    EXPECT_EQ(d96.overlapTiles, true);
    EXPECT_EQ(d96.rowOrder, unequal ? std::optional(RowOrder::Paired) : std::nullopt);
    EXPECT_EQ(d96, defaultTileConfig(96, "sm_90a", KeyLayout::Tensors, 0, unequal, true));
    TileConfig d96Long = resolvedDefault(96, unequal, false);
    EXPECT_EQ(d96Long.qOperand, QOperand::Registers);
    EXPECT_EQ(d96Long.blockN, 160);
    EXPECT_FALSE(d96Long.persistent);
    EXPECT_FALSE(d96Long.overlapTiles);
    // Regions that take registers keep the long form.
    EXPECT_EQ(resolvedDefault(96, unequal, true, 27), resolvedDefault(96, unequal, false, 27));
  }
  // Regions that take registers, packed batches and d192 keep the long defaults.
  EXPECT_EQ(resolvedDefault(64, false, true, 27), resolvedDefault(64, false, false, 27));
  EXPECT_EQ(resolvedDefault(128, false, true, 0, KeyLayout::PackedRows),
            resolvedDefault(128, false, false, 0, KeyLayout::PackedRows));
  EXPECT_EQ(resolvedDefault(192, false, true), resolvedDefault(192, false, false));
  // An explicit key block keeps its own (176 has no room for Q's second stage).
  auto wide = resolveTileConfig(parsed("Bc=176"), 128, "sm_90a", KeyLayout::Tensors, 0, false,
                                true);
  ASSERT_TRUE(bool(wide)) << llvm::toString(wide.takeError());
  EXPECT_EQ(wide->blockN, 176);
  EXPECT_FALSE(wide->overlapTiles);
}

/// Row blocks aligned to the rows' end (row_align=end|start): a switch of its own that prints
/// last, keys the kernel, is kept by the resolution where asked, and is refused beside O by
/// TMA (whose box would store the first row block's rows the second owns).
TEST(TileConfig, RowAlignSwitch) {
  auto plain = resolveTileConfig(parsed("persistent=true"), 64, "sm_90a");
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  EXPECT_EQ(plain->print().find("row_align"), std::string::npos);
  auto aligned = resolveTileConfig(parsed("persistent=true,row_align=end"), 64, "sm_90a");
  ASSERT_TRUE(bool(aligned)) << llvm::toString(aligned.takeError());
  EXPECT_EQ(aligned->alignRowsToEnd, true);
  EXPECT_EQ(aligned->print(), plain->print() + ",row_align=end");
  EXPECT_EQ(parsed(aligned->print()), *aligned);
  EXPECT_NE(hash_value(*aligned), hash_value(*plain));
  EXPECT_EQ(parsed("row-align=start").alignRowsToEnd, false);
  EXPECT_FALSE(parsed("row_align=start").empty());
  EXPECT_EQ(plain->overriddenBy(parsed("row_align=end")).alignRowsToEnd, true);
  auto refused = resolveTileConfig(parsed("row_align=end,o_tma=true"), 128, "sm_90a");
  ASSERT_FALSE(bool(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("row_align=end does not go with o_tma=true"),
            std::string::npos);
  EXPECT_NE(parseError("row_align=last").find("row_align must be start or end, not 'last'"),
            std::string::npos);
}

/// Value blocks prefetched (prefetch_values) are the cp.async kernel's: asking for them rules
/// out the warp-specialized default (d128), they round-trip and key the kernel, and beside warp
/// roles they are refused; a deeper ring (stages=3) deepens the value ring too.
TEST(TileConfig, PrefetchValuesIsTheCpAsyncKernels) {
  auto plain = resolveTileConfig(parsed(""), 128, "sm_90a");
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  auto prefetched = resolveTileConfig(parsed("prefetch_values=true"), 128, "sm_90a");
  ASSERT_TRUE(bool(prefetched)) << llvm::toString(prefetched.takeError());
  EXPECT_EQ(prefetched->warpSpecialize.value_or(false), false);
  EXPECT_EQ(prefetched->prefetchValues, true);
  EXPECT_EQ(parsed(prefetched->print()), *prefetched);
  EXPECT_NE(prefetched->print().find("prefetch_values=true"), std::string::npos);
  EXPECT_NE(hash_value(*prefetched), hash_value(*plain));
  // The split (decode) default takes it too, as the one-warpgroup kernel it is.
  auto split = resolveTileConfig(splitKvTileConfig(128), 128, "sm_90a");
  ASSERT_TRUE(bool(split)) << llvm::toString(split.takeError());
  EXPECT_EQ(split->prefetchValues, true);
  auto refused = resolveTileConfig(parsed("prefetch_values=true,warp_specialize=true"), 128,
                                   "sm_90a");
  ASSERT_FALSE(bool(refused));
  std::string message = llvm::toString(refused.takeError());
  EXPECT_NE(message.find("prefetch_values=true is the cp.async kernel's"), std::string::npos)
      << message;
  auto deeper = resolveTileConfig(parsed("prefetch_values=true,stages=3"), 128, "sm_90a");
  ASSERT_TRUE(bool(deeper)) << llvm::toString(deeper.takeError());
  EXPECT_EQ(deeper->stages, 3);
  EXPECT_EQ(deeper->prefetchValues, true);
}

/// The rotated key loop (softmax_overlap) is a warp-specialized kernel's: resolved, it is on
/// where it fits the registers (the d192 default's Bc = 80, not Bc = 128), set it round-trips
/// and keys the kernel, and without warp specialization it is refused.
TEST(TileConfig, SoftmaxOverlapNeedsWarpSpecialization) {
  auto d128 = resolveTileConfig(parsed(""), 128, "sm_90a");
  ASSERT_TRUE(bool(d128)) << llvm::toString(d128.takeError());
  EXPECT_EQ(d128->softmaxOverlap, true);
  EXPECT_NE(d128->print().find("softmax_overlap=true"), std::string::npos);
  auto d192 = resolveTileConfig(parsed(""), 192, "sm_90a");
  ASSERT_TRUE(bool(d192)) << llvm::toString(d192.takeError());
  EXPECT_EQ(d192->blockN, 112);
  EXPECT_EQ(d192->qOperand, QOperand::Shared);
  EXPECT_EQ(d192->softmaxOverlap, true);
  auto d192registers = resolveTileConfig(parsed("q=registers,warp_specialize=true"), 192, "sm_90a");
  ASSERT_TRUE(bool(d192registers)) << llvm::toString(d192registers.takeError());
  EXPECT_EQ(d192registers->blockN, 80);
  EXPECT_EQ(d192registers->softmaxOverlap, true);
  auto d192wide = resolveTileConfig(parsed("q=registers,warp_specialize=true,Bc=128"), 192,
                                    "sm_90a");
  ASSERT_TRUE(bool(d192wide)) << llvm::toString(d192wide.takeError());
  EXPECT_EQ(d192wide->softmaxOverlap, false);
  auto d96 = resolveTileConfig(parsed(""), 96, "sm_90a");
  ASSERT_TRUE(bool(d96)) << llvm::toString(d96.takeError());
  EXPECT_EQ(d96->blockN, 160);
  EXPECT_EQ(d96->softmaxOverlap, true);
  auto d64 = resolveTileConfig(parsed(""), 64, "sm_90a", KeyLayout::Tensors, 0,
                                /*rowBlocksUnequal=*/true, /*shortSequences=*/true);
  ASSERT_TRUE(bool(d64)) << llvm::toString(d64.takeError());
  EXPECT_FALSE(d64->softmaxOverlap);
  auto off = resolveTileConfig(parsed("softmax_overlap=false"), 128, "sm_90a");
  ASSERT_TRUE(bool(off)) << llvm::toString(off.takeError());
  EXPECT_EQ(off->softmaxOverlap, false);
  EXPECT_EQ(parsed(off->print()), *off);
  EXPECT_NE(off->print().find("softmax_overlap=false"), std::string::npos);
  EXPECT_NE(hash_value(*off), hash_value(*d128));
  for (const char *bad : {"softmax_overlap=true,warp_specialize=false", "softmax_overlap=yes"}) {
    std::string message = problemWith(bad);
    EXPECT_NE(message.find("softmax_overlap"), std::string::npos) << bad << ": " << message;
  }
  // At d64 under a causal mask the short-sequence default is not warp-specialized, so the
  // rotation cannot be asked for alone.
  auto alone = resolveTileConfig(parsed("softmax_overlap=true"), 64, "sm_90a",
                                 KeyLayout::Tensors, 0, /*rowBlocksUnequal=*/true,
                                 /*shortSequences=*/true);
  ASSERT_FALSE(bool(alone));
  EXPECT_NE(llvm::toString(alone.takeError()).find("warp_specialize"), std::string::npos);
}

/// The score and mask regions' registers (regionRegisters) move only the defaults: the rotated
/// key block shrinks to the largest that fits (3·D / 4 + Bc + regions <= 232; D / 2 + 5·Bc / 4 +
/// regions <= 248 with Q in shared memory: d192 and d256), down to half the tuned one, else the
/// loop runs unrotated with the tuned block; 0 changes nothing.
TEST(TileConfig, RegionRegistersShrinkTheRotatedKeyBlock) {
  struct Expected {
    int64_t headDim, regionRegisters, blockN;
    bool rotated;
  };
  for (const Expected &e : std::initializer_list<Expected>{
           {96, 0, 160, true},   {128, 0, 176, true},  {192, 0, 112, true},
           {96, 27, 128, true},  {128, 27, 96, true},  {192, 27, 96, true}, // softcap
           {96, 36, 112, true},  {128, 36, 96, true},  {192, 36, 80, true}, // alibi
           {128, 9, 112, true},  {192, 12, 112, true}, {192, 13, 96, true},
           {128, 72, 64, true},  {128, 73, 128, false}, {192, 100, 112, false},
           {256, 0, 80, true},   {256, 20, 80, true},   {256, 21, 64, true},
           {256, 36, 64, true},  {256, 60, 48, true},   {256, 61, 80, false}}) {
    SCOPED_TRACE("d" + std::to_string(e.headDim) + " regions " +
                 std::to_string(e.regionRegisters));
    TileConfig byDefault = defaultTileConfig(e.headDim, "sm_90a", KeyLayout::Tensors,
                                             e.regionRegisters);
    EXPECT_EQ(byDefault.blockN, e.blockN);
    EXPECT_EQ(byDefault.softmaxOverlap, e.rotated);
    EXPECT_EQ(byDefault.warpSpecialize, true);
    auto resolved = resolveTileConfig(parsed(""), e.headDim, "sm_90a", KeyLayout::Tensors,
                                      e.regionRegisters);
    ASSERT_TRUE(bool(resolved)) << llvm::toString(resolved.takeError());
    EXPECT_EQ(*resolved, byDefault);
  }
  auto resolved = [](llvm::StringRef text, int64_t d, int64_t regions,
                     KeyLayout keys = KeyLayout::Tensors, llvm::StringRef chip = "sm_90a") {
    auto c = resolveTileConfig(parsed(text), d, chip, keys, regions);
    if (!c) {
      ADD_FAILURE() << llvm::toString(c.takeError());
      return TileConfig();
    }
    return *c;
  };
  // Unrotated on request: the tuned key block. An explicit Bc is kept; its rotation fits or not.
  TileConfig off = resolved("softmax_overlap=false", 128, 36);
  EXPECT_EQ(off.blockN, 128);
  EXPECT_EQ(off.softmaxOverlap, false);
  TileConfig wide = resolved("Bc=128", 128, 36);
  EXPECT_EQ(wide.blockN, 128);
  EXPECT_EQ(wide.softmaxOverlap, false);
  EXPECT_EQ(resolved("Bc=96", 128, 36).softmaxOverlap, true);
  TileConfig on = resolved("softmax_overlap=true", 128, 36);
  EXPECT_EQ(on.blockN, 96);
  EXPECT_EQ(on.softmaxOverlap, true);
  // The one-warpgroup kernel: 3·D / 4 + 3·Bc / 4 + regions <= 252, only for a region cost.
  EXPECT_EQ(resolved("warp_specialize=false", 256, 0).blockN, 64);
  EXPECT_EQ(resolved("warp_specialize=false", 256, 27).blockN, 32);
  EXPECT_EQ(resolved("q=registers", 256, 36).blockN, 32);
  EXPECT_EQ(resolved("warp_specialize=false", 64, 36).blockN, 128);
  EXPECT_EQ(resolved("", 64, 0).blockN, 128);
  // Three consumer warpgroups at d64: D / 2 + Bc + regions <= 187.
  EXPECT_EQ(resolved("", 64, 27).blockN, 128);
  EXPECT_EQ(resolved("", 64, 36).blockN, 112);
  EXPECT_EQ(resolved("", 64, 36).blockM, 192);
  EXPECT_EQ(resolved("Bc=64,warp_specialize=false", 256, 36).blockN, 64);
  // Gathered (paged) keys and mma.sync keep their key blocks.
  EXPECT_EQ(resolved("", 256, 36, KeyLayout::Gathered).blockN, 64);
  EXPECT_EQ(resolved("", 128, 36, KeyLayout::Gathered).blockN, 64);
  EXPECT_EQ(resolved("", 128, 36, KeyLayout::Tensors, "sm_80"),
            resolved("", 128, 0, KeyLayout::Tensors, "sm_80"));
}

/// The region cost read from the kernels' IR: the ops their score and mask regions run once per
/// score element. Every bundled kernel is listed, so a new one states its cost here.
TEST(ScoreRegionCost, BundledKernelsAndTestVariants) {
  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  auto ops = [&](const std::string &text, const std::string &name) -> int64_t {
    auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
    if (!module) {
      ADD_FAILURE() << name << " does not parse";
      return -1;
    }
    EXPECT_EQ(scoreRegionRegisters(*module), perElementRegionOps(*module) * 9) << name;
    return perElementRegionOps(*module);
  };
  // Masks of index compares (causal, windows, prefixes) cost nothing; alibi's bias is a
  // subtraction, a conversion, a multiply and an add per score, softcap a divide, tanh, multiply.
  std::map<std::string, int64_t> bundled = {{"attention", 0}, {"causal", 0},
                                            {"sliding_window", 0}, {"prefix_lm", 0},
                                            {"gqa", 0},       {"mqa", 0},
                                            {"alibi", 4},     {"softcap", 3}};
  for (const kernels::KernelSource &kernel : kernels::all()) {
    auto expected = bundled.find(kernel.name);
    ASSERT_NE(expected, bundled.end()) << kernel.name << ": add its region cost here";
    EXPECT_EQ(ops(kernel.text, kernel.name), expected->second) << kernel.name;
  }
  EXPECT_EQ(kernels::all().size(), bundled.size());
  // chunked_local's divisions are per row and per column; gqa_head_window's window per head and
  // its reach per column, its bias per element (4); softcap_head_bias's head bias per program.
  EXPECT_EQ(ops(test::readTestVariant("chunked_local"), "chunked_local"), 0);
  EXPECT_EQ(ops(test::readTestVariant("gqa_head_window"), "gqa_head_window"), 4);
  EXPECT_EQ(ops(test::readTestVariant("softcap_head_bias"), "softcap_head_bias"), 4);
}

/// Which kernels' masks compare rows with columns (the default row order's fact): every bundled
/// kernel is listed, so a new one states it here.
TEST(ScoreRegionCost, MasksComparingRowsWithColumns) {
  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  auto compares = [&](const std::string &text, const std::string &name) {
    auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
    if (!module) {
      ADD_FAILURE() << name << " does not parse";
      return false;
    }
    return maskComparesRowsWithColumns(*module);
  };
  std::map<std::string, bool> bundled = {
      {"attention", false}, {"causal", true}, {"sliding_window", true}, {"prefix_lm", true},
      {"gqa", false},       {"mqa", false},   {"alibi", true},          {"softcap", false}};
  for (const kernels::KernelSource &kernel : kernels::all()) {
    auto expected = bundled.find(kernel.name);
    ASSERT_NE(expected, bundled.end()) << kernel.name << ": say whether its mask compares here";
    EXPECT_EQ(compares(kernel.text, kernel.name), expected->second) << kernel.name;
  }
  EXPECT_TRUE(compares(test::readTestVariant("chunked_local"), "chunked_local"));
  EXPECT_TRUE(compares(test::readTestVariant("gqa_head_window"), "gqa_head_window"));
  EXPECT_FALSE(compares(test::readTestVariant("softcap_head_bias"), "softcap_head_bias"));
  // A mask of one index alone keeps whole rows or whole columns: every row block the same work.
  const char *byRowOnly = R"(
func.func @rows(%s: tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32> {
  %u = tile.mask %s : tensor<?x?x?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %c7 = arith.constant 7 : index
    %keep = arith.cmpi ult, %qi, %c7 : index
    tile.yield %keep : i1
  }
  return %u : tensor<?x?x?x?xf32>
})";
  EXPECT_FALSE(compares(byRowOnly, "rows"));
}

/// Kernels whose row blocks differ in work run them last first by default on sm_90a (padded
/// batches, the measured case), persistent kernels' tile loops paired; packed and gathered
/// keys, mma.sync and an explicit row order keep theirs.
TEST(TileConfig, UnequalRowBlocksRunLastFirstByDefault) {
  for (int64_t d : {64, 128, 256}) {
    SCOPED_TRACE("d" + std::to_string(d));
    EXPECT_EQ(defaultTileConfig(d, "sm_90a", KeyLayout::Tensors, 0, true).rowOrder,
              RowOrder::Paired);
    // d64's short-sequence kernel has one warpgroup and one tile a CTA.
    EXPECT_EQ(defaultTileConfig(d, "sm_90a", KeyLayout::Tensors, 0, true, true).rowOrder,
              d == 64 ? RowOrder::Descending : RowOrder::Paired);
    EXPECT_EQ(defaultTileConfig(d, "sm_90a", KeyLayout::Tensors, 0, false).rowOrder, std::nullopt);
    EXPECT_EQ(defaultTileConfig(d, "sm_90a", KeyLayout::PackedRows, 0, true).rowOrder,
              std::nullopt);
    EXPECT_EQ(defaultTileConfig(d, "sm_90a", KeyLayout::Gathered, 0, true).rowOrder, std::nullopt);
    EXPECT_EQ(defaultTileConfig(d, "sm_80", KeyLayout::Tensors, 0, true).rowOrder, std::nullopt);
  }
  auto resolved = [](llvm::StringRef text, bool unequal, KeyLayout keys = KeyLayout::Tensors) {
    auto c = resolveTileConfig(parsed(text), 128, "sm_90a", keys, 0, unequal);
    if (!c) {
      ADD_FAILURE() << text.str() << ": " << llvm::toString(c.takeError());
      return TileConfig();
    }
    return *c;
  };
  EXPECT_EQ(resolved("", true).rowOrder, RowOrder::Paired);
  EXPECT_EQ(resolved("", false).rowOrder, std::nullopt);
  EXPECT_EQ(resolved("", true, KeyLayout::PackedRows).rowOrder, std::nullopt);
  // Without warp roles (which resolveTileConfig asks of the defaults as gathered keys) the
  // kernel's keys are still tensors.
  EXPECT_EQ(resolved("warp_specialize=false", true).rowOrder, RowOrder::Descending);
  EXPECT_EQ(resolved("pack_gqa=true", true).rowOrder, RowOrder::Descending);
  EXPECT_EQ(resolved("mma=sync", true).rowOrder, std::nullopt);
  // A persistent kernel's tile loop takes the row order: longest first, paired (serpentine
  // across heads when asked for descending); one tile a CTA, plain descending.
  EXPECT_EQ(resolved("persistent=true", true).rowOrder, RowOrder::Paired);
  EXPECT_EQ(resolved("persistent=true,row_order=descending", true).rowOrder,
            RowOrder::Descending);
  EXPECT_EQ(resolved("persistent=false", true).rowOrder, RowOrder::Descending);
  EXPECT_EQ(resolved("persistent=true", false).rowOrder, std::nullopt);
  EXPECT_EQ(resolved("persistent=true,row_order=ascending", true).rowOrder, RowOrder::Ascending);
  EXPECT_EQ(resolved("row_order=ascending", true).rowOrder, RowOrder::Ascending);
  EXPECT_EQ(resolved("row_order=descending", false).rowOrder, RowOrder::Descending);
  // The rest of the configuration is the one without the fact, but for the key block (d128
  // causal: 128 with Q in shared memory, where the full mask takes 176) and persistence, which
  // follows the row order.
  TileConfig reversed = resolved("", true), plain = resolved("", false);
  EXPECT_EQ(reversed.blockN, 128);
  EXPECT_EQ(plain.blockN, 176);
  reversed.rowOrder = std::nullopt;
  reversed.blockN = plain.blockN;
  // (and the overlapped tile boundaries, for which the causal key block leaves room)
  EXPECT_EQ(reversed.overlapTiles, true);
  EXPECT_EQ(plain.overlapTiles, std::nullopt);
  reversed.overlapTiles = std::nullopt;
  // (and ping-pong, the default of the full mask's d128 tile only)
  EXPECT_EQ(reversed.pingpong, std::nullopt);
  EXPECT_EQ(plain.pingpong, true);
  reversed.pingpong = plain.pingpong;
  // (and the narrow key tail, the full-mask tiles' only)
  EXPECT_EQ(reversed.keyTail, std::nullopt);
  EXPECT_EQ(plain.keyTail, 64);
  reversed.keyTail = plain.keyTail;
  EXPECT_EQ(reversed, plain);
}

/// row_sum_mma: P's row sums on the tensor cores, on request only (measured slower: docs/perf.md,
/// thirty-fourth session). It round-trips, keys the kernel apart and needs warp roles.
TEST(TileConfig, RowSumMmaSwitch) {
  auto plain = resolveTileConfig(parsed(""), 128, "sm_90a");
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  EXPECT_FALSE(plain->rowSumMma);
  EXPECT_FALSE(plain->sumsRowsOnTensorCores());
  auto sums = resolveTileConfig(parsed("row_sum_mma=true"), 128, "sm_90a");
  ASSERT_TRUE(bool(sums)) << llvm::toString(sums.takeError());
  EXPECT_EQ(sums->rowSumMma, true);
  EXPECT_TRUE(sums->sumsRowsOnTensorCores());
  EXPECT_EQ(parsed(sums->print()), *sums);
  TileConfig summed = *plain;
  summed.rowSumMma = true;
  EXPECT_EQ(sums->print(), summed.print());
  EXPECT_NE(hash_value(*sums), hash_value(*plain));
  EXPECT_NE(*sums, *plain);
  EXPECT_EQ(parsed("row-sum-mma=false").rowSumMma, false);
  EXPECT_FALSE(parsed("row_sum_mma=false").empty());
  // It prints before the register budget, as the fields' order says.
  EXPECT_EQ(parsed("ctas_per_sm=2,row_sum_mma=true").print(), "row_sum_mma=true,ctas_per_sm=2");
  // Without warp roles it is refused.
  auto refused = resolveTileConfig(parsed("warp_specialize=false,row_sum_mma=true"), 128,
                                   "sm_90a");
  ASSERT_FALSE(bool(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("row_sum_mma=true needs warp_specialize"),
            std::string::npos);
  EXPECT_FALSE(parsed("row_sum_mma=true").sumsRowsOnTensorCores());
}

/// key_tail=N: a partial last key block's softmax on its first N columns. It round-trips, keys
/// the kernel apart, prints last, and needs a multiple of 16 below Bc on wgmma kernels.
TEST(TileConfig, KeyTailSwitch) {
  auto plain = resolveTileConfig(parsed("key_tail=0"), 128, "sm_90a");
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  auto tail = resolveTileConfig(parsed("key_tail=64"), 128, "sm_90a");
  ASSERT_TRUE(bool(tail)) << llvm::toString(tail.takeError());
  EXPECT_EQ(tail->keyTail, 64);
  EXPECT_EQ(parsed(tail->print()), *tail);
  EXPECT_NE(hash_value(*tail), hash_value(*plain));
  EXPECT_NE(*tail, *plain);
  EXPECT_EQ(parsed("key-tail=32").keyTail, 32);
  EXPECT_EQ(parsed("key_tail=48,ctas_per_sm=2,row_align=end").print(),
            "ctas_per_sm=2,row_align=end,key_tail=48");
  auto refusal = [](llvm::StringRef text, int64_t headDim, llvm::StringRef chip) {
    auto config = resolveTileConfig(parsed(text), headDim, chip);
    return config ? std::string() : llvm::toString(config.takeError());
  };
  EXPECT_NE(refusal("key_tail=40", 128, "sm_90a").find("key_tail must be 0 or a positive "
                                                      "multiple of 16, got 40"),
            std::string::npos);
  EXPECT_NE(refusal("Bc=64,key_tail=64", 128, "sm_90a").find("key_tail (64) must be below Bc (64)"),
            std::string::npos);
  EXPECT_NE(refusal("key_tail=32", 64, "sm_80").find("key_tail needs mma=wgmma"),
            std::string::npos);
}

/// row_order=grouped: descending within L2-sized groups of (batch, head) pairs. It round-trips,
/// keys the kernel apart from descending, is replaced by another row_order, refuses persistent
/// tiles (and takes the persistent default away), and names its values when misspelt.
TEST(TileConfig, GroupedRowOrder) {
  TileConfig grouped = parsed("row_order=grouped");
  EXPECT_EQ(grouped.rowOrder, RowOrder::Grouped);
  EXPECT_TRUE(grouped.longestFirst());
  EXPECT_EQ(grouped.print(), "row_order=grouped");
  EXPECT_EQ(parsed(grouped.print()), grouped);
  TileConfig descending = parsed("row_order=descending");
  EXPECT_NE(grouped, descending);
  EXPECT_NE(hash_value(grouped), hash_value(descending));
  EXPECT_EQ(parsed("row_order=grouped,row_order=ascending").print(), "row_order=ascending");
  EXPECT_EQ(grouped.overriddenBy(descending), descending);
  EXPECT_EQ(descending.overriddenBy(grouped), grouped);
  auto bad = TileConfig::parse("row_order=sideways");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("ascending, descending, grouped or paired"),
            std::string::npos);
  // d128 causal on sm_90a is persistent by default: grouped takes a one-tile-per-CTA grid.
  auto causal = resolveTileConfig(grouped, 128, "sm_90a", KeyLayout::Tensors,
                                  /*regionRegisters=*/0, /*rowBlocksUnequal=*/true);
  ASSERT_TRUE(bool(causal)) << llvm::toString(causal.takeError());
  EXPECT_NE(causal->persistent, true);
  EXPECT_EQ(causal->rowOrder, RowOrder::Grouped);
  auto refused = resolveTileConfig(parsed("row_order=grouped,persistent=true"), 128, "sm_90a");
  ASSERT_FALSE(bool(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("row_order=grouped orders a one-tile-per-CTA"),
            std::string::npos);
}

/// row_order=paired: a persistent tile loop's twos of row blocks i and R - 1 - i. It
/// round-trips, keys the kernel apart from descending and grouped, is replaced by another
/// row_order, asks for persistence where nothing else is said, and refuses a one-tile grid.
TEST(TileConfig, PairedRowOrder) {
  TileConfig paired = parsed("row_order=paired");
  EXPECT_EQ(paired.rowOrder, RowOrder::Paired);
  EXPECT_TRUE(paired.longestFirst());
  EXPECT_EQ(paired.print(), "row_order=paired");
  EXPECT_EQ(parsed(paired.print()), paired);
  TileConfig descending = parsed("row_order=descending");
  TileConfig grouped = parsed("row_order=grouped");
  EXPECT_NE(paired, descending);
  EXPECT_NE(paired, grouped);
  EXPECT_NE(hash_value(paired), hash_value(descending));
  EXPECT_EQ(parsed("row_order=paired,row_order=grouped"), grouped);
  EXPECT_EQ(parsed("row_order=grouped,row_order=paired"), paired);
  EXPECT_EQ(paired.overriddenBy(descending), descending);
  EXPECT_EQ(descending.overriddenBy(paired), paired);
  // d128 causal on sm_90a: persistent already, the tile loop paired.
  auto causal = resolveTileConfig(paired, 128, "sm_90a", KeyLayout::Tensors,
                                  /*regionRegisters=*/0, /*rowBlocksUnequal=*/true);
  ASSERT_TRUE(bool(causal)) << llvm::toString(causal.takeError());
  EXPECT_EQ(causal->persistent, true);
  EXPECT_EQ(causal->rowOrder, RowOrder::Paired);
  EXPECT_EQ(parsed(causal->print()), *causal);
  // d192 full on sm_90a (one tile a CTA by default): paired asks for persistence.
  auto full = resolveTileConfig(paired, 192, "sm_90a", KeyLayout::Tensors,
                                /*regionRegisters=*/0, /*rowBlocksUnequal=*/false);
  ASSERT_TRUE(bool(full)) << llvm::toString(full.takeError());
  EXPECT_EQ(full->persistent, true);
  auto refused = resolveTileConfig(parsed("row_order=paired,persistent=false"), 128, "sm_90a");
  ASSERT_FALSE(bool(refused));
  EXPECT_NE(llvm::toString(refused.takeError())
                .find("row_order=paired orders a persistent kernel's tile loop"),
            std::string::npos);
  // The one-warpgroup kernel (no warp roles) has no persistent form to pair.
  auto oneWarpgroup =
      resolveTileConfig(parsed("row_order=paired,warp_specialize=false"), 128, "sm_90a");
  ASSERT_FALSE(bool(oneWarpgroup));
  EXPECT_NE(llvm::toString(oneWarpgroup.takeError())
                .find("row_order=paired deals a persistent kernel's tiles, and persistent=true "
                      "needs warp_specialize=true"),
            std::string::npos);
}

TEST(TileConfig, ResolveKeepsTheDefaultsOfTheOldOptions) {
  auto resolved = [](llvm::StringRef text, int64_t d, llvm::StringRef chip) {
    auto c = resolveTileConfig(parsed(text), d, chip);
    if (!c) {
      ADD_FAILURE() << llvm::toString(c.takeError());
      return std::string();
    }
    EXPECT_TRUE(c->isComplete());
    return c->print();
  };
  EXPECT_EQ(resolved("", 64, "sm_90a"),
            "Br=192,Bc=128,rows_per_warp=16,mma=wgmma,q=shared,copy_issue=eager,stages=2,"
            "pack_gqa=false,warp_specialize=true,softmax_overlap=true,persistent=true");
  auto causal = [](llvm::StringRef text, int64_t d, bool shortSequences = false) {
    auto c = resolveTileConfig(parsed(text), d, "sm_90a", KeyLayout::Tensors, 0, true,
                               shortSequences);
    return c ? c->print() : llvm::toString(c.takeError());
  };
  EXPECT_EQ(causal("", 64, /*shortSequences=*/true),
            "Br=64,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=2,"
            "pack_gqa=false,row_order=descending");
  EXPECT_EQ(causal("", 64),
            "Br=192,Bc=128,rows_per_warp=16,mma=wgmma,q=shared,copy_issue=eager,stages=2,"
            "pack_gqa=false,warp_specialize=true,softmax_overlap=true,persistent=true,"
            "row_order=paired,row_align=end");
  // An explicit power-of-two Br takes the end alignment away, an explicit alignment stays.
  EXPECT_EQ(causal("Br=128", 64).find("row_align"), std::string::npos);
  EXPECT_NE(causal("row_align=start", 64).find("row_align=start"), std::string::npos);
  // A Q operand other than the default's is the one-warpgroup kernel (as q=shared at d128).
  EXPECT_EQ(resolved("q=registers", 64, "sm_90a"),
            "Br=64,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=2,"
            "pack_gqa=false");
  // Head dims 96 to 192 on sm_90a: the warp-specialized kernel; off, the one-warpgroup one. At
  // d128 under a full mask FlashAttention-3's 128 x 176 tile with Q in shared memory, loaded by
  // TMA, persistent, its two consumer warpgroups ping-ponged; Q asked for in registers keeps
  // the warp roles (either is a d128 default); one tile a CTA drops the ping-pong.
  EXPECT_EQ(resolved("", 128, "sm_90a"),
            "Br=128,Bc=176,rows_per_warp=16,mma=wgmma,q=shared,copy_issue=eager,stages=2,"
            "pack_gqa=false,warp_specialize=true,softmax_overlap=true,pingpong=true,"
            "persistent=true,key_tail=64");
  EXPECT_EQ(resolved("persistent=false", 128, "sm_90a").find("pingpong"), std::string::npos);
  EXPECT_EQ(resolved("q=registers", 128, "sm_90a"),
            "Br=128,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=2,"
            "pack_gqa=false,warp_specialize=true,softmax_overlap=true");
  // Causal: Q in shared memory at Bc = 128, persistent, the tile loop longest first, paired,
  // each tile's last P·V and epilogue in the next tile; the other key block, one tile a CTA,
  // ping-pong or O by TMA take the overlapped boundaries away.
  EXPECT_EQ(causal("", 128),
            "Br=128,Bc=128,rows_per_warp=16,mma=wgmma,q=shared,copy_issue=eager,stages=2,"
            "pack_gqa=false,warp_specialize=true,softmax_overlap=true,persistent=true,"
            "row_order=paired,overlap_tiles=true");
  for (const char *away : {"block_n=176", "persistent=false", "pingpong=true", "o_tma=true",
                           "stages=3"})
    EXPECT_EQ(causal(away, 128).find("overlap_tiles"), std::string::npos) << away;
  EXPECT_NE(causal("overlap_tiles=false", 128).find("overlap_tiles=false"), std::string::npos);
  EXPECT_EQ(causal("q=registers", 128),
            "Br=128,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=2,"
            "pack_gqa=false,warp_specialize=true,softmax_overlap=true,row_order=descending");
  EXPECT_EQ(resolved("warp_specialize=false", 128, "sm_90a"),
            "Br=64,Bc=64,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=2,"
            "pack_gqa=false,warp_specialize=false");
  // Keys gathered row by row (paged) and packed query rows (split-KV decode) keep it off.
  auto gathered = resolveTileConfig(parsed(""), 128, "sm_90a", KeyLayout::Gathered);
  ASSERT_TRUE(bool(gathered));
  EXPECT_EQ(gathered->print(),
            "Br=64,Bc=64,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=2,"
            "pack_gqa=false");
  // A packed varlen batch: warp-specialized as padded at 128; at 64 the padded full mask's tile
  // (three consumer warpgroups, Q by TMA through the packed q_map), and under a causal-like mask
  // the one-warpgroup kernel with 3 CTAs an SM, unless the regions take registers or a budget is
  // set.
  auto packed = [&](llvm::StringRef text, int64_t headDim, int64_t regionRegisters,
                    bool rowBlocksUnequal = false) {
    auto config = resolveTileConfig(parsed(text), headDim, "sm_90a", KeyLayout::PackedRows,
                                    regionRegisters, rowBlocksUnequal);
    EXPECT_TRUE(bool(config)) << llvm::toString(config.takeError());
    return config ? config->print() : std::string();
  };
  // Packed at d128 under a full mask: Q in shared memory, loaded by the producer's TMA through
  // the packed q_map, and the persistent tile list (no ping-pong, no key tail: padded only).
  // Under a causal-like mask or with regions that take registers Q stays in registers, one
  // tile a CTA, as padded d128 with regions.
  EXPECT_EQ(packed("", 128, 0),
            "Br=128,Bc=176,rows_per_warp=16,mma=wgmma,q=shared,copy_issue=eager,stages=2,"
            "pack_gqa=false,warp_specialize=true,softmax_overlap=true,persistent=true");
  EXPECT_EQ(packed("mma=wgmma,warp_specialize=true,q=shared", 128, 0), packed("", 128, 0));
  EXPECT_EQ(packed("persistent=false", 128, 0),
            "Br=128,Bc=176,rows_per_warp=16,mma=wgmma,q=shared,copy_issue=eager,stages=2,"
            "pack_gqa=false,warp_specialize=true,softmax_overlap=true,persistent=false");
  EXPECT_EQ(packed("", 128, 0, /*rowBlocksUnequal=*/true),
            "Br=128,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=2,"
            "pack_gqa=false,warp_specialize=true,softmax_overlap=true");
  EXPECT_EQ(packed("q=registers", 128, 0), resolved("q=registers", 128, "sm_90a"));
  auto packedShared = resolveTileConfig(parsed("mma=wgmma,warp_specialize=true,q=shared"), 128,
                                        "sm_90a", KeyLayout::PackedRows);
  ASSERT_TRUE(bool(packedShared));
  EXPECT_TRUE(packedShared->loadsQWithTma());
  EXPECT_FALSE(packedShared->storesOWithTma(/*packed=*/true, /*splitKv=*/false));
  // d64, a full mask: the padded tile, one tile a CTA (not persistent, unlike padded).
  EXPECT_EQ(packed("", 64, 0),
            "Br=192,Bc=128,rows_per_warp=16,mma=wgmma,q=shared,copy_issue=eager,stages=2,"
            "pack_gqa=false,warp_specialize=true,softmax_overlap=true");
  auto packedD64 = resolveTileConfig(parsed(""), 64, "sm_90a", KeyLayout::PackedRows);
  ASSERT_TRUE(bool(packedD64));
  EXPECT_TRUE(packedD64->loadsQWithTma());
  // With the regions' registers the key block shrinks, as padded.
  EXPECT_EQ(packed("", 64, 36),
            "Br=192,Bc=112,rows_per_warp=16,mma=wgmma,q=shared,copy_issue=eager,stages=2,"
            "pack_gqa=false,warp_specialize=true,softmax_overlap=true");
  // d64 under a causal-like mask: the one-warpgroup kernel, a third CTA an SM without regions.
  EXPECT_EQ(packed("", 64, 0, /*rowBlocksUnequal=*/true),
            "Br=64,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=2,"
            "pack_gqa=false,ctas_per_sm=3");
  EXPECT_EQ(packed("", 64, 36, /*rowBlocksUnequal=*/true),
            "Br=64,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=2,"
            "pack_gqa=false");
  EXPECT_EQ(packed("ctas_per_sm=2", 64, 0, /*rowBlocksUnequal=*/true),
            "Br=64,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=2,"
            "pack_gqa=false,ctas_per_sm=2");
  // Warp roles asked for under a causal-like mask drop the one-warpgroup kernel's budget.
  EXPECT_EQ(packed("mma=wgmma,warp_specialize=true,q=shared", 64, 0, /*rowBlocksUnequal=*/true),
            "Br=192,Bc=128,rows_per_warp=16,mma=wgmma,q=shared,copy_issue=eager,stages=2,"
            "pack_gqa=false,warp_specialize=true,softmax_overlap=true");
  EXPECT_EQ(resolved("pack_gqa=true", 128, "sm_90a"),
            "Br=64,Bc=64,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=2,"
            "pack_gqa=true");
  EXPECT_EQ(resolved("", 64, "sm_80"),
            "Br=128,Bc=64,rows_per_warp=32,mma=sync,q=registers,copy_issue=eager,stages=2,pack_gqa=false");
  // A setting wgmma cannot take selects the mma.sync table.
  EXPECT_EQ(resolved("q=shared", 128, "sm_90a"),
            "Br=64,Bc=64,rows_per_warp=16,mma=sync,q=shared,copy_issue=eager,stages=2,pack_gqa=false");
  // An explicit Br the default rows per warp does not divide takes 16.
  EXPECT_EQ(resolved("Br=48", 64, "sm_90a"),
            "Br=48,Bc=64,rows_per_warp=16,mma=sync,q=registers,copy_issue=eager,stages=2,pack_gqa=false");
  EXPECT_EQ(resolved("stages=3,pack_gqa=false,warp_specialize=false", 64, "sm_90a"),
            "Br=64,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=3,"
            "pack_gqa=false,warp_specialize=false");
  EXPECT_FALSE(bool(resolveTileConfig(parsed("stages=5"), 64, "sm_90a")));
  EXPECT_FALSE(bool(resolveTileConfig(parsed("Br=20"), 64, "sm_90a")))
      << "checked before anything else";
}

// Split-KV (decode) kernels: GQA packing everywhere, key blocks of 128 where wgmma runs them at
// D <= 128; under the caller's settings, which win.
TEST(TileConfig, SplitKvDefaults) {
  EXPECT_EQ(splitKvTileConfig(128, "sm_90a").print(),
            "Bc=128,pack_gqa=true,warp_specialize=false,prefetch_values=true");
  EXPECT_EQ(splitKvTileConfig(256, "sm_90a").print(), "pack_gqa=true,warp_specialize=false");
  EXPECT_EQ(splitKvTileConfig(64, "sm_80").print(), "pack_gqa=true,warp_specialize=false");
  TileConfig asked = *TileConfig::parse("Bc=64,pack_gqa=false");
  EXPECT_EQ(splitKvTileConfig(128, "sm_90a", asked).print(),
            "Bc=64,pack_gqa=false,warp_specialize=false,prefetch_values=true");
  // Warp roles asked for take the prefetched values away; a deeper ring keeps them (both
  // rings deepened). Both resolve.
  for (auto [text, prefetched] : {std::pair<const char *, bool>{"warp_specialize=true", false},
                                  {"stages=3", true}}) {
    TileConfig split = splitKvTileConfig(128, "sm_90a", *TileConfig::parse(text));
    EXPECT_EQ(split.prefetchValues.value_or(false), prefetched) << text;
    auto resolved = resolveTileConfig(split, 128, "sm_90a");
    EXPECT_TRUE(bool(resolved)) << text << ": " << llvm::toString(resolved.takeError());
  }
  EXPECT_EQ(splitKvTileConfig(128, "sm_90a", parsed("prefetch_values=false")).prefetchValues,
            false);
  // A paged cache's gathered rows: key blocks of 64, still prefetched.
  EXPECT_EQ(splitKvTileConfig(128, "sm_90a", TileConfig(), KeyLayout::Gathered).print(),
            "Bc=64,pack_gqa=true,warp_specialize=false,prefetch_values=true");
}

TEST(TileConfig, CompiledKernelRecordsItsConfiguration) {
  const kernels::KernelSource &causal = *kernels::find("causal");
  PtxCompileOptions options;
  options.tiles = parsed("Br=128,Bc=32,mma=sync");
  auto k = compileToPTX(causal.text, causal.fileName, options);
  ASSERT_TRUE(bool(k)) << llvm::toString(k.takeError());
  EXPECT_EQ(k->tiles.print(), "Br=128,Bc=32,rows_per_warp=32,mma=sync,q=registers,"
                              "copy_issue=eager,stages=2,pack_gqa=false");
  EXPECT_EQ(k->blockM, 128);
  EXPECT_EQ(k->threads, 128);
  auto back = CompiledKernel::fromMetadataJson(k->metadataJson(), k->ptx);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->tiles, k->tiles);
}
