//===- Reference.cpp - running a kernel's float64 reference ---------------===//
#include "tilefuse/runtime/Reference.h"

#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/Parallel.h"
#include "llvm/Support/Threading.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tilefuse::runtime::reference {

std::string referenceSymbol(llvm::StringRef name) {
  return ("_mlir_ciface_" + name + "_reference").str();
}

namespace {
template <int Rank> MemRefDescriptor<Rank> describe(const HostView &view) {
  MemRefDescriptor<Rank> d;
  d.allocated = d.aligned = static_cast<double *>(view.data);
  d.offset = 0;
  for (int i = 0; i < Rank; ++i) {
    d.sizes[i] = view.sizes[i];
    d.strides[i] = view.strides[i];
  }
  return d;
}
} // namespace

llvm::Error runReference(ReferenceEntry entry, llvm::StringRef name, const HostView &q,
                         const HostView &k, const HostView &v, const HostView &o,
                         const HostView &lse) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "float64 reference of '" + name + "': " + why);
  };
  struct {
    const char *name;
    const HostView *view;
    int rank;
  } args[] = {{"Q", &q, 4}, {"K", &k, 4}, {"V", &v, 4}, {"O", &o, 4}, {"LSE", &lse, 3}};
  for (const auto &arg : args) {
    if (!arg.view->data)
      return fail(llvm::Twine(arg.name) + " is null");
    if (arg.view->rank != arg.rank)
      return fail(llvm::Twine(arg.name) + " must have rank " + llvm::Twine(arg.rank));
    for (int d = 0; d < arg.rank; ++d)
      if (arg.view->sizes[d] < 0 || arg.view->strides[d] < 0)
        return fail(llvm::Twine(arg.name) + ": negative size or stride in dimension " +
                    llvm::Twine(d));
  }
  int64_t B = q.sizes[0], H = q.sizes[1], M = q.sizes[2], D = q.sizes[3];
  int64_t Hkv = k.sizes[1], N = k.sizes[2], Dv = v.sizes[3];
  if (k.sizes[0] != B || v.sizes[0] != B || o.sizes[0] != B || lse.sizes[0] != B)
    return fail("Q, K, V, O and LSE must have the same batch size");
  if (Hkv == 0 || H % Hkv != 0)
    return fail("query heads (" + llvm::Twine(H) + ") must be a multiple of key/value heads (" +
                llvm::Twine(Hkv) + ")");
  if (v.sizes[1] != Hkv || v.sizes[2] != N)
    return fail("K and V must have the same heads and length");
  if (k.sizes[3] != D)
    return fail("K's head dimension must equal Q's");
  if (o.sizes[1] != H || o.sizes[2] != M || o.sizes[3] != Dv)
    return fail("O must be B x H x M x Dv");
  if (lse.sizes[1] != H || lse.sizes[2] != M)
    return fail("LSE must be B x H x M");

  // Rows in chunks over every core; each row is O(N * D) work.
  int64_t rows = B * H * M;
  if (rows == 0)
    return llvm::Error::success();
  int64_t workers = std::max<int64_t>(1, llvm::hardware_concurrency().compute_thread_count());
  int64_t chunk = std::max<int64_t>(1, rows / (workers * 8));
  int64_t chunks = (rows + chunk - 1) / chunk;
  auto dq = describe<4>(q), dk = describe<4>(k), dv = describe<4>(v), dO = describe<4>(o);
  auto dl = describe<3>(lse);
  llvm::parallelFor(0, chunks, [&](size_t c) {
    // Each call gets its own descriptors: the entry point takes them by pointer.
    auto q4 = dq, k4 = dk, v4 = dv, o4 = dO;
    auto l3 = dl;
    int64_t begin = int64_t(c) * chunk;
    entry(&q4, &k4, &v4, &o4, &l3, begin, std::min(rows, begin + chunk));
  });
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<ReferenceLibrary>> ReferenceLibrary::load(llvm::StringRef path,
                                                                          llvm::StringRef name) {
  std::string error;
  // Permanent: the library stays loaded for the life of the process (as the kernels' modules).
  llvm::sys::DynamicLibrary library =
      llvm::sys::DynamicLibrary::getPermanentLibrary(path.str().c_str(), &error);
  if (!library.isValid())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot load the float64 reference " + path + ": " + error);
  std::string symbol = referenceSymbol(name);
  void *address = library.getAddressOfSymbol(symbol.c_str());
  if (!address)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + " has no float64 reference of kernel '" + name +
                                       "' (symbol " + symbol + ")");
  return std::unique_ptr<ReferenceLibrary>(
      new ReferenceLibrary(reinterpret_cast<ReferenceEntry>(address), name.str()));
}

uint16_t toBF16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if (std::isnan(x))
    return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

float fromBF16(uint16_t x) {
  uint32_t u = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t toF16(float x) {
  // Round to nearest even through the binary16 format (inputs here are finite and moderate).
  uint32_t u;
  std::memcpy(&u, &x, 4);
  uint32_t sign = (u >> 16) & 0x8000;
  float a = std::fabs(x);
  if (std::isnan(x))
    return 0x7e00;
  if (a >= 65520.0f)
    return static_cast<uint16_t>(sign | 0x7c00);
  if (a < 6.103515625e-05f) { // subnormal: multiples of 2^-24
    uint32_t m = static_cast<uint32_t>(std::nearbyint(a * 16777216.0f));
    return static_cast<uint16_t>(sign | m);
  }
  std::memcpy(&u, &a, 4);
  uint32_t exp = ((u >> 23) & 0xff) - 127 + 15;
  uint32_t mant = u & 0x7fffff;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
    ++h;
  return static_cast<uint16_t>(sign | h);
}

float fromF16(uint16_t x) {
  uint32_t sign = (x & 0x8000) << 16, exp = (x >> 10) & 0x1f, mant = x & 0x3ff;
  if (exp == 0)
    return (sign ? -1.0f : 1.0f) * std::ldexp(static_cast<float>(mant), -24);
  if (exp == 31)
    return sign ? -INFINITY : (mant ? NAN : INFINITY);
  uint32_t u = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

size_t elementSize(ElementType t) { return t == ElementType::F32 ? 4 : 2; }

std::vector<int32_t> sequenceOffsets(const std::vector<int64_t> &lengths, int64_t first) {
  std::vector<int32_t> offsets = {int32_t(first)};
  for (int64_t length : lengths)
    offsets.push_back(offsets.back() + int32_t(length));
  return offsets;
}

std::vector<char> packRows(const char *padded, size_t rowBytes, int64_t heads, int64_t rows,
                           const std::vector<int64_t> &lengths,
                           const std::vector<int32_t> &offsets, int64_t tokens, char fill) {
  std::vector<char> packed(size_t(tokens * heads) * rowBytes, fill);
  for (size_t b = 0; b < lengths.size(); ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < lengths[b]; ++i)
        std::memcpy(&packed[size_t((offsets[b] + i) * heads + h) * rowBytes],
                    &padded[size_t((int64_t(b) * heads + h) * rows + i) * rowBytes], rowBytes);
  return packed;
}

void unpackRows(const char *packed, char *padded, size_t rowBytes, int64_t heads, int64_t rows,
                const std::vector<int64_t> &lengths, const std::vector<int32_t> &offsets) {
  for (size_t b = 0; b < lengths.size(); ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < lengths[b]; ++i)
        std::memcpy(&padded[size_t((int64_t(b) * heads + h) * rows + i) * rowBytes],
                    &packed[size_t((offsets[b] + i) * heads + h) * rowBytes], rowBytes);
}

void unpackLseRows(const float *packed, float *padded, int64_t heads, int64_t rows,
                   int64_t tokens, const std::vector<int64_t> &lengths,
                   const std::vector<int32_t> &offsets) {
  for (size_t b = 0; b < lengths.size(); ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < lengths[b]; ++i)
        padded[(int64_t(b) * heads + h) * rows + i] = packed[h * tokens + offsets[b] + i];
}

std::vector<double> storeAs(ElementType t, const std::vector<float> &values, void *dst) {
  std::vector<double> seen(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    switch (t) {
    case ElementType::F32:
      static_cast<float *>(dst)[i] = values[i];
      seen[i] = values[i];
      break;
    case ElementType::BF16: {
      uint16_t h = toBF16(values[i]);
      static_cast<uint16_t *>(dst)[i] = h;
      seen[i] = fromBF16(h);
      break;
    }
    case ElementType::F16: {
      uint16_t h = toF16(values[i]);
      static_cast<uint16_t *>(dst)[i] = h;
      seen[i] = fromF16(h);
      break;
    }
    }
  }
  return seen;
}

std::vector<double> loadAs(ElementType t, const void *src, size_t count) {
  std::vector<double> out(count);
  for (size_t i = 0; i < count; ++i)
    out[i] = t == ElementType::F32    ? static_cast<const float *>(src)[i]
             : t == ElementType::BF16 ? fromBF16(static_cast<const uint16_t *>(src)[i])
                                      : fromF16(static_cast<const uint16_t *>(src)[i]);
  return out;
}

} // namespace tilefuse::runtime::reference
