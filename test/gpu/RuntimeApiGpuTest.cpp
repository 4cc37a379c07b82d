//===- RuntimeApiGpuTest.cpp - the embeddable runtime on the GPU ----------===//
//
// tilefuse-runtime-gpu-tests: the in-process path a user of libtilefuse.so takes. Kernels are
// compiled from DSL in process through tilefuse::Runtime (bundled ones by name, and test-only
// variants as DSL text), launched with Kernel::launch on device memory and a stream of the CUDA
// runtime's helpers, and compared with tilefuse::referenceAttention, the float64 reference the
// runtime derives from the same DSL text. Plus the disk cache shared by two processes: the second
// gets every kernel from disk and compiles nothing.
//
// It links libtilefuse.so like an application (the static build's library exports only its C
// and C++ APIs), and the GPU-side runtime (TilefuseCudaRuntime: device buffers, streams) beside
// it. Where there is no driver or no GPU the GPU tests print "skipped: no GPU (<reason>)"; the
// shared-cache test still runs (it compiles for sm_90a then).
//
// Bounds as in GpuAttentionTest.cpp: O to a relative L2 error of 1e-2 (bf16) or 3e-3 (f16), LSE
// to 1e-3 on its finite entries, -inf exactly where the reference has it, no NaN (outputs are
// poisoned with NaN before every launch).
//
//===----------------------------------------------------------------------===//
#include "RuntimeApiGpuTestVariants.h"
#include "tilefuse/runtime/Reference.h"
#include "tilefuse/runtime/Tilefuse.h"
#include "tilefuse/runtime/cuda/Driver.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include "GpuTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace tilefuse;
using namespace tilefuse::runtime::cuda;
using tilefuse::runtime::ElementType;
namespace ref = tilefuse::runtime::reference;

namespace {

using tilefuse::test::gpuStatus;
using tilefuse::test::skipMessage;

//===----------------------------------------------------------------------===//
// One kernel on the GPU against its float64 reference
//===----------------------------------------------------------------------===//

/// Tensor layouts, as the 14 element strides of Kernel::launch (q_b, q_h, q_m, k_b, k_h, k_n,
/// v_b, v_h, v_n, o_b, o_h, o_m, lse_b, lse_h). Both are dense, so a tensor's storage holds
/// exactly its B*H*M*D (or B*H*M) elements.
enum class Layout {
  BHMD, ///< contiguous (launched with strides == nullptr)
  BMHD, ///< heads interleaved, as PyTorch's (B, S, H, D); LSE contiguous
};

std::vector<int64_t> stridesOf(Layout layout, const AttentionShape &s) {
  if (layout == Layout::BHMD)
    return {s.H * s.M * s.D,   s.M * s.D, s.D, s.Hkv * s.N * s.D, s.N * s.D, s.D,
            s.Hkv * s.N * s.D, s.N * s.D, s.D, s.H * s.M * s.D,   s.M * s.D, s.D,
            s.H * s.M,         s.M};
  return {s.M * s.H * s.D,   s.D, s.H * s.D,   s.N * s.Hkv * s.D, s.D, s.Hkv * s.D,
          s.N * s.Hkv * s.D, s.D, s.Hkv * s.D, s.M * s.H * s.D,   s.D, s.H * s.D,
          s.H * s.M,         s.M};
}

double relativeL2(double errorSquares, double referenceSquares) {
  return referenceSquares == 0 ? std::sqrt(errorSquares)
                               : std::sqrt(errorSquares / referenceSquares);
}

/// Uploads `bytes` of `host` into a new device buffer.
llvm::Expected<DeviceBuffer> upload(const std::vector<char> &host) {
  auto buffer = DeviceBuffer::allocate(host.size());
  if (!buffer)
    return buffer.takeError();
  if (llvm::Error e = buffer->upload(host.data(), host.size()))
    return std::move(e);
  return std::move(*buffer);
}

/// A varlen or paged kernel's launch form (KernelSpec::varlen, pagedKv). In BMHD storage, B
/// sequences of M query (N key) rows each are a packed batch already (THD: [B·M, H, D], the
/// sequences at offsets b·M), so the padded float64 reference reads the same memory; LSE is then
/// [H, B·M]. Paged, sequence b's keys are its N rows in pages b·perSequence ... in order: [B,
/// perSequence·pageSize, Hkv, D] for the reference, a page stride for the launch.
struct Form {
  bool varlen = false;
  int64_t pageSize = 0; ///< 0: contiguous keys
};

/// Launches `kernel` (got for `spec`) on random inputs of `shape` stored in `layout`, and
/// compares O and LSE with the float64 reference of `spec` on the same values and layout.
void launchAndCheck(const KernelSpec &spec, const Kernel &kernel, const AttentionShape &shape,
                    Layout layout, Form form = {}) {
  SCOPED_TRACE(kernel.name() + " " + kernel.dtype() + " D=" + std::to_string(shape.D) + " " +
               kernel.arch() + (layout == Layout::BMHD ? " bmhd" : " bhmd") +
               (form.varlen ? " varlen" : "") +
               (form.pageSize ? " pages of " + std::to_string(form.pageSize) : ""));
  ASSERT_TRUE(kernel.dtype() == "bf16" || kernel.dtype() == "f16") << kernel.dtype();
  ASSERT_TRUE(layout == Layout::BMHD || (!form.varlen && !form.pageSize));
  ElementType type = kernel.dtype() == "bf16" ? ElementType::BF16 : ElementType::F16;
  size_t bytes = ref::elementSize(type);
  int64_t perSequence = form.pageSize ? (shape.N + form.pageSize - 1) / form.pageSize : 0;
  int64_t keyRows = form.pageSize ? perSequence * form.pageSize : shape.N; // per sequence
  size_t nq = shape.B * shape.H * shape.M * shape.D, nk = shape.B * shape.Hkv * keyRows * shape.D,
         nl = shape.B * shape.H * shape.M;

  std::mt19937 rng(1234);
  std::vector<char> q(nq * bytes), k(nk * bytes), v(nk * bytes);
  std::vector<double> q64 = ref::storeAs(type, ref::randomNormal(nq, rng), q.data());
  std::vector<double> k64 = ref::storeAs(type, ref::randomNormal(nk, rng), k.data());
  std::vector<double> v64 = ref::storeAs(type, ref::randomNormal(nk, rng), v.data());
  std::vector<int64_t> strides = stridesOf(layout, shape);
  if (form.pageSize)
    strides[3] = strides[6] = keyRows * shape.Hkv * shape.D; // a sequence's pages
  if (form.varlen) { // LSE [H, B·M]
    strides[12] = shape.M;
    strides[13] = shape.B * shape.M;
  }

  std::vector<double> o64(nq), lse64(nl);
  Status status = referenceAttention(spec, q64.data(), k64.data(), v64.data(), o64.data(),
                                     lse64.data(), shape, strides.data());
  ASSERT_TRUE(status.ok()) << "referenceAttention: " << status.message();

  auto dq = upload(q), dk = upload(k), dv = upload(v);
  TF_ASSERT_OK(dq.takeError());
  TF_ASSERT_OK(dk.takeError());
  TF_ASSERT_OK(dv.takeError());
  auto dout = DeviceBuffer::allocate(nq * bytes);
  TF_ASSERT_OK(dout.takeError());
  auto dlse = DeviceBuffer::allocate(nl * sizeof(float));
  TF_ASSERT_OK(dlse.takeError());
  TF_ASSERT_OK(dout->fill(0xFF)); // NaN: an element the kernel does not write shows
  TF_ASSERT_OK(dlse->fill(0xFF));
  auto stream = Stream::create();
  TF_ASSERT_OK(stream.takeError());

  auto pointer = [](const DeviceBuffer &b) { return reinterpret_cast<void *>(b.address()); };
  // Paged: pages in order, every sequence N rows; the launch takes a page's stride. Varlen: the
  // sequences at offsets b·M (b·N); paged, no key offsets.
  std::vector<int64_t> launchStrides = strides;
  std::vector<int32_t> table, lengths(shape.B, int32_t(shape.N)), cuQ, cuK;
  for (int64_t i = 0; i < shape.B * perSequence; ++i)
    table.push_back(int32_t(i));
  for (int64_t b = 0; b <= shape.B; ++b) {
    cuQ.push_back(int32_t(b * shape.M));
    cuK.push_back(int32_t(b * shape.N));
  }
  auto upload32 = [](const std::vector<int32_t> &host) {
    return upload(std::vector<char>(reinterpret_cast<const char *>(host.data()),
                                    reinterpret_cast<const char *>(host.data() + host.size())));
  };
  auto dtable = upload32(table.empty() ? std::vector<int32_t>{0} : table),
       dlengths = upload32(lengths), dcuQ = upload32(cuQ), dcuK = upload32(cuK);
  TF_ASSERT_OK(dtable.takeError());
  TF_ASSERT_OK(dlengths.takeError());
  TF_ASSERT_OK(dcuQ.takeError());
  TF_ASSERT_OK(dcuK.takeError());
  PagedKV paged = PagedKV::of(static_cast<const int32_t *>(pointer(*dtable)), perSequence,
                              perSequence, static_cast<const int32_t *>(pointer(*dlengths)),
                              form.pageSize, shape.B * perSequence);
  if (form.pageSize)
    launchStrides[3] = launchStrides[6] = form.pageSize * shape.Hkv * shape.D;
  Varlen varlen = Varlen::of(
      static_cast<const int32_t *>(pointer(*dcuQ)),
      form.pageSize ? nullptr : static_cast<const int32_t *>(pointer(*dcuK)), shape.B * shape.M,
      shape.B * shape.N);
  status = kernel.launch(stream->handle(), pointer(*dq), pointer(*dk), pointer(*dv),
                         pointer(*dout), static_cast<float *>(pointer(*dlse)), shape,
                         layout == Layout::BHMD ? nullptr : launchStrides.data(), 0,
                         form.pageSize ? &paged : nullptr, form.varlen ? &varlen : nullptr);
  ASSERT_TRUE(status.ok()) << "launch: " << status.message();
  TF_ASSERT_OK(stream->synchronize());

  std::vector<char> o(nq * bytes);
  std::vector<float> lse(nl);
  TF_ASSERT_OK(dout->download(o.data(), o.size()));
  TF_ASSERT_OK(dlse->download(lse.data(), lse.size() * sizeof(float)));
  std::vector<double> got = ref::loadAs(type, o.data(), nq);

  int64_t outNaN = 0, lseNaN = 0, lseMismatch = 0;
  double num = 0, den = 0;
  for (size_t i = 0; i < nq; ++i) {
    if (std::isnan(got[i])) {
      ++outNaN;
      continue;
    }
    double d = got[i] - o64[i];
    num += d * d;
    den += o64[i] * o64[i];
  }
  double outError = relativeL2(num, den);
  num = den = 0;
  for (size_t i = 0; i < nl; ++i) {
    if (std::isnan(lse[i])) {
      ++lseNaN;
      continue;
    }
    if (std::isinf(lse[i]) || std::isinf(lse64[i])) {
      lseMismatch += !(std::isinf(lse[i]) && lse[i] < 0 && std::isinf(lse64[i]) && lse64[i] < 0);
      continue;
    }
    double d = lse[i] - lse64[i];
    num += d * d;
    den += lse64[i] * lse64[i];
  }
  double lseError = relativeL2(num, den);
  double outBound = type == ElementType::BF16 ? 1e-2 : 3e-3;
  std::printf("  %-18s %-4s D=%-3lld %-6s B=%lld H=%lld Hkv=%lld M=%lld N=%lld %s (%s): "
              "O %.2e LSE %.2e\n",
              kernel.name().c_str(), kernel.dtype().c_str(), (long long)shape.D,
              kernel.arch().c_str(), (long long)shape.B, (long long)shape.H, (long long)shape.Hkv,
              (long long)shape.M, (long long)shape.N, layout == Layout::BMHD ? "bmhd" : "bhmd",
              kernel.origin().c_str(), outError, lseError);
  EXPECT_EQ(outNaN, 0) << "NaN in O";
  EXPECT_EQ(lseNaN, 0) << "NaN in LSE";
  EXPECT_EQ(lseMismatch, 0) << "-inf in LSE where the reference is finite, or the other way";
  EXPECT_LE(outError, outBound) << "O against float64";
  EXPECT_LE(lseError, 1e-3) << "LSE against float64";
}

/// Gets `spec`'s kernel from `runtime` and checks it on `shape` in both layouts.
void compileLaunchAndCheck(Runtime &runtime, const KernelSpec &spec, AttentionShape shape) {
  std::shared_ptr<const Kernel> kernel;
  Status status = runtime.getKernel(spec, kernel);
  ASSERT_TRUE(status.ok()) << "getKernel: " << status.message();
  shape.D = kernel->headDim();
  launchAndCheck(spec, *kernel, shape, Layout::BHMD);
  launchAndCheck(spec, *kernel, shape, Layout::BMHD);
}

/// A runtime with no disk cache: every kernel of these tests compiles in this process.
RuntimeOptions inProcessOnly() {
  RuntimeOptions options;
  options.cacheDirectory.clear();
  return options;
}

KernelSpec bundled(const char *name, const char *dtype = "", int64_t headDim = 0) {
  KernelSpec spec;
  spec.kernel = name;
  spec.dtype = dtype;
  spec.headDim = headDim;
  return spec;
}

KernelSpec fromText(const char *text, const char *sourceName) {
  KernelSpec spec;
  spec.source = text;
  spec.sourceName = sourceName;
  return spec;
}

// Lengths that are not multiples of any block size, keys longer than queries.
const AttentionShape kShape{2, 4, 4, 259, 517, 64};
// gqa and mqa fix H = 8 and Hkv = 2 or 1 in their signatures.
const AttentionShape kGroupedShape{2, 8, 2, 259, 517, 64};

} // namespace

//===----------------------------------------------------------------------===//
// Bundled kernels and DSL text, compiled in process and launched
//===----------------------------------------------------------------------===//

TEST(RuntimeApiGpu, BundledKernels) {
  TF_REQUIRE_GPU();
  Runtime runtime(inProcessOnly());
  for (const char *name : {"attention", "causal", "sliding_window", "alibi", "softcap",
                           "prefix_lm"})
    compileLaunchAndCheck(runtime, bundled(name), kShape);
  compileLaunchAndCheck(runtime, bundled("gqa"), kGroupedShape);
  AttentionShape mqa = kGroupedShape;
  mqa.Hkv = 1;
  compileLaunchAndCheck(runtime, bundled("mqa"), mqa);
  EXPECT_EQ(runtime.stats().compiles, 8u);
}

TEST(RuntimeApiGpu, SpecializedAndConfigured) {
  TF_REQUIRE_GPU();
  Runtime runtime(inProcessOnly());
  compileLaunchAndCheck(runtime, bundled("causal", "f16", 128), kShape);
  compileLaunchAndCheck(runtime, bundled("attention", "bf16", 128), kShape);
  KernelSpec blocks = bundled("causal");
  blocks.blockM = 128;
  blocks.blockN = 64;
  compileLaunchAndCheck(runtime, blocks, kShape);
  KernelSpec window = bundled("sliding_window");
  window.params = {"window_left=64", "window_right=0"};
  compileLaunchAndCheck(runtime, window, kShape);
  // Ampere's code path (mma.sync), JIT-compiled by the driver for this GPU.
  KernelSpec ampere = bundled("causal");
  ampere.arch = "sm_80";
  compileLaunchAndCheck(runtime, ampere, kShape);
}

TEST(RuntimeApiGpu, SplitKVKernels) {
  TF_REQUIRE_GPU();
  Runtime runtime(inProcessOnly());
  // Decode (one query row, long keys: the launcher splits them) and a prefill shape, through
  // the API's split-KV spec, grouped heads included; each launch chooses its split count.
  for (const char *name : {"attention", "causal", "sliding_window"}) {
    KernelSpec split = bundled(name);
    split.splitKv = true;
    compileLaunchAndCheck(runtime, split, AttentionShape{2, 4, 4, 1, 20000, 64});
    compileLaunchAndCheck(runtime, split, kShape);
  }
  KernelSpec gqa = bundled("gqa");
  gqa.splitKv = true;
  compileLaunchAndCheck(runtime, gqa, AttentionShape{1, 8, 2, 1, 30000, 64});
  KernelSpec wide = bundled("attention", "bf16", 128);
  wide.splitKv = true;
  compileLaunchAndCheck(runtime, wide, AttentionShape{1, 8, 8, 3, 40000, 128});
}

// Varlen, paged and both (chunked prefill), compiled in process from KernelSpec::varlen and
// pagedKv, launched through Kernel::launch's Varlen and PagedKV.
TEST(RuntimeApiGpu, VarlenAndPagedKernels) {
  TF_REQUIRE_GPU();
  Runtime runtime(inProcessOnly());
  struct Case {
    const char *kernel;
    bool varlen;
    int64_t pageSize;
    AttentionShape shape;
  };
  for (const Case &c : {Case{"causal", true, 0, kShape}, Case{"sliding_window", true, 0, kShape},
                        Case{"causal", false, 16, kShape}, Case{"causal", true, 16, kShape},
                        Case{"gqa", true, 7, kGroupedShape},
                        Case{"alibi", true, 32, {3, 4, 4, 100, 1000, 64}}}) {
    KernelSpec spec = bundled(c.kernel);
    spec.varlen = c.varlen;
    spec.pagedKv = c.pageSize > 0;
    std::shared_ptr<const Kernel> kernel;
    Status status = runtime.getKernel(spec, kernel);
    ASSERT_TRUE(status.ok()) << c.kernel << ": " << status.message();
    AttentionShape shape = c.shape;
    shape.D = kernel->headDim();
    launchAndCheck(spec, *kernel, shape, Layout::BMHD, Form{c.varlen, c.pageSize});
  }
}

TEST(RuntimeApiGpu, KernelsWrittenAsDslText) {
  TF_REQUIRE_GPU();
  Runtime runtime(inProcessOnly());
  compileLaunchAndCheck(runtime, fromText(kChunkedLocalDsl, "chunked_local.mlir"), kShape);
  KernelSpec chunk = fromText(kChunkedLocalDsl, "chunked_local.mlir");
  chunk.params = {"chunk=100"};
  compileLaunchAndCheck(runtime, chunk, kShape);
  compileLaunchAndCheck(runtime, fromText(kSoftcapHeadBiasDsl, "softcap_head_bias.mlir"), kShape);
  KernelSpec f16 = fromText(kSoftcapHeadBiasDsl, "softcap_head_bias.mlir");
  f16.dtype = "f16";
  f16.headDim = 128;
  compileLaunchAndCheck(runtime, f16, kShape);
}

// The GPU backward (Runtime::getBackward) after the GPU forward, against the CPU backend's
// backward (HostAttention, itself checked against float64 in the unit tests) on the same inputs
// and the GPU's O and LSE: every gradient within bf16's rounding, none unwritten; in the BMHD
// layout too (the public 26 strides), and deterministic dQ bitwise the same twice.
TEST(RuntimeApiGpu, BackwardAgainstTheCpuBackend) {
  TF_REQUIRE_GPU();
  Runtime runtime(inProcessOnly());
  for (const char *name : {"causal", "softcap", "gqa"})
    for (Layout layout : {Layout::BHMD, Layout::BMHD})
      for (bool deterministic : {false, true}) {
        KernelSpec spec = bundled(name);
        spec.deterministic = deterministic;
        AttentionShape shape = std::string(name) == "gqa" ? kGroupedShape : kShape;
        SCOPED_TRACE(std::string(name) + (layout == Layout::BMHD ? " bmhd" : " bhmd") +
                     (deterministic ? " deterministic" : ""));
        std::shared_ptr<const Kernel> forward;
        std::shared_ptr<const Backward> backward;
        std::shared_ptr<const HostAttention> host;
        ASSERT_TRUE(runtime.getKernel(spec, forward).ok());
        Status got = runtime.getBackward(spec, backward);
        ASSERT_TRUE(got.ok()) << got.message();
        ASSERT_TRUE(runtime.getHostAttention(spec, host).ok());
        shape.D = backward->headDim();
        ElementType type = ElementType::BF16;
        size_t nq = shape.B * shape.H * shape.M * shape.D,
               nk = shape.B * shape.Hkv * shape.N * shape.D, nl = shape.B * shape.H * shape.M;
        std::mt19937 rng(99);
        std::vector<char> q(nq * 2), k(nk * 2), v(nk * 2), dO(nq * 2);
        for (auto *x : {&q, &k, &v, &dO})
          ref::storeAs(type, ref::randomNormal(x->size() / 2, rng), x->data());
        std::vector<int64_t> forwardStrides = stridesOf(layout, shape);
        // The public order: the forward's 14, then dO and dQ like q, dK and dV like k.
        std::vector<int64_t> strides = forwardStrides;
        for (int t : {0, 0, 1, 1})
          strides.insert(strides.end(), forwardStrides.begin() + 3 * t,
                         forwardStrides.begin() + 3 * t + 3);
        auto dq = upload(q), dk = upload(k), dv = upload(v), ddO = upload(dO);
        TF_ASSERT_OK(dq.takeError());
        TF_ASSERT_OK(dk.takeError());
        TF_ASSERT_OK(dv.takeError());
        TF_ASSERT_OK(ddO.takeError());
        std::vector<DeviceBuffer> outs;
        for (size_t bytes : {nq * 2, nl * 4, nq * 2, nk * 2, nk * 2}) {
          auto b = DeviceBuffer::allocate(bytes);
          TF_ASSERT_OK(b.takeError());
          TF_ASSERT_OK(b->fill(0xFF));
          outs.push_back(std::move(*b));
        }
        auto at = [](const DeviceBuffer &b) { return reinterpret_cast<void *>(b.address()); };
        auto stream = Stream::create();
        TF_ASSERT_OK(stream.takeError());
        const int64_t *launchStrides = layout == Layout::BHMD ? nullptr : strides.data();
        Status s = forward->launch(stream->handle(), at(*dq), at(*dk), at(*dv), at(outs[0]),
                                   static_cast<float *>(at(outs[1])), shape,
                                   layout == Layout::BHMD ? nullptr : forwardStrides.data());
        ASSERT_TRUE(s.ok()) << s.message();
        std::vector<std::vector<char>> runs;
        for (int run = 0; run < (deterministic ? 2 : 1); ++run) {
          s = backward->launch(stream->handle(), at(*dq), at(*dk), at(*dv), at(outs[0]),
                               at(*ddO), static_cast<const float *>(at(outs[1])), at(outs[2]),
                               at(outs[3]), at(outs[4]), shape, launchStrides);
          ASSERT_TRUE(s.ok()) << s.message();
          TF_ASSERT_OK(stream->synchronize());
          std::vector<char> all(nq * 2 + 2 * nk * 2);
          TF_ASSERT_OK(outs[2].download(all.data(), nq * 2));
          TF_ASSERT_OK(outs[3].download(all.data() + nq * 2, nk * 2));
          TF_ASSERT_OK(outs[4].download(all.data() + nq * 2 + nk * 2, nk * 2));
          runs.push_back(std::move(all));
        }
        if (deterministic) {
          EXPECT_EQ(runs[0], runs[1]) << "deterministic dQ, dK, dV differ between two runs";
        }
        std::vector<char> o(nq * 2);
        std::vector<float> lse(nl);
        TF_ASSERT_OK(outs[0].download(o.data(), o.size()));
        TF_ASSERT_OK(outs[1].download(lse.data(), nl * 4));
        std::vector<char> want(runs[0].size());
        s = host->backward(q.data(), k.data(), v.data(), o.data(), dO.data(), lse.data(),
                           want.data(), want.data() + nq * 2, want.data() + nq * 2 + nk * 2,
                           shape, launchStrides);
        ASSERT_TRUE(s.ok()) << s.message();
        std::vector<double> g = ref::loadAs(type, runs[0].data(), runs[0].size() / 2),
                            w = ref::loadAs(type, want.data(), want.size() / 2);
        double num = 0, den = 0;
        int64_t nan = 0;
        for (size_t i = 0; i < g.size(); ++i) {
          if (std::isnan(g[i])) {
            ++nan;
            continue;
          }
          num += (g[i] - w[i]) * (g[i] - w[i]);
          den += w[i] * w[i];
        }
        std::printf("  backward %-8s %s%s: dQ, dK, dV %.2e against the CPU backend\n", name,
                    layout == Layout::BMHD ? "bmhd" : "bhmd",
                    deterministic ? " deterministic" : "", relativeL2(num, den));
        EXPECT_EQ(nan, 0) << "NaN (unwritten) gradients";
        EXPECT_LE(relativeL2(num, den), 1e-2);
      }
}

TEST(RuntimeApiGpu, RepeatedGetsAndLaunchesReuseTheKernel) {
  TF_REQUIRE_GPU();
  Runtime runtime(inProcessOnly());
  std::shared_ptr<const Kernel> first, second;
  ASSERT_TRUE(runtime.getKernel(bundled("causal"), first).ok());
  ASSERT_TRUE(runtime.getKernel(bundled("causal"), second).ok());
  EXPECT_EQ(first->origin(), "compiled");
  EXPECT_EQ(second->origin(), "memory");
  for (int i = 0; i < 3; ++i)
    launchAndCheck(bundled("causal"), *second, kShape, Layout::BHMD);
  EXPECT_EQ(runtime.stats().compiles, 1u);
}

//===----------------------------------------------------------------------===//
// One disk cache, two processes
//===----------------------------------------------------------------------===//

namespace {

/// What the cache child gets: a bundled kernel and one written as DSL text.
std::vector<KernelSpec> sharedCacheSpecs() {
  std::vector<KernelSpec> specs = {bundled("causal"),
                                   fromText(kChunkedLocalDsl, "chunked_local.mlir")};
  if (!gpuStatus().usable)
    for (KernelSpec &spec : specs)
      spec.arch = "sm_90a"; // with a GPU: empty, the GPU's own
  return specs;
}

std::string readFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

} // namespace

/// The child's side: runs only when RuntimeApiSharedCache re-runs this binary with
/// TILEFUSE_TEST_CACHE_CHILD=1. Gets the kernels through the process's global runtime (its disk
/// cache from TILEFUSE_CACHE_DIR), launches and checks them where there is a GPU, and prints
/// where each came from and what the runtime did.
TEST(RuntimeApiCacheChild, GetKernels) {
  if (!getenv("TILEFUSE_TEST_CACHE_CHILD"))
    GTEST_SKIP() << "runs as a child of RuntimeApiSharedCache.SecondProcessCompilesNothing";
  Runtime &runtime = Runtime::global();
  for (const KernelSpec &spec : sharedCacheSpecs()) {
    std::shared_ptr<const Kernel> kernel;
    Status status = runtime.getKernel(spec, kernel);
    ASSERT_TRUE(status.ok()) << status.message();
    std::printf("child-kernel %s origin=%s\n", kernel->name().c_str(), kernel->origin().c_str());
    if (gpuStatus().usable)
      launchAndCheck(spec, *kernel, kShape, Layout::BHMD);
  }
  RuntimeStats stats = runtime.stats();
  std::printf("child-stats compiles=%llu disk=%llu bad=%llu\n", (unsigned long long)stats.compiles,
              (unsigned long long)stats.diskHits, (unsigned long long)stats.badEntries);
}

TEST(RuntimeApiSharedCache, SecondProcessCompilesNothing) {
  std::string self = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
  ASSERT_FALSE(self.empty());
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tilefuse-runtime-gpu-cache", dir));
  std::string cache = std::string(dir) + "/cache";

  // The children's environment: ours, with the cache directory set and nothing that bypasses it.
  std::vector<std::string> envStrings;
  for (char **e = environ; *e; ++e) {
    llvm::StringRef entry(*e);
    if (!entry.starts_with("TILEFUSE_CACHE_DIR=") &&
        !entry.starts_with("TILEFUSE_ALWAYS_COMPILE=") && !entry.starts_with("TILEFUSE_DUMP_IR="))
      envStrings.push_back(entry.str());
  }
  envStrings.push_back("TILEFUSE_CACHE_DIR=" + cache);
  envStrings.push_back("TILEFUSE_TEST_CACHE_CHILD=1");
  std::vector<llvm::StringRef> env(envStrings.begin(), envStrings.end());

  size_t kernels = sharedCacheSpecs().size();
  auto runChild = [&](int index) {
    std::string log = std::string(dir) + "/child" + std::to_string(index) + ".log";
    std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log),
                                                  llvm::StringRef(log)};
    llvm::StringRef args[] = {self, "--gtest_filter=RuntimeApiCacheChild.*"};
    std::string error;
    int rc = llvm::sys::ExecuteAndWait(self, args, env, redirects, /*SecondsToWait=*/300, 0,
                                       &error);
    std::string output = readFile(log);
    EXPECT_EQ(rc, 0) << "child " << index << ": " << error << "\n" << output;
    return output;
  };
  auto count = [](const std::string &text, const std::string &what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
      ++n;
    return n;
  };

  std::string first = runChild(1);
  EXPECT_EQ(count(first, "origin=compiled"), kernels) << first;
  EXPECT_NE(first.find("child-stats compiles=" + std::to_string(kernels) + " disk=0 bad=0"),
            std::string::npos)
      << first;
  std::string second = runChild(2);
  EXPECT_EQ(count(second, "origin=disk"), kernels) << second;
  EXPECT_NE(second.find("child-stats compiles=0 disk=" + std::to_string(kernels) + " bad=0"),
            std::string::npos)
      << second;
  std::printf("first process:\n%ssecond process:\n%s", first.c_str(), second.c_str());
  llvm::sys::fs::remove_directories(dir);
}
