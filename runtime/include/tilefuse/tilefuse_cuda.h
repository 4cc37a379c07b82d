/*===- tilefuse_cuda.h - C API of the tilefuse CUDA runtime --------*- C -*-===*
 *
 * A stable C interface to load compiled tilefuse kernels (PTX + JSON sidecar) and launch them on
 * device pointers, for applications in any language and for Python through ctypes
 * (libtilefuse_cuda.so). It links no CUDA library: libcuda.so.1 is opened at run time, and a
 * machine without a driver or GPU gets TILEFUSE_ERROR_UNAVAILABLE, never a crash.
 *
 * Every function that can fail returns a tilefuse_status and, when `err` is not NULL, writes a
 * NUL-terminated message of at most `errlen` bytes (truncated) into it.
 *
 * Kernels use the CUDA context current on the calling thread at load time (an application's,
 * e.g. PyTorch's), or device 0's primary context when none is current, and must be launched with
 * that context current (or none).
 *
 *===----------------------------------------------------------------------===*/
#ifndef TILEFUSE_TILEFUSE_CUDA_H
#define TILEFUSE_TILEFUSE_CUDA_H

#include "tilefuse/tilefuse_status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* tilefuse_status: TILEFUSE_OK, TILEFUSE_ERROR_UNAVAILABLE (no driver or GPU),
 * TILEFUSE_ERROR_INVALID_ARGUMENT (nothing was launched), TILEFUSE_ERROR_CUDA (a driver call
 * failed), ... */

/* A loaded kernel. */
typedef struct tilefuse_kernel tilefuse_kernel;

/* TILEFUSE_OK when a driver and a GPU are there. */
int tilefuse_cuda_available(char *err, size_t errlen);

/* Loads <name>.ptx and its JSON sidecar (json_path NULL: ptx_path with .json for .ptx), as
 * `tilefuse compile --emit ptx` writes them. A sidecar without "declared_sizes" (from a tilefuse
 * that did not record the sizes the kernel's signature fixes) is refused with
 * TILEFUSE_ERROR_INVALID_ARGUMENT: compile the kernel again. */
int tilefuse_cuda_load(const char *ptx_path, const char *json_path, tilefuse_kernel **out,
                       char *err, size_t errlen);

/* Same from memory: NUL-terminated PTX text and sidecar JSON text. */
int tilefuse_cuda_load_data(const char *ptx, const char *json, tilefuse_kernel **out, char *err,
                            size_t errlen);

/* Enqueues the kernel on `stream` (a CUstream; NULL: the legacy default stream).
 * q, o: B x H x M x D and k, v: B x Hkv x N x D device pointers in the kernel's dtype; lse:
 * B x H x M float32. `strides`: 14 element strides in the order q_b, q_h, q_m, k_b, k_h, k_n,
 * v_b, v_h, v_n, o_b, o_h, o_m, lse_b, lse_h (innermost dimensions contiguous), or NULL for
 * contiguous tensors. Shapes are checked (every size the kernel declares, e.g. gqa's H = 8 and
 * Hkv = 2; H % Hkv == 0; D == the kernel's head dim; ...) before anything is launched.
 * Asynchronous: faults inside the kernel surface at the next synchronization. Thread-safe. */
int tilefuse_cuda_launch(const tilefuse_kernel *kernel, void *stream, const void *q,
                         const void *k, const void *v, void *o, void *lse, int64_t B, int64_t H,
                         int64_t Hkv, int64_t M, int64_t N, int64_t D, const int64_t *strides,
                         char *err, size_t errlen);

/* tilefuse_cuda_launch with a split-KV kernel's key splits (its sidecar says "split_kv"): each
 * row block's keys shared out over `kv_splits` CTAs; 0 lets the launcher choose, as
 * tilefuse_cuda_launch does. An unsplit kernel takes 0 or 1. */
int tilefuse_cuda_launch_split(const tilefuse_kernel *kernel, void *stream, const void *q,
                               const void *k, const void *v, void *o, void *lse, int64_t B,
                               int64_t H, int64_t Hkv, int64_t M, int64_t N, int64_t D,
                               const int64_t *strides, int64_t kv_splits, char *err,
                               size_t errlen);

/* A paged-KV kernel's launch (its sidecar says "paged_kv"; `tilefuse compile --paged-kv`): k_cache
 * and v_cache are caches of `pages` pages of `page_size` rows, pages x Hkv x page_size x D with
 * the strides k_b, k_h, k_n (and v_...) of a page, a head and a row: vLLM's and FlashInfer's
 * [pages, page_size, Hkv, D] layout is page_size*Hkv*D, D, Hkv*D. Batch b's key/value row n is
 * row n % page_size of page page_table[b * table_stride + n / page_size]; page_table (B rows
 * of pages_per_sequence >= 1 entries) and kv_lengths (B) are int32 device pointers, and N is an
 * upper bound of the lengths (the split count is chosen by it). The table's entries must be
 * pages of the caches: they are on the device and not checked. `strides` as in
 * tilefuse_cuda_launch, not NULL. kv_splits as in tilefuse_cuda_launch_split. */
int tilefuse_cuda_launch_paged(const tilefuse_kernel *kernel, void *stream, const void *q,
                               const void *k_cache, const void *v_cache, void *o, void *lse,
                               int64_t B, int64_t H, int64_t Hkv, int64_t M, int64_t N, int64_t D,
                               const int64_t *strides, const int32_t *page_table,
                               int64_t pages_per_sequence, int64_t table_stride,
                               const int32_t *kv_lengths, int64_t page_size, int64_t pages,
                               int64_t kv_splits, char *err, size_t errlen);

/* A varlen kernel's launch (its sidecar says "varlen"; `tilefuse compile --varlen`): q and o
 * hold total_q packed query rows, k and v total_k key/value rows, one sequence after another
 * (FlashAttention's varlen THD layout, [tokens, heads, D], with the strides q_h, q_m etc. of a
 * head and a row; the batch strides are not read), lse [H, total_q] (lse_h = total_q). Sequence
 * b's query rows are cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1, its key rows those of
 * cu_seqlens_k: B + 1 non-decreasing int32 device pointers each, within the totals (device
 * memory: not checked). B counts the sequences; M and N bound their query and key lengths (the
 * grid covers M rows a sequence). `strides` as in tilefuse_cuda_launch, not NULL. */
int tilefuse_cuda_launch_varlen(const tilefuse_kernel *kernel, void *stream, const void *q,
                                const void *k, const void *v, void *o, void *lse, int64_t B,
                                int64_t H, int64_t Hkv, int64_t M, int64_t N, int64_t D,
                                const int64_t *strides, const int32_t *cu_seqlens_q,
                                const int32_t *cu_seqlens_k, int64_t total_q, int64_t total_k,
                                char *err, size_t errlen);

/* A paged varlen kernel's launch (its sidecar says "paged_kv" and "varlen"; `tilefuse compile
 * --paged-kv --varlen`: chunked prefill over a paged cache, FlashAttention's varlen API with a
 * block table and seqused_k): q, o and lse packed as in tilefuse_cuda_launch_varlen (total_q
 * rows at the offsets cu_seqlens_q, M bounding the sequences' query lengths), k_cache, v_cache,
 * the table and the lengths as in tilefuse_cuda_launch_paged (sequence b's keys are its
 * kv_lengths[b] rows, N bounds them). `strides` as in tilefuse_cuda_launch, not NULL. */
int tilefuse_cuda_launch_paged_varlen(const tilefuse_kernel *kernel, void *stream, const void *q,
                                      const void *k_cache, const void *v_cache, void *o,
                                      void *lse, int64_t B, int64_t H, int64_t Hkv, int64_t M,
                                      int64_t N, int64_t D, const int64_t *strides,
                                      const int32_t *page_table, int64_t pages_per_sequence,
                                      int64_t table_stride, const int32_t *kv_lengths,
                                      int64_t page_size, int64_t pages,
                                      const int32_t *cu_seqlens_q, int64_t total_q, char *err,
                                      size_t errlen);

/* Unloads the kernel; NULL is ignored. */
void tilefuse_cuda_free(tilefuse_kernel *kernel);

/* A loaded derived backward: the three kernels of `tilefuse compile --backward` (preprocess,
 * key_gradients, query_gradients), launched in order. */
typedef struct tilefuse_backward tilefuse_backward;

/* Loads the backward's PTX and its sidecar, a JSON array of the three phases' metadata
 * (json_path NULL: ptx_path with .json for .ptx). */
int tilefuse_cuda_backward_load(const char *ptx_path, const char *json_path,
                                tilefuse_backward **out, char *err, size_t errlen);

/* Enqueues the backward on `stream` (a CUstream; NULL: the legacy default stream): from q, k, v,
 * the forward's o and lse and the incoming gradient d_o, writes d_q, d_k and d_v (dQ and dO are
 * B x H x M x D like Q, dK and dV B x Hkv x N x D like K, in the kernel's dtype). `strides`: 26
 * element strides, every dimension but the innermost: tilefuse_cuda_launch's 14 (q, k, v, o,
 * lse), then d_o, d_q, d_k, d_v (3 each), as tilefuse_host_attention_backward takes them; NULL:
 * all contiguous. The workspaces (f32: B*H*M, plus B*H*M*D
 * unless the backward is deterministic) are the handle's, grown on demand; launches that share
 * a handle are ordered on one stream. */
int tilefuse_cuda_backward_launch(const tilefuse_backward *backward, void *stream, const void *q,
                                  const void *k, const void *v, const void *o, const void *d_o,
                                  const void *lse, void *d_q, void *d_k, void *d_v, int64_t B,
                                  int64_t H, int64_t Hkv, int64_t M, int64_t N, int64_t D,
                                  const int64_t *strides, char *err, size_t errlen);

/* Unloads the backward (after its launches have finished); NULL is ignored. */
void tilefuse_cuda_backward_free(tilefuse_backward *backward);

/* The sidecar's fields; the strings live as long as the kernel. */
const char *tilefuse_cuda_kernel_name(const tilefuse_kernel *kernel);
const char *tilefuse_cuda_kernel_dtype(const tilefuse_kernel *kernel); /* "bf16" or "f16" */
int64_t tilefuse_cuda_kernel_head_dim(const tilefuse_kernel *kernel);

#ifdef __cplusplus
}
#endif

#endif /* TILEFUSE_TILEFUSE_CUDA_H */
