#include "TestUtil.h"

#include "tilefuse/kernels/Registry.h"
#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace tilefuse;
using namespace tilefuse::runtime;

std::unique_ptr<CpuKernel> test::compileBundled(const std::string &name, const std::string &dtype,
                                                int64_t br, int64_t bc, bool instrument) {
  const kernels::KernelSource *src = kernels::find(name);
  EXPECT_NE(src, nullptr) << name;
  if (!src)
    return nullptr;
  CpuCompileOptions opts;
  opts.blockM = br;
  opts.blockN = bc;
  opts.instrument = instrument;
  opts.elementType = dtype;
  auto k = CpuKernel::compile(src->text, src->fileName, opts);
  if (!k) {
    ADD_FAILURE() << llvm::toString(k.takeError());
    return nullptr;
  }
  return std::move(*k);
}

test::RunResult test::runAgainstReference(const CpuKernel &kernel, const std::string &name,
                                          reference::Problem p, unsigned seed) {
  auto variant = reference::variantFor(name, p.H);
  EXPECT_TRUE(variant.has_value()) << name;
  if (!variant)
    return RunResult{};
  return runAgainstReference(kernel, *variant, p, seed);
}

test::RunResult test::runAgainstReference(const CpuKernel &kernel,
                                          const reference::Variant &variant,
                                          reference::Problem p, unsigned seed) {
  RunResult r;
  ElementType et = kernel.elementType();
  size_t es = reference::elementSize(et);
  std::mt19937 rng(seed);
  auto draw = [&](size_t n) { return reference::randomNormal(n, rng); };
  size_t nq = p.B * p.H * p.M * p.D, nk = p.B * p.Hkv * p.N * p.D, nl = p.B * p.H * p.M;
  std::vector<char> qb(nq * es), kb(nk * es), vb(nk * es);
  // Poison: NaN in every storage type (0xffff is a NaN in bf16 and f16; all-ones f32 too).
  std::vector<char> ob(nq * es, static_cast<char>(0xff));
  std::vector<float> lseb(nl, NAN);
  auto q = reference::storeAs(et, draw(nq), qb.data());
  auto k = reference::storeAs(et, draw(nk), kb.data());
  auto v = reference::storeAs(et, draw(nk), vb.data());
  auto qv = HostView::contiguous(qb.data(), {p.B, p.H, p.M, p.D});
  auto kv = HostView::contiguous(kb.data(), {p.B, p.Hkv, p.N, p.D});
  auto vv = HostView::contiguous(vb.data(), {p.B, p.Hkv, p.N, p.D});
  auto ov = HostView::contiguous(ob.data(), {p.B, p.H, p.M, p.D});
  auto lv = HostView::contiguous(lseb.data(), {p.B, p.H, p.M, 0}, 3);
  if (llvm::Error e = kernel.run(qv, kv, vv, ov, lv, &r.counts)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    r.allWritten = false;
    return r;
  }
  std::vector<double> refO, refL;
  reference::attention(p, variant, q, k, v, refO, refL);
  auto o = reference::loadAs(et, ob.data(), nq);
  double num = 0, den = 0;
  for (size_t i = 0; i < nq; ++i) {
    if (!std::isfinite(o[i]))
      r.allWritten = false;
    num += (o[i] - refO[i]) * (o[i] - refO[i]);
    den += refO[i] * refO[i];
  }
  r.outError = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  num = den = 0;
  for (size_t i = 0; i < nl; ++i) {
    if (std::isnan(lseb[i]))
      r.allWritten = false;
    if (std::isinf(refL[i])) {
      if (lseb[i] != refL[i])
        r.lseInfMatches = false;
      continue;
    }
    num += (lseb[i] - refL[i]) * (lseb[i] - refL[i]);
    den += refL[i] * refL[i];
  }
  r.lseError = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return r;
}
