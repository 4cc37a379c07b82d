//===- TileMath.h - constants the softmax lowerings share -------*- C++ -*-===//
#ifndef TILEFUSE_DIALECT_TILEMATH_H
#define TILEFUSE_DIALECT_TILEMATH_H

namespace tilefuse::tile {

/// log2(e): exp(x) = exp2(x * log2(e)); the online softmax works in base 2.
constexpr double kLog2E = 1.4426950408889634;
/// ln(2): log(x) = log2(x) * ln(2), and a base-2 running max back in natural units.
constexpr double kLn2 = 0.6931471805599453;

} // namespace tilefuse::tile

#endif
