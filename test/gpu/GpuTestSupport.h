//===- GpuTestSupport.h - what the GPU test binaries share ------*- C++ -*-===//
//
// Whether there is a GPU (tests skip with "skipped: no GPU (<reason>)", the line ctest and log
// readers look for, where there is no driver or no device, and fail where the driver is broken),
// and assertions on llvm::Error / llvm::Expected results of the CUDA runtime.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_TEST_GPU_GPUTESTSUPPORT_H
#define TILEFUSE_TEST_GPU_GPUTESTSUPPORT_H

#include "tilefuse/runtime/cuda/Driver.h"
#include "llvm/ADT/StringRef.h"

#include <gtest/gtest.h>

#include <string>

#define TF_CONCAT_INNER(a, b) a##b
#define TF_CONCAT(a, b) TF_CONCAT_INNER(a, b)

/// Fails the current test with the error's message unless `expr` (an llvm::Error) is success.
#define TF_ASSERT_OK(expr)                                                                         \
  do {                                                                                             \
    if (llvm::Error tfError = (expr))                                                              \
      FAIL() << ::tilefuse::runtime::cuda::takeReport(std::move(tfError)).message;                 \
  } while (0)

/// `lhs = *expr` for an llvm::Expected `expr`; fails the current test with its error otherwise.
#define TF_ASSERT_OK_AND_ASSIGN(lhs, expr)                                                         \
  auto TF_CONCAT(tfExpected, __LINE__) = (expr);                                                   \
  if (!TF_CONCAT(tfExpected, __LINE__))                                                            \
    FAIL() << ::tilefuse::runtime::cuda::takeReport(TF_CONCAT(tfExpected, __LINE__).takeError())   \
                  .message;                                                                        \
  lhs = std::move(*TF_CONCAT(tfExpected, __LINE__))

namespace tilefuse::test {

struct GpuStatus {
  bool usable = false;
  /// No driver or no GPU: GPU tests skip. Any other failure fails them.
  bool unavailable = false;
  std::string message;
};

inline const GpuStatus &gpuStatus() {
  static const GpuStatus status = [] {
    namespace cu = ::tilefuse::runtime::cuda;
    GpuStatus s;
    auto driver = cu::Driver::get();
    if (driver) {
      s.usable = true;
      return s;
    }
    cu::ErrorReport report = cu::takeReport(driver.takeError());
    s.unavailable =
        report.kind == cu::ErrorKind::NoDriver || report.kind == cu::ErrorKind::NoDevice;
    s.message = report.message;
    return s;
  }();
  return status;
}

/// "skipped: no GPU (<reason>)".
inline std::string skipMessage() {
  llvm::StringRef reason = gpuStatus().message;
  if (reason.starts_with("no GPU (")) // the driver's own message already says it
    return "skipped: " + reason.str();
  return "skipped: no GPU (" + reason.str() + ")";
}

} // namespace tilefuse::test

/// In a test body: skips where there is no GPU, fails where the driver is broken.
#define TF_REQUIRE_GPU()                                                                           \
  do {                                                                                             \
    if (::tilefuse::test::gpuStatus().unavailable)                                                 \
      GTEST_SKIP() << ::tilefuse::test::skipMessage();                                             \
    if (!::tilefuse::test::gpuStatus().usable)                                                     \
      FAIL() << "the CUDA driver failed to initialize: " << ::tilefuse::test::gpuStatus().message; \
  } while (0)

#endif
