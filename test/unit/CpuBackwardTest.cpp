//===- CpuBackwardTest.cpp - the tiled backward on the CPU against float64 ---===//
//
// The derived backward, tiled in FlashAttention-2's backward schedule (tile-tiling-backward) and
// run by the CPU reference backend (CpuBackwardKernel), against the float64 backward reference
// (BackwardReferenceKernel: the untiled derived backward in f64, itself checked against finite
// differences and an analytic backward in BackwardReferenceTest.cpp). Every bundled variant and
// both test-only variants, f32 (the tiled arithmetic itself, to f32 rounding) and bf16 / f16
// (the storage rounding of inputs and gradients), both dQ schemes (atomic accumulation and the
// deterministic ordered loop), odd lengths, M != N both ways and block sizes that divide neither.
// Random normal inputs; O and the logsumexp come from the tiled forward of the same pair.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "tilefuse/kernels/Registry.h"
#include "tilefuse/runtime/CpuBackwardKernel.h"
#include "tilefuse/runtime/Float64Reference.h"
#include "tilefuse/runtime/Reference.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

using namespace tilefuse;
using namespace tilefuse::runtime;

namespace {

constexpr int64_t kHeadDim = 16;

struct Variant {
  std::string name, text, fileName;
  std::vector<std::string> params;
};

Variant variantNamed(const std::string &name) {
  Variant v;
  v.name = name;
  if (const kernels::KernelSource *src = kernels::find(name)) {
    v.text = src->text;
    v.fileName = src->fileName;
  } else {
    std::string path = std::string(TILEFUSE_TEST_VARIANTS_DIR) + "/" + name + ".mlir";
    auto buffer = llvm::MemoryBuffer::getFile(path);
    EXPECT_TRUE(static_cast<bool>(buffer)) << path;
    if (buffer)
      v.text = (*buffer)->getBuffer().str();
    v.fileName = name + ".mlir";
  }
  // Masks that cut into lengths of a few dozen (so blocks are empty, full and partial), a soft
  // cap the scores reach (so f' differs from 1).
  if (name == "sliding_window")
    v.params = {"window_left=8", "window_right=2"};
  else if (name == "prefix_lm")
    v.params = {"prefix=10"};
  else if (name == "softcap")
    v.params = {"cap=2.0"};
  else if (name == "chunked_local")
    v.params = {"chunk=16"};
  return v;
}

std::unique_ptr<CpuBackwardKernel> compileTiled(const Variant &v, const std::string &dtype,
                                                bool deterministic, int64_t br = 16,
                                                int64_t bc = 32, bool instrument = false,
                                                bool descendingRows = false) {
  CpuBackwardOptions options;
  options.descendingRows = descendingRows;
  options.elementType = dtype;
  options.headDim = kHeadDim;
  options.params = v.params;
  options.blockM = br;
  options.blockN = bc;
  options.deterministic = deterministic;
  options.instrument = instrument;
  options.cpuTarget = "baseline";
  auto kernel = CpuBackwardKernel::compile(v.text, v.fileName, options);
  if (!kernel) {
    ADD_FAILURE() << llvm::toString(kernel.takeError());
    return nullptr;
  }
  return std::move(*kernel);
}

std::unique_ptr<BackwardReferenceKernel> compileReference(const Variant &v) {
  ReferenceOptions options;
  options.headDim = kHeadDim;
  options.params = v.params;
  auto reference = BackwardReferenceKernel::compile(v.text, v.fileName, options);
  if (!reference) {
    ADD_FAILURE() << llvm::toString(reference.takeError());
    return nullptr;
  }
  return std::move(*reference);
}

std::array<int64_t, 4> qShape(const reference::Problem &p) { return {p.B, p.H, p.M, p.D}; }
std::array<int64_t, 4> kvShape(const reference::Problem &p) { return {p.B, p.Hkv, p.N, p.D}; }

/// One problem: storage-typed inputs, the tiled forward's O and logsumexp, and both backwards.
struct BackwardRun {
  reference::Problem p;
  ElementType et = ElementType::F32;
  std::vector<char> q, k, v, dO, o, dq, dk, dv;
  std::vector<float> lse;
  /// What the float64 reference sees: the storage-typed values, exactly.
  std::vector<double> qSeen, kSeen, vSeen, dOSeen, oSeen;
  BlockCounts counts;

  size_t qCount() const { return p.B * p.H * p.M * p.D; }
  size_t kvCount() const { return p.B * p.Hkv * p.N * p.D; }
};

/// Draws inputs, runs the tiled forward (O, LSE) and the tiled backward; the gradients' buffers
/// start as NaN, so an element never written fails.
BackwardRun runTiled(const CpuBackwardKernel &kernel, reference::Problem p, unsigned seed) {
  BackwardRun r;
  r.p = p;
  r.et = kernel.elementType();
  size_t es = reference::elementSize(r.et);
  std::mt19937 rng(seed);
  auto draw = [&](std::vector<char> &bytes, std::vector<double> &seen, size_t n) {
    bytes.resize(n * es);
    seen = reference::storeAs(r.et, reference::randomNormal(n, rng), bytes.data());
  };
  draw(r.q, r.qSeen, r.qCount());
  draw(r.k, r.kSeen, r.kvCount());
  draw(r.v, r.vSeen, r.kvCount());
  draw(r.dO, r.dOSeen, r.qCount());
  r.o.assign(r.qCount() * es, static_cast<char>(0xff));
  r.lse.assign(p.B * p.H * p.M, NAN);
  auto view = [&](std::vector<char> &bytes, std::array<int64_t, 4> shape) {
    return HostView::contiguous(bytes.data(), shape);
  };
  HostView lse = HostView::contiguous(r.lse.data(), {p.B, p.H, p.M, 0}, 3);
  if (llvm::Error e = kernel.forward(view(r.q, qShape(p)), view(r.k, kvShape(p)),
                                     view(r.v, kvShape(p)), view(r.o, qShape(p)), lse)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return r;
  }
  r.oSeen = reference::loadAs(r.et, r.o.data(), r.qCount());
  r.dq.assign(r.qCount() * es, static_cast<char>(0xff));
  r.dk.assign(r.kvCount() * es, static_cast<char>(0xff));
  r.dv.assign(r.kvCount() * es, static_cast<char>(0xff));
  if (llvm::Error e = kernel.backward(view(r.q, qShape(p)), view(r.k, kvShape(p)),
                                      view(r.v, kvShape(p)), view(r.o, qShape(p)),
                                      view(r.dO, qShape(p)), lse, view(r.dq, qShape(p)),
                                      view(r.dk, kvShape(p)), view(r.dv, kvShape(p)),
                                      &r.counts))
    ADD_FAILURE() << llvm::toString(std::move(e));
  return r;
}

struct Gradients {
  std::vector<double> dq, dk, dv;
};

/// The float64 backward of the same inputs (O and LSE as the tiled forward gave them).
Gradients referenceGradients(const BackwardReferenceKernel &reference, BackwardRun &r) {
  const reference::Problem &p = r.p;
  Gradients g;
  g.dq.assign(r.qCount(), NAN);
  g.dk.assign(r.kvCount(), NAN);
  g.dv.assign(r.kvCount(), NAN);
  std::vector<double> lse(r.lse.begin(), r.lse.end());
  llvm::Error e = reference.run(
      HostView::contiguous(r.qSeen.data(), qShape(p)),
      HostView::contiguous(r.kSeen.data(), kvShape(p)),
      HostView::contiguous(r.vSeen.data(), kvShape(p)),
      HostView::contiguous(r.oSeen.data(), qShape(p)),
      HostView::contiguous(r.dOSeen.data(), qShape(p)),
      HostView::contiguous(lse.data(), {p.B, p.H, p.M, 0}, 3),
      HostView::contiguous(g.dq.data(), qShape(p)), HostView::contiguous(g.dk.data(), kvShape(p)),
      HostView::contiguous(g.dv.data(), kvShape(p)));
  if (e)
    ADD_FAILURE() << llvm::toString(std::move(e));
  return g;
}

/// ||got - want|| / ||want|| (the norm of the difference where want is all zero); infinite
/// where got is not finite.
double relativeError(const std::vector<double> &got, const std::vector<double> &want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]))
      return INFINITY;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

/// The bound for a gradient in storage type `et`: f32 is the tiled arithmetic's rounding (about
/// 2e-7 seen); bf16 and f16 add one rounding of each gradient to the storage type (2^-9, 2^-12
/// relative at most; about 1.6e-3 seen in bf16).
double boundFor(ElementType et) {
  return et == ElementType::F32 ? 5e-6 : et == ElementType::BF16 ? 4e-3 : 1e-3;
}

/// The problem sizes a variant runs with: H = 4 over Hkv = 2, unless it declares its heads
/// (applyDeclaredHeads).
reference::Problem problemFor(const Variant &, int64_t M, int64_t N) {
  reference::Problem p;
  p.B = 2;
  p.H = 4;
  p.Hkv = 2;
  p.M = M;
  p.N = N;
  p.D = kHeadDim;
  return p;
}

/// Declared head counts, from the float64 forward reference (the sizes the signature fixes).
void applyDeclaredHeads(const Variant &v, reference::Problem &p) {
  auto forward = test::compileReference(v.text, v.fileName, kHeadDim, v.params);
  ASSERT_TRUE(forward);
  int64_t H = forward->declaredSizes().sizes[0][1];
  int64_t Hkv = forward->declaredSizes().sizes[1][1];
  if (H > 0)
    p.H = H;
  if (Hkv > 0)
    p.Hkv = Hkv;
}

using Case = std::tuple<std::string, std::string, bool>; // variant, dtype, deterministic

class TiledBackward : public testing::TestWithParam<Case> {};

TEST_P(TiledBackward, MatchesTheFloat64Backward) {
  auto [name, dtype, deterministic] = GetParam();
  Variant variant = variantNamed(name);
  auto tiled = compileTiled(variant, dtype, deterministic);
  auto reference = compileReference(variant);
  ASSERT_TRUE(tiled && reference);
  // Odd lengths, M != N both ways, Br = 16 and Bc = 32 dividing neither; and a single element.
  for (auto [M, N] : {std::pair<int64_t, int64_t>{37, 53}, {53, 37}, {1, 1}}) {
    reference::Problem p = problemFor(variant, M, N);
    applyDeclaredHeads(variant, p);
    BackwardRun r = runTiled(*tiled, p, unsigned(M * 131 + N));
    Gradients want = referenceGradients(*reference, r);
    SCOPED_TRACE(testing::Message() << name << " " << dtype << (deterministic ? " det" : "")
                                    << " M=" << M << " N=" << N);
    double bound = boundFor(r.et);
    EXPECT_LE(relativeError(reference::loadAs(r.et, r.dq.data(), r.qCount()), want.dq), bound);
    EXPECT_LE(relativeError(reference::loadAs(r.et, r.dk.data(), r.kvCount()), want.dk), bound);
    EXPECT_LE(relativeError(reference::loadAs(r.et, r.dv.data(), r.kvCount()), want.dv), bound);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, TiledBackward,
    testing::Combine(testing::Values("attention", "causal", "sliding_window", "alibi", "softcap",
                                     "prefix_lm", "gqa", "mqa", "chunked_local",
                                     "softcap_head_bias"),
                     testing::Values("f32", "bf16"), testing::Bool()),
    [](const testing::TestParamInfo<Case> &info) {
      return std::get<0>(info.param) + "_" + std::get<1>(info.param) +
             (std::get<2>(info.param) ? "_deterministic" : "_atomic");
    });

/// f16 storage, and square blocks (Br = Bc) on a long causal problem.
TEST(TiledBackwardShapes, F16AndSquareBlocks) {
  Variant variant = variantNamed("causal");
  auto tiled = compileTiled(variant, "f16", /*deterministic=*/false, 32, 32);
  auto reference = compileReference(variant);
  ASSERT_TRUE(tiled && reference);
  reference::Problem p = problemFor(variant, 100, 131);
  BackwardRun r = runTiled(*tiled, p, 7);
  Gradients want = referenceGradients(*reference, r);
  EXPECT_LE(relativeError(reference::loadAs(r.et, r.dq.data(), r.qCount()), want.dq), 1e-3);
  EXPECT_LE(relativeError(reference::loadAs(r.et, r.dk.data(), r.kvCount()), want.dk), 1e-3);
  EXPECT_LE(relativeError(reference::loadAs(r.et, r.dv.data(), r.kvCount()), want.dv), 1e-3);
}

/// Fully masked rows (sliding window, M > N + window): their dQ rows are exactly zero, no
/// gradient is NaN, and dK, dV match the reference (the masked rows add nothing).
TEST(TiledBackwardShapes, FullyMaskedRowsHaveZeroGradients) {
  Variant variant = variantNamed("sliding_window");
  auto reference = compileReference(variant);
  ASSERT_TRUE(reference);
  for (bool deterministic : {false, true}) {
    auto tiled = compileTiled(variant, "f32", deterministic);
    ASSERT_TRUE(tiled);
    reference::Problem p = problemFor(variant, 53, 23);
    BackwardRun r = runTiled(*tiled, p, 11);
    Gradients want = referenceGradients(*reference, r);
    auto dq = reference::loadAs(r.et, r.dq.data(), r.qCount());
    int64_t masked = 0;
    for (int64_t row = 0; row < p.B * p.H * p.M; ++row) {
      bool empty = row % p.M > p.N - 1 + 8; // the window reaches back 8 keys
      ASSERT_EQ(std::isinf(r.lse[row]), empty) << "row " << row % p.M;
      if (!empty)
        continue;
      ++masked;
      for (int64_t d = 0; d < p.D; ++d)
        ASSERT_EQ(dq[row * p.D + d], 0.0) << "row " << row % p.M;
    }
    EXPECT_GT(masked, 0);
    for (const std::vector<char> *g : {&r.dq, &r.dk, &r.dv})
      for (double x : reference::loadAs(r.et, g->data(), g->size() / sizeof(float)))
        ASSERT_TRUE(std::isfinite(x));
    EXPECT_LE(relativeError(dq, want.dq), 5e-6);
    EXPECT_LE(relativeError(reference::loadAs(r.et, r.dk.data(), r.kvCount()), want.dk), 5e-6);
    EXPECT_LE(relativeError(reference::loadAs(r.et, r.dv.data(), r.kvCount()), want.dv), 5e-6);
  }
}

/// Deterministic mode: runs give the same gradients bit for bit, one after another and on
/// concurrent threads. (So does the atomic mode on the host, whose programs run in order; what
/// the flag changes is the schedule, no cross-program sum of dQ, which keeps a GPU's dQ
/// reproducible.)
TEST(TiledBackwardShapes, DeterministicIsBitwiseReproducible) {
  Variant variant = variantNamed("alibi");
  auto tiled = compileTiled(variant, "bf16", /*deterministic=*/true);
  ASSERT_TRUE(tiled);
  EXPECT_TRUE(tiled->deterministic());
  reference::Problem p = problemFor(variant, 61, 45);
  BackwardRun first = runTiled(*tiled, p, 3);
  BackwardRun second = runTiled(*tiled, p, 3);
  EXPECT_EQ(first.dq, second.dq);
  EXPECT_EQ(first.dk, second.dk);
  EXPECT_EQ(first.dv, second.dv);
  // The compiled pair runs on several threads at once (each call runs its grids on its own
  // thread): every run gives the same bits.
  std::vector<BackwardRun> concurrent(4);
  std::vector<std::thread> threads;
  for (BackwardRun &run : concurrent)
    threads.emplace_back([&] { run = runTiled(*tiled, p, 3); });
  for (std::thread &thread : threads)
    thread.join();
  for (const BackwardRun &run : concurrent) {
    EXPECT_EQ(run.dq, first.dq);
    EXPECT_EQ(run.dk, first.dk);
    EXPECT_EQ(run.dv, first.dv);
  }
}

/// The dQ grid's row blocks last first (row_order=descending): each row block's dQ is still one
/// program's ordered loop, so the gradients are the ascending grid's, bit for bit (the forward
/// of the pair is reversed too, and its O and LSE are one program's each as well).
TEST(TiledBackwardShapes, DescendingRowBlocksGiveTheSameGradients) {
  for (const char *name : {"causal", "prefix_lm", "chunked_local"}) {
    Variant variant = variantNamed(name);
    auto ascending = compileTiled(variant, "f32", /*deterministic=*/true);
    auto descending = compileTiled(variant, "f32", /*deterministic=*/true, 16, 32,
                                   /*instrument=*/false, /*descendingRows=*/true);
    ASSERT_TRUE(ascending && descending);
    reference::Problem p = problemFor(variant, 77, 61);
    applyDeclaredHeads(variant, p);
    BackwardRun a = runTiled(*ascending, p, 9);
    BackwardRun d = runTiled(*descending, p, 9);
    SCOPED_TRACE(name);
    EXPECT_EQ(a.o, d.o);
    EXPECT_EQ(a.lse, d.lse);
    EXPECT_EQ(a.dq, d.dq);
    EXPECT_EQ(a.dk, d.dk);
    EXPECT_EQ(a.dv, d.dv);
  }
}

/// The dK/dV loop over query blocks is pruned with the mask's intervals the other way round:
/// causal at M = N = 128 with 16 x 16 blocks visits, per key block j, the query blocks i >= j
/// (36 of 64 per head), 8 of them partial (the diagonal); the deterministic dQ loop over key
/// blocks visits the same blocks the forward's way.
TEST(TiledBackwardShapes, QueryLoopSkipsFullyMaskedBlocks) {
  Variant variant = variantNamed("causal");
  for (bool deterministic : {false, true}) {
    auto tiled = compileTiled(variant, "f32", deterministic, 16, 16, /*instrument=*/true);
    ASSERT_TRUE(tiled);
    reference::Problem p = problemFor(variant, 128, 128);
    BackwardRun r = runTiled(*tiled, p, 5);
    int64_t heads = p.B * p.H, passes = deterministic ? 2 : 1;
    EXPECT_EQ(r.counts.full, passes * heads * 28) << deterministic;
    EXPECT_EQ(r.counts.partial, passes * heads * 8) << deterministic;
  }
}

/// The pair's forward is the CPU backend's forward: the same O and logsumexp, bit for bit, as
/// CpuKernel compiled with the same options (the backward in the module changes nothing).
TEST(TiledBackwardShapes, ThePairsForwardIsTheCpuKernel) {
  Variant variant = variantNamed("alibi");
  auto pair = compileTiled(variant, "bf16", /*deterministic=*/false);
  CpuCompileOptions options;
  options.elementType = "bf16";
  options.headDim = kHeadDim;
  options.blockM = 16;
  options.blockN = 32;
  options.cpuTarget = "baseline";
  auto forward = CpuKernel::compile(variant.text, variant.fileName, options);
  ASSERT_TRUE(pair && forward) << (forward ? "" : llvm::toString(forward.takeError()));
  reference::Problem p = problemFor(variant, 45, 33);
  BackwardRun r = runTiled(*pair, p, 9);
  std::vector<char> o(r.o.size(), static_cast<char>(0xff));
  std::vector<float> lse(r.lse.size(), NAN);
  llvm::Error e = (*forward)->run(HostView::contiguous(r.q.data(), qShape(p)),
                                  HostView::contiguous(r.k.data(), kvShape(p)),
                                  HostView::contiguous(r.v.data(), kvShape(p)),
                                  HostView::contiguous(o.data(), qShape(p)),
                                  HostView::contiguous(lse.data(), {p.B, p.H, p.M, 0}, 3));
  ASSERT_FALSE(static_cast<bool>(e)) << llvm::toString(std::move(e));
  EXPECT_EQ(o, r.o);
  EXPECT_EQ(0, std::memcmp(lse.data(), r.lse.data(), lse.size() * sizeof(float)));
}

/// A causal mask, then a soft cap (which turns the masked -inf into a finite -cap: those scores
/// keep a probability), then a scale and a window mask. Block pruning must not skip the blocks
/// the first mask empties (it did: the forward and backward both lost them); the window mask
/// still prunes. Forward against the float64 forward, backward against the float64 backward.
constexpr const char *kMaskCapWindow = R"(
!qkv = memref<?x?x?x16xf32, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x16xf32>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x16xf32>
func.func @mask_cap_window(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %u = tile.mask %s : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  %c3 = arith.constant 3.0 : f32
  %w = tile.score_mod %u : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %x = arith.divf %score, %c3 : f32
    %th = math.tanh %x : f32
    %r = arith.mulf %th, %c3 : f32
    tile.yield %r : f32
  }
  %t = tile.scale %w by 0.5 : !scores
  %c20 = arith.constant 20 : index
  %z = tile.mask %t : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %lo = arith.addi %kv, %c20 : index
    %keep = arith.cmpi uge, %lo, %qi : index
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %z : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
)";

TEST(TiledBackwardShapes, AMaskBeforeAScoreModDoesNotPrune) {
  Variant variant{"mask_cap_window", kMaskCapWindow, "mask_cap_window.mlir", {}};
  auto tiled = compileTiled(variant, "f32", /*deterministic=*/true, 16, 16, /*instrument=*/true);
  auto reference = compileReference(variant);
  auto forwardReference = test::compileReference(variant.text, variant.fileName, kHeadDim);
  ASSERT_TRUE(tiled && reference && forwardReference);
  reference::Problem p = problemFor(variant, 70, 53);
  BackwardRun r = runTiled(*tiled, p, 13);
  std::vector<double> o(r.qCount(), NAN), lse(p.B * p.H * p.M, NAN);
  llvm::Error e = forwardReference->run(HostView::contiguous(r.qSeen.data(), qShape(p)),
                                        HostView::contiguous(r.kSeen.data(), kvShape(p)),
                                        HostView::contiguous(r.vSeen.data(), kvShape(p)),
                                        HostView::contiguous(o.data(), qShape(p)),
                                        HostView::contiguous(lse.data(), {p.B, p.H, p.M, 0}, 3));
  ASSERT_FALSE(static_cast<bool>(e)) << llvm::toString(std::move(e));
  EXPECT_LE(relativeError(r.oSeen, o), 5e-6);
  Gradients want = referenceGradients(*reference, r);
  EXPECT_LE(relativeError(reference::loadAs(r.et, r.dq.data(), r.qCount()), want.dq), 5e-6);
  EXPECT_LE(relativeError(reference::loadAs(r.et, r.dk.data(), r.kvCount()), want.dk), 5e-6);
  EXPECT_LE(relativeError(reference::loadAs(r.et, r.dv.data(), r.kvCount()), want.dv), 5e-6);
  // The window mask still prunes: rows reach back 20 keys, so of the 5 x 4 blocks per head
  // some are skipped in each loop.
  int64_t all = 2 * p.B * p.H * 5 * 4;
  EXPECT_LT(r.counts.visited(), all);
  EXPECT_GT(r.counts.visited(), 0);
}

/// A score region op without a derivative rule: an error at its file:line:col, no crash.
TEST(TiledBackwardErrors, UndifferentiableScoreModIsALocatedError) {
  std::string text = kernels::find("softcap")->text;
  std::string tanh = "%th = math.tanh %x : f32";
  size_t at = text.find(tanh);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, tanh.size(), "%th = arith.remf %x, %cap : f32");
  auto kernel = CpuBackwardKernel::compile(text, "remainder.mlir", CpuBackwardOptions());
  ASSERT_FALSE(static_cast<bool>(kernel));
  std::string message = llvm::toString(kernel.takeError());
  EXPECT_NE(message.find("remainder.mlir:20:11"), std::string::npos) << message;
  EXPECT_NE(message.find("cannot be differentiated"), std::string::npos) << message;
}

/// Bad views and options are errors naming what is wrong.
TEST(TiledBackwardErrors, BadShapesAndOptionsAreErrors) {
  Variant variant = variantNamed("attention");
  CpuBackwardOptions options;
  options.blockM = 0;
  auto bad = CpuBackwardKernel::compile(variant.text, variant.fileName, options);
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("block sizes must be positive"),
            std::string::npos);

  auto tiled = compileTiled(variant, "f32", false);
  ASSERT_TRUE(tiled);
  reference::Problem p{1, 2, 2, 5, 7, kHeadDim};
  std::vector<float> q(p.B * p.H * p.M * p.D, 1.0f), kv(p.B * p.Hkv * p.N * p.D, 1.0f),
      lse(p.B * p.H * p.M, 0.0f), wrong(p.B * p.Hkv * (p.N + 1) * p.D);
  auto qv = HostView::contiguous(q.data(), qShape(p));
  auto kvv = HostView::contiguous(kv.data(), kvShape(p));
  auto lv = HostView::contiguous(lse.data(), {p.B, p.H, p.M, 0}, 3);
  llvm::Error e = tiled->backward(qv, kvv, kvv, qv, qv, lv, qv, kvv,
                                  HostView::contiguous(wrong.data(), {p.B, p.Hkv, p.N + 1, p.D}));
  ASSERT_TRUE(static_cast<bool>(e));
  std::string message = llvm::toString(std::move(e));
  EXPECT_NE(message.find("dV dimension 2 is 8, not 7"), std::string::npos) << message;
  e = tiled->backward(qv, kvv, kvv, qv, qv, lv, qv, kvv, HostView());
  ASSERT_TRUE(static_cast<bool>(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("dV is null"), std::string::npos);
  // gqa declares 8 query heads: 4 is refused before anything runs.
  Variant gqa = variantNamed("gqa");
  auto gqaKernel = compileTiled(gqa, "f32", true);
  ASSERT_TRUE(gqaKernel);
  e = gqaKernel->backward(qv, kvv, kvv, qv, qv, lv, qv, kvv, kvv);
  ASSERT_TRUE(static_cast<bool>(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("was written for 8"), std::string::npos);
}

} // namespace
