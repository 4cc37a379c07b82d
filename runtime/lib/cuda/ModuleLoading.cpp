//===- ModuleLoading.cpp - what both kernel launchers do to load ----------===//
#include "ModuleLoading.h"

using namespace tilefuse::runtime::cuda;
using namespace tilefuse::runtime::cuda::detail;

void tilefuse::runtime::cuda::detail::releaseLoaded(CUcontext context, CUmodule module,
                                                    CUdeviceptr workspace, CUevent lastLaunch) {
  if (!module && !workspace && !lastLaunch)
    return;
  const DriverApi &cu = api();
  CUcontext current = nullptr;
  (void)cu.cuCtxGetCurrent(&current);
  bool switchContext = current != context;
  if (switchContext && cu.cuCtxPushCurrent_v2(context) != CUDA_SUCCESS)
    return;
  if (lastLaunch) {
    (void)cu.cuEventSynchronize(lastLaunch);
    (void)cu.cuEventDestroy_v2(lastLaunch);
  }
  if (workspace)
    (void)cu.cuMemFree_v2(workspace);
  if (module)
    (void)cu.cuModuleUnload(module);
  if (switchContext) {
    CUcontext popped = nullptr;
    (void)cu.cuCtxPopCurrent_v2(&popped);
  }
}

llvm::Expected<LoadTarget> tilefuse::runtime::cuda::detail::currentLoadTarget() {
  auto driver = Driver::get();
  if (!driver)
    return driver.takeError();
  auto context = driver->currentContext();
  if (!context)
    return context.takeError();
  auto device = driver->currentDevice();
  if (!device)
    return device.takeError();
  return LoadTarget{*context, *device};
}

/// The text up to the first NUL of a log buffer the driver filled.
static std::string takeLog(const std::string &buffer) {
  return llvm::StringRef(buffer.c_str()).rtrim().str();
}

llvm::Expected<CUmodule>
tilefuse::runtime::cuda::detail::loadPtxModule(llvm::StringRef ptx, const std::string &what,
                                               std::string &infoLog) {
  // The driver's JIT (ptxas) reports why PTX does not compile only through these log buffers.
  constexpr size_t logBytes = 1 << 16;
  std::string errorLog(logBytes, '\0'), info(logBytes, '\0');
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_LOG_VERBOSE};
  void *optionValues[] = {errorLog.data(), reinterpret_cast<void *>(uintptr_t(logBytes - 1)),
                          info.data(), reinterpret_cast<void *>(uintptr_t(logBytes - 1)),
                          reinterpret_cast<void *>(uintptr_t(1))};
  std::string image = ptx.str(); // the driver reads PTX as a NUL-terminated string
  CUmodule module = nullptr;
  CUresult result = api().cuModuleLoadDataEx(&module, image.c_str(), std::size(options), options,
                                             optionValues);
  infoLog = takeLog(info);
  if (llvm::Error error = check(result, "cuModuleLoadDataEx(" + what + ")")) {
    std::string log = takeLog(errorLog);
    ErrorReport report = takeReport(std::move(error));
    return makeError(report.kind, report.message + "\nJIT error log:\n" +
                                      (log.empty() ? std::string("(empty)") : log));
  }
  return module;
}

llvm::Expected<LoadedFunction>
tilefuse::runtime::cuda::detail::loadFunction(CUmodule module, const KernelMetadata &metadata,
                                              const DeviceInfo &device) {
  const DriverApi &cu = api();
  const std::string &name = metadata.name;
  LoadedFunction loaded;
  CUresult result = cu.cuModuleGetFunction(&loaded.function, module, name.c_str());
  if (result == CUDA_ERROR_NOT_FOUND)
    return makeError(ErrorKind::InvalidArgument,
                     "the PTX module has no .entry named '" + name + "' (the sidecar's name)");
  if (llvm::Error error = check(result, "cuModuleGetFunction(" + name + ")"))
    return std::move(error);

  int maxThreads = 0, staticShared = 0;
  struct {
    int *value;
    CUfunction_attribute attribute;
    const char *what;
  } attributes[] = {
      {&maxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block"},
      {&staticShared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "static shared memory"},
      {&loaded.registers, CU_FUNC_ATTRIBUTE_NUM_REGS, "registers"},
      {&loaded.localBytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "local memory"},
  };
  for (auto &a : attributes)
    if (llvm::Error error = check(cu.cuFuncGetAttribute(a.value, a.attribute, loaded.function),
                                  "cuFuncGetAttribute(" + name + ", " + a.what + ")"))
      return std::move(error);
  if (metadata.threads > maxThreads)
    return makeError(ErrorKind::InvalidArgument,
                     "kernel '" + name + "' runs at most " + llvm::Twine(maxThreads) +
                         " threads per block (.maxntid, registers) but its sidecar says " +
                         llvm::Twine(metadata.threads));
  if (staticShared + metadata.sharedBytes > device.maxSharedBytesPerBlockOptin)
    return makeError(ErrorKind::InvalidArgument,
                     "kernel '" + name + "' needs " + llvm::Twine(metadata.sharedBytes) +
                         " bytes of dynamic and " + llvm::Twine(staticShared) +
                         " of static shared memory; " + device.name + " allows " +
                         llvm::Twine(device.maxSharedBytesPerBlockOptin) + " per block");
  // Above 48 KiB, dynamic shared memory has to be opted in per function.
  if (metadata.sharedBytes > 48 * 1024)
    if (llvm::Error error = check(
            cu.cuFuncSetAttribute(loaded.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                  static_cast<int>(metadata.sharedBytes)),
            "cuFuncSetAttribute(" + name + ", max dynamic shared memory " +
                llvm::Twine(metadata.sharedBytes) + ")"))
      return std::move(error);
  return loaded;
}
