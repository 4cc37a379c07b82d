//===- TestUtil.h - shared helpers of the CPU backend tests -----*- C++ -*-===//
#ifndef TILEFUSE_TEST_UNIT_TESTUTIL_H
#define TILEFUSE_TEST_UNIT_TESTUTIL_H

#include "tilefuse/runtime/CpuKernel.h"
#include "tilefuse/runtime/Reference.h"

#include <memory>
#include <string>
#include <vector>

namespace tilefuse::test {

/// Compiles bundled kernel `name` with storage type `dtype`; fails the test on error.
std::unique_ptr<runtime::CpuKernel> compileBundled(const std::string &name,
                                                   const std::string &dtype, int64_t br,
                                                   int64_t bc, bool instrument = false);

/// One run of a kernel on fresh random inputs, with its float64 reference.
struct RunResult {
  double outError = 0; ///< ||O - ref|| / ||ref||
  double lseError = 0; ///< same for the logsumexp, over rows with a finite reference
  bool allWritten = true;     ///< no poison left in O or LSE
  bool lseInfMatches = true;  ///< -inf exactly where the reference is -inf
  runtime::BlockCounts counts;
};

/// The same against a variant given as semantics (a mask or score function made up by a test).
RunResult runAgainstReference(const runtime::CpuKernel &kernel,
                              const runtime::reference::Variant &variant,
                              runtime::reference::Problem p, unsigned seed);

RunResult runAgainstReference(const runtime::CpuKernel &kernel, const std::string &name,
                              runtime::reference::Problem p, unsigned seed);

} // namespace tilefuse::test

#endif
