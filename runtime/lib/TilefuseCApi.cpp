//===- TilefuseCApi.cpp - the embeddable runtime: stable C API ------------===//
#include "tilefuse/tilefuse.h"

#include "tilefuse/runtime/Tilefuse.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

using namespace tilefuse;

static_assert(int(StatusCode::Ok) == TILEFUSE_OK);
static_assert(int(StatusCode::Unavailable) == TILEFUSE_ERROR_UNAVAILABLE);
static_assert(int(StatusCode::InvalidArgument) == TILEFUSE_ERROR_INVALID_ARGUMENT);
static_assert(int(StatusCode::Cuda) == TILEFUSE_ERROR_CUDA);
static_assert(int(StatusCode::Compile) == TILEFUSE_ERROR_COMPILE);

struct tilefuse_attention {
  std::shared_ptr<const Kernel> kernel;
  std::string metadata;
  std::string config;
};

struct tilefuse_host_attention {
  std::shared_ptr<const HostAttention> pair;
};

struct tilefuse_backward {
  std::shared_ptr<const Backward> backward;
};

namespace {

/// Writes the message into the caller's buffer, truncated and NUL-terminated; returns the code.
int report(const Status &status, char *err, size_t errlen) {
  if (err && errlen) {
    size_t n = std::min(status.message().size(), errlen - 1);
    std::memcpy(err, status.message().data(), n);
    err[n] = '\0';
  }
  return static_cast<int>(status.code());
}

int invalid(const char *message, char *err, size_t errlen) {
  return report(Status(StatusCode::InvalidArgument, message), err, errlen);
}

} // namespace

void tilefuse_spec_init(tilefuse_spec *spec) {
  if (!spec)
    return;
  std::memset(spec, 0, sizeof *spec);
  spec->size = sizeof *spec;
}

const char *tilefuse_version(void) {
  static const std::string v = tilefuse::version();
  return v.c_str();
}

int tilefuse_gpu_available(char *err, size_t errlen) {
  std::string why;
  if (cudaAvailable(&why))
    return report(Status(), err, errlen);
  return report(Status(StatusCode::Unavailable, why), err, errlen);
}

/// The C spec as a KernelSpec; reads only the fields the caller's (possibly older) struct has.
static int toKernelSpec(const tilefuse_spec *spec, const char *caller, KernelSpec &k, char *err,
                        size_t errlen) {
  // The caller's struct may be older (smaller) than ours: read what it has, default the rest.
  constexpr size_t minimum = offsetof(tilefuse_spec, ptx_features) + sizeof(const char *);
  if (spec->size < minimum)
    return invalid((std::string(caller) + ": spec->size is too small (initialize the spec with "
                                          "tilefuse_spec_init)")
                       .c_str(),
                   err, errlen);
  tilefuse_spec s;
  tilefuse_spec_init(&s);
  std::memcpy(&s, spec, std::min(spec->size, sizeof s));

  auto str = [](const char *p) { return p ? std::string(p) : std::string(); };
  k.kernel = str(s.kernel);
  k.source = str(s.source);
  if (s.source_name)
    k.sourceName = s.source_name;
  k.dtype = str(s.dtype);
  k.headDim = s.head_dim;
  if (s.block_m)
    k.blockM = s.block_m;
  if (s.block_n)
    k.blockN = s.block_n;
  k.arch = str(s.arch);
  k.ptxFeatures = str(s.ptx_features);
  if (spec->size >= offsetof(tilefuse_spec, params) + sizeof(const char *) && s.params) {
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(s.params).split(parts, ',', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef p : parts)
      k.params.push_back(p.trim().str());
  }
  // Added after 0.1.0; an older caller's struct ends before them, so they read as zero (s was
  // initialized before the copy).
  k.config = str(s.config);
  if (s.autotune) {
    llvm::StringRef mode(s.autotune);
    if (mode == "off")
      k.autotune = AutotuneMode::Off;
    else if (mode == "cached")
      k.autotune = AutotuneMode::Cached;
    else if (mode == "on")
      k.autotune = AutotuneMode::On;
    else
      return invalid((std::string(caller) + ": autotune must be off, cached or on, not '" +
                      s.autotune + "'")
                         .c_str(),
                     err, errlen);
  }
  if (s.seq_len < 0)
    return invalid((std::string(caller) + ": seq_len must not be negative").c_str(), err,
                   errlen);
  k.seqLen = s.seq_len;
  k.deterministic = s.deterministic != 0;
  k.splitKv = s.split_kv != 0;
  k.pagedKv = s.paged_kv != 0;
  k.pageSize = s.page_size;
  k.varlen = s.varlen != 0;
  return TILEFUSE_OK;
}

int tilefuse_attention_get(const tilefuse_spec *spec, tilefuse_attention **out, char *err,
                           size_t errlen) {
  if (!spec || !out)
    return invalid("tilefuse_attention_get: spec and out must not be NULL", err, errlen);
  *out = nullptr;
  KernelSpec k;
  if (int rc = toKernelSpec(spec, "tilefuse_attention_get", k, err, errlen))
    return rc;

  std::shared_ptr<const Kernel> kernel;
  Status status = Runtime::global().getKernel(k, kernel);
  if (!status.ok())
    return report(status, err, errlen);
  *out = new tilefuse_attention{kernel, kernel->metadataJson(), kernel->config()};
  return report(Status(), err, errlen);
}

int tilefuse_attention_launch(const tilefuse_attention *kernel, void *stream, const void *q,
                              const void *k, const void *v, void *o, float *lse, int64_t B,
                              int64_t H, int64_t Hkv, int64_t M, int64_t N, int64_t D,
                              const int64_t *strides, char *err, size_t errlen) {
  if (!kernel)
    return invalid("tilefuse_attention_launch: kernel is NULL", err, errlen);
  return report(kernel->kernel->launch(stream, q, k, v, o, lse, {B, H, Hkv, M, N, D}, strides),
                err, errlen);
}

int tilefuse_attention_launch_split(const tilefuse_attention *kernel, void *stream,
                                    const void *q, const void *k, const void *v, void *o,
                                    float *lse, int64_t B, int64_t H, int64_t Hkv, int64_t M,
                                    int64_t N, int64_t D, const int64_t *strides,
                                    int64_t kv_splits, char *err, size_t errlen) {
  if (!kernel)
    return invalid("tilefuse_attention_launch_split: kernel is NULL", err, errlen);
  return report(kernel->kernel->launch(stream, q, k, v, o, lse, {B, H, Hkv, M, N, D}, strides,
                                       kv_splits),
                err, errlen);
}

int tilefuse_attention_launch_paged(const tilefuse_attention *kernel, void *stream,
                                    const void *q, const void *k_cache, const void *v_cache,
                                    void *o, float *lse, int64_t B, int64_t H, int64_t Hkv,
                                    int64_t M, int64_t N, int64_t D, const int64_t *strides,
                                    const int32_t *page_table, int64_t pages_per_sequence,
                                    int64_t table_stride, const int32_t *kv_lengths,
                                    int64_t page_size, int64_t pages, int64_t kv_splits,
                                    char *err, size_t errlen) {
  if (!kernel)
    return invalid("tilefuse_attention_launch_paged: kernel is NULL", err, errlen);
  PagedKV paged = PagedKV::of(page_table, pages_per_sequence, table_stride, kv_lengths,
                              page_size, pages);
  return report(kernel->kernel->launch(stream, q, k_cache, v_cache, o, lse,
                                       {B, H, Hkv, M, N, D}, strides, kv_splits, &paged),
                err, errlen);
}

int tilefuse_attention_launch_varlen(const tilefuse_attention *kernel, void *stream,
                                     const void *q, const void *k, const void *v, void *o,
                                     float *lse, int64_t B, int64_t H, int64_t Hkv, int64_t M,
                                     int64_t N, int64_t D, const int64_t *strides,
                                     const int32_t *cu_seqlens_q, const int32_t *cu_seqlens_k,
                                     int64_t total_q, int64_t total_k, char *err,
                                     size_t errlen) {
  if (!kernel)
    return invalid("tilefuse_attention_launch_varlen: kernel is NULL", err, errlen);
  Varlen varlen = Varlen::of(cu_seqlens_q, cu_seqlens_k, total_q, total_k);
  return report(kernel->kernel->launch(stream, q, k, v, o, lse, {B, H, Hkv, M, N, D}, strides,
                                       0, nullptr, &varlen),
                err, errlen);
}

int tilefuse_attention_launch_paged_varlen(
    const tilefuse_attention *kernel, void *stream, const void *q, const void *k_cache,
    const void *v_cache, void *o, float *lse, int64_t B, int64_t H, int64_t Hkv, int64_t M,
    int64_t N, int64_t D, const int64_t *strides, const int32_t *page_table,
    int64_t pages_per_sequence, int64_t table_stride, const int32_t *kv_lengths,
    int64_t page_size, int64_t pages, const int32_t *cu_seqlens_q, int64_t total_q, char *err,
    size_t errlen) {
  if (!kernel)
    return invalid("tilefuse_attention_launch_paged_varlen: kernel is NULL", err, errlen);
  PagedKV paged = PagedKV::of(page_table, pages_per_sequence, table_stride, kv_lengths,
                              page_size, pages);
  // The keys are the caches': no key offsets.
  Varlen varlen = Varlen::of(cu_seqlens_q, nullptr, total_q, 0);
  return report(kernel->kernel->launch(stream, q, k_cache, v_cache, o, lse,
                                       {B, H, Hkv, M, N, D}, strides, 0, &paged, &varlen),
                err, errlen);
}

void tilefuse_attention_release(tilefuse_attention *kernel) { delete kernel; }

int tilefuse_reference_attention(const tilefuse_spec *spec, const double *q, const double *k,
                                 const double *v, double *o, double *lse, int64_t B, int64_t H,
                                 int64_t Hkv, int64_t M, int64_t N, int64_t D,
                                 const int64_t *strides, char *err, size_t errlen) {
  if (!spec)
    return invalid("tilefuse_reference_attention: spec must not be NULL", err, errlen);
  KernelSpec kernelSpec;
  if (int rc = toKernelSpec(spec, "tilefuse_reference_attention", kernelSpec, err, errlen))
    return rc;
  return report(referenceAttention(kernelSpec, q, k, v, o, lse, {B, H, Hkv, M, N, D}, strides),
                err, errlen);
}

const char *tilefuse_attention_name(const tilefuse_attention *kernel) {
  return kernel ? kernel->kernel->name().c_str() : "";
}
const char *tilefuse_attention_dtype(const tilefuse_attention *kernel) {
  return kernel ? kernel->kernel->dtype().c_str() : "";
}
const char *tilefuse_attention_arch(const tilefuse_attention *kernel) {
  return kernel ? kernel->kernel->arch().c_str() : "";
}
int64_t tilefuse_attention_head_dim(const tilefuse_attention *kernel) {
  return kernel ? kernel->kernel->headDim() : 0;
}
const char *tilefuse_attention_ptx(const tilefuse_attention *kernel) {
  return kernel ? kernel->kernel->ptx().c_str() : "";
}
const char *tilefuse_attention_metadata(const tilefuse_attention *kernel) {
  return kernel ? kernel->metadata.c_str() : "";
}
const char *tilefuse_attention_origin(const tilefuse_attention *kernel) {
  return kernel ? kernel->kernel->origin().c_str() : "";
}

const char *tilefuse_attention_config(const tilefuse_attention *kernel) {
  return kernel ? kernel->config.c_str() : "";
}

const char *tilefuse_attention_config_source(const tilefuse_attention *kernel) {
  return kernel ? kernel->kernel->configSource().c_str() : "";
}

int tilefuse_host_attention_get(const tilefuse_spec *spec, tilefuse_host_attention **out,
                                char *err, size_t errlen) {
  if (!spec || !out)
    return invalid("tilefuse_host_attention_get: spec and out must not be NULL", err, errlen);
  *out = nullptr;
  KernelSpec k;
  if (int rc = toKernelSpec(spec, "tilefuse_host_attention_get", k, err, errlen))
    return rc;
  std::shared_ptr<const HostAttention> pair;
  Status status = Runtime::global().getHostAttention(k, pair);
  if (!status.ok())
    return report(status, err, errlen);
  *out = new tilefuse_host_attention{pair};
  return report(Status(), err, errlen);
}

int tilefuse_host_attention_forward(const tilefuse_host_attention *attention, const void *q,
                                    const void *k, const void *v, void *o, float *lse, int64_t B,
                                    int64_t H, int64_t Hkv, int64_t M, int64_t N, int64_t D,
                                    const int64_t *strides, char *err, size_t errlen) {
  if (!attention)
    return invalid("tilefuse_host_attention_forward: attention is NULL", err, errlen);
  return report(attention->pair->forward(q, k, v, o, lse, {B, H, Hkv, M, N, D}, strides), err,
                errlen);
}

int tilefuse_host_attention_backward(const tilefuse_host_attention *attention, const void *q,
                                     const void *k, const void *v, const void *o,
                                     const void *d_o, const float *lse, void *dq, void *dk,
                                     void *dv, int64_t B, int64_t H, int64_t Hkv, int64_t M,
                                     int64_t N, int64_t D, const int64_t *strides, char *err,
                                     size_t errlen) {
  if (!attention)
    return invalid("tilefuse_host_attention_backward: attention is NULL", err, errlen);
  return report(attention->pair->backward(q, k, v, o, d_o, lse, dq, dk, dv,
                                          {B, H, Hkv, M, N, D}, strides),
                err, errlen);
}

void tilefuse_host_attention_release(tilefuse_host_attention *attention) { delete attention; }

int tilefuse_backward_get(const tilefuse_spec *spec, tilefuse_backward **out, char *err,
                          size_t errlen) {
  if (!spec || !out)
    return invalid("tilefuse_backward_get: spec and out must not be NULL", err, errlen);
  *out = nullptr;
  KernelSpec k;
  if (int rc = toKernelSpec(spec, "tilefuse_backward_get", k, err, errlen))
    return rc;
  std::shared_ptr<const Backward> backward;
  Status status = Runtime::global().getBackward(k, backward);
  if (!status.ok())
    return report(status, err, errlen);
  *out = new tilefuse_backward{backward};
  return report(Status(), err, errlen);
}

int tilefuse_backward_launch(const tilefuse_backward *backward, void *stream, const void *q,
                             const void *k, const void *v, const void *o, const void *d_o,
                             const float *lse, void *dq, void *dk, void *dv, int64_t B, int64_t H,
                             int64_t Hkv, int64_t M, int64_t N, int64_t D,
                             const int64_t *strides, char *err, size_t errlen) {
  if (!backward)
    return invalid("tilefuse_backward_launch: backward is NULL", err, errlen);
  return report(backward->backward->launch(stream, q, k, v, o, d_o, lse, dq, dk, dv,
                                           {B, H, Hkv, M, N, D}, strides),
                err, errlen);
}

void tilefuse_backward_release(tilefuse_backward *backward) { delete backward; }
