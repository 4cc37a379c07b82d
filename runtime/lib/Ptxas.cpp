//===- Ptxas.cpp - PTX to cubin through the CUDA toolkit's ptxas ----------===//
#include "tilefuse/runtime/Ptxas.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace tilefuse::runtime;

static llvm::Error failure(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

PtxasSearch PtxasSearch::fromEnvironment() {
  auto env = [](const char *name) {
    std::optional<std::string> v = llvm::sys::Process::GetEnv(name);
    return v ? *v : std::string();
  };
  PtxasSearch search;
  search.explicitPath = env("TILEFUSE_PTXAS");
  search.cudaHome = env("CUDA_HOME");
  search.cudaPath = env("CUDA_PATH");
  search.path = env("PATH");
  return search;
}

static bool isExecutableFile(llvm::StringRef path) {
  return llvm::sys::fs::is_regular_file(path) && llvm::sys::fs::can_execute(path);
}

llvm::Expected<std::string> tilefuse::runtime::findPtxas(const PtxasSearch &search) {
  if (!search.explicitPath.empty()) {
    if (isExecutableFile(search.explicitPath))
      return search.explicitPath;
    return failure("no ptxas: TILEFUSE_PTXAS (or --ptxas) names " + search.explicitPath +
                   ", which is not an executable file");
  }
  for (auto [variable, root] : {std::pair<const char *, const std::string &>{"CUDA_HOME",
                                                                             search.cudaHome},
                                {"CUDA_PATH", search.cudaPath}}) {
    if (root.empty())
      continue;
    llvm::SmallString<256> candidate(root);
    llvm::sys::path::append(candidate, "bin", "ptxas");
    if (isExecutableFile(candidate))
      return std::string(candidate);
    return failure(llvm::Twine("no ptxas: ") + variable + "=" + root + " has no bin/ptxas; " +
                   "point " + variable + " at a CUDA toolkit (12.x or later), or unset it to " +
                   "search PATH");
  }
  if (!search.path.empty()) {
    llvm::SmallVector<llvm::StringRef> dirs;
    llvm::StringRef(search.path).split(dirs, llvm::sys::EnvPathSeparator, -1,
                                       /*KeepEmpty=*/false);
    if (!dirs.empty())
      if (llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName("ptxas", dirs))
        return *found;
  }
  for (const std::string &dir : search.fallbackDirectories) {
    llvm::SmallString<256> candidate(dir);
    llvm::sys::path::append(candidate, "ptxas");
    if (isExecutableFile(candidate))
      return std::string(candidate);
  }
  std::string fallback;
  for (const std::string &dir : search.fallbackDirectories)
    fallback += (fallback.empty() ? "" : ", ") + dir;
  return failure("no ptxas (the CUDA toolkit's PTX assembler, needed for --emit cubin and "
                 "--emit header): CUDA_HOME and CUDA_PATH are unset, PATH (" +
                 (search.path.empty() ? std::string("empty") : search.path) + ") has none" +
                 (fallback.empty() ? std::string() : ", nor has " + fallback) +
                 ". Install the CUDA toolkit and set CUDA_HOME, put its bin/ on PATH, or name "
                 "the file with TILEFUSE_PTXAS");
}

/// Runs `program args...` with stdout and stderr into one temporary file; returns the exit code
/// (negative when it could not run) and the output.
static int run(llvm::StringRef program, llvm::ArrayRef<llvm::StringRef> args, std::string &output,
               std::string &errorMessage) {
  llvm::SmallString<128> log;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("tilefuse-ptxas", "log", log)) {
    errorMessage = "cannot create a temporary file: " + ec.message();
    return -1;
  }
  llvm::FileRemover removeLog(log);
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log),
                                                llvm::StringRef(log)};
  bool executionFailed = false;
  int rc = llvm::sys::ExecuteAndWait(program, args, std::nullopt, redirects, /*SecondsToWait=*/0,
                                     /*MemoryLimit=*/0, &errorMessage, &executionFailed);
  if (auto buffer = llvm::MemoryBuffer::getFile(log, /*IsText=*/true))
    output = (*buffer)->getBuffer().rtrim().str();
  return executionFailed ? -1 : rc;
}

std::string tilefuse::runtime::ptxasVersion(llvm::StringRef ptxas) {
  std::string output, error;
  if (run(ptxas, {ptxas, "--version"}, output, error) != 0)
    return "";
  auto [head, tail] = llvm::StringRef(output).rsplit('\n');
  return (tail.empty() ? head : tail).trim().str();
}

llvm::Expected<std::string> tilefuse::runtime::assembleCubin(
    llvm::StringRef ptxas, llvm::StringRef ptx, llvm::StringRef chip,
    llvm::ArrayRef<std::string> extraOptions, std::string *printed) {
  llvm::SmallString<128> input, output;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("tilefuse", "ptx", input))
    return failure("cannot create a temporary file for ptxas: " + ec.message());
  llvm::FileRemover removeInput(input);
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("tilefuse", "cubin", output))
    return failure("cannot create a temporary file for ptxas: " + ec.message());
  llvm::FileRemover removeOutput(output);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(input, ec, llvm::sys::fs::OF_Text);
    if (ec)
      return failure("cannot write " + input + ": " + ec.message());
    os << ptx;
  }
  std::string arch = ("-arch=" + chip).str();
  llvm::SmallVector<llvm::StringRef> args{ptxas, arch};
  for (const std::string &option : extraOptions)
    args.push_back(option);
  args.append({"-o", output, input});
  std::string log, error;
  int rc = run(ptxas, args, log, error);
  if (printed)
    *printed = log;
  if (rc != 0) {
    std::string command;
    for (llvm::StringRef a : args)
      command += (command.empty() ? "" : " ") + a.str();
    return failure("ptxas failed" +
                   (rc < 0 ? " to run (" + error + ")" : " with exit code " + llvm::Twine(rc)) +
                   ": " + command + (log.empty() ? "" : "\n" + log));
  }
  auto cubin = llvm::MemoryBuffer::getFile(output, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
  if (!cubin)
    return failure("cannot read ptxas's output " + output + ": " + cubin.getError().message());
  if ((*cubin)->getBufferSize() == 0)
    return failure("ptxas wrote an empty cubin");
  return (*cubin)->getBuffer().str();
}
