//===- DriverApiCheck.cpp - DriverApi.h against cuda.h --------------------===//
//
// Compile-time only: where a CUDA toolkit is installed, checks that the types and constants
// DriverApi.h declares by hand are those of cuda.h. It contributes no code.
//
//===----------------------------------------------------------------------===//
#include "DriverApi.h"

#include <cuda.h>

#include <type_traits>

namespace cu = tilefuse::runtime::cuda::detail;

static_assert(std::is_same_v<cu::CUcontext, ::CUcontext>);
static_assert(std::is_same_v<cu::CUmodule, ::CUmodule>);
static_assert(std::is_same_v<cu::CUfunction, ::CUfunction>);
static_assert(std::is_same_v<cu::CUstream, ::CUstream>);
static_assert(std::is_same_v<cu::CUevent, ::CUevent>);
static_assert(std::is_same_v<cu::CUdeviceptr, ::CUdeviceptr>);
static_assert(std::is_same_v<cu::CUdevice, ::CUdevice>);
static_assert(sizeof(cu::CUresult) == sizeof(::CUresult));
static_assert(sizeof(cu::CUjit_option) == sizeof(::CUjit_option));
static_assert(sizeof(cu::CUtensorMapDataType) == sizeof(::CUtensorMapDataType));
static_assert(sizeof(cu::CUtensorMapInterleave) == sizeof(::CUtensorMapInterleave));
static_assert(sizeof(cu::CUtensorMapSwizzle) == sizeof(::CUtensorMapSwizzle));
static_assert(sizeof(cu::CUtensorMapL2promotion) == sizeof(::CUtensorMapL2promotion));
static_assert(sizeof(cu::CUtensorMapFloatOOBfill) == sizeof(::CUtensorMapFloatOOBfill));
// The same bytes; ours is aligned as the driver requires, cuda.h's (in C++) more.
static_assert(sizeof(cu::CUtensorMap) == sizeof(::CUtensorMap));
static_assert(sizeof(cu::CUtensorMap::opaque) / sizeof(cu::CUtensorMap::opaque[0]) ==
              CU_TENSOR_MAP_NUM_QWORDS);
static_assert(alignof(cu::CUtensorMap) == 64 && alignof(::CUtensorMap) % 64 == 0);

#define TILEFUSE_SAME_VALUE(NAME) static_assert(int(cu::NAME) == int(::NAME), #NAME)
TILEFUSE_SAME_VALUE(CUDA_SUCCESS);
TILEFUSE_SAME_VALUE(CUDA_ERROR_NO_DEVICE);
TILEFUSE_SAME_VALUE(CUDA_ERROR_NOT_FOUND);
TILEFUSE_SAME_VALUE(CU_JIT_INFO_LOG_BUFFER);
TILEFUSE_SAME_VALUE(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
TILEFUSE_SAME_VALUE(CU_JIT_ERROR_LOG_BUFFER);
TILEFUSE_SAME_VALUE(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
TILEFUSE_SAME_VALUE(CU_JIT_LOG_VERBOSE);
TILEFUSE_SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
TILEFUSE_SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
TILEFUSE_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
TILEFUSE_SAME_VALUE(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
TILEFUSE_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
TILEFUSE_SAME_VALUE(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
TILEFUSE_SAME_VALUE(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
TILEFUSE_SAME_VALUE(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
TILEFUSE_SAME_VALUE(CU_FUNC_ATTRIBUTE_NUM_REGS);
TILEFUSE_SAME_VALUE(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
TILEFUSE_SAME_VALUE(CU_STREAM_NON_BLOCKING);
TILEFUSE_SAME_VALUE(CU_EVENT_DEFAULT);
TILEFUSE_SAME_VALUE(CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
TILEFUSE_SAME_VALUE(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
TILEFUSE_SAME_VALUE(CU_TENSOR_MAP_INTERLEAVE_NONE);
TILEFUSE_SAME_VALUE(CU_TENSOR_MAP_SWIZZLE_128B);
TILEFUSE_SAME_VALUE(CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
TILEFUSE_SAME_VALUE(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
TILEFUSE_SAME_VALUE(CU_GET_PROC_ADDRESS_LEGACY_STREAM);
TILEFUSE_SAME_VALUE(CU_GET_PROC_ADDRESS_SUCCESS);
#undef TILEFUSE_SAME_VALUE

// Each DriverApi member against the prototype of the variant it is resolved as (cudaTypedefs.h's
// PFN_<name>_v<version>), with cuda.h's enum parameters compared by size.
#include <cudaTypedefs.h>

template <typename Ours, typename Theirs> struct SameShape : std::false_type {};
template <typename R1, typename R2, typename... A1, typename... A2>
struct SameShape<R1 (*)(A1...), R2(CUDAAPI *)(A2...)>
    : std::bool_constant<sizeof(R1) == sizeof(R2) && sizeof...(A1) == sizeof...(A2) &&
                         ((sizeof(A1) == sizeof(A2)) && ...)> {};

#define TILEFUSE_SAME_PROTOTYPE(MEMBER, NAME, VERSION)                                             \
  static_assert(SameShape<decltype(cu::DriverApi::MEMBER), PFN_##NAME##_v##VERSION>::value,       \
                #MEMBER)
TILEFUSE_SAME_PROTOTYPE(cuInit, cuInit, 2000);
TILEFUSE_SAME_PROTOTYPE(cuDriverGetVersion, cuDriverGetVersion, 2020);
TILEFUSE_SAME_PROTOTYPE(cuGetErrorName, cuGetErrorName, 6000);
TILEFUSE_SAME_PROTOTYPE(cuGetErrorString, cuGetErrorString, 6000);
TILEFUSE_SAME_PROTOTYPE(cuDeviceGetCount, cuDeviceGetCount, 2000);
TILEFUSE_SAME_PROTOTYPE(cuDeviceGet, cuDeviceGet, 2000);
TILEFUSE_SAME_PROTOTYPE(cuDeviceGetName, cuDeviceGetName, 2000);
TILEFUSE_SAME_PROTOTYPE(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000);
TILEFUSE_SAME_PROTOTYPE(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000);
TILEFUSE_SAME_PROTOTYPE(cuCtxGetCurrent, cuCtxGetCurrent, 4000);
TILEFUSE_SAME_PROTOTYPE(cuCtxSetCurrent, cuCtxSetCurrent, 4000);
TILEFUSE_SAME_PROTOTYPE(cuCtxPushCurrent_v2, cuCtxPushCurrent, 4000);
TILEFUSE_SAME_PROTOTYPE(cuCtxPopCurrent_v2, cuCtxPopCurrent, 4000);
TILEFUSE_SAME_PROTOTYPE(cuCtxGetDevice, cuCtxGetDevice, 2000);
TILEFUSE_SAME_PROTOTYPE(cuCtxSynchronize, cuCtxSynchronize, 2000);
TILEFUSE_SAME_PROTOTYPE(cuModuleLoadDataEx, cuModuleLoadDataEx, 2010);
TILEFUSE_SAME_PROTOTYPE(cuModuleUnload, cuModuleUnload, 2000);
TILEFUSE_SAME_PROTOTYPE(cuModuleGetFunction, cuModuleGetFunction, 2000);
TILEFUSE_SAME_PROTOTYPE(cuFuncGetAttribute, cuFuncGetAttribute, 2020);
TILEFUSE_SAME_PROTOTYPE(cuFuncSetAttribute, cuFuncSetAttribute, 9000);
TILEFUSE_SAME_PROTOTYPE(cuOccupancyMaxActiveBlocksPerMultiprocessor,
                        cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050);
TILEFUSE_SAME_PROTOTYPE(cuLaunchKernel, cuLaunchKernel, 4000);
TILEFUSE_SAME_PROTOTYPE(cuMemAlloc_v2, cuMemAlloc, 3020);
TILEFUSE_SAME_PROTOTYPE(cuMemFree_v2, cuMemFree, 3020);
TILEFUSE_SAME_PROTOTYPE(cuMemcpyHtoD_v2, cuMemcpyHtoD, 3020);
TILEFUSE_SAME_PROTOTYPE(cuMemcpyDtoH_v2, cuMemcpyDtoH, 3020);
TILEFUSE_SAME_PROTOTYPE(cuMemsetD8_v2, cuMemsetD8, 3020);
TILEFUSE_SAME_PROTOTYPE(cuStreamCreate, cuStreamCreate, 2000);
TILEFUSE_SAME_PROTOTYPE(cuStreamDestroy_v2, cuStreamDestroy, 4000);
TILEFUSE_SAME_PROTOTYPE(cuStreamSynchronize, cuStreamSynchronize, 2000);
TILEFUSE_SAME_PROTOTYPE(cuMemsetD8Async, cuMemsetD8Async, 3020);
TILEFUSE_SAME_PROTOTYPE(cuEventCreate, cuEventCreate, 2000);
TILEFUSE_SAME_PROTOTYPE(cuEventRecord, cuEventRecord, 2000);
TILEFUSE_SAME_PROTOTYPE(cuStreamWaitEvent, cuStreamWaitEvent, 3020);
TILEFUSE_SAME_PROTOTYPE(cuEventSynchronize, cuEventSynchronize, 2000);
// cuda.h #defines cuEventElapsedTime as the CUDA 12.8 variant (_v2); the member is the 2000
// variant, which libcuda exports under the plain name.
#undef cuEventElapsedTime
TILEFUSE_SAME_PROTOTYPE(cuEventElapsedTime, cuEventElapsedTime, 2000);
TILEFUSE_SAME_PROTOTYPE(cuEventDestroy_v2, cuEventDestroy, 4000);
TILEFUSE_SAME_PROTOTYPE(cuTensorMapEncodeTiled, cuTensorMapEncodeTiled, 12000);
static_assert(SameShape<cu::GetProcAddressFn, PFN_cuGetProcAddress_v12000>::value,
              "cuGetProcAddress_v2");
#undef TILEFUSE_SAME_PROTOTYPE
