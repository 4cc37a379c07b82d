//===- DriverApi.h - the CUDA driver entry points we call -------*- C++ -*-===//
//
// The few CUDA driver types, constants and entry points the runtime uses, declared here instead of
// taken from cuda.h so that the runtime builds on machines without the CUDA toolkit (CI) and links
// no CUDA library. Values and prototypes are those of cuda.h (CUDA 13.0), whose ABI the driver
// keeps stable per entry point version; DriverApiCheck.cpp compares them with cuda.h wherever a
// toolkit is installed.
//
// Each entry point is the variant a given CUDA version introduced (cuGetProcAddress's
// `cudaVersion`): e.g. cuMemAlloc at 3020 is cuMemAlloc_v2, the one with 64-bit CUdeviceptr.
// The member is named after the symbol libcuda exports for that variant, so a reader sees which
// prototype is meant and the dlsym fallback knows what to look up.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_LIB_CUDA_DRIVERAPI_H
#define TILEFUSE_RUNTIME_LIB_CUDA_DRIVERAPI_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstddef>
#include <cstdint>

// Opaque handles, spelled as cuda.h spells them so both can be included in one file.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;

namespace tilefuse::runtime::cuda::detail {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = CUctx_st *;
using CUmodule = CUmod_st *;
using CUfunction = CUfunc_st *;
using CUstream = CUstream_st *;
using CUevent = CUevent_st *;
using CUjit_option = int;
using CUdevice_attribute = int;
using CUfunction_attribute = int;
using CUtensorMapDataType = int;
using CUtensorMapInterleave = int;
using CUtensorMapSwizzle = int;
using CUtensorMapL2promotion = int;
using CUtensorMapFloatOOBfill = int;

/// A TMA descriptor (cuda.h's CUtensorMap): opaque, 128 bytes. cuTensorMapEncodeTiled needs it
/// 64-byte aligned (cuda.h asks for 128 where the language allows; the driver, for 64).
struct alignas(64) CUtensorMap {
  unsigned long long opaque[16];
};

enum : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_NOT_FOUND = 500,
};

enum : int {
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_LOG_VERBOSE = 12,
};

enum : int {
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

enum : int {
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

enum : unsigned {
  CU_STREAM_NON_BLOCKING = 1,
};

enum : unsigned {
  CU_EVENT_DEFAULT = 0,
};

// The tensor maps of TMA kernels (LaunchAbi.h: bf16 or f16 elements, SWIZZLE_128B, zero fill).
enum : int {
  CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6,
  CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9,
};

enum : int {
  CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
};

enum : int {
  CU_TENSOR_MAP_SWIZZLE_128B = 3,
};

enum : int {
  CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3,
};

enum : int {
  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0,
};

enum : int {
  CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1,
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
};

/// cuGetProcAddress_v2 (CUDA 12.0): the one entry point looked up with dlsym.
using GetProcAddressFn = CUresult (*)(const char *symbol, void **pfn, int cudaVersion,
                                      uint64_t flags, int *symbolStatus);

/// The driver entry points the runtime calls; Driver.cpp's table lists each with its version.
struct DriverApi {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuGetErrorName)(CUresult error, const char **name);
  CUresult (*cuGetErrorString)(CUresult error, const char **text);

  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
  CUresult (*cuDeviceGetName)(char *name, int length, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int *value, CUdevice_attribute attribute, CUdevice device);

  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *context, CUdevice device);
  CUresult (*cuCtxGetCurrent)(CUcontext *context);
  CUresult (*cuCtxSetCurrent)(CUcontext context);
  CUresult (*cuCtxPushCurrent_v2)(CUcontext context);
  CUresult (*cuCtxPopCurrent_v2)(CUcontext *context);
  CUresult (*cuCtxGetDevice)(CUdevice *device);
  CUresult (*cuCtxSynchronize)();

  CUresult (*cuModuleLoadDataEx)(CUmodule *module, const void *image, unsigned numOptions,
                                 CUjit_option *options, void **optionValues);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction *function, CUmodule module, const char *name);
  CUresult (*cuFuncGetAttribute)(int *value, CUfunction_attribute attribute, CUfunction function);
  CUresult (*cuFuncSetAttribute)(CUfunction function, CUfunction_attribute attribute, int value);
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *blocks, CUfunction function,
                                                          int blockSize, size_t sharedBytes);
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned gridX, unsigned gridY, unsigned gridZ,
                             unsigned blockX, unsigned blockY, unsigned blockZ,
                             unsigned sharedMemBytes, CUstream stream, void **kernelParams,
                             void **extra);

  CUresult (*cuMemAlloc_v2)(CUdeviceptr *address, size_t bytes);
  CUresult (*cuMemFree_v2)(CUdeviceptr address);
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr dst, const void *src, size_t bytes);
  CUresult (*cuMemcpyDtoH_v2)(void *dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemsetD8_v2)(CUdeviceptr dst, unsigned char value, size_t count);
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t count,
                              CUstream stream);

  CUresult (*cuStreamCreate)(CUstream *stream, unsigned flags);
  CUresult (*cuStreamDestroy_v2)(CUstream stream);
  CUresult (*cuStreamSynchronize)(CUstream stream);

  CUresult (*cuEventCreate)(CUevent *event, unsigned flags);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  /// Optional (null where the lookup fails): CudaBackwardKernel then waits on the host.
  CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned flags);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventElapsedTime)(float *milliseconds, CUevent start, CUevent end);
  CUresult (*cuEventDestroy_v2)(CUevent event);

  /// CUDA 12.0; null where the driver is older (only TMA kernels need it: their launches say
  /// so, every other launch works).
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap *tensorMap, CUtensorMapDataType dataType,
                                     uint32_t rank, void *globalAddress,
                                     const uint64_t *globalDim, const uint64_t *globalStrides,
                                     const uint32_t *boxDim, const uint32_t *elementStrides,
                                     CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                     CUtensorMapL2promotion l2Promotion,
                                     CUtensorMapFloatOOBfill oobFill);
};

/// The entry points of the process's driver. Only valid after Driver::get() succeeded.
const DriverApi &api();

/// Success, or an ErrorKind::DriverCall error "<what>: CUDA_ERROR_X (description)".
llvm::Error check(CUresult result, const llvm::Twine &what);

/// Makes `context` (where a module was loaded) current on the calling thread if none is, and
/// refuses a launch of `kernel` from another context.
llvm::Error useLoadedContext(CUcontext context, const std::string &kernel);

/// A file's text (a PTX module or a sidecar), or an InvalidArgument error naming it.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> readTextFile(llvm::StringRef path);

} // namespace tilefuse::runtime::cuda::detail

#endif
