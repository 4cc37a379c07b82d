//===- ExpandF16ConversionsTest.cpp - f16 conversions without the CPU's help ===//
//
// tile-expand-f16-conversions replaces f16 <-> f32 conversions by integer arithmetic so the CPU
// backend needs neither F16C nor compiler-runtime calls. Its results must be IEEE's: checked
// here against the C compiler's _Float16 conversions, for every f16 value (extension) and for
// every f32 around every f16 rounding boundary plus random ones (truncation, round to nearest
// even), JIT-compiled for the baseline CPU through the CPU backend's own lowering.
//
//===----------------------------------------------------------------------===//
#include "DiagnosedSource.h"
#include "cpu/HostCompile.h"
#include "tilefuse/codegen/Passes.h"
#include "tilefuse/passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace mlir;

namespace {

#if defined(__FLT16_MAX__) && (defined(__x86_64__) || defined(__aarch64__))

constexpr const char *kConversions = R"mlir(
func.func @extend(%in: memref<?xi16>, %out: memref<?xf32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %in, %c0 : memref<?xi16>
  scf.for %i = %c0 to %n step %c1 {
    %bits = memref.load %in[%i] : memref<?xi16>
    %h = arith.bitcast %bits : i16 to f16
    %f = arith.extf %h : f16 to f32
    memref.store %f, %out[%i] : memref<?xf32>
  }
  return
}
func.func @truncate(%in: memref<?xf32>, %out: memref<?xi16>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %in, %c0 : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %f = memref.load %in[%i] : memref<?xf32>
    %h = arith.truncf %f : f32 to f16
    %bits = arith.bitcast %h : f16 to i16
    memref.store %bits, %out[%i] : memref<?xi16>
  }
  return
}
)mlir";

template <typename T> struct Descriptor1D {
  T *allocated, *aligned;
  int64_t offset, size, stride;
};
template <typename T> Descriptor1D<T> describe(std::vector<T> &v) {
  return {v.data(), v.data(), 0, int64_t(v.size()), 1};
}

class ExpandF16Conversions : public testing::Test {
protected:
  void SetUp() override {
    DialectRegistry registry;
    tilefuse::runtime::registerCompilerDialects(registry);
    context = std::make_unique<MLIRContext>(registry);
    module = parseSourceString<ModuleOp>(kConversions, context.get());
    ASSERT_TRUE(module);
    PassManager pm(context.get());
    tilefuse::buildCpuLoopsToLLVMPipeline(pm); // the expansion is part of it
    ASSERT_TRUE(succeeded(pm.run(*module)));
    // The baseline CPU: no F16C, so nothing but the expansion could convert.
    auto created = tilefuse::runtime::cpu::createHostJit(*module, "baseline");
    ASSERT_TRUE(static_cast<bool>(created)) << llvm::toString(created.takeError());
    engine = std::move(*created);
  }

  template <typename In, typename Out>
  std::vector<Out> call(llvm::StringRef name, std::vector<In> in) {
    auto symbol = engine->lookup(("_mlir_ciface_" + name).str());
    EXPECT_TRUE(static_cast<bool>(symbol));
    if (!symbol) {
      llvm::consumeError(symbol.takeError());
      return {};
    }
    std::vector<Out> out(in.size());
    auto a = describe(in);
    auto b = describe(out);
    reinterpret_cast<void (*)(Descriptor1D<In> *, Descriptor1D<Out> *)>(*symbol)(&a, &b);
    return out;
  }

  std::unique_ptr<MLIRContext> context;
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<ExecutionEngine> engine;
};

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST_F(ExpandF16Conversions, ExtensionIsExactForEveryHalf) {
  std::vector<uint16_t> all(1 << 16);
  for (uint32_t i = 0; i < all.size(); ++i)
    all[i] = uint16_t(i);
  std::vector<float> got = call<uint16_t, float>("extend", all);
  ASSERT_EQ(got.size(), all.size());
  for (uint32_t i = 0; i < all.size(); ++i) {
    _Float16 h;
    std::memcpy(&h, &all[i], 2);
    float want = float(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got[i])) << std::hex << i;
      continue;
    }
    ASSERT_EQ(bitsOf(got[i]), bitsOf(want)) << "f16 bits 0x" << std::hex << i;
  }
}

TEST_F(ExpandF16Conversions, TruncationRoundsToNearestEven) {
  std::vector<float> inputs;
  // Every f32 whose bits above the 13 that f16 drops take every value, with the dropped bits
  // just below, at and above the halfway point (ties go to even), and at the extremes: covers
  // every f16 rounding boundary, subnormals, overflow to infinity, infinities and NaNs.
  for (uint32_t high = 0; high < (1u << 19); ++high)
    for (uint32_t low : {0x0u, 0x1u, 0xfffu, 0x1000u, 0x1001u, 0x1fffu})
      inputs.push_back(floatOf((high << 13) | low));
  std::mt19937 rng(42);
  for (int i = 0; i < 1000000; ++i)
    inputs.push_back(floatOf(rng()));
  std::vector<uint16_t> got = call<float, uint16_t>("truncate", inputs);
  ASSERT_EQ(got.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    _Float16 h = _Float16(inputs[i]);
    uint16_t want;
    std::memcpy(&want, &h, 2);
    bool wantNaN = (want & 0x7c00) == 0x7c00 && (want & 0x3ff);
    if (wantNaN) {
      ASSERT_EQ(got[i] & 0x7c00, 0x7c00) << "f32 bits 0x" << std::hex << bitsOf(inputs[i]);
      ASSERT_NE(got[i] & 0x3ff, 0) << "NaN must stay NaN: 0x" << std::hex << bitsOf(inputs[i]);
      continue;
    }
    ASSERT_EQ(got[i], want) << "f32 bits 0x" << std::hex << bitsOf(inputs[i]);
  }
}

#else
TEST(ExpandF16Conversions, NeedsFloat16InTheCCompiler) {
  GTEST_SKIP() << "the C compiler has no _Float16 to compare with";
}
#endif

} // namespace
