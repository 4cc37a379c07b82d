//===- ScoreModDerivativeTest.cpp - df/ds of score regions, checked by numbers ===//
//
// buildScoreModGrad differentiates a score region op by op; here its result is checked against
// finite differences, for every bundled kernel with a score_mod, the test-only variant
// softcap_head_bias and regions written below (select, maximum / minimum, the math ops).
//
// For each region, three scalar functions of (s, b, h, q_idx, kv_idx, captured) are built and
// JIT-compiled for the host through the CPU backend's lowering:
//   derivative32  the body of the tile.score_mod_grad that buildScoreModGrad makes (f32: what a
//                 backward kernel would run)
//   value64       the score_mod's body with its f32 arithmetic in f64 (as the float64 reference
//                 evaluates it)
//   derivative64  emitScoreDerivative applied to value64's body (the same rules, in f64)
// and compared at random points:
//   derivative64 vs the central difference (f(s + e) - f(s - e)) / 2e of value64, with
//     e = 1e-5 max(1, |s|): the difference's truncation error is e^2 / 6 |f'''| (<= 2e-10 s^2 for
//     the regions here, whose third derivatives are O(1) in their scaled units) and its rounding
//     error about 2^-52 |f| / e (< 1e-9 for |f| < 100), so 1e-6 (1 + |f'|) leaves a wide margin
//     while a wrong rule (a missing factor, a wrong sign, a dropped term) is off by O(|f'|).
//     A point within e of a kink or a jump (a select, max, abs) is skipped: there the forward
//     and backward one-sided differences disagree; at most 1% of the points may be skipped.
//   derivative32 vs derivative64: each f32 op rounds by at most 2^-24 relatively, the regions
//     chain fewer than 16 ops, and the one cancellation (1 - tanh^2) loses at most a few ulps of
//     1 absolutely, so 1e-5 (1 + |f'|) holds; a wrong f32 rule would fail the f64 check first.
// A captured value that is not a constant (alibi's H = memref.dim) is an index argument.
//
//===----------------------------------------------------------------------===//
#include "DiagnosedSource.h"
#include "cpu/HostCompile.h"
#include "tilefuse/codegen/Passes.h"
#include "tilefuse/dialect/TileDialect.h"
#include "tilefuse/dialect/TileOps.h"
#include "tilefuse/kernels/Registry.h"
#include "tilefuse/passes/ScoreModDerivative.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using namespace tilefuse;

namespace {

/// Regions written only here: every rule, with selects on score and index conditions.
constexpr const char *kRegionsWrittenHere = R"mlir(
// A clamped softplus of the score below the diagonal, a tanh and expm1 / log1p above it.
func.func @clamp_softplus(%t: tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32> {
  %floor = arith.constant -3.0 : f32
  %ceiling = arith.constant 8.0 : f32
  %u = tile.score_mod %t : tensor<?x?x?x?xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %lower = arith.maximumf %score, %floor : f32
    %clamped = arith.minimumf %ceiling, %lower : f32
    %e = math.exp %clamped : f32
    %one = arith.constant 1.0 : f32
    %e1 = arith.addf %e, %one : f32
    %softplus = math.log %e1 : f32
    %tenth = arith.constant 0.1 : f32
    %x = arith.mulf %score, %tenth : f32
    %th = math.tanh %x : f32
    %em = math.expm1 %th : f32
    %lp = math.log1p %em : f32
    %scaled = arith.mulf %lp, %ceiling : f32
    %below = arith.cmpi ule, %kv, %qi : index
    %r = arith.select %below, %softplus, %scaled : f32
    tile.yield %r : f32
  }
  return %u : tensor<?x?x?x?xf32>
}

// Selects on the score's sign, abs, sqrt, rsqrt, log2, exp2, div, fma, powf of a score base, a
// subtraction and a negation, and an index-derived bias through sitofp.
func.func @select_on_score(%t: tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32> {
  %u = tile.score_mod %t : tensor<?x?x?x?xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %one = arith.constant 1.0 : f32
    %zero = arith.constant 0.0 : f32
    %tenth = arith.constant 0.1 : f32
    %x = arith.mulf %score, %tenth : f32
    %sq = arith.mulf %x, %x : f32
    %r1 = arith.addf %sq, %one : f32
    %root = math.sqrt %r1 : f32
    %inv = math.rsqrt %r1 : f32
    %a = math.absf %x : f32
    %ratio = arith.divf %a, %root : f32
    %lg = math.log2 %r1 : f32
    %e2 = math.exp2 %inv : f32
    %f = math.fma %ratio, %lg, %e2 : f32
    %three_halves = arith.constant 1.5 : f32
    %pw = math.powf %r1, %three_halves : f32
    %negative = arith.cmpf olt, %score, %zero : f32
    %picked = arith.select %negative, %f, %pw : f32
    %q64 = arith.index_cast %qi : index to i64
    %qf = arith.sitofp %q64 : i64 to f32
    %milli = arith.constant 0.001 : f32
    %bias = arith.mulf %qf, %milli : f32
    %d = arith.subf %bias, %picked : f32
    %r = arith.negf %d : f32
    tile.yield %r : f32
  }
  return %u : tensor<?x?x?x?xf32>
}
)mlir";

using Scalar32 = float (*)(float, int64_t, int64_t, int64_t, int64_t, int64_t);
using Scalar64 = double (*)(double, int64_t, int64_t, int64_t, int64_t, int64_t);

struct CompiledRegion {
  std::unique_ptr<ExecutionEngine> engine;
  Scalar32 derivative32 = nullptr;
  Scalar64 value64 = nullptr, derivative64 = nullptr;
};

class ScoreModDerivative : public testing::Test {
protected:
  void SetUp() override {
    DialectRegistry registry;
    tilefuse::runtime::registerCompilerDialects(registry);
    context = std::make_unique<MLIRContext>(registry);
    context->loadAllAvailableDialects();
  }

  /// A scalar function (s: `scoreType`, b, h, q_idx, kv_idx, captured: index) in `jit`, with its
  /// entry block's arguments, and `mapping` holding the captured values of `region`: constants
  /// cloned (f32 constants promoted to `scoreType`), an index from above mapped to `captured`.
  func::FuncOp addScalarFunction(ModuleOp jit, StringRef name, Type scoreType, Region &region,
                                 IRMapping &mapping) {
    OpBuilder b(jit.getBodyRegion());
    Type index = b.getIndexType();
    auto fn = func::FuncOp::create(
        b, jit.getLoc(), name,
        b.getFunctionType({scoreType, index, index, index, index, index}, {scoreType}));
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    SetVector<Value> captured;
    getUsedValuesDefinedAbove(region, captured);
    int nonConstant = 0;
    for (Value v : captured) {
      Operation *def = v.getDefiningOp();
      if (def && def->hasTrait<OpTrait::ConstantLike>()) {
        cloneWidened(b, *def, scoreType, mapping);
        continue;
      }
      EXPECT_TRUE(v.getType().isIndex()) << "a captured non-constant that is not an index";
      EXPECT_EQ(nonConstant++, 0) << "more than one non-constant captured value";
      mapping.map(v, entry->getArgument(5));
    }
    return fn;
  }

  /// Clones `op` at `b`: with its f32 results retyped to `type` (f32 constants rebuilt in it).
  static void cloneWidened(OpBuilder &b, Operation &op, Type type, IRMapping &mapping) {
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      if (auto value = dyn_cast<FloatAttr>(constant.getValue()); value && value.getType().isF32()) {
        mapping.map(constant.getResult(),
                    arith::ConstantOp::create(b, op.getLoc(),
                                              b.getFloatAttr(type, value.getValueAsDouble())));
        return;
      }
    }
    Operation *copy = b.clone(op, mapping);
    for (OpResult result : copy->getResults())
      if (result.getType().isF32())
        result.setType(type);
  }

  /// Builds and JIT-compiles the three functions of `scoreMod` (see the file comment); the
  /// score_mod_grad is built in `scoreMod`'s own module, before it.
  void compile(tile::ScoreModOp scoreMod, CompiledRegion &compiled) {
    Type f32 = Float32Type::get(context.get()), f64 = Float64Type::get(context.get());
    OpBuilder b(context.get());
    FailureOr<tile::ScoreModGradOp> grad = buildScoreModGrad(b, scoreMod);
    ASSERT_TRUE(succeeded(grad));
    OwningOpRef<ModuleOp> jit = ModuleOp::create(UnknownLoc::get(context.get()));

    { // derivative32: the score_mod_grad's body, returning its second yielded value.
      IRMapping mapping;
      func::FuncOp fn = addScalarFunction(*jit, "derivative32", f32, grad->getBody(), mapping);
      Block &body = grad->getBody().front();
      mapping.map(body.getArguments(), fn.getArguments().take_front(5));
      OpBuilder fb = OpBuilder::atBlockEnd(&fn.getBody().front());
      for (Operation &op : body.without_terminator())
        fb.clone(op, mapping);
      func::ReturnOp::create(fb, fn.getLoc(),
                             mapping.lookup(body.getTerminator()->getOperand(1)));
    }
    func::FuncOp value64;
    { // value64: the score_mod's body in f64.
      IRMapping mapping;
      value64 = addScalarFunction(*jit, "value64", f64, scoreMod.getBody(), mapping);
      Block &body = scoreMod.getBody().front();
      mapping.map(body.getArguments(), value64.getArguments().take_front(5));
      OpBuilder fb = OpBuilder::atBlockEnd(&value64.getBody().front());
      for (Operation &op : body.without_terminator())
        cloneWidened(fb, op, f64, mapping);
      func::ReturnOp::create(fb, value64.getLoc(),
                             mapping.lookup(body.getTerminator()->getOperand(0)));
    }
    { // derivative64: the rules applied to value64's body.
      Block &body = value64.getBody().front();
      ASSERT_TRUE(succeeded(checkScoreDifferentiable(body)));
      IRMapping unused;
      func::FuncOp fn = addScalarFunction(*jit, "derivative64", f64, value64.getBody(), unused);
      OpBuilder fb = OpBuilder::atBlockEnd(&fn.getBody().front());
      ScoreValueAndDerivative result = emitScoreDerivative(fb, body, fn.getArguments());
      func::ReturnOp::create(fb, fn.getLoc(), result.derivative);
    }
    ASSERT_TRUE(succeeded(verify(*jit)));

    PassManager pm(context.get());
    buildCpuLoopsToLLVMPipeline(pm);
    ASSERT_TRUE(succeeded(pm.run(*jit)));
    auto created = tilefuse::runtime::cpu::createHostJit(*jit, "host");
    ASSERT_TRUE(static_cast<bool>(created)) << llvm::toString(created.takeError());
    compiled.engine = std::move(*created);
    auto lookup = [&](StringRef name) -> void * {
      auto symbol = compiled.engine->lookup(name);
      if (!symbol) {
        ADD_FAILURE() << llvm::toString(symbol.takeError());
        return nullptr;
      }
      return *symbol;
    };
    compiled.derivative32 = reinterpret_cast<Scalar32>(lookup("derivative32"));
    compiled.value64 = reinterpret_cast<Scalar64>(lookup("value64"));
    compiled.derivative64 = reinterpret_cast<Scalar64>(lookup("derivative64"));
  }

  /// Checks df/ds of `scoreMod` at `points` random (s, b, h, q, kv) with |s| <= `spread`.
  void checkNumerically(tile::ScoreModOp scoreMod, double spread, int points = 2000) {
    CompiledRegion c;
    compile(scoreMod, c);
    checkNumerically(c, spread, points);
  }
  void checkNumerically(CompiledRegion &c, double spread, int points) {
    ASSERT_TRUE(c.derivative32 && c.value64 && c.derivative64);
    std::mt19937_64 rng(12);
    std::uniform_real_distribution<double> score(-spread, spread);
    std::uniform_int_distribution<int64_t> batch(0, 3), head(0, 15), position(0, 4095);
    const int64_t heads = 16; // the captured index (alibi's H)
    int skipped = 0;
    for (int i = 0; i < points; ++i) {
      // s exactly representable in f32, so both precisions see the same point.
      double s = static_cast<float>(score(rng));
      int64_t bi = batch(rng), hi = head(rng), qi = position(rng), kv = position(rng);
      auto f = [&](double x) { return c.value64(x, bi, hi, qi, kv, heads); };
      double e = 1e-5 * std::max(1.0, std::abs(s));
      double forward = (f(s + e) - f(s)) / e, backward = (f(s) - f(s - e)) / e;
      double central = (f(s + e) - f(s - e)) / (2 * e);
      if (std::abs(forward - backward) > 1e-3 * (1 + std::abs(central))) {
        ++skipped; // a kink or a jump within e of s
        continue;
      }
      double d64 = c.derivative64(s, bi, hi, qi, kv, heads);
      double d32 = c.derivative32(static_cast<float>(s), bi, hi, qi, kv, heads);
      ASSERT_NEAR(d64, central, 1e-6 * (1 + std::abs(central)))
          << "s=" << s << " b=" << bi << " h=" << hi << " q=" << qi << " kv=" << kv;
      ASSERT_NEAR(d32, d64, 1e-5 * (1 + std::abs(d64)))
          << "s=" << s << " b=" << bi << " h=" << hi << " q=" << qi << " kv=" << kv;
    }
    EXPECT_LE(skipped, points / 100);
  }

  SmallVector<tile::ScoreModOp> scoreModsOf(ModuleOp module) {
    SmallVector<tile::ScoreModOp> found;
    module.walk([&](tile::ScoreModOp op) { found.push_back(op); });
    return found;
  }

  std::unique_ptr<MLIRContext> context;
};

TEST_F(ScoreModDerivative, EveryBundledKernelWithAScoreMod) {
  int checked = 0;
  for (const kernels::KernelSource &kernel : kernels::all()) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kernel.text, context.get());
    ASSERT_TRUE(module) << kernel.name;
    for (tile::ScoreModOp scoreMod : scoreModsOf(*module)) {
      SCOPED_TRACE(kernel.name);
      checkNumerically(scoreMod, /*spread=*/60.0);
      ++checked;
    }
  }
  EXPECT_GE(checked, 2); // softcap and alibi at least
}

TEST_F(ScoreModDerivative, SoftcapHeadBiasVariant) {
  std::string path = std::string(TILEFUSE_TEST_VARIANTS_DIR) + "/softcap_head_bias.mlir";
  auto buffer = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(static_cast<bool>(buffer)) << path;
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>((*buffer)->getBuffer(), context.get());
  ASSERT_TRUE(module);
  SmallVector<tile::ScoreModOp> scoreMods = scoreModsOf(*module);
  ASSERT_EQ(scoreMods.size(), 1u);
  checkNumerically(scoreMods.front(), /*spread=*/60.0);
}

TEST_F(ScoreModDerivative, RegionsWrittenHere) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kRegionsWrittenHere, context.get());
  ASSERT_TRUE(module);
  SmallVector<tile::ScoreModOp> scoreMods = scoreModsOf(*module);
  ASSERT_EQ(scoreMods.size(), 2u);
  for (tile::ScoreModOp scoreMod : scoreMods) {
    SCOPED_TRACE(scoreMod->getParentOfType<func::FuncOp>().getName().str());
    checkNumerically(scoreMod, /*spread=*/20.0);
  }
}

// At a tie of maximum (s exactly at clamp_softplus's floor of -3), each operand gets half of the
// tangent (PyTorch's rule): df/ds = 1/2 sigmoid(-3) below the diagonal.
TEST_F(ScoreModDerivative, MaximumSplitsATie) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kRegionsWrittenHere, context.get());
  ASSERT_TRUE(module);
  CompiledRegion c;
  compile(scoreModsOf(*module).front(), c);
  ASSERT_TRUE(c.derivative32 && c.derivative64);
  double sigmoid = 1.0 / (1.0 + std::exp(3.0));
  EXPECT_NEAR(c.derivative64(-3.0, 0, 0, 5, 2, 16), 0.5 * sigmoid, 1e-15);
  EXPECT_NEAR(c.derivative32(-3.0f, 0, 0, 5, 2, 16), 0.5 * sigmoid, 1e-7);
  EXPECT_NEAR(c.derivative64(-3.0 + 1e-9, 0, 0, 5, 2, 16), sigmoid, 1e-8);
  EXPECT_EQ(c.derivative64(-3.0 - 1e-9, 0, 0, 5, 2, 16), 0.0);
}

} // namespace
