//===- Driver.h - the CUDA driver, opened at run time -----------*- C++ -*-===//
//
// libcuda.so.1 is opened with dlopen on first use and its entry points are fetched through
// cuGetProcAddress, so nothing links a CUDA library at build time. On a machine with no driver or
// no GPU every call returns an error value ("no driver (...)", "no GPU (...)"); nothing here
// aborts or exits.
//
// Contexts: the runtime uses the context current on the calling thread (an application's, e.g.
// PyTorch's) and, when there is none, makes device 0's primary context current, as the CUDA
// runtime API does. Select another device with CUDA_VISIBLE_DEVICES or by making its context
// current first.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_CUDA_DRIVER_H
#define TILEFUSE_RUNTIME_CUDA_DRIVER_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <string>

// Opaque driver handles, spelled as cuda.h spells them so both headers can be included together.
struct CUctx_st;
struct CUstream_st;
struct CUevent_st;

namespace tilefuse::runtime::cuda {

/// A device address (CUdeviceptr).
using DevicePtr = uint64_t;

/// What went wrong, for callers that react differently (tests skip on NoDriver / NoDevice; the
/// C API returns a status code per kind).
enum class ErrorKind {
  NoDriver,        ///< libcuda.so.1 cannot be opened, or lacks an entry point we need
  NoDevice,        ///< cuInit failed or no device is visible
  InvalidArgument, ///< bad files, metadata, shapes, strides or pointers; nothing was launched
  DriverCall,      ///< a driver call returned an error
};

/// The error payload of this runtime: a kind and a message saying what was attempted and why it
/// failed (for driver calls: the call, its arguments and the driver's error name and text).
class RuntimeError : public llvm::ErrorInfo<RuntimeError> {
public:
  static char ID;
  RuntimeError(ErrorKind kind, std::string message)
      : kind(kind), message(std::move(message)) {}
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override;

  ErrorKind kind;
  std::string message;
};

llvm::Error makeError(ErrorKind kind, const llvm::Twine &message);

/// A consumed error: its kind (DriverCall for errors that are not RuntimeErrors) and message.
struct ErrorReport {
  ErrorKind kind = ErrorKind::DriverCall;
  std::string message;
};
ErrorReport takeReport(llvm::Error error);

/// The device behind the current context.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int computeMajor = 0, computeMinor = 0;
  /// Shared memory one block may opt in to (cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES).
  int maxSharedBytesPerBlockOptin = 0;
  int multiprocessorCount = 0;
  int l2CacheBytes = 0;
};

/// The process's driver: opened, initialized and checked for a device once, then kept for the
/// life of the process (never dlclose'd: modules and buffers may outlive any owner, and unloading
/// libcuda during exit races the driver's own teardown).
class Driver {
public:
  /// The driver, or why there is none (ErrorKind::NoDriver or NoDevice). Thread-safe; the first
  /// call does the work and later calls return its result.
  static llvm::Expected<Driver &> get();

  /// cuDriverGetVersion, e.g. 13000 for CUDA 13.0.
  int version() const { return driverVersion; }
  int deviceCount() const { return devices; }

  /// The context current on the calling thread; if there is none, device 0's primary context,
  /// retained for the life of the process and made current.
  llvm::Expected<CUctx_st *> currentContext();
  llvm::Expected<DeviceInfo> currentDevice();
  /// Makes `context` current on the calling thread (e.g. a worker thread loading modules for a
  /// context another thread uses).
  llvm::Error setCurrentContext(CUctx_st *context);
  /// Waits for all work in the current context (cuCtxSynchronize); reports asynchronous errors
  /// of earlier launches.
  llvm::Error synchronize();

private:
  Driver() = default;
  int driverVersion = 0;
  int devices = 0;
};

class Stream;

/// Device memory, freed when this object goes. Allocated in (and freed while) the context
/// current on the calling thread.
class DeviceBuffer {
public:
  static llvm::Expected<DeviceBuffer> allocate(size_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer &&other) noexcept;
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer();

  DevicePtr address() const { return base; }
  size_t size() const { return bytes; }
  /// Synchronous copies of `count` bytes at byte `offset` into the buffer (bounds-checked).
  llvm::Error upload(const void *host, size_t count, size_t offset = 0);
  llvm::Error download(void *host, size_t count, size_t offset = 0) const;
  /// Sets every byte to `value` (e.g. 0xFF: NaN in bf16, f16 and f32, to poison outputs).
  llvm::Error fill(uint8_t value);
  /// The same, enqueued on `stream` (e.g. to flush the L2 cache between timed launches).
  llvm::Error fillAsync(uint8_t value, const Stream &stream);

private:
  DeviceBuffer(DevicePtr base, size_t bytes) : base(base), bytes(bytes) {}
  void release();
  DevicePtr base = 0;
  size_t bytes = 0;
};

/// A non-blocking stream of the current context, destroyed with this object.
class Stream {
public:
  static llvm::Expected<Stream> create();
  Stream(Stream &&other) noexcept;
  Stream &operator=(Stream &&other) noexcept;
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  ~Stream();

  CUstream_st *handle() const { return stream; }
  llvm::Error synchronize() const;

private:
  explicit Stream(CUstream_st *stream) : stream(stream) {}
  void release();
  CUstream_st *stream = nullptr;
};

/// A CUDA event of the current context (timing enabled), destroyed with this object: what the
/// autotuner times launches with.
class Event {
public:
  static llvm::Expected<Event> create();
  Event(Event &&other) noexcept;
  Event &operator=(Event &&other) noexcept;
  Event(const Event &) = delete;
  Event &operator=(const Event &) = delete;
  ~Event();

  /// Records the event on `stream` (cuEventRecord).
  llvm::Error record(const Stream &stream);
  /// Waits until the work before the recorded event finished.
  llvm::Error synchronize() const;
  /// Milliseconds between two recorded, completed events (cuEventElapsedTime).
  static llvm::Expected<float> elapsedMilliseconds(const Event &start, const Event &end);

private:
  explicit Event(CUevent_st *event) : event(event) {}
  void release();
  CUevent_st *event = nullptr;
};

} // namespace tilefuse::runtime::cuda

#endif
