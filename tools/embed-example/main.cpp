//===- main.cpp - an application embedding tilefuse -----------------------===//
//
// Gets the bundled causal attention kernel from tilefuse's runtime (compiled in process on first
// use, then served from the kernel cache), and, with a GPU, runs it on random inputs through
// device memory of the CUDA runtime and checks it against a float64 attention on the host.
// Without a GPU it reports that and exits 0 after compiling.
//
//   embed-example [B H Hkv M N]      (default 2 8 2 500 500)
//
//===----------------------------------------------------------------------===//
#include <tilefuse/runtime/Tilefuse.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#ifdef EMBED_EXAMPLE_WITH_CUDART
#include <cuda_runtime.h>
#endif

namespace {

uint16_t toBF16(float x) { // round to nearest even
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

float fromBF16(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

#ifdef EMBED_EXAMPLE_WITH_CUDART
#define CUDA_CHECK(call)                                                                       \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));                         \
      return 1;                                                                                \
    }                                                                                          \
  } while (0)

/// Runs the kernel on random inputs and compares O and LSE with a float64 causal attention.
int runOnGpu(const tilefuse::Kernel &kernel, const tilefuse::AttentionShape &s) {
  size_t nq = s.B * s.H * s.M * s.D, nk = s.B * s.Hkv * s.N * s.D, nl = s.B * s.H * s.M;
  std::vector<uint16_t> q(nq), k(nk), v(nk), o(nq);
  std::vector<float> lse(nl);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (auto &x : q)
    x = toBF16(normal(rng));
  for (auto &x : k)
    x = toBF16(normal(rng));
  for (auto &x : v)
    x = toBF16(normal(rng));
  void *dq, *dk, *dv, *dout;
  float *dlse;
  cudaStream_t stream;
  CUDA_CHECK(cudaMalloc(&dq, nq * 2));
  CUDA_CHECK(cudaMalloc(&dk, nk * 2));
  CUDA_CHECK(cudaMalloc(&dv, nk * 2));
  CUDA_CHECK(cudaMalloc(&dout, nq * 2));
  CUDA_CHECK(cudaMalloc(&dlse, nl * 4));
  CUDA_CHECK(cudaMemcpy(dq, q.data(), nq * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dk, k.data(), nk * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dv, v.data(), nk * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaStreamCreate(&stream));

  tilefuse::Status status = kernel.launch(stream, dq, dk, dv, dout, dlse, s);
  if (!status.ok()) {
    std::fprintf(stderr, "launch: %s\n", status.message().c_str());
    return 1;
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaMemcpy(o.data(), dout, nq * 2, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(lse.data(), dlse, nl * 4, cudaMemcpyDeviceToHost));

  // float64 causal attention: query i sees keys 0..i; query head h reads key head h / (H/Hkv).
  double scale = 1.0 / std::sqrt(double(s.D)), oNum = 0, oDen = 0, lNum = 0, lDen = 0;
  std::vector<double> p(s.N);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      int64_t hk = h / (s.H / s.Hkv);
      for (int64_t i = 0; i < s.M; ++i) {
        const uint16_t *qi = &q[((b * s.H + h) * s.M + i) * s.D];
        int64_t last = std::min(i, s.N - 1);
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= last; ++j) {
          const uint16_t *kj = &k[((b * s.Hkv + hk) * s.N + j) * s.D];
          double dot = 0;
          for (int64_t d = 0; d < s.D; ++d)
            dot += double(fromBF16(qi[d])) * fromBF16(kj[d]);
          p[j] = dot * scale;
          mx = std::max(mx, p[j]);
        }
        for (int64_t j = 0; j <= last; ++j)
          sum += p[j] = std::exp(p[j] - mx);
        for (int64_t d = 0; d < s.D; ++d) {
          double want = 0;
          for (int64_t j = 0; j <= last; ++j)
            want += p[j] * fromBF16(v[((b * s.Hkv + hk) * s.N + j) * s.D + d]);
          want /= sum;
          double got = fromBF16(o[((b * s.H + h) * s.M + i) * s.D + d]);
          oNum += (got - want) * (got - want);
          oDen += want * want;
        }
        double wantL = mx + std::log(sum), gotL = lse[(b * s.H + h) * s.M + i];
        lNum += (gotL - wantL) * (gotL - wantL);
        lDen += wantL * wantL;
      }
    }
  double oErr = std::sqrt(oNum / oDen), lErr = std::sqrt(lNum / lDen);
  bool ok = oErr <= 1e-2 && lErr <= 1e-3; // NaN fails too
  std::printf("error        O %.2e (bound 1e-02)   LSE %.2e (bound 1e-03)   vs float64\n", oErr,
              lErr);
  std::printf("result       %s\n", ok ? "PASS" : "FAIL");
  cudaFree(dq);
  cudaFree(dk);
  cudaFree(dv);
  cudaFree(dout);
  cudaFree(dlse);
  cudaStreamDestroy(stream);
  return ok ? 0 : 1;
}
#endif

} // namespace

int main(int argc, char **argv) {
  tilefuse::AttentionShape shape{2, 8, 2, 500, 500, 64};
  if (argc == 6) {
    shape.B = std::atoll(argv[1]);
    shape.H = std::atoll(argv[2]);
    shape.Hkv = std::atoll(argv[3]);
    shape.M = std::atoll(argv[4]);
    shape.N = std::atoll(argv[5]);
  }
  std::string why;
  bool gpu = tilefuse::cudaAvailable(&why);

  tilefuse::KernelSpec spec;
  spec.kernel = "causal";
  if (!gpu)
    spec.arch = "sm_90a"; // with a GPU: empty, the GPU's own
  std::shared_ptr<const tilefuse::Kernel> kernel;
  tilefuse::Status status = tilefuse::Runtime::global().getKernel(spec, kernel);
  if (!status.ok()) {
    std::fprintf(stderr, "tilefuse: %s\n", status.message().c_str());
    return 1;
  }
  std::printf("tilefuse     %s\n", tilefuse::version().c_str());
  std::printf("kernel       %s for %s, %s, head dim %lld, Br=%lld Bc=%lld (%s, %zu bytes of "
              "PTX)\n",
              kernel->name().c_str(), kernel->arch().c_str(), kernel->dtype().c_str(),
              (long long)kernel->headDim(), (long long)kernel->blockM(),
              (long long)kernel->blockN(), kernel->origin().c_str(), kernel->ptx().size());
  std::printf("shape        B=%lld H=%lld Hkv=%lld M=%lld N=%lld D=%lld\n", (long long)shape.B,
              (long long)shape.H, (long long)shape.Hkv, (long long)shape.M, (long long)shape.N,
              (long long)shape.D);
  if (!gpu) {
    std::printf("result       no GPU (%s): the kernel compiled, nothing was launched\n",
                why.c_str());
    return 0;
  }
#ifdef EMBED_EXAMPLE_WITH_CUDART
  return runOnGpu(*kernel, shape);
#else
  std::printf("result       built without the CUDA runtime: nothing was launched\n");
  return 0;
#endif
}
