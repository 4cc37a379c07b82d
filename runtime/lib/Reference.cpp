//===- Reference.cpp - naive float64 attention for checking ---------------===//
#include "tilefuse/runtime/Reference.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace tilefuse::runtime::reference {

std::optional<Variant> variantFor(llvm::StringRef name, int64_t H) {
  Variant v;
  v.scale = 0; // the kernels' default temperature, 1/sqrt(D)
  auto causal = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; };
  if (name == "attention" || name == "gqa" || name == "mqa")
    return v;
  if (name == "causal") {
    v.mask = causal;
    return v;
  }
  if (name == "sliding_window") {
    v.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv + 100 >= q && kv <= q + 20; };
    return v;
  }
  if (name == "alibi") {
    v.mask = causal;
    v.scoreMod = [H](double s, int64_t, int64_t h, int64_t q, int64_t kv) {
      double slope = std::exp2(-8.0 * double(h + 1) / double(H));
      return s + slope * double(kv - q);
    };
    return v;
  }
  if (name == "softcap") {
    v.scoreMod = [](double s, int64_t, int64_t, int64_t, int64_t) {
      return 30.0 * std::tanh(s / 30.0);
    };
    return v;
  }
  if (name == "prefix_lm") {
    v.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv < 100 || kv <= q; };
    return v;
  }
  return std::nullopt;
}

void attention(const Problem &p, const Variant &variant, const std::vector<double> &q,
               const std::vector<double> &k, const std::vector<double> &v,
               std::vector<double> &out, std::vector<double> &lse) {
  out.assign(p.B * p.H * p.M * p.D, 0.0);
  lse.assign(p.B * p.H * p.M, 0.0);
  std::vector<double> s(p.N);
  int64_t group = p.H / p.Hkv;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h) {
      int64_t hk = h / group;
      const double *kb = &k[((b * p.Hkv + hk) * p.N) * p.D];
      const double *vb = &v[((b * p.Hkv + hk) * p.N) * p.D];
      for (int64_t i = 0; i < p.M; ++i) {
        const double *qi = &q[((b * p.H + h) * p.M + i) * p.D];
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < p.N; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < p.D; ++d)
            dot += qi[d] * kb[j * p.D + d];
          double x = dot * (variant.scale > 0 ? variant.scale : 1.0 / std::sqrt(double(p.D)));
          if (variant.scoreMod)
            x = variant.scoreMod(x, b, h, i, j);
          if (variant.mask && !variant.mask(b, h, i, j))
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
