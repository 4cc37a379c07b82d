/*===- tilefuse.h - the embeddable runtime: stable C API -----------*- C -*-===*
 *
 * libtilefuse.so: get an attention kernel by bundled name or by DSL text, specialized and
 * configured, compiled in process to PTX (through the kernel cache: memory, then the directory
 * TILEFUSE_CACHE_DIR), and launch it on device pointers, shapes, strides and a CUDA stream.
 *
 *   tilefuse_spec spec;
 *   tilefuse_attention *kernel;
 *   char err[4096];
 *   tilefuse_spec_init(&spec);
 *   spec.kernel = "causal";
 *   if (tilefuse_attention_get(&spec, &kernel, err, sizeof err) != TILEFUSE_OK ||
 *       tilefuse_attention_launch(kernel, stream, q, k, v, o, lse, B, H, Hkv, M, N, 64, NULL,
 *                                 err, sizeof err) != TILEFUSE_OK)
 *     fprintf(stderr, "%s\n", err);
 *   tilefuse_attention_release(kernel);
 *
 * Every function that can fail returns a tilefuse_status and, when `err` is not NULL, writes a
 * NUL-terminated message of at most `errlen` bytes (truncated) into it: for DSL errors
 * (TILEFUSE_ERROR_COMPILE) the compiler's diagnostics with file:line:col. The CUDA driver
 * (libcuda.so.1) is opened at run time; without one, launches return TILEFUSE_ERROR_UNAVAILABLE
 * and everything else still works. All functions are thread-safe.
 *
 * Stability: functions are only added, never changed. tilefuse_spec only grows at its end; its
 * first field says how large the caller's copy is (tilefuse_spec_init sets it).
 *
 *===----------------------------------------------------------------------===*/
#ifndef TILEFUSE_TILEFUSE_H
#define TILEFUSE_TILEFUSE_H

#include "tilefuse/tilefuse_status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Which kernel, specialized and configured how. NULL strings and zero numbers mean "default". */
typedef struct tilefuse_spec {
  size_t size;              /* sizeof(tilefuse_spec) as the caller compiled it */
  const char *kernel;       /* a bundled kernel (attention, causal, ...), or NULL for `source` */
  const char *source;       /* DSL text (a module with one kernel function) */
  const char *source_name;  /* the file name diagnostics give for `source`; NULL: "<source>" */
  const char *dtype;        /* "bf16" or "f16"; NULL: as the kernel is written */
  int64_t head_dim;         /* 0: as the kernel is written */
  int64_t block_m;          /* rows of Q per program, a multiple of 16 up to 256; 0: tuned */
  int64_t block_n;          /* keys per block, a multiple of 16; 0: tuned */
  const char *arch;         /* "sm_90a" or "sm_80"; NULL: the current GPU's (sm_90a without) */
  const char *ptx_features; /* NVPTX features (PTX version); NULL: "+ptx80" */
  const char *params;       /* variant parameters, "NAME=VALUE,NAME=VALUE"; NULL: as written
                               (added in 0.1: callers built before read as NULL by `size`) */
  /* Added after 0.1.0 (callers built before read as NULL / 0 by `size`): */
  const char *config;       /* tile configuration, "Br=64,Bc=128,mma=wgmma,rows_per_warp=16,
                               q=registers,copy_issue=eager" (any subset); block_m / block_n
                               override its Br / Bc; NULL: default or tuned */
  const char *autotune;     /* "off", "cached" (the tuning database's entry when there is one)
                               or "on" (tune on a miss, ~15 s once per kernel, sequence bucket
                               and GPU; written to the database); NULL: TILEFUSE_AUTOTUNE,
                               default off. Only a spec without block_m, block_n and config is
                               tuned. */
  int64_t seq_len;          /* the sequence length it will mostly run at (picks the tuning
                               bucket, 0: 4096; and up to 1024 the default configuration's
                               short-sequence form, 0: the long one) */
  int deterministic;        /* the backward (tilefuse_host_attention, tilefuse_backward_get):
                               nonzero accumulates dQ across key blocks in a fixed order,
                               bitwise the same on every run, instead of by atomic adds; zero
                               lets the GPU backward take the faster (on sm_90a above head dim
                               64, the ordered one); the forward ignores it */
  int split_kv;             /* nonzero: split-KV (each row block's keys shared out over CTAs
                               and merged; decode); each launch picks the split count */
  int paged_kv;             /* nonzero: K and V are paged caches read through a page table
                               (tilefuse_attention_launch_paged); not tuned */
  int64_t page_size;        /* paged_kv: rows per page fixed at compile time (faster), or 0:
                               any, given at each launch */
  int varlen;               /* nonzero: packed batches of variable-length sequences
                               (tilefuse_attention_launch_varlen); with paged_kv, packed
                               queries over the paged cache (tilefuse_attention_launch_paged_
                               varlen); with split_kv, the launcher picks the split count */
} tilefuse_spec;

/* A compiled kernel (a reference to one held by the process-wide runtime). */
typedef struct tilefuse_attention tilefuse_attention;

/* Zeroes `spec` and sets its size. */
void tilefuse_spec_init(tilefuse_spec *spec);

/* "tilefuse <version> build <id> LLVM <version>" (part of every cache key). */
const char *tilefuse_version(void);

/* TILEFUSE_OK when a CUDA driver and a GPU are there. */
int tilefuse_gpu_available(char *err, size_t errlen);

/* The kernel for `spec`, compiled (to PTX, once per distinct spec and compiler), or found in the
 * memory or disk cache. Needs no GPU when spec->arch is given. Release it with
 * tilefuse_attention_release. */
int tilefuse_attention_get(const tilefuse_spec *spec, tilefuse_attention **out, char *err,
                           size_t errlen);

/* The float64 reference of `spec`'s kernel on host arrays, to check what a kernel computed: the
 * kernel's own DSL text (its written form) evaluated naively in float64, specialized by
 * spec->head_dim and spec->params (dtype, block sizes and arch do not change it). q, o:
 * B x H x M x D; k, v: B x Hkv x N x D; lse: B x H x M; all doubles; `strides` as for
 * tilefuse_attention_launch (NULL: contiguous). Sizes the kernel's signature fixes are checked
 * (TILEFUSE_ERROR_INVALID_ARGUMENT); a kernel with no float64 meaning is
 * TILEFUSE_ERROR_COMPILE (file:line:col). Needs no GPU. Fully masked rows give o = 0 and
 * lse = -inf. */
int tilefuse_reference_attention(const tilefuse_spec *spec, const double *q, const double *k,
                                 const double *v, double *o, double *lse, int64_t B, int64_t H,
                                 int64_t Hkv, int64_t M, int64_t N, int64_t D,
                                 const int64_t *strides, char *err, size_t errlen);

/* Enqueues the kernel on `stream` (a CUstream; NULL: the legacy default stream).
 * q, o: B x H x M x D and k, v: B x Hkv x N x D device pointers in the kernel's dtype; lse:
 * B x H x M floats; D must be the kernel's head dim. `strides`: 14 element strides in the order
 * q_b, q_h, q_m, k_b, k_h, k_n, v_b, v_h, v_n, o_b, o_h, o_m, lse_b, lse_h (innermost dimensions
 * contiguous), or NULL for contiguous tensors. Shapes (including every size the kernel's
 * signature fixes, e.g. gqa's H = 8 and Hkv = 2), strides and alignment are checked before
 * anything is launched, and before the CUDA driver is needed (TILEFUSE_ERROR_INVALID_ARGUMENT,
 * the message naming the tensor, dimension, given and declared size). The first launch loads the
 * module into the CUDA context current on the calling thread (device 0's primary context when none
 * is); later launches must run in that context. Asynchronous: faults inside the kernel surface at
 * the next synchronization. */
int tilefuse_attention_launch(const tilefuse_attention *kernel, void *stream, const void *q,
                              const void *k, const void *v, void *o, float *lse, int64_t B,
                              int64_t H, int64_t Hkv, int64_t M, int64_t N, int64_t D,
                              const int64_t *strides, char *err, size_t errlen);

/* tilefuse_attention_launch with the key splits of a split-KV kernel (spec->split_kv): each row
 * block's keys shared out over `kv_splits` CTAs; 0 lets the launcher choose (what
 * tilefuse_attention_launch does). An unsplit kernel takes 0 or 1. */
int tilefuse_attention_launch_split(const tilefuse_attention *kernel, void *stream,
                                    const void *q, const void *k, const void *v, void *o,
                                    float *lse, int64_t B, int64_t H, int64_t Hkv, int64_t M,
                                    int64_t N, int64_t D, const int64_t *strides,
                                    int64_t kv_splits, char *err, size_t errlen);

/* A paged-KV kernel's launch (spec->paged_kv): k_cache and v_cache are caches of `pages` pages
 * of `page_size` rows, pages x Hkv x page_size x D with the strides k_b, k_h, k_n (and v_...) of
 * a page, a head and a row (vLLM's [pages, page_size, Hkv, D]: page_size*Hkv*D, D, Hkv*D);
 * `strides` must not be NULL. Batch b's key/value row n is row n % page_size of page
 * page_table[b * table_stride + n / page_size]; page_table (B rows of pages_per_sequence >= 1
 * entries) and kv_lengths (B) are int32 device pointers; N is an upper bound of the lengths.
 * The table's entries must be pages of the caches (device memory: not checked). kv_splits as
 * in tilefuse_attention_launch_split. */
/* A varlen kernel's launch (spec->varlen; FlashAttention's varlen API): q and o hold total_q
 * packed query rows, k and v total_k key/value rows, one sequence after another ([tokens,
 * heads, D] with the strides q_h, q_m etc. of a head and a row; the batch strides are not
 * read, `strides` must not be NULL), lse total_q rows a head ([H, total_q]: lse_h = total_q).
 * Sequence b's query rows are cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1, its key rows those of
 * cu_seqlens_k (B + 1 non-decreasing int32 device pointers each, within the totals: device
 * memory, not checked). B counts the sequences; M and N bound their query and key lengths
 * (max_seqlen_q and max_seqlen_k). */
int tilefuse_attention_launch_varlen(const tilefuse_attention *kernel, void *stream,
                                     const void *q, const void *k, const void *v, void *o,
                                     float *lse, int64_t B, int64_t H, int64_t Hkv, int64_t M,
                                     int64_t N, int64_t D, const int64_t *strides,
                                     const int32_t *cu_seqlens_q, const int32_t *cu_seqlens_k,
                                     int64_t total_q, int64_t total_k, char *err,
                                     size_t errlen);

int tilefuse_attention_launch_paged(const tilefuse_attention *kernel, void *stream,
                                    const void *q, const void *k_cache, const void *v_cache,
                                    void *o, float *lse, int64_t B, int64_t H, int64_t Hkv,
                                    int64_t M, int64_t N, int64_t D, const int64_t *strides,
                                    const int32_t *page_table, int64_t pages_per_sequence,
                                    int64_t table_stride, const int32_t *kv_lengths,
                                    int64_t page_size, int64_t pages, int64_t kv_splits,
                                    char *err, size_t errlen);

/* A paged varlen kernel's launch (spec->paged_kv and spec->varlen: chunked prefill, or prefill
 * and decode mixed, over a paged cache; FlashAttention's varlen API with a block table and
 * seqused_k): q, o and lse are packed as in tilefuse_attention_launch_varlen (total_q rows,
 * sequence b's at cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1, M bounding their lengths), k_cache,
 * v_cache, the table and the lengths as in tilefuse_attention_launch_paged (sequence b's keys are
 * its kv_lengths[b] rows; N bounds them). `strides` must not be NULL: the packed tensors' head
 * and row strides (batch strides unread) and the caches' page, head and row strides. */
int tilefuse_attention_launch_paged_varlen(
    const tilefuse_attention *kernel, void *stream, const void *q, const void *k_cache,
    const void *v_cache, void *o, float *lse, int64_t B, int64_t H, int64_t Hkv, int64_t M,
    int64_t N, int64_t D, const int64_t *strides, const int32_t *page_table,
    int64_t pages_per_sequence, int64_t table_stride, const int32_t *kv_lengths,
    int64_t page_size, int64_t pages, const int32_t *cu_seqlens_q, int64_t total_q, char *err,
    size_t errlen);

/* Drops this reference; NULL is ignored. */
void tilefuse_attention_release(tilefuse_attention *kernel);

/* A kernel and the backward derived from its DSL text, compiled together for the host CPU (the
 * reference backend: both tiled, JIT-compiled in process, run on the calling thread), for
 * training without a GPU and for checking gradients. spec->dtype may be "bf16", "f16" (uint16_t
 * bit patterns) or "f32" (floats); spec->block_m / block_n (0: 64), head_dim, params and
 * deterministic apply, the GPU fields do not. Compiled once per distinct spec per process. */
typedef struct tilefuse_host_attention tilefuse_host_attention;

int tilefuse_host_attention_get(const tilefuse_spec *spec, tilefuse_host_attention **out,
                                char *err, size_t errlen);

/* O and the logsumexp on host arrays: q, o B x H x M x D; k, v B x Hkv x N x D; lse B x H x M
 * floats. `strides`: as for tilefuse_attention_launch (14), or NULL for contiguous arrays. */
int tilefuse_host_attention_forward(const tilefuse_host_attention *attention, const void *q,
                                    const void *k, const void *v, void *o, float *lse, int64_t B,
                                    int64_t H, int64_t Hkv, int64_t M, int64_t N, int64_t D,
                                    const int64_t *strides, char *err, size_t errlen);

/* dq, dk, dv (shaped like q, k, v) of a loss whose gradient with respect to o is d_o; o and lse
 * are the forward's. `strides`: 26 element strides, the 14 of tilefuse_attention_launch then
 * d_o (b, h, m), dq (b, h, m), dk (b, h, n), dv (b, h, n), or NULL for contiguous arrays. */
int tilefuse_host_attention_backward(const tilefuse_host_attention *attention, const void *q,
                                     const void *k, const void *v, const void *o,
                                     const void *d_o, const float *lse, void *dq, void *dk,
                                     void *dv, int64_t B, int64_t H, int64_t Hkv, int64_t M,
                                     int64_t N, int64_t D, const int64_t *strides, char *err,
                                     size_t errlen);

/* Drops this reference; NULL is ignored. */
void tilefuse_host_attention_release(tilefuse_host_attention *attention);

/* The backward derived from a kernel's DSL text, for the GPU (three kernels launched in order:
 * D = rowsum(dO o O), dK and dV per key block, dQ). spec->kernel or source, dtype ("bf16" or
 * "f16"), head_dim, params, block_m = block_n (0: 64, or 128 with warpgroup MMAs at head dims
 * up to 64), arch, ptx_features, deterministic and, of config, Br, Bc, rows_per_warp, mma
 * and row_order apply (another config setting is a compile error naming it). Compiled once per distinct spec
 * per process. */
typedef struct tilefuse_backward tilefuse_backward;

int tilefuse_backward_get(const tilefuse_spec *spec, tilefuse_backward **out, char *err,
                          size_t errlen);

/* Enqueues the backward on `stream` (a CUstream; NULL: the legacy default stream): device
 * pointers shaped as tilefuse_host_attention_backward's arrays (o and lse the forward's,
 * tilefuse_attention_launch, on the same inputs), the same 26 strides or NULL for contiguous
 * tensors. Asynchronous; the f32 workspaces are the backward's, used in stream order. */
int tilefuse_backward_launch(const tilefuse_backward *backward, void *stream, const void *q,
                             const void *k, const void *v, const void *o, const void *d_o,
                             const float *lse, void *dq, void *dk, void *dv, int64_t B, int64_t H,
                             int64_t Hkv, int64_t M, int64_t N, int64_t D,
                             const int64_t *strides, char *err, size_t errlen);

/* Drops this reference; NULL is ignored. */
void tilefuse_backward_release(tilefuse_backward *backward);

/* The kernel's properties; strings live as long as the reference. */
const char *tilefuse_attention_name(const tilefuse_attention *kernel);
const char *tilefuse_attention_dtype(const tilefuse_attention *kernel); /* "bf16" or "f16" */
const char *tilefuse_attention_arch(const tilefuse_attention *kernel);
int64_t tilefuse_attention_head_dim(const tilefuse_attention *kernel);
const char *tilefuse_attention_ptx(const tilefuse_attention *kernel);
const char *tilefuse_attention_metadata(const tilefuse_attention *kernel); /* JSON */
/* Where it came from: "memory", "disk" or "compiled". */
const char *tilefuse_attention_origin(const tilefuse_attention *kernel);
/* Its complete tile configuration ("Br=64,Bc=128,rows_per_warp=16,mma=wgmma,...") and where that
 * came from: "default", "explicit", "database" or "tuned". */
const char *tilefuse_attention_config(const tilefuse_attention *kernel);
const char *tilefuse_attention_config_source(const tilefuse_attention *kernel);

#ifdef __cplusplus
}
#endif

#endif /* TILEFUSE_TILEFUSE_H */
