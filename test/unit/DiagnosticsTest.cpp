//===- DiagnosticsTest.cpp - bad input gives errors, never crashes --------===//
#include "TestUtil.h"

#include "tilefuse/kernels/Registry.h"
#include <gtest/gtest.h>

using namespace tilefuse;
using namespace tilefuse::runtime;

namespace {

std::string compileError(const std::string &text, const std::string &name = "bad.mlir") {
  auto k = CpuKernel::compile(text, name, CpuCompileOptions());
  if (k)
    return "";
  return llvm::toString(k.takeError());
}

TEST(Diagnostics, MalformedFileNamesLineAndColumn) {
  std::string err = compileError("func.func @f() {\n  %x = tile.frobnicate\n}\n");
  EXPECT_NE(err.find("bad.mlir:2:"), std::string::npos) << err;
}

TEST(Diagnostics, UnknownDtype) {
  std::string text = kernels::find("attention")->text;
  // A storage type MLIR does not know, written where kernels declare theirs.
  std::string bad = text;
  size_t at = bad.find("!elt = bf16");
  ASSERT_NE(at, std::string::npos);
  bad.replace(at, std::string("!elt = bf16").size(), "!elt = bf17");
  std::string err = compileError(bad, "kernels/attention.mlir");
  EXPECT_NE(err.find("kernels/attention.mlir:"), std::string::npos) << err;
  EXPECT_NE(err.find("error"), std::string::npos) << err;
}

TEST(Diagnostics, ShapeMismatchPointsAtTheOp) {
  std::string text = kernels::find("attention")->text;
  // K with head dim 32 against Q with 64: the verifier rejects the dot.
  size_t pos = text.find("%s = tile.dot %q, %k transpose_rhs : !in, !in");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, std::string("%s = tile.dot %q, %k transpose_rhs : !in, !in").size(),
               "%s = tile.dot %q, %q transpose_rhs : !in, tensor<?x?x?x32x!elt>");
  std::string err = compileError(text, "kernels/attention.mlir");
  EXPECT_NE(err.find("kernels/attention.mlir:"), std::string::npos) << err;
}

TEST(Diagnostics, UndefinedSymbol) {
  std::string text = kernels::find("attention")->text;
  size_t pos = text.find("tile.scale %s :");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, std::string("tile.scale %s :").size(), "tile.scale %nowhere :");
  std::string err = compileError(text, "kernels/attention.mlir");
  EXPECT_NE(err.find("kernels/attention.mlir:19:19: error:"), std::string::npos) << err;
  EXPECT_NE(err.find("undeclared SSA value"), std::string::npos) << err;
}

TEST(Diagnostics, RunRejectsMismatchedShapes) {
  auto kernel = test::compileBundled("attention", "f32", 64, 64);
  ASSERT_TRUE(kernel);
  std::vector<float> buf(4 * 4 * 32 * 64), lse(4 * 4 * 32);
  auto q = HostView::contiguous(buf.data(), {1, 4, 32, 64});
  auto k = HostView::contiguous(buf.data(), {1, 3, 32, 64}); // 4 heads over 3: not a GQA group
  auto l = HostView::contiguous(lse.data(), {1, 4, 32, 0}, 3);
  llvm::Error e = kernel->run(q, k, k, q, l);
  ASSERT_TRUE(static_cast<bool>(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("multiple of key/value heads"), std::string::npos);
  auto wrongD = HostView::contiguous(buf.data(), {1, 4, 32, 32});
  llvm::Error e2 = kernel->run(wrongD, wrongD, wrongD, wrongD, l);
  ASSERT_TRUE(static_cast<bool>(e2));
  EXPECT_NE(llvm::toString(std::move(e2)).find("was written for 64"), std::string::npos);
}

TEST(Diagnostics, TilingRejectsBadBlockSizes) {
  CpuCompileOptions opts;
  opts.blockM = 0;
  auto k = CpuKernel::compile(kernels::find("attention")->text, "kernels/attention.mlir", opts);
  ASSERT_FALSE(static_cast<bool>(k));
  EXPECT_NE(llvm::toString(k.takeError()).find("block sizes must be positive"), std::string::npos);
}

} // namespace
