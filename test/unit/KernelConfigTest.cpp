//===- KernelConfigTest.cpp - the tile.config module attribute -------------===//
//
// A kernel module carries its TileConfig as `tile.config = #tile.config<"TEXT">`
// (tilefuse/dialect/KernelConfig.h): it prints and parses back to the same configuration, a bad
// text is a diagnostic at its location (never a crash), and readModuleConfig / configForPass
// give the passes the configuration with the attribute winning over their options.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/dialect/TileOps.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace tilefuse;

namespace {

/// A context with the tile dialect whose diagnostics are collected as "line:col: message".
struct ConfigContext {
  MLIRContext ctx;
  std::vector<std::string> diagnostics;
  ScopedDiagnosticHandler handler;

  ConfigContext()
      : handler(&ctx, [this](Diagnostic &diagnostic) {
          std::string text;
          if (auto loc = dyn_cast<FileLineColLoc>(diagnostic.getLocation()))
            text = std::to_string(loc.getLine()) + ":" + std::to_string(loc.getColumn()) + ": ";
          diagnostics.push_back(text + diagnostic.str());
          return success();
        }) {
    ctx.loadDialect<tile::TileDialect>();
  }

  OwningOpRef<ModuleOp> parse(StringRef text) {
    return parseSourceString<ModuleOp>(text, ParserConfig(&ctx), "config.mlir");
  }
};

TileConfig complete() {
  TileConfig c;
  c.blockM = 128;
  c.blockN = 64;
  c.rowsPerWarp = 32;
  c.mma = MmaKind::Sync;
  c.qOperand = QOperand::Shared;
  c.copyIssue = CopyIssue::AtBarrier;
  return c;
}

TEST(KernelConfig, AttributeRoundTripsThroughText) {
  ConfigContext c;
  for (const TileConfig &config : {TileConfig(), complete(), defaultTileConfig(64, "sm_90a")}) {
    OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&c.ctx));
    tile::writeModuleConfig(*module, config);
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    // The canonical text, as TileConfig prints it.
    EXPECT_NE(text.find("tile.config = #tile.config<\"" + config.print() + "\">"),
              std::string::npos)
        << text;
    OwningOpRef<ModuleOp> parsed = c.parse(text);
    ASSERT_TRUE(parsed) << text;
    FailureOr<TileConfig> read = tile::readModuleConfig(*parsed);
    ASSERT_TRUE(succeeded(read));
    EXPECT_EQ(*read, config) << read->print();
  }
  EXPECT_TRUE(c.diagnostics.empty());
}

TEST(KernelConfig, ParsesOlderSpellingsToTheCanonicalText) {
  ConfigContext c;
  OwningOpRef<ModuleOp> module =
      c.parse("module attributes {tile.config = #tile.config<\"block-m=128, q-operand=shared\">} "
              "{}");
  ASSERT_TRUE(module);
  auto attr = (*module)->getAttrOfType<tile::ConfigAttr>(tile::TileDialect::kConfigAttrName);
  ASSERT_TRUE(attr);
  EXPECT_EQ(attr.getConfig().print(), "Br=128,q=shared");
}

TEST(KernelConfig, BadTextIsALocatedError) {
  struct Case {
    const char *text;
    const char *message;
  } cases[] = {
      {"Br=sixty", "1:47: #tile.config: Br needs an integer, not 'sixty'"},
      {"Br=64,colour=red", "1:47: #tile.config: unknown setting 'colour'"},
      {"mma=mfma", "1:47: #tile.config: mma must be sync or wgmma, not 'mfma'"},
      // Parsed, but the fields do not fit together (TileConfig::verify).
      {"Br=24", "1:47: #tile.config: block-m must be a multiple of 16"},
      {"Br=64,mma=wgmma,rows_per_warp=32", "1:47: #tile.config: mma=wgmma needs chip=sm_90a"},
      {"Br=128,mma=sync,warp_specialize=true",
       "1:47: #tile.config: warp_specialize=true needs mma=wgmma (chip sm_90a)"},
  };
  for (const Case &testCase : cases) {
    ConfigContext c;
    std::string text = std::string("module attributes {tile.config = #tile.config<\"") +
                       testCase.text + "\">} {}";
    EXPECT_FALSE(c.parse(text)) << testCase.text;
    ASSERT_EQ(c.diagnostics.size(), 1u) << testCase.text;
    EXPECT_EQ(c.diagnostics[0].rfind(testCase.message, 0), 0u)
        << testCase.text << " gave: " << c.diagnostics[0];
  }
}

TEST(KernelConfig, VerifierWantsAConfigAttributeOnAModule) {
  ConfigContext c;
  EXPECT_FALSE(c.parse("module attributes {tile.config = \"Br=64\"} {}"));
  ASSERT_EQ(c.diagnostics.size(), 1u);
  EXPECT_NE(c.diagnostics[0].find("'tile.config' must be a #tile.config, not \"Br=64\""),
            std::string::npos)
      << c.diagnostics[0];

  c.diagnostics.clear();
  c.ctx.allowUnregisteredDialects();
  EXPECT_FALSE(c.parse("module {\n"
                       "  module attributes {tile.config = #tile.config<\"Br=64\">} {}\n"
                       "  \"test.op\"() {tile.config = #tile.config<\"Br=64\">} : () -> ()\n"
                       "}"));
  ASSERT_FALSE(c.diagnostics.empty());
  EXPECT_NE(c.diagnostics.back().find("'tile.config' belongs on a module"), std::string::npos)
      << c.diagnostics.back();
}

TEST(KernelConfig, ReadModuleConfigReportsAnAttributeOfTheWrongKind) {
  // A pass may see the module before the verifier does: readModuleConfig checks by itself.
  ConfigContext c;
  OwningOpRef<ModuleOp> module =
      ModuleOp::create(FileLineColLoc::get(&c.ctx, "kernel.mlir", 3, 1));
  (*module)->setAttr(tile::TileDialect::kConfigAttrName, StringAttr::get(&c.ctx, "Br=64"));
  EXPECT_TRUE(failed(tile::readModuleConfig(*module)));
  ASSERT_EQ(c.diagnostics.size(), 1u);
  EXPECT_EQ(c.diagnostics[0], "3:1: 'tile.config' must be a #tile.config, not \"Br=64\"");
}

TEST(KernelConfig, ConfigForPassLetsTheAttributeWin) {
  ConfigContext c;
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&c.ctx));
  TileConfig options = defaultTileConfig(64, "sm_80"); // a pass's option values
  // No attribute: the options.
  FailureOr<TileConfig> none = tile::configForPass(*module, options);
  ASSERT_TRUE(succeeded(none));
  EXPECT_EQ(*none, options);
  // The fields the attribute sets win, the options fill the others.
  TileConfig written;
  written.blockM = 256;
  written.qOperand = QOperand::Shared;
  tile::writeModuleConfig(*module, written);
  FailureOr<TileConfig> merged = tile::configForPass(*module, options);
  ASSERT_TRUE(succeeded(merged));
  EXPECT_EQ(*merged, options.overriddenBy(written));
  EXPECT_EQ(merged->blockM, 256);
  EXPECT_EQ(merged->blockN, options.blockN);
  EXPECT_EQ(merged->qOperand, QOperand::Shared);
}

} // namespace
