//===- FileTestUtil.h - files and directories in the unit tests -*- C++ -*-===//
#ifndef TILEFUSE_TEST_UNIT_FILETESTUTIL_H
#define TILEFUSE_TEST_UNIT_FILETESTUTIL_H

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace tilefuse::test {

/// A fresh directory (named after `prefix`), removed with the object.
struct TempDir {
  llvm::SmallString<128> path;
  explicit TempDir(llvm::StringRef prefix = "tilefuse-test") {
    std::error_code ec = llvm::sys::fs::createUniqueDirectory(prefix, path);
    EXPECT_FALSE(ec) << ec.message();
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string str() const { return std::string(path); }
};

/// The bytes of `path`; empty when it cannot be read.
inline std::string readFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

/// Replaces `path` with `bytes`; fails the test when it cannot.
inline void writeFile(const std::string &path, llvm::StringRef bytes) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  ASSERT_FALSE(ec) << ec.message();
  os << bytes;
}

/// Files in `dir`, by name.
inline std::set<std::string> listDir(const std::string &dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
    names.insert(llvm::sys::path::filename(it->path()).str());
  return names;
}

/// Writes `object` (an object file's bytes) to `dir`/`stem`.o and links it into `dir`/`stem`.so
/// with the C compiler `cc` (-shared, -lm): the path of the library, or "" after failing the
/// test.
inline std::string linkSharedLibrary(llvm::StringRef cc, const std::string &dir,
                                     llvm::StringRef stem, llvm::StringRef object) {
  std::string objectPath = dir + "/" + stem.str() + ".o";
  std::string libraryPath = dir + "/" + stem.str() + ".so";
  std::error_code ec;
  {
    llvm::raw_fd_ostream os(objectPath, ec);
    if (!ec)
      os << object;
  }
  if (ec) {
    ADD_FAILURE() << "cannot write " << objectPath << ": " << ec.message();
    return "";
  }
  llvm::StringRef args[] = {cc, "-shared", "-o", libraryPath, objectPath, "-lm"};
  std::string error;
  if (llvm::sys::ExecuteAndWait(cc, args, std::nullopt, {}, 0, 0, &error) != 0) {
    ADD_FAILURE() << "linking " << libraryPath << " failed: " << error;
    return "";
  }
  return libraryPath;
}

} // namespace tilefuse::test

#endif
