//===- BackwardReferenceTest.cpp - the derived backward against independent gradients -===//
//
// The backward of a kernel is derived from its forward text (tile-derive-backward) and evaluated
// in float64 (tile-to-f64-tensor-reference, BackwardReferenceKernel). These tests check its dQ,
// dK and dV, for every bundled variant and both test-only variants, against two gradients that
// share nothing with the derivation:
//  (a) central finite differences of the float64 forward reference (the row reference of the
//      forward text) of the loss L = sum(O o G), so that dO = G, at sampled entries of Q, K, V;
//  (b) an analytic float64 attention backward written here, with each variant's score function,
//      its derivative and its mask stated by hand.
// Inputs are random normal (never zeros), lengths odd and M != N both ways, the head dimension
// small (16) to stay fast; kernels whose heads are not fixed run with H = 4, Hkv = 2, so every
// variant's dK and dV sum over a group of query heads. Fully masked rows give zero gradients.
//
//===----------------------------------------------------------------------===//
#include "FileTestUtil.h"
#include "TestUtil.h"

#include "tilefuse/kernels/Registry.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

using namespace tilefuse;
using namespace tilefuse::runtime;

namespace {

constexpr int64_t kHeadDim = 16;

/// A variant as the tests state it: its score function f, f' and mask, by hand.
struct HandSemantics {
  std::function<double(double, int64_t, int64_t, int64_t, int64_t)> scoreMod;   ///< identity
  std::function<double(double, int64_t, int64_t, int64_t, int64_t)> derivative; ///< 1
  std::function<bool(int64_t, int64_t, int64_t, int64_t)> mask;                  ///< keep all
  /// The mask applies to the raw scores and f to its output (f(-inf) where masked, which may be
  /// finite: that element keeps a probability but passes no gradient to the scores).
  bool maskBeforeScoreMod = false;
};

/// A variant under test: its DSL text, the parameters it runs with, and its meaning.
struct Variant {
  std::string name, text, fileName;
  std::vector<std::string> params;
};

std::string readVariant(const std::string &name) {
  std::string path = std::string(TILEFUSE_TEST_VARIANTS_DIR) + "/" + name + ".mlir";
  auto buffer = llvm::MemoryBuffer::getFile(path);
  EXPECT_TRUE(static_cast<bool>(buffer)) << path;
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

Variant variantNamed(const std::string &name) {
  Variant v;
  v.name = name;
  if (const kernels::KernelSource *src = kernels::find(name)) {
    v.text = src->text;
    v.fileName = src->fileName;
  } else {
    v.text = readVariant(name);
    v.fileName = name + ".mlir";
  }
  // Parameters small enough that the masks cut into lengths of a few dozen, and a soft cap the
  // scores reach, so that f' differs from 1.
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

HandSemantics semanticsOf(const std::string &name, int64_t H) {
  HandSemantics s;
  auto causal = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; };
  auto softcap = [&s](double cap) {
    s.scoreMod = [cap](double x, int64_t, int64_t, int64_t, int64_t) {
      return cap * std::tanh(x / cap);
    };
    s.derivative = [cap](double x, int64_t, int64_t, int64_t, int64_t) {
      double t = std::tanh(x / cap);
      return 1.0 - t * t;
    };
  };
  if (name == "causal")
    s.mask = causal;
  else if (name == "sliding_window")
    s.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv + 8 >= q && kv <= q + 2; };
  else if (name == "prefix_lm")
    s.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv < 10 || kv <= q; };
  else if (name == "alibi") {
    s.mask = causal;
    s.scoreMod = [H](double x, int64_t, int64_t h, int64_t q, int64_t kv) {
      return x + std::exp2(-8.0 * double(h + 1) / double(H)) * double(kv - q);
    };
  } else if (name == "softcap") {
    softcap(2.0);
  } else if (name == "chunked_local") {
    s.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q && q / 16 == kv / 16; };
  } else if (name == "softcap_head_bias") {
    softcap(20.0);
    auto capped = s.scoreMod;
    s.scoreMod = [capped](double x, int64_t b, int64_t h, int64_t q, int64_t kv) {
      return capped(x, b, h, q, kv) - 0.25 * double(h);
    };
  }
  return s;
}

struct Gradients {
  std::vector<double> dq, dk, dv;
};

/// The standard attention backward in float64 on contiguous arrays, written independently of the
/// compiler: P from the scores by a plain softmax, D_i = sum_j P_ij (dO_i . V_j),
/// dS_ij = P_ij (dO_i . V_j - D_i) f'(s_ij), dQ_i = scale sum_j dS_ij K_j, dK_j and dV_j summed
/// over the query heads of the group of their key/value head.
Gradients analyticBackward(const reference::Problem &p, const HandSemantics &sem,
                           const std::vector<double> &q, const std::vector<double> &k,
                           const std::vector<double> &v, const std::vector<double> &dO) {
  Gradients g;
  g.dq.assign(q.size(), 0.0);
  g.dk.assign(k.size(), 0.0);
  g.dv.assign(v.size(), 0.0);
  double scale = 1.0 / std::sqrt(double(p.D));
  int64_t group = p.H / p.Hkv;
  std::vector<double> raw(p.N), x(p.N), prob(p.N), dotV(p.N);
  std::vector<bool> kept(p.N);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h) {
      int64_t hk = h / group;
      auto at = [&](int64_t heads, int64_t head, int64_t len, int64_t row) {
        return ((b * heads + head) * len + row) * p.D;
      };
      for (int64_t i = 0; i < p.M; ++i) {
        const double *qi = &q[at(p.H, h, p.M, i)];
        const double *doi = &dO[at(p.H, h, p.M, i)];
        double m = -INFINITY;
        for (int64_t j = 0; j < p.N; ++j) {
          double s = 0;
          for (int64_t d = 0; d < p.D; ++d)
            s += qi[d] * k[at(p.Hkv, hk, p.N, j) + d];
          raw[j] = s * scale;
          kept[j] = !sem.mask || sem.mask(b, h, i, j);
          double in = sem.maskBeforeScoreMod && !kept[j] ? -INFINITY : raw[j];
          x[j] = sem.scoreMod ? sem.scoreMod(in, b, h, i, j) : in;
          if (!sem.maskBeforeScoreMod && !kept[j])
            x[j] = -INFINITY;
          m = std::max(m, x[j]);
        }
        if (m == -INFINITY)
          continue; // no kept score: P = 0, no gradient
        double sum = 0;
        for (int64_t j = 0; j < p.N; ++j)
          sum += std::exp(x[j] - m);
        double rowTerm = 0;
        for (int64_t j = 0; j < p.N; ++j) {
          prob[j] = std::exp(x[j] - m) / sum;
          dotV[j] = 0;
          for (int64_t d = 0; d < p.D; ++d)
            dotV[j] += doi[d] * v[at(p.Hkv, hk, p.N, j) + d];
          rowTerm += prob[j] * dotV[j];
        }
        for (int64_t j = 0; j < p.N; ++j) {
          if (prob[j] == 0)
            continue;
          double fPrime = !kept[j]        ? 0.0
                          : sem.derivative ? sem.derivative(raw[j], b, h, i, j)
                                           : 1.0;
          double dS = prob[j] * (dotV[j] - rowTerm) * fPrime * scale;
          for (int64_t d = 0; d < p.D; ++d) {
            g.dq[at(p.H, h, p.M, i) + d] += dS * k[at(p.Hkv, hk, p.N, j) + d];
            g.dk[at(p.Hkv, hk, p.N, j) + d] += dS * qi[d];
            g.dv[at(p.Hkv, hk, p.N, j) + d] += prob[j] * doi[d];
          }
        }
      }
    }
  return g;
}

/// max |a - b| / (1 + |b|); infinite where either is not finite.
double maxError(const std::vector<double> &a, const std::vector<double> &b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i]))
      return INFINITY;
    worst = std::max(worst, std::abs(a[i] - b[i]) / (1 + std::abs(b[i])));
  }
  return worst;
}

/// One variant compiled both ways: the forward reference and the derived backward.
struct Compiled {
  std::unique_ptr<ReferenceKernel> forward;
  std::unique_ptr<BackwardReferenceKernel> backward;
};

Compiled compile(const Variant &v) {
  Compiled c;
  c.forward = test::compileReference(v.text, v.fileName, kHeadDim, v.params);
  ReferenceOptions options;
  options.headDim = kHeadDim;
  options.params = v.params;
  auto backward = BackwardReferenceKernel::compile(v.text, v.fileName, options);
  if (!backward)
    ADD_FAILURE() << llvm::toString(backward.takeError());
  else
    c.backward = std::move(*backward);
  return c;
}

/// Inputs, the forward's outputs and the derived backward's gradients of one problem.
struct GradientRun {
  reference::Problem p;
  std::vector<double> q, k, v, dO, o, lse;
  Gradients got;
};

std::array<int64_t, 4> qShape(const reference::Problem &p) { return {p.B, p.H, p.M, p.D}; }
std::array<int64_t, 4> kvShape(const reference::Problem &p) { return {p.B, p.Hkv, p.N, p.D}; }

void forward(const ReferenceKernel &kernel, const reference::Problem &p,
             std::vector<double> &q, std::vector<double> &k, std::vector<double> &v,
             std::vector<double> &o, std::vector<double> &lse) {
  o.assign(q.size(), NAN);
  lse.assign(p.B * p.H * p.M, NAN);
  llvm::Error e = kernel.run(HostView::contiguous(q.data(), qShape(p)),
                             HostView::contiguous(k.data(), kvShape(p)),
                             HostView::contiguous(v.data(), kvShape(p)),
                             HostView::contiguous(o.data(), qShape(p)),
                             HostView::contiguous(lse.data(), {p.B, p.H, p.M, 0}, 3));
  ASSERT_FALSE(static_cast<bool>(e)) << llvm::toString(std::move(e));
}

void runBackward(const Compiled &c, GradientRun &r, unsigned seed) {
  const reference::Problem &p = r.p;
  std::mt19937 rng(seed);
  auto draw = [&](size_t n) {
    auto f = reference::randomNormal(n, rng);
    return std::vector<double>(f.begin(), f.end());
  };
  r.q = draw(p.B * p.H * p.M * p.D);
  r.k = draw(p.B * p.Hkv * p.N * p.D);
  r.v = draw(p.B * p.Hkv * p.N * p.D);
  r.dO = draw(p.B * p.H * p.M * p.D);
  forward(*c.forward, p, r.q, r.k, r.v, r.o, r.lse);
  r.got.dq.assign(r.q.size(), NAN);
  r.got.dk.assign(r.k.size(), NAN);
  r.got.dv.assign(r.v.size(), NAN);
  llvm::Error e = c.backward->run(
      HostView::contiguous(r.q.data(), qShape(p)), HostView::contiguous(r.k.data(), kvShape(p)),
      HostView::contiguous(r.v.data(), kvShape(p)), HostView::contiguous(r.o.data(), qShape(p)),
      HostView::contiguous(r.dO.data(), qShape(p)),
      HostView::contiguous(r.lse.data(), {p.B, p.H, p.M, 0}, 3),
      HostView::contiguous(r.got.dq.data(), qShape(p)),
      HostView::contiguous(r.got.dk.data(), kvShape(p)),
      HostView::contiguous(r.got.dv.data(), kvShape(p)));
  ASSERT_FALSE(static_cast<bool>(e)) << llvm::toString(std::move(e));
}

/// The problem sizes a variant runs with: its declared heads, else H = 4 over Hkv = 2.
reference::Problem problemFor(const Compiled &c, int64_t M, int64_t N) {
  reference::Problem p;
  int64_t H = c.forward->declaredSizes().sizes[0][1];
  int64_t Hkv = c.forward->declaredSizes().sizes[1][1];
  p.B = 2;
  p.H = H > 0 ? H : 4;
  p.Hkv = Hkv > 0 ? Hkv : 2;
  p.M = M;
  p.N = N;
  p.D = kHeadDim;
  return p;
}

class DerivedBackward : public testing::TestWithParam<std::string> {};

/// (b): the derived backward equals the hand-written analytic backward to float64 rounding.
TEST_P(DerivedBackward, MatchesAnalyticBackward) {
  Variant variant = variantNamed(GetParam());
  Compiled c = compile(variant);
  ASSERT_TRUE(c.forward && c.backward);
  for (auto [M, N] : {std::pair<int64_t, int64_t>{37, 53}, {53, 37}, {1, 1}}) {
    GradientRun r;
    r.p = problemFor(c, M, N);
    runBackward(c, r, unsigned(M * 131 + N));
    Gradients want = analyticBackward(r.p, semanticsOf(variant.name, r.p.H), r.q, r.k, r.v, r.dO);
    SCOPED_TRACE(testing::Message() << variant.name << " M=" << M << " N=" << N);
    EXPECT_LE(maxError(r.got.dq, want.dq), 1e-12);
    EXPECT_LE(maxError(r.got.dk, want.dk), 1e-12);
    EXPECT_LE(maxError(r.got.dv, want.dv), 1e-12);
  }
}

/// (a): the derived backward equals central finite differences of the float64 forward of
/// L = sum(O o G) (G = dO), at entries of Q, K and V drawn at random.
TEST_P(DerivedBackward, MatchesFiniteDifferencesOfTheForward) {
  Variant variant = variantNamed(GetParam());
  Compiled c = compile(variant);
  ASSERT_TRUE(c.forward && c.backward);
  for (auto [M, N] : {std::pair<int64_t, int64_t>{37, 53}, {53, 37}}) {
    GradientRun r;
    r.p = problemFor(c, M, N);
    runBackward(c, r, unsigned(M * 7 + N));
    SCOPED_TRACE(testing::Message() << variant.name << " M=" << M << " N=" << N);
    auto loss = [&]() {
      std::vector<double> o, lse;
      forward(*c.forward, r.p, r.q, r.k, r.v, o, lse);
      double l = 0;
      for (size_t i = 0; i < o.size(); ++i)
        l += o[i] * r.dO[i];
      return l;
    };
    std::mt19937 rng(M + N);
    const double h = 1e-5;
    struct Input {
      const char *name;
      std::vector<double> *values;
      const std::vector<double> *gradient;
    } inputs[] = {{"Q", &r.q, &r.got.dq}, {"K", &r.k, &r.got.dk}, {"V", &r.v, &r.got.dv}};
    for (const Input &in : inputs) {
      std::uniform_int_distribution<size_t> pick(0, in.values->size() - 1);
      for (int sample = 0; sample < 8; ++sample) {
        size_t at = pick(rng);
        double x = (*in.values)[at];
        (*in.values)[at] = x + h;
        double up = loss();
        (*in.values)[at] = x - h;
        double down = loss();
        (*in.values)[at] = x;
        double fd = (up - down) / (2 * h);
        double g = (*in.gradient)[at];
        EXPECT_NEAR(g, fd, 1e-6 * (1 + std::abs(fd))) << "d" << in.name << "[" << at << "]";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, DerivedBackward,
                         testing::Values("attention", "causal", "sliding_window", "alibi",
                                         "softcap", "prefix_lm", "gqa", "mqa", "chunked_local",
                                         "softcap_head_bias"),
                         [](const testing::TestParamInfo<std::string> &info) {
                           return info.param;
                         });

/// A kernel written only here: the causal mask first, then a soft cap, which turns the masked
/// -inf into a finite -2. Those elements keep a probability (P is not zero there) but pass no
/// gradient to Q or K; the derivation zeroes them explicitly (a masked score is a constant).
constexpr const char *kMaskThenCap = R"(
!qkv = memref<?x?x?x16xf32, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x16xf32>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x16xf32>
func.func @mask_then_cap(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s : !scores
  %u = tile.mask %t : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  %cap = arith.constant 2.0 : f32
  %w = tile.score_mod %u : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %x = arith.divf %score, %cap : f32
    %th = math.tanh %x : f32
    %r = arith.mulf %th, %cap : f32
    tile.yield %r : f32
  }
  %p, %lse = tile.softmax %w : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
)";

TEST(DerivedBackwardRows, MaskBeforeScoreModPassesNoGradientThroughMaskedScores) {
  Variant variant{"mask_then_cap", kMaskThenCap, "mask_then_cap.mlir", {}};
  Compiled c = compile(variant);
  ASSERT_TRUE(c.forward && c.backward);
  GradientRun r;
  r.p = problemFor(c, 29, 41);
  runBackward(c, r, 5);
  HandSemantics sem;
  sem.maskBeforeScoreMod = true;
  sem.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; };
  sem.scoreMod = [](double x, int64_t, int64_t, int64_t, int64_t) {
    return 2.0 * std::tanh(x / 2.0);
  };
  sem.derivative = [](double x, int64_t, int64_t, int64_t, int64_t) {
    double t = std::tanh(x / 2.0);
    return 1.0 - t * t;
  };
  Gradients want = analyticBackward(r.p, sem, r.q, r.k, r.v, r.dO);
  EXPECT_LE(maxError(r.got.dq, want.dq), 1e-12);
  EXPECT_LE(maxError(r.got.dk, want.dk), 1e-12);
  EXPECT_LE(maxError(r.got.dv, want.dv), 1e-12);
  // The masked elements' probabilities are not zero: V's gradient sees every key.
  EXPECT_NE(r.got.dv.back(), 0.0);
}

/// Fully masked rows (sliding window, M > N + window): their dQ rows are exactly zero, they add
/// nothing to dK and dV, and no gradient is NaN.
TEST(DerivedBackwardRows, FullyMaskedRowsHaveZeroGradients) {
  Variant variant = variantNamed("sliding_window");
  Compiled c = compile(variant);
  ASSERT_TRUE(c.forward && c.backward);
  GradientRun r;
  r.p = problemFor(c, 53, 23);
  runBackward(c, r, 11);
  const reference::Problem &p = r.p;
  int64_t masked = 0;
  for (int64_t row = 0; row < p.B * p.H * p.M; ++row) {
    int64_t i = row % p.M;
    bool empty = i > p.N - 1 + 8; // the window reaches back 8 keys
    ASSERT_EQ(std::isinf(r.lse[row]), empty) << "row " << i;
    if (!empty)
      continue;
    ++masked;
    for (int64_t d = 0; d < p.D; ++d)
      ASSERT_EQ(r.got.dq[row * p.D + d], 0.0) << "row " << i;
  }
  EXPECT_GT(masked, 0);
  for (const std::vector<double> *g : {&r.got.dq, &r.got.dk, &r.got.dv})
    for (double x : *g)
      ASSERT_TRUE(std::isfinite(x));
  // The masked rows' dO does not reach dK or dV: changing it changes nothing.
  Gradients before = r.got;
  for (int64_t row = 0; row < p.B * p.H * p.M; ++row)
    if (row % p.M > p.N - 1 + 8)
      for (int64_t d = 0; d < p.D; ++d)
        r.dO[row * p.D + d] *= -3.0;
  Gradients want = analyticBackward(p, semanticsOf("sliding_window", p.H), r.q, r.k, r.v, r.dO);
  EXPECT_LE(maxError(before.dk, want.dk), 1e-12);
  EXPECT_LE(maxError(before.dv, want.dv), 1e-12);
}

/// Strided views (rows padded, as a launch may pass them) give the same gradients, bit for bit,
/// as contiguous ones; the padding is never written.
TEST(DerivedBackwardRows, StridedViewsGiveTheSameGradients) {
  Compiled c = compile(variantNamed("causal"));
  ASSERT_TRUE(c.forward && c.backward);
  GradientRun r;
  r.p = problemFor(c, 19, 23);
  runBackward(c, r, 3);
  const reference::Problem &p = r.p;
  const int64_t pad = 5, rowStride = p.D + pad;
  // A copy of `dense` (B x heads x len x D) with every row padded, the padding set to `fill`.
  auto padded = [&](const std::vector<double> &dense, int64_t heads, int64_t len, double fill) {
    std::vector<double> out(p.B * heads * len * rowStride, fill);
    for (int64_t row = 0; row < p.B * heads * len; ++row)
      for (int64_t d = 0; d < p.D; ++d)
        out[row * rowStride + d] = dense.empty() ? fill : dense[row * p.D + d];
    return out;
  };
  auto view = [&](std::vector<double> &data, int64_t heads, int64_t len) {
    HostView v = HostView::contiguous(data.data(), {p.B, heads, len, p.D});
    v.strides = {heads * len * rowStride, len * rowStride, rowStride, 1};
    return v;
  };
  const double poison = 12345.0;
  std::vector<double> q = padded(r.q, p.H, p.M, poison), k = padded(r.k, p.Hkv, p.N, poison),
                      v = padded(r.v, p.Hkv, p.N, poison), o = padded(r.o, p.H, p.M, poison),
                      dO = padded(r.dO, p.H, p.M, poison), dq = padded({}, p.H, p.M, poison),
                      dk = padded({}, p.Hkv, p.N, poison), dv = padded({}, p.Hkv, p.N, poison);
  llvm::Error e = c.backward->run(view(q, p.H, p.M), view(k, p.Hkv, p.N), view(v, p.Hkv, p.N),
                                  view(o, p.H, p.M), view(dO, p.H, p.M),
                                  HostView::contiguous(r.lse.data(), {p.B, p.H, p.M, 0}, 3),
                                  view(dq, p.H, p.M), view(dk, p.Hkv, p.N), view(dv, p.Hkv, p.N));
  ASSERT_FALSE(static_cast<bool>(e)) << llvm::toString(std::move(e));
  EXPECT_EQ(dq, padded(r.got.dq, p.H, p.M, poison));
  EXPECT_EQ(dk, padded(r.got.dk, p.Hkv, p.N, poison));
  EXPECT_EQ(dv, padded(r.got.dv, p.Hkv, p.N, poison));
}

/// The ahead-of-time form (`tilefuse compile --emit reference --backward`): an object for the
/// baseline CPU, linked into a shared library by the system's C compiler and called through its
/// C entry point, gives what the JIT gives.
TEST(DerivedBackwardObject, SharedLibraryMatchesTheJit) {
  auto cc = llvm::sys::findProgramByName("cc");
  if (!cc)
    GTEST_SKIP() << "no C compiler (cc) to link the shared library";
  Variant variant = variantNamed("softcap");
  ReferenceOptions options;
  options.headDim = kHeadDim;
  options.params = variant.params;
  std::string name;
  auto object = compileBackwardReferenceObject(variant.text, variant.fileName, options, &name);
  ASSERT_TRUE(static_cast<bool>(object)) << llvm::toString(object.takeError());
  EXPECT_EQ(name, "softcap");

  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tilefuse-backward", dir));
  std::string libraryPath =
      test::linkSharedLibrary(*cc, dir.str().str(), "softcap.backward", *object);
  ASSERT_FALSE(libraryPath.empty());
  std::string error;
  auto library = llvm::sys::DynamicLibrary::getPermanentLibrary(libraryPath.c_str(), &error);
  ASSERT_TRUE(library.isValid()) << error;
  using D4 = reference::MemRefDescriptor<4>;
  using D3 = reference::MemRefDescriptor<3>;
  using Entry = void (*)(D4 *, D4 *, D4 *, D4 *, D4 *, D3 *, D4 *, D4 *, D4 *);
  auto entry = reinterpret_cast<Entry>(
      library.getAddressOfSymbol("_mlir_ciface_softcap_backward_reference"));
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(library.getAddressOfSymbol("_mlir_ciface_softcap_reference"), nullptr);

  Compiled c = compile(variant);
  ASSERT_TRUE(c.forward && c.backward);
  GradientRun r;
  r.p = problemFor(c, 21, 34);
  runBackward(c, r, 8);
  const reference::Problem &p = r.p;
  auto describe4 = [](std::vector<double> &data, std::array<int64_t, 4> sizes) {
    D4 d{data.data(), data.data(), 0, {}, {}};
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      d.sizes[i] = sizes[i];
      d.strides[i] = stride;
      stride *= sizes[i];
    }
    return d;
  };
  Gradients aot;
  aot.dq.assign(r.q.size(), NAN);
  aot.dk.assign(r.k.size(), NAN);
  aot.dv.assign(r.v.size(), NAN);
  D4 q = describe4(r.q, qShape(p)), k = describe4(r.k, kvShape(p)), v = describe4(r.v, kvShape(p)),
     o = describe4(r.o, qShape(p)), dO = describe4(r.dO, qShape(p)),
     dq = describe4(aot.dq, qShape(p)), dk = describe4(aot.dk, kvShape(p)),
     dv = describe4(aot.dv, kvShape(p));
  D3 lse{r.lse.data(), r.lse.data(), 0, {p.B, p.H, p.M}, {p.H * p.M, p.M, 1}};
  entry(&q, &k, &v, &o, &dO, &lse, &dq, &dk, &dv);
  EXPECT_LE(maxError(aot.dq, r.got.dq), 1e-13);
  EXPECT_LE(maxError(aot.dk, r.got.dk), 1e-13);
  EXPECT_LE(maxError(aot.dv, r.got.dv), 1e-13);
  llvm::sys::fs::remove_directories(dir);
}

/// An op of the score region without a derivative rule: the backward is refused with an error
/// at that op's file:line:col.
TEST(DerivedBackwardRows, UndifferentiableScoreModIsALocatedError) {
  std::string text = kernels::find("softcap")->text;
  std::string tanh = "%th = math.tanh %x : f32";
  size_t at = text.find(tanh);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, tanh.size(), "%th = arith.remf %x, %cap : f32");
  auto backward = BackwardReferenceKernel::compile(text, "remainder.mlir", ReferenceOptions());
  ASSERT_FALSE(static_cast<bool>(backward));
  std::string message = llvm::toString(backward.takeError());
  EXPECT_NE(message.find("remainder.mlir:20:11"), std::string::npos) << message;
  EXPECT_NE(message.find("'arith.remf' op cannot be differentiated"), std::string::npos)
      << message;
}

/// Gradient views must have the shapes of what they are gradients of.
TEST(DerivedBackwardRows, GradientShapesAreChecked) {
  Compiled c = compile(variantNamed("attention"));
  ASSERT_TRUE(c.forward && c.backward);
  reference::Problem p{1, 2, 2, 5, 7, kHeadDim};
  std::vector<double> q(p.B * p.H * p.M * p.D, 1.0), kv(p.B * p.Hkv * p.N * p.D, 1.0),
      lse(p.B * p.H * p.M, 0.0), wrong(p.B * p.Hkv * (p.N + 1) * p.D);
  llvm::Error e = c.backward->run(
      HostView::contiguous(q.data(), qShape(p)), HostView::contiguous(kv.data(), kvShape(p)),
      HostView::contiguous(kv.data(), kvShape(p)), HostView::contiguous(q.data(), qShape(p)),
      HostView::contiguous(q.data(), qShape(p)),
      HostView::contiguous(lse.data(), {p.B, p.H, p.M, 0}, 3),
      HostView::contiguous(q.data(), qShape(p)), HostView::contiguous(kv.data(), kvShape(p)),
      HostView::contiguous(wrong.data(), {p.B, p.Hkv, p.N + 1, p.D}));
  ASSERT_TRUE(static_cast<bool>(e));
  std::string message = llvm::toString(std::move(e));
  EXPECT_NE(message.find("dV dimension 2 differs"), std::string::npos) << message;
}

} // namespace
