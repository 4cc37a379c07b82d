//===- CApi.cpp - C API of the tilefuse CUDA runtime ----------------------===//
#include "tilefuse/tilefuse_cuda.h"

#include "tilefuse/runtime/cuda/CudaBackwardKernel.h"
#include "tilefuse/runtime/cuda/CudaKernel.h"

#include <cstring>

using namespace tilefuse::runtime::cuda;

struct tilefuse_kernel {
  std::unique_ptr<CudaKernel> kernel;
  std::string dtype;
};

struct tilefuse_backward {
  std::unique_ptr<CudaBackwardKernel> kernel;
};

namespace {

int statusOf(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::NoDriver:
  case ErrorKind::NoDevice:
    return TILEFUSE_ERROR_UNAVAILABLE;
  case ErrorKind::InvalidArgument:
    return TILEFUSE_ERROR_INVALID_ARGUMENT;
  case ErrorKind::DriverCall:
    return TILEFUSE_ERROR_CUDA;
  }
  return TILEFUSE_ERROR_CUDA;
}

/// Copies `message` into the caller's buffer, truncated and NUL-terminated.
void writeMessage(const std::string &message, char *err, size_t errlen) {
  if (!err || errlen == 0)
    return;
  size_t n = std::min(message.size(), errlen - 1);
  std::memcpy(err, message.data(), n);
  err[n] = '\0';
}

int report(llvm::Error error, char *err, size_t errlen) {
  if (!error) {
    writeMessage("", err, errlen);
    return TILEFUSE_OK;
  }
  ErrorReport report = takeReport(std::move(error));
  writeMessage(report.message, err, errlen);
  return statusOf(report.kind);
}

int invalidArgument(const char *message, char *err, size_t errlen) {
  return report(makeError(ErrorKind::InvalidArgument, message), err, errlen);
}

int adopt(llvm::Expected<std::unique_ptr<CudaKernel>> kernel, tilefuse_kernel **out, char *err,
          size_t errlen) {
  if (!kernel)
    return report(kernel.takeError(), err, errlen);
  auto *handle = new tilefuse_kernel{std::move(*kernel), ""};
  handle->dtype = dtypeName(handle->kernel->metadata().dtype).str();
  *out = handle;
  return report(llvm::Error::success(), err, errlen);
}

DevicePtr address(const void *pointer) {
  return static_cast<DevicePtr>(reinterpret_cast<uintptr_t>(pointer));
}

/// Every launch form of the C API: `function`'s argument checks (the kernel; the strides where
/// `stridesNeeded` names what they describe, else NULL strides are contiguous), then
/// CudaKernel::launch, which checks the rest.
int launchForm(const char *function, const char *stridesNeeded, const tilefuse_kernel *kernel,
               void *stream, const void *q, const void *k, const void *v, void *o, void *lse,
               const AttentionShape &shape, const int64_t *strides, int64_t kvSplits,
               const tilefuse::runtime::PagedKV *paged, const tilefuse::runtime::Varlen *varlen,
               char *err, size_t errlen) {
  if (!kernel)
    return invalidArgument((std::string(function) + ": kernel is NULL").c_str(), err, errlen);
  if (!strides && stridesNeeded)
    return invalidArgument((std::string(function) + ": strides must not be NULL (" +
                            stridesNeeded + ")")
                               .c_str(),
                           err, errlen);
  AttentionBuffers buffers{address(q), address(k), address(v), address(o), address(lse)};
  AttentionStrides layout = strides ? AttentionStrides::fromArray(strides)
                                    : AttentionStrides::contiguous(shape);
  return report(kernel->kernel->launch(static_cast<CUstream_st *>(stream), buffers, shape, layout,
                                       kvSplits, paged, varlen),
                err, errlen);
}

} // namespace

int tilefuse_cuda_available(char *err, size_t errlen) {
  auto driver = Driver::get();
  return report(driver ? llvm::Error::success() : driver.takeError(), err, errlen);
}

int tilefuse_cuda_load(const char *ptx_path, const char *json_path, tilefuse_kernel **out,
                       char *err, size_t errlen) {
  if (!out || !ptx_path)
    return invalidArgument("tilefuse_cuda_load: ptx_path and out must not be NULL", err, errlen);
  *out = nullptr;
  return adopt(CudaKernel::loadFiles(ptx_path, json_path ? json_path : ""), out, err, errlen);
}

int tilefuse_cuda_load_data(const char *ptx, const char *json, tilefuse_kernel **out, char *err,
                            size_t errlen) {
  if (!out || !ptx || !json)
    return invalidArgument("tilefuse_cuda_load_data: ptx, json and out must not be NULL", err,
                           errlen);
  *out = nullptr;
  auto metadata = KernelMetadata::parse(json, "sidecar");
  if (!metadata)
    return report(metadata.takeError(), err, errlen);
  return adopt(CudaKernel::load(ptx, std::move(*metadata)), out, err, errlen);
}

int tilefuse_cuda_launch_split(const tilefuse_kernel *kernel, void *stream, const void *q,
                               const void *k, const void *v, void *o, void *lse, int64_t B,
                               int64_t H, int64_t Hkv, int64_t M, int64_t N, int64_t D,
                               const int64_t *strides, int64_t kv_splits, char *err,
                               size_t errlen) {
  return launchForm("tilefuse_cuda_launch", nullptr, kernel, stream, q, k, v, o, lse,
                    {B, H, Hkv, M, N, D}, strides, kv_splits, nullptr, nullptr, err, errlen);
}

int tilefuse_cuda_launch_paged(const tilefuse_kernel *kernel, void *stream, const void *q,
                               const void *k_cache, const void *v_cache, void *o, void *lse,
                               int64_t B, int64_t H, int64_t Hkv, int64_t M, int64_t N, int64_t D,
                               const int64_t *strides, const int32_t *page_table,
                               int64_t pages_per_sequence, int64_t table_stride,
                               const int32_t *kv_lengths, int64_t page_size, int64_t pages,
                               int64_t kv_splits, char *err, size_t errlen) {
  auto paged = tilefuse::runtime::PagedKV::of(page_table, pages_per_sequence, table_stride,
                                              kv_lengths, page_size, pages);
  return launchForm("tilefuse_cuda_launch_paged", "the caches' page, head and row strides",
                    kernel, stream, q, k_cache, v_cache, o, lse, {B, H, Hkv, M, N, D}, strides,
                    kv_splits, &paged, nullptr, err, errlen);
}

int tilefuse_cuda_launch_varlen(const tilefuse_kernel *kernel, void *stream, const void *q,
                                const void *k, const void *v, void *o, void *lse, int64_t B,
                                int64_t H, int64_t Hkv, int64_t M, int64_t N, int64_t D,
                                const int64_t *strides, const int32_t *cu_seqlens_q,
                                const int32_t *cu_seqlens_k, int64_t total_q, int64_t total_k,
                                char *err, size_t errlen) {
  auto varlen = tilefuse::runtime::Varlen::of(cu_seqlens_q, cu_seqlens_k, total_q, total_k);
  return launchForm("tilefuse_cuda_launch_varlen", "the packed tensors' head and row strides",
                    kernel, stream, q, k, v, o, lse, {B, H, Hkv, M, N, D}, strides, 0, nullptr,
                    &varlen, err, errlen);
}

int tilefuse_cuda_launch_paged_varlen(const tilefuse_kernel *kernel, void *stream, const void *q,
                                      const void *k_cache, const void *v_cache, void *o,
                                      void *lse, int64_t B, int64_t H, int64_t Hkv, int64_t M,
                                      int64_t N, int64_t D, const int64_t *strides,
                                      const int32_t *page_table, int64_t pages_per_sequence,
                                      int64_t table_stride, const int32_t *kv_lengths,
                                      int64_t page_size, int64_t pages,
                                      const int32_t *cu_seqlens_q, int64_t total_q, char *err,
                                      size_t errlen) {
  auto paged = tilefuse::runtime::PagedKV::of(page_table, pages_per_sequence, table_stride,
                                              kv_lengths, page_size, pages);
  // The keys are the caches': no key offsets.
  auto varlen = tilefuse::runtime::Varlen::of(cu_seqlens_q, nullptr, total_q, 0);
  return launchForm("tilefuse_cuda_launch_paged_varlen",
                    "the packed tensors' and the caches' strides", kernel, stream, q, k_cache,
                    v_cache, o, lse, {B, H, Hkv, M, N, D}, strides, 0, &paged, &varlen, err,
                    errlen);
}

int tilefuse_cuda_launch(const tilefuse_kernel *kernel, void *stream, const void *q,
                         const void *k, const void *v, void *o, void *lse, int64_t B, int64_t H,
                         int64_t Hkv, int64_t M, int64_t N, int64_t D, const int64_t *strides,
                         char *err, size_t errlen) {
  return tilefuse_cuda_launch_split(kernel, stream, q, k, v, o, lse, B, H, Hkv, M, N, D, strides,
                                    /*kv_splits=*/0, err, errlen);
}

void tilefuse_cuda_free(tilefuse_kernel *kernel) { delete kernel; }

const char *tilefuse_cuda_kernel_name(const tilefuse_kernel *kernel) {
  return kernel ? kernel->kernel->metadata().name.c_str() : "";
}

const char *tilefuse_cuda_kernel_dtype(const tilefuse_kernel *kernel) {
  return kernel ? kernel->dtype.c_str() : "";
}

int64_t tilefuse_cuda_kernel_head_dim(const tilefuse_kernel *kernel) {
  return kernel ? kernel->kernel->metadata().headDim : 0;
}

int tilefuse_cuda_backward_load(const char *ptx_path, const char *json_path,
                                tilefuse_backward **out, char *err, size_t errlen) {
  if (!out)
    return invalidArgument("tilefuse_cuda_backward_load: out is NULL", err, errlen);
  *out = nullptr;
  if (!ptx_path)
    return invalidArgument("tilefuse_cuda_backward_load: ptx_path is NULL", err, errlen);
  auto kernel = CudaBackwardKernel::loadFiles(ptx_path, json_path ? json_path : "");
  if (!kernel)
    return report(kernel.takeError(), err, errlen);
  *out = new tilefuse_backward{std::move(*kernel)};
  return report(llvm::Error::success(), err, errlen);
}

int tilefuse_cuda_backward_launch(const tilefuse_backward *backward, void *stream, const void *q,
                                  const void *k, const void *v, const void *o, const void *d_o,
                                  const void *lse, void *d_q, void *d_k, void *d_v, int64_t B,
                                  int64_t H, int64_t Hkv, int64_t M, int64_t N, int64_t D,
                                  const int64_t *strides, char *err, size_t errlen) {
  if (!backward)
    return invalidArgument("tilefuse_cuda_backward_launch: backward is NULL", err, errlen);
  AttentionShape shape{B, H, Hkv, M, N, D};
  BackwardStrides s = strides ? BackwardStrides::fromPublicOrder(strides)
                             : BackwardStrides::contiguous(shape);
  BackwardBuffers buffers{address(q),   address(k),   address(v),
                          address(o),   address(d_o), address(lse),
                          address(d_q), address(d_k), address(d_v)};
  return report(backward->kernel->launch(static_cast<CUstream_st *>(stream), buffers, shape, s),
                err, errlen);
}

void tilefuse_cuda_backward_free(tilefuse_backward *backward) { delete backward; }
