#include "TestUtil.h"

#include "llvm/Support/MemoryBuffer.h"

#include "tilefuse/kernels/Registry.h"
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace tilefuse;
using namespace tilefuse::runtime;

std::unique_ptr<CpuKernel> test::compileBundled(const std::string &name, const std::string &dtype,
                                                int64_t br, int64_t bc, bool instrument,
                                                const std::string &cpuTarget) {
  const kernels::KernelSource *src = kernels::find(name);
  EXPECT_NE(src, nullptr) << name;
  if (!src)
    return nullptr;
  CpuCompileOptions opts;
  opts.blockM = br;
  opts.blockN = bc;
  opts.instrument = instrument;
  opts.elementType = dtype;
  opts.cpuTarget = cpuTarget;
  auto k = CpuKernel::compile(src->text, src->fileName, opts);
  if (!k) {
    ADD_FAILURE() << llvm::toString(k.takeError());
    return nullptr;
  }
  return std::move(*k);
}

std::unique_ptr<ReferenceKernel> test::compileReference(const std::string &text,
                                                        const std::string &bufferName,
                                                        int64_t headDim,
                                                        const std::vector<std::string> &params) {
  ReferenceOptions options;
  options.headDim = headDim;
  options.params = params;
  auto reference = ReferenceKernel::compile(text, bufferName, options);
  if (!reference) {
    ADD_FAILURE() << llvm::toString(reference.takeError());
    return nullptr;
  }
  return std::move(*reference);
}

std::string test::readTestVariant(const std::string &name) {
  std::string path = std::string(TILEFUSE_TEST_VARIANTS_DIR) + "/" + name + ".mlir";
  auto buffer = llvm::MemoryBuffer::getFile(path);
  EXPECT_TRUE(static_cast<bool>(buffer)) << path;
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

test::VariantSource test::variantSource(const std::string &name, bool testOnly) {
  if (testOnly)
    return {readTestVariant(name), name + ".mlir"};
  const kernels::KernelSource *src = kernels::find(name);
  EXPECT_NE(src, nullptr) << name;
  if (!src)
    return {};
  return {src->text, src->fileName};
}

bool test::variantHeads(const std::string &name, bool testOnly, reference::Problem &p) {
  bool declared = name == "gqa" || name == "mqa";
  p.H = declared ? 8 : 4;
  p.Hkv = name == "gqa" ? 2 : name == "mqa" ? 1 : name == "attention" ? 2 : p.H;
  if (testOnly)
    p.H = p.Hkv = 3;
  if (name == "gqa_head_window") {
    p.H = 6;
    p.Hkv = 2;
  }
  return declared;
}

std::unique_ptr<ReferenceKernel> test::compileBundledReference(const std::string &name) {
  const kernels::KernelSource *src = kernels::find(name);
  EXPECT_NE(src, nullptr) << name;
  if (!src)
    return nullptr;
  return compileReference(src->text, src->fileName);
}

test::RunResult test::runAgainstReference(const CpuKernel &kernel,
                                          const ReferenceKernel &referenceKernel,
                                          reference::Problem p, unsigned seed, int64_t kvSplits,
                                          const Paging *paging, const Packing *packing) {
  RunResult r;
  if (packing) {
    EXPECT_EQ(packing->queryLengths.size(), packing->keyLengths.size());
    p.B = int64_t(packing->queryLengths.size());
    p.M = p.N = 0;
    for (int64_t b = 0; b < p.B; ++b) {
      p.M = std::max(p.M, packing->queryLengths[b]);
      p.N = std::max(p.N, packing->keyLengths[b]);
    }
  }
  if (packing && paging) {
    EXPECT_EQ(packing->keyLengths, paging->lengths) << "paged, the keys are the paged lengths";
  }
  if (paging) {
    EXPECT_EQ(paging->lengths.size(), size_t(p.B));
    p.N = 0;
    for (int64_t length : paging->lengths)
      p.N = std::max(p.N, length);
  }
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
  // Paged: the same keys and values in a cache of pages, NaN where no sequence has a row.
  std::vector<char> kCache, vCache;
  std::vector<int32_t> table, lengths;
  PagedKV paged;
  if (paging) {
    int64_t ps = paging->pageSize;
    int64_t perSequence = std::max<int64_t>(1, (p.N + ps - 1) / ps);
    int64_t pages = p.B * perSequence + 3;
    std::vector<int32_t> order(pages);
    for (int64_t i = 0; i < pages; ++i)
      order[i] = int32_t(i);
    std::shuffle(order.begin(), order.end(), rng);
    size_t rowBytes = p.D * es, cacheBytes = size_t(pages * ps * p.Hkv) * rowBytes;
    kCache.assign(cacheBytes, static_cast<char>(0xff));
    vCache.assign(cacheBytes, static_cast<char>(0xff));
    table.assign(size_t(p.B * perSequence), 0);
    for (int64_t b = 0; b < p.B; ++b) {
      lengths.push_back(int32_t(paging->lengths[b]));
      for (int64_t i = 0; i < perSequence; ++i)
        table[b * perSequence + i] = order[b * perSequence + i];
      for (int64_t n = 0; n < paging->lengths[b]; ++n)
        for (int64_t h = 0; h < p.Hkv; ++h) {
          // [pages, page size, Hkv, D]
          int64_t page = table[b * perSequence + n / ps];
          size_t to = size_t(((page * ps + n % ps) * p.Hkv + h) * p.D) * es;
          size_t from = size_t(((b * p.Hkv + h) * p.N + n) * p.D) * es;
          std::memcpy(&kCache[to], &kb[from], rowBytes);
          std::memcpy(&vCache[to], &vb[from], rowBytes);
        }
    }
    auto cacheView = [&](std::vector<char> &cache) {
      HostView view;
      view.data = cache.data();
      view.sizes = {pages, p.Hkv, ps, p.D};
      view.strides = {ps * p.Hkv * p.D, p.D, p.Hkv * p.D, 1};
      return view;
    };
    kv = cacheView(kCache);
    vv = cacheView(vCache);
    paged.pageTable = table.data();
    paged.pagesPerSequence = perSequence;
    paged.tableStride = perSequence;
    paged.kvLengths = lengths.data();
  }
  // Packed: the same rows one sequence after another (THD; LSE H x tokens), behind `lead` rows
  // and before `tail` rows that no sequence owns.
  const int64_t lead = 2, tail = 3;
  std::vector<int32_t> cuQ, cuK;
  std::vector<char> qPacked, kPacked, vPacked, oPacked;
  std::vector<float> lsePacked;
  int64_t tokensQ = 0;
  size_t rowBytes = p.D * es;
  Varlen varlen;
  if (packing) {
    const std::vector<int64_t> &lq = packing->queryLengths, &lk = packing->keyLengths;
    cuQ = reference::sequenceOffsets(lq, lead);
    cuK = reference::sequenceOffsets(lk, lead);
    tokensQ = cuQ.back() + tail;
    int64_t tokensK = cuK.back() + tail;
    char nan = static_cast<char>(0xff);
    qPacked = reference::packRows(qb.data(), rowBytes, p.H, p.M, lq, cuQ, tokensQ, nan);
    oPacked.assign(size_t(tokensQ * p.H) * rowBytes, nan);
    lsePacked.assign(size_t(p.H * tokensQ), NAN);
    qv = Varlen::tokens(qPacked.data(), p.B, p.H, p.M, p.D);
    ov = Varlen::tokens(oPacked.data(), p.B, p.H, p.M, p.D);
    lv = Varlen::lse(lsePacked.data(), p.B, p.H, p.M, tokensQ);
    // Paged too (chunked prefill), the keys are the caches' above and no key offsets are
    // passed: the kernel must not read them.
    if (!paging) {
      kPacked = reference::packRows(kb.data(), rowBytes, p.Hkv, p.N, lk, cuK, tokensK, nan);
      vPacked = reference::packRows(vb.data(), rowBytes, p.Hkv, p.N, lk, cuK, tokensK, nan);
      kv = Varlen::tokens(kPacked.data(), p.B, p.Hkv, p.N, p.D);
      vv = Varlen::tokens(vPacked.data(), p.B, p.Hkv, p.N, p.D);
    }
    varlen = Varlen::of(cuQ.data(), paging ? nullptr : cuK.data(), tokensQ, tokensK);
  }
  if (llvm::Error e = kernel.run(qv, kv, vv, ov, lv, &r.counts, kvSplits,
                                 paging ? &paged : nullptr, packing ? &varlen : nullptr)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    r.allWritten = false;
    return r;
  }
  // Packed, the reference leaves the rows past a sequence's length as they are: zero, as the
  // kernel's unpacked output has them.
  double unset = packing ? 0.0 : NAN;
  std::vector<double> refO(nq, unset), refL(nl, unset);
  std::vector<int64_t> perSequence = paging ? paging->lengths : std::vector<int64_t>();
  if (packing && !paging)
    perSequence = packing->keyLengths;
  if (llvm::Error e = reference::runPerSequence(
          referenceKernel, p, paging || packing ? &perSequence : nullptr, q.data(), k.data(),
          v.data(), refO.data(), refL.data(), packing ? &packing->queryLengths : nullptr)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    r.allWritten = false;
    return r;
  }
  if (packing) {
    // Back to the padded layout; rows past a sequence's length compare as equal (zero).
    std::vector<char> padded(nq * es, 0);
    reference::unpackRows(oPacked.data(), padded.data(), rowBytes, p.H, p.M,
                          packing->queryLengths, cuQ);
    ob.swap(padded);
    std::fill(lseb.begin(), lseb.end(), 0.0f);
    reference::unpackLseRows(lsePacked.data(), lseb.data(), p.H, p.M, tokensQ,
                             packing->queryLengths, cuQ);
    // The rows no sequence owns keep their poison.
    for (int64_t t : {int64_t(0), lead - 1, tokensQ - tail, tokensQ - 1})
      for (int64_t h = 0; h < p.H; ++h) {
        size_t at = size_t((t * p.H + h) * p.D) * es;
        if (!std::all_of(&oPacked[at], &oPacked[at] + rowBytes,
                         [](char c) { return c == static_cast<char>(0xff); }) ||
            !std::isnan(lsePacked[h * tokensQ + t]))
          ADD_FAILURE() << "row " << t << " of head " << h
                        << " belongs to no sequence, and was written";
      }
  }
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
      ++r.maskedRows;
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

void test::naiveAttention(const reference::Problem &p, const Semantics &semantics,
                          const std::vector<double> &q, const std::vector<double> &k,
                          const std::vector<double> &v, std::vector<double> &out,
                          std::vector<double> &lse) {
  out.assign(p.B * p.H * p.M * p.D, 0.0);
  lse.assign(p.B * p.H * p.M, 0.0);
  std::vector<double> s(p.N);
  int64_t group = p.H / p.Hkv;
  double scale = semantics.scale > 0 ? semantics.scale : 1.0 / std::sqrt(double(p.D));
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h) {
      const double *kb = &k[((b * p.Hkv + h / group) * p.N) * p.D];
      const double *vb = &v[((b * p.Hkv + h / group) * p.N) * p.D];
      for (int64_t i = 0; i < p.M; ++i) {
        const double *qi = &q[((b * p.H + h) * p.M + i) * p.D];
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < p.N; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < p.D; ++d)
            dot += qi[d] * kb[j * p.D + d];
          double x = dot * scale;
          if (semantics.scoreMod)
            x = semantics.scoreMod(x, b, h, i, j);
          if (semantics.mask && !semantics.mask(b, h, i, j))
            x = -std::numeric_limits<double>::infinity();
          s[j] = x;
          m = std::max(m, x);
        }
        double *o = &out[((b * p.H + h) * p.M + i) * p.D];
        double &l = lse[(b * p.H + h) * p.M + i];
        if (m == -std::numeric_limits<double>::infinity()) {
          l = m;
          continue;
        }
        double sum = 0;
        for (int64_t j = 0; j < p.N; ++j) {
          double e = std::exp(s[j] - m);
          sum += e;
          for (int64_t d = 0; d < p.D; ++d)
            o[d] += e * vb[j * p.D + d];
        }
        for (int64_t d = 0; d < p.D; ++d)
          o[d] /= sum;
        l = m + std::log(sum);
      }
    }
}
