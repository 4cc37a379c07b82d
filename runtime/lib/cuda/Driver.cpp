//===- Driver.cpp - the CUDA driver, opened at run time -------------------===//
#include "tilefuse/runtime/cuda/Driver.h"

#include "DriverApi.h"

#include "llvm/Support/raw_ostream.h"

#include <dlfcn.h>

#include <utility>

using namespace tilefuse::runtime::cuda;
using namespace tilefuse::runtime::cuda::detail;

char RuntimeError::ID = 0;

void RuntimeError::log(llvm::raw_ostream &os) const { os << message; }

std::error_code RuntimeError::convertToErrorCode() const {
  return llvm::inconvertibleErrorCode();
}

llvm::Error tilefuse::runtime::cuda::makeError(ErrorKind kind, const llvm::Twine &message) {
  return llvm::make_error<RuntimeError>(kind, message.str());
}

ErrorReport tilefuse::runtime::cuda::takeReport(llvm::Error error) {
  ErrorReport report;
  auto append = [&report](llvm::StringRef message) {
    if (!report.message.empty())
      report.message += "\n";
    report.message += message.str();
  };
  llvm::handleAllErrors(
      std::move(error),
      [&](const RuntimeError &e) {
        report.kind = e.kind;
        append(e.message);
      },
      [&](const llvm::ErrorInfoBase &e) {
        report.kind = ErrorKind::DriverCall;
        append(e.message());
      });
  return report;
}

namespace {

/// Filled once by openLibcuda(); read-only afterwards.
DriverApi entryPoints;

/// One driver entry point: the name cuGetProcAddress takes (no version suffix), the variant's
/// exported symbol (for dlsym when cuGetProcAddress_v2 is missing or fails), the CUDA version
/// that introduced this variant, and where the pointer goes. An optional one may be missing (its
/// slot stays null): only some launches need it, and they check.
struct EntryPoint {
  const char *name;
  const char *symbol;
  int version;
  void **slot;
  bool optional = false;
};

#define TILEFUSE_ENTRY_POINT(NAME, SYMBOL, VERSION)                                                \
  EntryPoint { #NAME, #SYMBOL, VERSION, reinterpret_cast<void **>(&entryPoints.SYMBOL) }
#define TILEFUSE_OPTIONAL_ENTRY_POINT(NAME, SYMBOL, VERSION)                                       \
  EntryPoint { #NAME, #SYMBOL, VERSION, reinterpret_cast<void **>(&entryPoints.SYMBOL), true }

const EntryPoint entryPointTable[] = {
    TILEFUSE_ENTRY_POINT(cuInit, cuInit, 2000),
    TILEFUSE_ENTRY_POINT(cuDriverGetVersion, cuDriverGetVersion, 2020),
    TILEFUSE_ENTRY_POINT(cuGetErrorName, cuGetErrorName, 6000),
    TILEFUSE_ENTRY_POINT(cuGetErrorString, cuGetErrorString, 6000),
    TILEFUSE_ENTRY_POINT(cuDeviceGetCount, cuDeviceGetCount, 2000),
    TILEFUSE_ENTRY_POINT(cuDeviceGet, cuDeviceGet, 2000),
    TILEFUSE_ENTRY_POINT(cuDeviceGetName, cuDeviceGetName, 2000),
    TILEFUSE_ENTRY_POINT(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000),
    TILEFUSE_ENTRY_POINT(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000),
    TILEFUSE_ENTRY_POINT(cuCtxGetCurrent, cuCtxGetCurrent, 4000),
    TILEFUSE_ENTRY_POINT(cuCtxSetCurrent, cuCtxSetCurrent, 4000),
    TILEFUSE_ENTRY_POINT(cuCtxPushCurrent, cuCtxPushCurrent_v2, 4000),
    TILEFUSE_ENTRY_POINT(cuCtxPopCurrent, cuCtxPopCurrent_v2, 4000),
    TILEFUSE_ENTRY_POINT(cuCtxGetDevice, cuCtxGetDevice, 2000),
    // 2000, not 13000: CUDA 13's cuCtxSynchronize_v2 takes a context argument.
    TILEFUSE_ENTRY_POINT(cuCtxSynchronize, cuCtxSynchronize, 2000),
    TILEFUSE_ENTRY_POINT(cuModuleLoadDataEx, cuModuleLoadDataEx, 2010),
    TILEFUSE_ENTRY_POINT(cuModuleUnload, cuModuleUnload, 2000),
    TILEFUSE_ENTRY_POINT(cuModuleGetFunction, cuModuleGetFunction, 2000),
    TILEFUSE_ENTRY_POINT(cuFuncGetAttribute, cuFuncGetAttribute, 2020),
    TILEFUSE_ENTRY_POINT(cuFuncSetAttribute, cuFuncSetAttribute, 9000),
    TILEFUSE_ENTRY_POINT(cuOccupancyMaxActiveBlocksPerMultiprocessor,
                         cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050),
    TILEFUSE_ENTRY_POINT(cuLaunchKernel, cuLaunchKernel, 4000),
    TILEFUSE_ENTRY_POINT(cuMemAlloc, cuMemAlloc_v2, 3020),
    TILEFUSE_ENTRY_POINT(cuMemFree, cuMemFree_v2, 3020),
    TILEFUSE_ENTRY_POINT(cuMemcpyHtoD, cuMemcpyHtoD_v2, 3020),
    TILEFUSE_ENTRY_POINT(cuMemcpyDtoH, cuMemcpyDtoH_v2, 3020),
    TILEFUSE_ENTRY_POINT(cuMemsetD8, cuMemsetD8_v2, 3020),
    TILEFUSE_ENTRY_POINT(cuStreamCreate, cuStreamCreate, 2000),
    TILEFUSE_ENTRY_POINT(cuStreamDestroy, cuStreamDestroy_v2, 4000),
    TILEFUSE_ENTRY_POINT(cuStreamSynchronize, cuStreamSynchronize, 2000),
    TILEFUSE_ENTRY_POINT(cuMemsetD8Async, cuMemsetD8Async, 3020),
    TILEFUSE_ENTRY_POINT(cuEventCreate, cuEventCreate, 2000),
    TILEFUSE_ENTRY_POINT(cuEventRecord, cuEventRecord, 2000),
    // Orders the backward's workspace across streams; without it the launcher waits on the host.
    TILEFUSE_OPTIONAL_ENTRY_POINT(cuStreamWaitEvent, cuStreamWaitEvent, 3020),
    TILEFUSE_ENTRY_POINT(cuEventSynchronize, cuEventSynchronize, 2000),
    // 2000: the variant every driver since CUDA 2.0 has (CUDA 12.8's _v2 differs only in how
    // it reports events recorded with a disabled timer).
    TILEFUSE_ENTRY_POINT(cuEventElapsedTime, cuEventElapsedTime, 2000),
    TILEFUSE_ENTRY_POINT(cuEventDestroy, cuEventDestroy_v2, 4000),
    // TMA kernels' tensor maps (CUDA 12.0): a driver without it still runs every other kernel.
    TILEFUSE_OPTIONAL_ENTRY_POINT(cuTensorMapEncodeTiled, cuTensorMapEncodeTiled, 12000),
};

#undef TILEFUSE_ENTRY_POINT
#undef TILEFUSE_OPTIONAL_ENTRY_POINT

/// Opens libcuda.so.1 and fills `entryPoints`. Errors are ErrorKind::NoDriver.
llvm::Error openLibcuda() {
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace of the process.
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *why = dlerror();
    return makeError(ErrorKind::NoDriver, llvm::Twine("no driver (libcuda.so.1 not found: ") +
                                              (why ? why : "dlopen failed") + ")");
  }
  // cuGetProcAddress picks the variant of each entry point by version, which is how the driver
  // wants to be asked; plain dlsym of the exported variant names is the fallback for drivers
  // older than CUDA 12.0 (no cuGetProcAddress_v2).
  auto getProcAddress = reinterpret_cast<GetProcAddressFn>(dlsym(library, "cuGetProcAddress_v2"));
  for (const EntryPoint &entry : entryPointTable) {
    void *function = nullptr;
    int symbolStatus = -1;
    if (getProcAddress &&
        getProcAddress(entry.name, &function, entry.version, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                       &symbolStatus) == CUDA_SUCCESS &&
        symbolStatus == CU_GET_PROC_ADDRESS_SUCCESS && function) {
      *entry.slot = function;
      continue;
    }
    function = dlsym(library, entry.symbol);
    if (!function && entry.optional)
      continue;
    if (!function)
      return makeError(ErrorKind::NoDriver, llvm::Twine("no driver (libcuda.so.1 lacks ") +
                                                entry.symbol + ": the driver is too old)");
    *entry.slot = function;
  }
  return llvm::Error::success();
}

} // namespace

const DriverApi &tilefuse::runtime::cuda::detail::api() { return entryPoints; }

llvm::Error tilefuse::runtime::cuda::detail::check(CUresult result, const llvm::Twine &what) {
  if (result == CUDA_SUCCESS)
    return llvm::Error::success();
  const char *name = nullptr, *text = nullptr;
  if (entryPoints.cuGetErrorName(result, &name) != CUDA_SUCCESS || !name)
    name = "unknown CUDA error";
  if (entryPoints.cuGetErrorString(result, &text) != CUDA_SUCCESS || !text)
    text = "no description";
  return makeError(ErrorKind::DriverCall, what + ": " + name + " " + llvm::Twine(result) + " (" +
                                              text + ")");
}

llvm::Expected<Driver &> Driver::get() {
  struct Opened {
    Driver *driver = nullptr;
    ErrorReport failure;
  };
  // Initialized by exactly one thread (C++11 statics); the Driver is never freed (see Driver.h).
  static const Opened opened = [] {
    Opened result;
    auto fail = [&result](llvm::Error error) {
      result.failure = takeReport(std::move(error));
      return result;
    };
    if (llvm::Error error = openLibcuda())
      return fail(std::move(error));
    if (llvm::Error error = check(entryPoints.cuInit(0), "cuInit"))
      return fail(makeError(ErrorKind::NoDevice, "no GPU (" + takeReport(std::move(error)).message +
                                                     ")"));
    int count = 0;
    if (llvm::Error error = check(entryPoints.cuDeviceGetCount(&count), "cuDeviceGetCount"))
      return fail(makeError(ErrorKind::NoDevice, "no GPU (" + takeReport(std::move(error)).message +
                                                     ")"));
    if (count == 0)
      return fail(makeError(ErrorKind::NoDevice, "no GPU (cuDeviceGetCount: 0 devices)"));
    int version = 0;
    if (llvm::Error error = check(entryPoints.cuDriverGetVersion(&version), "cuDriverGetVersion"))
      return fail(std::move(error));
    result.driver = new Driver();
    result.driver->driverVersion = version;
    result.driver->devices = count;
    return result;
  }();
  if (opened.driver)
    return *opened.driver;
  return makeError(opened.failure.kind, opened.failure.message);
}

llvm::Expected<CUctx_st *> Driver::currentContext() {
  CUcontext context = nullptr;
  if (llvm::Error error = check(entryPoints.cuCtxGetCurrent(&context), "cuCtxGetCurrent"))
    return std::move(error);
  if (context)
    return context;
  // Retained once per process and never released, like the CUDA runtime's primary context.
  struct Primary {
    CUcontext context = nullptr;
    ErrorReport failure;
  };
  static const Primary primary = [] {
    Primary result;
    CUdevice device = 0;
    llvm::Error error = check(entryPoints.cuDeviceGet(&device, 0), "cuDeviceGet(0)");
    if (!error)
      error = check(entryPoints.cuDevicePrimaryCtxRetain(&result.context, device),
                    "cuDevicePrimaryCtxRetain(device 0)");
    if (error)
      result.failure = takeReport(std::move(error));
    return result;
  }();
  if (!primary.context)
    return makeError(primary.failure.kind, primary.failure.message);
  if (llvm::Error error = check(entryPoints.cuCtxSetCurrent(primary.context), "cuCtxSetCurrent"))
    return std::move(error);
  return primary.context;
}

llvm::Expected<DeviceInfo> Driver::currentDevice() {
  if (auto context = currentContext(); !context)
    return context.takeError();
  DeviceInfo info;
  CUdevice device = 0;
  if (llvm::Error error = check(entryPoints.cuCtxGetDevice(&device), "cuCtxGetDevice"))
    return std::move(error);
  info.ordinal = device;
  char name[256] = {};
  if (llvm::Error error =
          check(entryPoints.cuDeviceGetName(name, sizeof(name) - 1, device), "cuDeviceGetName"))
    return std::move(error);
  info.name = name;
  struct {
    int *value;
    CUdevice_attribute attribute;
    const char *what;
  } attributes[] = {
      {&info.computeMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability"},
      {&info.computeMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability"},
      {&info.maxSharedBytesPerBlockOptin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
       "opt-in shared memory per block"},
      {&info.multiprocessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count"},
      {&info.l2CacheBytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 cache size"},
  };
  for (auto &a : attributes)
    if (llvm::Error error = check(entryPoints.cuDeviceGetAttribute(a.value, a.attribute, device),
                                  llvm::Twine("cuDeviceGetAttribute(") + a.what + ")"))
      return std::move(error);
  return info;
}

llvm::Error Driver::setCurrentContext(CUctx_st *context) {
  return check(entryPoints.cuCtxSetCurrent(context), "cuCtxSetCurrent");
}

llvm::Error Driver::synchronize() {
  if (auto context = currentContext(); !context)
    return context.takeError();
  return check(entryPoints.cuCtxSynchronize(), "cuCtxSynchronize");
}

//===----------------------------------------------------------------------===//
// DeviceBuffer
//===----------------------------------------------------------------------===//

llvm::Expected<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  auto driver = Driver::get();
  if (!driver)
    return driver.takeError();
  if (auto context = driver->currentContext(); !context)
    return context.takeError();
  if (bytes == 0) // cuMemAlloc rejects 0 bytes; an empty buffer has address 0
    return DeviceBuffer();
  CUdeviceptr base = 0;
  if (llvm::Error error = check(entryPoints.cuMemAlloc_v2(&base, bytes),
                                "cuMemAlloc(" + llvm::Twine(bytes) + " bytes)"))
    return std::move(error);
  return DeviceBuffer(base, bytes);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer &&other) noexcept
    : base(std::exchange(other.base, 0)), bytes(std::exchange(other.bytes, 0)) {}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  if (this != &other) {
    release();
    base = std::exchange(other.base, 0);
    bytes = std::exchange(other.bytes, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() {
  // A failure here (e.g. the sticky error of a faulted kernel) has no one to report to; the
  // driver reclaims the memory with the context.
  if (base)
    (void)entryPoints.cuMemFree_v2(base);
  base = 0;
  bytes = 0;
}

static llvm::Error checkRange(size_t offset, size_t count, size_t size, const char *what) {
  if (offset > size || count > size - offset)
    return makeError(ErrorKind::InvalidArgument,
                     llvm::Twine(what) + " of " + llvm::Twine(count) + " bytes at offset " +
                         llvm::Twine(offset) + " overruns a buffer of " + llvm::Twine(size) +
                         " bytes");
  return llvm::Error::success();
}

/// The synchronous copy and memset calls run on the legacy default stream and may return before
/// the device holds the bytes (cuMemcpyHtoD from pageable memory returns once the bytes are
/// staged; cuMemsetD8 is asynchronous to the host). Work on a non-blocking Stream does not wait
/// for that stream, so a kernel launched on one right after could read the old bytes, or see its
/// own output overwritten by a poisoning memset still in flight. Waiting here makes the calls
/// what DeviceBuffer documents: done when they return.
static llvm::Error waitForLegacyStream(const char *after) {
  // The entry points are resolved with CU_GET_PROC_ADDRESS_LEGACY_STREAM: the null stream is
  // the legacy default stream.
  return check(entryPoints.cuStreamSynchronize(nullptr),
               llvm::Twine("cuStreamSynchronize(legacy stream) after ") + after);
}

llvm::Error DeviceBuffer::upload(const void *host, size_t count, size_t offset) {
  if (llvm::Error error = checkRange(offset, count, bytes, "upload"))
    return error;
  if (count == 0)
    return llvm::Error::success();
  if (llvm::Error error = check(entryPoints.cuMemcpyHtoD_v2(base + offset, host, count),
                                "cuMemcpyHtoD(" + llvm::Twine(count) + " bytes)"))
    return error;
  return waitForLegacyStream("cuMemcpyHtoD");
}

llvm::Error DeviceBuffer::download(void *host, size_t count, size_t offset) const {
  if (llvm::Error error = checkRange(offset, count, bytes, "download"))
    return error;
  if (count == 0)
    return llvm::Error::success();
  return check(entryPoints.cuMemcpyDtoH_v2(host, base + offset, count),
               "cuMemcpyDtoH(" + llvm::Twine(count) + " bytes)");
}

llvm::Error DeviceBuffer::fillAsync(uint8_t value, const Stream &stream) {
  if (bytes == 0)
    return llvm::Error::success();
  return check(entryPoints.cuMemsetD8Async(base, value, bytes, stream.handle()),
               "cuMemsetD8Async(" + llvm::Twine(bytes) + " bytes)");
}

llvm::Error DeviceBuffer::fill(uint8_t value) {
  if (bytes == 0)
    return llvm::Error::success();
  if (llvm::Error error = check(entryPoints.cuMemsetD8_v2(base, value, bytes),
                                "cuMemsetD8(" + llvm::Twine(bytes) + " bytes)"))
    return error;
  return waitForLegacyStream("cuMemsetD8");
}

//===----------------------------------------------------------------------===//
// Stream
//===----------------------------------------------------------------------===//

llvm::Expected<Stream> Stream::create() {
  auto driver = Driver::get();
  if (!driver)
    return driver.takeError();
  if (auto context = driver->currentContext(); !context)
    return context.takeError();
  CUstream stream = nullptr;
  if (llvm::Error error =
          check(entryPoints.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
    return std::move(error);
  return Stream(stream);
}

Stream::Stream(Stream &&other) noexcept : stream(std::exchange(other.stream, nullptr)) {}

Stream &Stream::operator=(Stream &&other) noexcept {
  if (this != &other) {
    release();
    stream = std::exchange(other.stream, nullptr);
  }
  return *this;
}

Stream::~Stream() { release(); }

void Stream::release() {
  if (stream)
    (void)entryPoints.cuStreamDestroy_v2(stream);
  stream = nullptr;
}

llvm::Error Stream::synchronize() const {
  return check(entryPoints.cuStreamSynchronize(stream), "cuStreamSynchronize");
}

//===----------------------------------------------------------------------===//
// Event
//===----------------------------------------------------------------------===//

llvm::Expected<Event> Event::create() {
  auto driver = Driver::get();
  if (!driver)
    return driver.takeError();
  if (auto context = driver->currentContext(); !context)
    return context.takeError();
  CUevent event = nullptr;
  if (llvm::Error error = check(entryPoints.cuEventCreate(&event, CU_EVENT_DEFAULT),
                                "cuEventCreate"))
    return std::move(error);
  return Event(event);
}

Event::Event(Event &&other) noexcept : event(std::exchange(other.event, nullptr)) {}

Event &Event::operator=(Event &&other) noexcept {
  if (this != &other) {
    release();
    event = std::exchange(other.event, nullptr);
  }
  return *this;
}

Event::~Event() { release(); }

void Event::release() {
  if (event)
    (void)entryPoints.cuEventDestroy_v2(event);
  event = nullptr;
}

llvm::Error Event::record(const Stream &stream) {
  return check(entryPoints.cuEventRecord(event, stream.handle()), "cuEventRecord");
}

llvm::Error Event::synchronize() const {
  return check(entryPoints.cuEventSynchronize(event), "cuEventSynchronize");
}

llvm::Expected<float> Event::elapsedMilliseconds(const Event &start, const Event &end) {
  float ms = 0;
  if (llvm::Error error =
          check(entryPoints.cuEventElapsedTime(&ms, start.event, end.event), "cuEventElapsedTime"))
    return std::move(error);
  return ms;
}

llvm::Error tilefuse::runtime::cuda::detail::useLoadedContext(CUcontext context,
                                                              const std::string &kernel) {
  const DriverApi &cu = api();
  CUcontext current = nullptr;
  if (llvm::Error error = check(cu.cuCtxGetCurrent(&current), "cuCtxGetCurrent"))
    return error;
  if (!current)
    return check(cu.cuCtxSetCurrent(context), "cuCtxSetCurrent");
  if (current != context)
    return makeError(ErrorKind::InvalidArgument,
                     "launch of '" + kernel +
                         "': the CUDA context current on this thread is not the one the kernel "
                         "was loaded in");
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
tilefuse::runtime::cuda::detail::readTextFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return makeError(ErrorKind::InvalidArgument,
                     "cannot read " + path + ": " + buffer.getError().message());
  return std::move(*buffer);
}
