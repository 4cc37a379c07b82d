/*===- AotCheck.c - the ahead-of-time header on the GPU, without tilefuse -===*
 *
 * Plain C99 + pthreads. Includes causal.h, the header `tilefuse compile --kernel causal
 * --emit header` writes (cubin embedded, launcher), and gqa.h, the same for kernels/gqa.mlir
 * (8 query heads, 2 key/value heads declared in its signature), and needs nothing else of
 * tilefuse:
 *
 *   1. four threads make the first causal_launch calls at once (the module loads once), each
 *      into its own outputs; B=2 H=4 Hkv=2 (grouped heads) M=N=300 (not multiples of the block);
 *   2. M=100 N=333 and M=333 N=100 (causal, top-left aligned: query i sees keys 0..i);
 *   3. strided tensors: Q and O in B x M x H x D order (as PyTorch's B,S,H,D), K and V padded;
 *   0. (no GPU needed) causal_check accepts valid arguments and names each broken requirement;
 *      gqa_check names the tensor, dimension, given and declared size of a launch with other
 *      head counts than gqa declares, and gqa_launch refuses it before any driver call;
 *   4. the launcher's checks: H % Hkv, odd q stride, misaligned k, NULL lse, and gqa with 6
 *      heads (nothing launched: its poisoned output stays untouched);
 *   6. causal_split.h, the causal kernel with --split-kv (GQA-packed): its launcher with a
 *      workspace from causal_split_split_workspace, zeroed once by causal_split_split_workspace_init
 *      and reused across launches, at split counts 1, 3 and 8, grouped heads, M = N = 300 and a
 *      decode-like M = 5, N = 2000; on the host, a split count of 0 and a NULL workspace are
 *      refused before any driver call;
 *   7. causal_varlen.h, the causal kernel with --varlen: sequences of one length packed one
 *      after another ([tokens, heads, D], LSE [H, tokens]) through cu_seqlens_q / cu_seqlens_k,
 *      grouped heads, M = N and M != N; on the host, NULL offsets and NULL strides are refused;
 *      the same cases through causal_varlen_qtma.h (Q in shared memory, loaded by TMA through
 *      the packed q_map on sm_90a);
 *   8. causal_paged.h, the causal kernel with --paged-kv: K and V in caches of 16-row pages
 *      ([pages, 16, Hkv, D]) through a page table, a length per sequence; on the host, a NULL
 *      table and NULL strides are refused;
 *   9. causal_paged_varlen.h, the causal kernel with --paged-kv --varlen (chunked prefill):
 *      queries packed as in 7, keys in pages as in 8, no key offsets passed;
 *  10. causal_backward.h, the causal kernel's derived backward (--backward): after causal_launch
 *      wrote O and LSE, causal_backward_launch with a random dO and a workspace of
 *      causal_backward_workspace_bytes (poisoned, as it need not be initialized) writes dQ, dK
 *      and dV, compared with a float64 causal attention backward computed here from the same
 *      bf16 inputs, O and LSE (relative L2 error <= 2e-2 each): B=1 H=2 M=N=200, and grouped
 *      heads with M < N (keys no query sees get zero gradients); on the host, its check names
 *      each broken requirement (the workspace's included) and its workspace size is the launch
 *      ABI's;
 *   5. the `--emit cubin` file (argv[1]) loads with cuModuleLoad and has the kernel; with
 *      argv[2], the PTX it came from loads through the driver's JIT too. Both loads are timed
 *      (run with CUDA_CACHE_DISABLE=1 for a cold JIT).
 * Each forward result is compared with a float64 attention computed here on the same bf16 inputs:
 * relative L2 error of O <= 1e-2, of LSE <= 1e-3 (the bounds of tilefuse-gpu-tests); outputs
 * are poisoned with NaN first, so an element never written fails. Prints PASS or FAIL (exit 1);
 * without a GPU it prints "skipped: no GPU (...)" and exits 0.
 *
 *   gcc -std=c99 -O2 -Wall -Werror -I<dir of causal.h and gqa.h> -I<cuda>/include AotCheck.c \
 *       -o aot-check -lcuda -lpthread -lm
 *   ./aot-check causal.cubin [causal.ptx]
 *
 *===----------------------------------------------------------------------===*/
#define _POSIX_C_SOURCE 200809L
#include "causal.h"
#include "causal_backward.h"
#include "causal_split.h"
#include "causal_paged.h"
#include "causal_paged_varlen.h"
#include "causal_varlen.h"
#include "causal_varlen_qtma.h"
#include "gqa.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define D CAUSAL_HEAD_DIM
#if CAUSAL_BACKWARD_HEAD_DIM != CAUSAL_HEAD_DIM
#error "causal.h and causal_backward.h are of different head dims (scripts/build-aot.sh makes both)"
#endif

static int failures = 0;

static void fail(const char *what, const char *detail) {
  ++failures;
  printf("FAILED: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
}

/* One case of a table run through a header's _check function: its answer `why` (NULL: accepted)
 * against the expected one (NULL: accepted; else a message `why` equals, or with `contains`
 * holds), printed and, when it differs, counted as a failure of `checker`. */
static void expectAnswer(const char *name, const char *why, const char *expected, int contains,
                         const char *checker) {
  int ok = expected == NULL ? why == NULL
                            : why != NULL && (contains ? strstr(why, expected) != NULL
                                                       : strcmp(why, expected) == 0);
  printf("[%s] check: %-40s -> %s\n", ok ? "ok  " : "FAIL", name, why ? why : "accepted");
  if (!ok)
    fail(name, checker);
}

static const char *errorName(CUresult r) {
  const char *name = NULL;
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS || name == NULL)
    return "unknown CUresult";
  return name;
}

#define CHECK_CU(call)                                                                         \
  do {                                                                                         \
    CUresult r_ = (call);                                                                      \
    if (r_ != CUDA_SUCCESS) {                                                                  \
      printf("FAILED: %s returned %s (line %d)\n", #call, errorName(r_), __LINE__);            \
      printf("FAIL\n");                                                                        \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

/* bf16 <-> float, round to nearest even (inputs are finite). */
static uint16_t toBF16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}
static float fromBF16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float x;
  memcpy(&x, &u, 4);
  return x;
}

/* A deterministic normal-ish generator (sum of uniforms), so runs are repeatable. */
static uint64_t rngState = 0x9e3779b97f4a7c15ull;
static double uniform(void) {
  rngState ^= rngState << 13;
  rngState ^= rngState >> 7;
  rngState ^= rngState << 17;
  return (double)(rngState >> 11) / 9007199254740992.0;
}
static float normal(void) {
  double s = 0;
  int i;
  for (i = 0; i < 12; ++i)
    s += uniform();
  return (float)(s - 6.0);
}

/* One problem: sizes, element strides (the launcher's order), host and device copies. */
typedef struct {
  int64_t B, H, Hkv, M, N;
  int64_t s[14];
  int strided; /* pass s to the launcher (else NULL: contiguous) */
  size_t qElems, kElems, oElems, lseElems;
  uint16_t *q, *k, *v;
  CUdeviceptr dq, dk, dv;
} Problem;

static void layout(Problem *p, int64_t B, int64_t H, int64_t Hkv, int64_t M, int64_t N,
                   int strided) {
  memset(p, 0, sizeof *p);
  p->B = B;
  p->H = H;
  p->Hkv = Hkv;
  p->M = M;
  p->N = N;
  p->strided = strided;
  if (!strided) {
    p->s[2] = p->s[11] = D;
    p->s[1] = p->s[10] = M * D;
    p->s[0] = p->s[9] = H * M * D;
    p->s[5] = p->s[8] = D;
    p->s[4] = p->s[7] = N * D;
    p->s[3] = p->s[6] = Hkv * N * D;
    p->s[13] = M;
    p->s[12] = H * M;
  } else {
    /* Q, O: B x M x H x D storage. K, V: rows padded to D + 8, heads padded by 3 rows. LSE:
     * B x H x (M + 5). */
    p->s[0] = p->s[9] = M * H * D;
    p->s[1] = p->s[10] = D;
    p->s[2] = p->s[11] = H * D;
    p->s[5] = p->s[8] = D + 8;
    p->s[4] = p->s[7] = (N + 3) * (D + 8);
    p->s[3] = p->s[6] = Hkv * (N + 3) * (D + 8);
    p->s[13] = M + 5;
    p->s[12] = H * (M + 5);
  }
  p->qElems = (size_t)(B * p->s[0]);
  p->kElems = (size_t)(B * p->s[3]);
  p->oElems = p->qElems;
  p->lseElems = (size_t)(B * p->s[12]);
}

static void setUp(Problem *p) {
  size_t i;
  p->q = calloc(p->qElems, 2);
  p->k = calloc(p->kElems, 2);
  p->v = calloc(p->kElems, 2);
  for (i = 0; i < p->qElems; ++i)
    p->q[i] = toBF16(normal());
  for (i = 0; i < p->kElems; ++i) {
    p->k[i] = toBF16(normal());
    p->v[i] = toBF16(normal());
  }
  CHECK_CU(cuMemAlloc(&p->dq, p->qElems * 2));
  CHECK_CU(cuMemAlloc(&p->dk, p->kElems * 2));
  CHECK_CU(cuMemAlloc(&p->dv, p->kElems * 2));
  CHECK_CU(cuMemcpyHtoD(p->dq, p->q, p->qElems * 2));
  CHECK_CU(cuMemcpyHtoD(p->dk, p->k, p->kElems * 2));
  CHECK_CU(cuMemcpyHtoD(p->dv, p->v, p->kElems * 2));
}

static void tearDown(Problem *p) {
  free(p->q);
  free(p->k);
  free(p->v);
  cuMemFree(p->dq);
  cuMemFree(p->dk);
  cuMemFree(p->dv);
}

/* Outputs of one launch. */
typedef struct {
  CUdeviceptr o, lse;
} Outputs;

static void allocOutputs(const Problem *p, Outputs *out) {
  CHECK_CU(cuMemAlloc(&out->o, p->oElems * 2));
  CHECK_CU(cuMemAlloc(&out->lse, p->lseElems * 4));
  CHECK_CU(cuMemsetD8(out->o, 0xff, p->oElems * 2)); /* NaN in bf16 and f32 */
  CHECK_CU(cuMemsetD8(out->lse, 0xff, p->lseElems * 4));
}

static CUresult launch(const Problem *p, const Outputs *out, CUstream stream) {
  return causal_launch(stream, (const void *)(uintptr_t)p->dq, (const void *)(uintptr_t)p->dk,
                       (const void *)(uintptr_t)p->dv, (void *)(uintptr_t)out->o,
                       (float *)(uintptr_t)out->lse, p->B, p->H, p->Hkv, p->M, p->N,
                       p->strided ? p->s : NULL);
}

/* Compares one launch's outputs with the float64 causal attention. */
static void compare(const char *name, const Problem *p, const Outputs *out) {
  uint16_t *o = malloc(p->oElems * 2);
  float *lse = malloc(p->lseElems * 4);
  double *scores = malloc((size_t)p->N * sizeof(double));
  double scale = 1.0 / sqrt((double)D);
  double oNum = 0, oDen = 0, lNum = 0, lDen = 0;
  long nans = 0;
  int64_t b, h, i, j, d;
  CHECK_CU(cuMemcpyDtoH(o, out->o, p->oElems * 2));
  CHECK_CU(cuMemcpyDtoH(lse, out->lse, p->lseElems * 4));
  for (b = 0; b < p->B; ++b)
    for (h = 0; h < p->H; ++h) {
      int64_t hk = h / (p->H / p->Hkv);
      for (i = 0; i < p->M; ++i) {
        const uint16_t *qr = p->q + b * p->s[0] + h * p->s[1] + i * p->s[2];
        int64_t last = i < p->N - 1 ? i : p->N - 1; /* keys 0..i */
        double mx = -INFINITY, sum = 0, l, got;
        for (j = 0; j <= last; ++j) {
          const uint16_t *kr = p->k + b * p->s[3] + hk * p->s[4] + j * p->s[5];
          double dot = 0;
          for (d = 0; d < D; ++d)
            dot += (double)fromBF16(qr[d]) * fromBF16(kr[d]);
          scores[j] = dot * scale;
          if (scores[j] > mx)
            mx = scores[j];
        }
        for (j = 0; j <= last; ++j) {
          scores[j] = exp(scores[j] - mx);
          sum += scores[j];
        }
        for (d = 0; d < D; ++d) {
          double want = 0;
          for (j = 0; j <= last; ++j)
            want += scores[j] * fromBF16(p->v[b * p->s[6] + hk * p->s[7] + j * p->s[8] + d]);
          want /= sum;
          got = fromBF16(o[b * p->s[9] + h * p->s[10] + i * p->s[11] + d]);
          if (isnan(got)) {
            ++nans;
            continue;
          }
          oNum += (got - want) * (got - want);
          oDen += want * want;
        }
        l = mx + log(sum);
        got = lse[b * p->s[12] + h * p->s[13] + i];
        if (isnan(got)) {
          ++nans;
          continue;
        }
        lNum += (got - l) * (got - l);
        lDen += l * l;
      }
    }
  {
    double oErr = sqrt(oNum / (oDen > 0 ? oDen : 1)), lErr = sqrt(lNum / (lDen > 0 ? lDen : 1));
    int ok = nans == 0 && oErr <= 1e-2 && lErr <= 1e-3;
    printf("[%s] %-40s B=%lld H=%lld Hkv=%lld M=%lld N=%lld%s: O %.2e LSE %.2e NaN %ld\n",
           ok ? "ok  " : "FAIL", name, (long long)p->B, (long long)p->H, (long long)p->Hkv,
           (long long)p->M, (long long)p->N, p->strided ? " strided" : "", oErr, lErr, nans);
    if (!ok)
      fail(name, "error over the bound (O 1e-2, LSE 1e-3) or unwritten elements");
  }
  free(o);
  free(lse);
  free(scores);
}

/* Test 1: the first launches come from four threads at once. */
typedef struct {
  const Problem *p;
  Outputs out;
  CUresult result;
} ThreadArg;

static void *launchThread(void *arg) {
  ThreadArg *t = arg;
  t->result = launch(t->p, &t->out, NULL); /* no context current here: the header's choice */
  return NULL;
}

static void concurrentFirstLaunch(void) {
  Problem p;
  ThreadArg args[4];
  pthread_t threads[4];
  int i;
  layout(&p, 2, 4, 2, 300, 300, 0);
  setUp(&p);
  for (i = 0; i < 4; ++i) {
    args[i].p = &p;
    allocOutputs(&p, &args[i].out);
  }
  for (i = 0; i < 4; ++i)
    pthread_create(&threads[i], NULL, launchThread, &args[i]);
  for (i = 0; i < 4; ++i)
    pthread_join(threads[i], NULL);
  CHECK_CU(cuCtxSynchronize());
  for (i = 0; i < 4; ++i) {
    char name[64];
    snprintf(name, sizeof name, "first launch, thread %d of 4", i);
    if (args[i].result != CUDA_SUCCESS)
      fail(name, errorName(args[i].result));
    else
      compare(name, &p, &args[i].out);
    cuMemFree(args[i].out.o);
    cuMemFree(args[i].out.lse);
  }
  tearDown(&p);
}

static void one(const char *name, int64_t B, int64_t H, int64_t Hkv, int64_t M, int64_t N,
                int strided, CUstream stream) {
  Problem p;
  Outputs out;
  CUresult r;
  layout(&p, B, H, Hkv, M, N, strided);
  setUp(&p);
  allocOutputs(&p, &out);
  r = launch(&p, &out, stream);
  if (r != CUDA_SUCCESS) {
    fail(name, errorName(r));
  } else {
    CHECK_CU(cuStreamSynchronize(stream));
    compare(name, &p, &out);
  }
  cuMemFree(out.o);
  cuMemFree(out.lse);
  tearDown(&p);
}

/* Test 6: the split-KV header, one workspace for every launch (zeroed once; each launch leaves
 * its counters zero), against the same float64 causal attention. */
static void splitLaunches(CUstream stream) {
  static const struct {
    const char *name;
    int64_t B, H, Hkv, M, N, splits;
  } cases[] = {
      {"split: 1 split", 2, 4, 2, 300, 300, 1},
      {"split: 3 splits", 2, 4, 2, 300, 300, 3},
      {"split: 8 splits, decode-like", 1, 8, 2, 5, 2000, 8},
      {"split: 3 splits again (counters left zero)", 2, 4, 2, 300, 300, 3},
  };
  CUdeviceptr workspace = 0;
  size_t bytes = 0, i;
  for (i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    causal_split_split_workspace_layout w = causal_split_split_workspace(
        cases[i].splits, cases[i].B, cases[i].H, cases[i].Hkv, cases[i].M);
    if (w.bytes > bytes)
      bytes = w.bytes;
  }
  CHECK_CU(cuMemAlloc(&workspace, bytes));
  /* Zeroed once for the largest shape's counters: they are the first bytes of any layout. */
  CHECK_CU(cuMemsetD8(workspace, 0, bytes));
  CHECK_CU(causal_split_split_workspace_init(workspace, 2, 4, 2, 300, stream));
  for (i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    Problem p;
    Outputs out;
    CUresult r;
    layout(&p, cases[i].B, cases[i].H, cases[i].Hkv, cases[i].M, cases[i].N, 0);
    setUp(&p);
    allocOutputs(&p, &out);
    r = causal_split_launch(stream, (const void *)(uintptr_t)p.dq, (const void *)(uintptr_t)p.dk,
                            (const void *)(uintptr_t)p.dv, (void *)(uintptr_t)out.o,
                            (float *)(uintptr_t)out.lse, p.B, p.H, p.Hkv, p.M, p.N, NULL,
                            workspace, cases[i].splits);
    if (r != CUDA_SUCCESS) {
      fail(cases[i].name, errorName(r));
    } else {
      CHECK_CU(cuStreamSynchronize(stream));
      compare(cases[i].name, &p, &out);
    }
    cuMemFree(out.o);
    cuMemFree(out.lse);
    tearDown(&p);
  }
  cuMemFree(workspace);
}

/* Test 7: the varlen header on B sequences of M query and N key rows each, packed: Q and O are
 * [B*M, H, D] (the B x M x H x D strides of a padded batch), K and V [B*N, Hkv, D], LSE [H, B*M]
 * (lse_b = M, lse_h = B*M), so the padded float64 check reads them as they are. */
typedef CUresult (*VarlenLaunch)(CUstream, const void *, const void *, const void *, void *,
                                 float *, int64_t, int64_t, int64_t, int64_t, int64_t,
                                 const int64_t *, const int32_t *, const int32_t *, int64_t,
                                 int64_t);

static void varlenLaunches(CUstream stream) {
  static const struct {
    const char *name;
    int64_t B, H, Hkv, M, N;
    int qtma; /* 1: causal_varlen_qtma.h's launcher */
  } cases[] = {
      {"varlen: 3 sequences of 300", 3, 4, 2, 300, 300, 0},
      {"varlen: 2 sequences, 100 queries and 333 keys each", 2, 2, 1, 100, 333, 0},
      {"varlen, Q by TMA: 3 sequences of 300", 3, 4, 2, 300, 300, 1},
      {"varlen, Q by TMA: 2 sequences, 100 queries and 333 keys each", 2, 2, 1, 100, 333, 1},
  };
  size_t i;
  int64_t b;
  for (i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    VarlenLaunch launch = cases[i].qtma ? causal_varlen_qtma_launch : causal_varlen_launch;
    Problem p;
    Outputs out;
    CUresult r;
    int32_t cuQ[8], cuK[8];
    CUdeviceptr dcuQ, dcuK;
    layout(&p, cases[i].B, cases[i].H, cases[i].Hkv, cases[i].M, cases[i].N, 1);
    p.s[3] = p.s[6] = p.N * p.Hkv * D; /* K, V: [tokens, Hkv, D] */
    p.s[4] = p.s[7] = D;
    p.s[5] = p.s[8] = p.Hkv * D;
    p.s[12] = p.M; /* LSE: [H, tokens] */
    p.s[13] = p.B * p.M;
    p.kElems = (size_t)(p.B * p.s[3]);
    p.lseElems = (size_t)(p.H * p.B * p.M);
    setUp(&p);
    allocOutputs(&p, &out);
    for (b = 0; b <= p.B; ++b) {
      cuQ[b] = (int32_t)(b * p.M);
      cuK[b] = (int32_t)(b * p.N);
    }
    CHECK_CU(cuMemAlloc(&dcuQ, sizeof cuQ));
    CHECK_CU(cuMemAlloc(&dcuK, sizeof cuK));
    CHECK_CU(cuMemcpyHtoD(dcuQ, cuQ, sizeof cuQ));
    CHECK_CU(cuMemcpyHtoD(dcuK, cuK, sizeof cuK));
    r = launch(stream, (const void *)(uintptr_t)p.dq, (const void *)(uintptr_t)p.dk,
               (const void *)(uintptr_t)p.dv, (void *)(uintptr_t)out.o,
               (float *)(uintptr_t)out.lse, p.B, p.H, p.Hkv, p.M, p.N, p.s,
               (const int32_t *)(uintptr_t)dcuQ, (const int32_t *)(uintptr_t)dcuK, p.B * p.M,
               p.B * p.N);
    if (r != CUDA_SUCCESS) {
      fail(cases[i].name, errorName(r));
    } else {
      CHECK_CU(cuStreamSynchronize(stream));
      compare(cases[i].name, &p, &out);
    }
    cuMemFree(dcuQ);
    cuMemFree(dcuK);
    cuMemFree(out.o);
    cuMemFree(out.lse);
    tearDown(&p);
  }
}

/* Test 8: the paged header. Sequence b's pages are pages b * perSequence ... in order, so the
 * caches read as a B x Hkv x N x D tensor with a batch stride of perSequence pages, which the
 * float64 check reads through p.s; the kernel gets the caches' page stride instead. */
static void pagedLaunches(CUstream stream) {
  static const struct {
    const char *name;
    int64_t B, H, Hkv, M, N, pageSize;
  } cases[] = {
      {"paged: pages of 16, grouped heads", 2, 4, 2, 300, 300, 16},
      {"paged: pages of 5, 100 queries, 333 keys", 2, 2, 1, 100, 333, 5},
  };
  size_t i;
  int64_t b, j;
  for (i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    Problem p;
    Outputs out;
    CUresult r;
    int64_t ps = cases[i].pageSize, perSequence = (cases[i].N + ps - 1) / ps;
    int64_t pages = cases[i].B * perSequence, launchStrides[14];
    int32_t table[256], lengths[8];
    CUdeviceptr dTable, dLengths;
    layout(&p, cases[i].B, cases[i].H, cases[i].Hkv, cases[i].M, cases[i].N, 0);
    p.s[3] = p.s[6] = perSequence * ps * p.Hkv * D; /* a sequence's pages */
    p.s[4] = p.s[7] = D;
    p.s[5] = p.s[8] = p.Hkv * D;
    p.kElems = (size_t)(pages * ps * p.Hkv * D);
    setUp(&p);
    allocOutputs(&p, &out);
    for (j = 0; j < pages; ++j)
      table[j] = (int32_t)j;
    for (b = 0; b < p.B; ++b)
      lengths[b] = (int32_t)p.N;
    CHECK_CU(cuMemAlloc(&dTable, (size_t)pages * 4));
    CHECK_CU(cuMemAlloc(&dLengths, (size_t)p.B * 4));
    CHECK_CU(cuMemcpyHtoD(dTable, table, (size_t)pages * 4));
    CHECK_CU(cuMemcpyHtoD(dLengths, lengths, (size_t)p.B * 4));
    for (j = 0; j < 14; ++j)
      launchStrides[j] = p.s[j];
    launchStrides[3] = launchStrides[6] = ps * p.Hkv * D; /* a page */
    r = causal_paged_launch(stream, (const void *)(uintptr_t)p.dq,
                            (const void *)(uintptr_t)p.dk, (const void *)(uintptr_t)p.dv,
                            (void *)(uintptr_t)out.o, (float *)(uintptr_t)out.lse, p.B, p.H,
                            p.Hkv, p.M, p.N, launchStrides, (const int32_t *)(uintptr_t)dTable,
                            perSequence, perSequence, (const int32_t *)(uintptr_t)dLengths, ps,
                            pages);
    if (r != CUDA_SUCCESS) {
      fail(cases[i].name, errorName(r));
    } else {
      CHECK_CU(cuStreamSynchronize(stream));
      compare(cases[i].name, &p, &out);
    }
    cuMemFree(dTable);
    cuMemFree(dLengths);
    cuMemFree(out.o);
    cuMemFree(out.lse);
    tearDown(&p);
  }
}

/* Test 9: the paged varlen header: Q, O and LSE packed as in test 7 (sequences of M rows), K and
 * V in pages as in test 8 (lengths N); cu_seqlens_k NULL (not read). */
static void pagedVarlenLaunches(CUstream stream) {
  static const struct {
    const char *name;
    int64_t B, H, Hkv, M, N, pageSize;
  } cases[] = {
      {"paged varlen: 3 sequences, 300 queries over 300 keys, pages of 16", 3, 4, 2, 300, 300,
       16},
      {"paged varlen: 2 sequences, 64 queries over 333 keys, pages of 16", 2, 2, 1, 64, 333, 16},
  };
  size_t i;
  int64_t b, j;
  for (i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    Problem p;
    Outputs out;
    CUresult r;
    int64_t ps = cases[i].pageSize, perSequence = (cases[i].N + ps - 1) / ps;
    int64_t pages = cases[i].B * perSequence, launchStrides[14];
    int32_t table[256], lengths[8], cuQ[8];
    CUdeviceptr dTable, dLengths, dcuQ;
    layout(&p, cases[i].B, cases[i].H, cases[i].Hkv, cases[i].M, cases[i].N, 1);
    p.s[3] = p.s[6] = perSequence * ps * p.Hkv * D; /* a sequence's pages */
    p.s[4] = p.s[7] = D;
    p.s[5] = p.s[8] = p.Hkv * D;
    p.s[12] = p.M; /* LSE: [H, tokens] */
    p.s[13] = p.B * p.M;
    p.kElems = (size_t)(pages * ps * p.Hkv * D);
    p.lseElems = (size_t)(p.H * p.B * p.M);
    setUp(&p);
    allocOutputs(&p, &out);
    for (j = 0; j < pages; ++j)
      table[j] = (int32_t)j;
    for (b = 0; b < p.B; ++b)
      lengths[b] = (int32_t)p.N;
    for (b = 0; b <= p.B; ++b)
      cuQ[b] = (int32_t)(b * p.M);
    CHECK_CU(cuMemAlloc(&dTable, (size_t)pages * 4));
    CHECK_CU(cuMemAlloc(&dLengths, (size_t)p.B * 4));
    CHECK_CU(cuMemAlloc(&dcuQ, sizeof cuQ));
    CHECK_CU(cuMemcpyHtoD(dTable, table, (size_t)pages * 4));
    CHECK_CU(cuMemcpyHtoD(dLengths, lengths, (size_t)p.B * 4));
    CHECK_CU(cuMemcpyHtoD(dcuQ, cuQ, sizeof cuQ));
    for (j = 0; j < 14; ++j)
      launchStrides[j] = p.s[j];
    launchStrides[3] = launchStrides[6] = ps * p.Hkv * D; /* a page */
    r = causal_paged_varlen_launch(
        stream, (const void *)(uintptr_t)p.dq, (const void *)(uintptr_t)p.dk,
        (const void *)(uintptr_t)p.dv, (void *)(uintptr_t)out.o, (float *)(uintptr_t)out.lse,
        p.B, p.H, p.Hkv, p.M, p.N, launchStrides, (const int32_t *)(uintptr_t)dTable,
        perSequence, perSequence, (const int32_t *)(uintptr_t)dLengths, ps, pages,
        (const int32_t *)(uintptr_t)dcuQ, NULL, p.B * p.M, 0);
    if (r != CUDA_SUCCESS) {
      fail(cases[i].name, errorName(r));
    } else {
      CHECK_CU(cuStreamSynchronize(stream));
      compare(cases[i].name, &p, &out);
    }
    cuMemFree(dTable);
    cuMemFree(dLengths);
    cuMemFree(dcuQ);
    cuMemFree(out.o);
    cuMemFree(out.lse);
    tearDown(&p);
  }
}

/* Test 10: the backward header. The float64 backward of causal attention (query i sees keys
 * 0..i) from the same bf16 inputs, the forward's O and LSE and dO, all contiguous:
 * P = exp(S - LSE), dV = P^T dO, dP = dO V^T, D_i = rowsum(dO o O), dS = P o (dP - D),
 * dQ = scale dS K, dK = scale dS^T Q; a key/value head's dK and dV sum over its query heads. */
static void referenceBackward(const Problem *p, const uint16_t *o, const float *lse,
                              const uint16_t *dO, double *dQ, double *dK, double *dV) {
  double scale = 1.0 / sqrt((double)D);
  int64_t b, h, i, j, d;
  memset(dQ, 0, p->qElems * sizeof(double));
  memset(dK, 0, p->kElems * sizeof(double));
  memset(dV, 0, p->kElems * sizeof(double));
  for (b = 0; b < p->B; ++b)
    for (h = 0; h < p->H; ++h) {
      int64_t hk = h / (p->H / p->Hkv);
      for (i = 0; i < p->M; ++i) {
        int64_t row = ((b * p->H + h) * p->M + i) * D;
        int64_t last = i < p->N - 1 ? i : p->N - 1;
        double rowSum = 0;
        for (d = 0; d < D; ++d)
          rowSum += (double)fromBF16(dO[row + d]) * fromBF16(o[row + d]);
        for (j = 0; j <= last; ++j) {
          int64_t key = ((b * p->Hkv + hk) * p->N + j) * D;
          double s = 0, dP = 0, P, dS;
          for (d = 0; d < D; ++d) {
            s += (double)fromBF16(p->q[row + d]) * fromBF16(p->k[key + d]);
            dP += (double)fromBF16(dO[row + d]) * fromBF16(p->v[key + d]);
          }
          P = exp(s * scale - lse[(b * p->H + h) * p->M + i]);
          dS = P * (dP - rowSum);
          for (d = 0; d < D; ++d) {
            dQ[row + d] += scale * dS * fromBF16(p->k[key + d]);
            dK[key + d] += scale * dS * fromBF16(p->q[row + d]);
            dV[key + d] += P * fromBF16(dO[row + d]);
          }
        }
      }
    }
}

/* The relative L2 error of a bf16 gradient against the float64 one; unwritten (NaN) elements
 * counted into *nans. */
static double gradientError(const uint16_t *got, const double *want, size_t n, long *nans) {
  double num = 0, den = 0;
  size_t i;
  for (i = 0; i < n; ++i) {
    double g = fromBF16(got[i]);
    if (isnan(g)) {
      ++*nans;
      continue;
    }
    num += (g - want[i]) * (g - want[i]);
    den += want[i] * want[i];
  }
  return sqrt(num / (den > 0 ? den : 1));
}

static void backwardLaunch(const char *name, int64_t B, int64_t H, int64_t Hkv, int64_t M,
                           int64_t N, CUstream stream) {
  Problem p;
  Outputs out;
  CUdeviceptr dO, dQ, dK, dV, workspace;
  uint16_t *hostDO, *o, *gotQ, *gotK, *gotV;
  float *lse;
  double *wantQ, *wantK, *wantV;
  size_t bytes = causal_backward_workspace_bytes(B, H, M), i;
  CUresult r;
  layout(&p, B, H, Hkv, M, N, 0);
  setUp(&p);
  allocOutputs(&p, &out);
  r = launch(&p, &out, stream);
  if (r != CUDA_SUCCESS) {
    fail(name, errorName(r));
    tearDown(&p);
    return;
  }
  hostDO = malloc(p.oElems * 2);
  for (i = 0; i < p.oElems; ++i)
    hostDO[i] = toBF16(normal());
  CHECK_CU(cuMemAlloc(&dO, p.oElems * 2));
  CHECK_CU(cuMemAlloc(&dQ, p.qElems * 2));
  CHECK_CU(cuMemAlloc(&dK, p.kElems * 2));
  CHECK_CU(cuMemAlloc(&dV, p.kElems * 2));
  CHECK_CU(cuMemAlloc(&workspace, bytes));
  CHECK_CU(cuMemcpyHtoD(dO, hostDO, p.oElems * 2));
  /* NaN in bf16 and f32: an element never written fails, and the workspace needs no zeroing. */
  CHECK_CU(cuMemsetD8(dQ, 0xff, p.qElems * 2));
  CHECK_CU(cuMemsetD8(dK, 0xff, p.kElems * 2));
  CHECK_CU(cuMemsetD8(dV, 0xff, p.kElems * 2));
  CHECK_CU(cuMemsetD8(workspace, 0xff, bytes));
  CHECK_CU(cuStreamSynchronize(stream));
  r = causal_backward_launch(
      stream, (const void *)(uintptr_t)p.dq, (const void *)(uintptr_t)p.dk,
      (const void *)(uintptr_t)p.dv, (const void *)(uintptr_t)out.o, (const void *)(uintptr_t)dO,
      (const float *)(uintptr_t)out.lse, (void *)(uintptr_t)dQ, (void *)(uintptr_t)dK,
      (void *)(uintptr_t)dV, B, H, Hkv, M, N, NULL, (void *)(uintptr_t)workspace);
  if (r != CUDA_SUCCESS) {
    fail(name, errorName(r));
  } else {
    long nans = 0;
    double qErr, kErr, vErr;
    int ok;
    CHECK_CU(cuStreamSynchronize(stream));
    o = malloc(p.oElems * 2);
    lse = malloc(p.lseElems * 4);
    gotQ = malloc(p.qElems * 2);
    gotK = malloc(p.kElems * 2);
    gotV = malloc(p.kElems * 2);
    wantQ = malloc(p.qElems * sizeof(double));
    wantK = malloc(p.kElems * sizeof(double));
    wantV = malloc(p.kElems * sizeof(double));
    CHECK_CU(cuMemcpyDtoH(o, out.o, p.oElems * 2));
    CHECK_CU(cuMemcpyDtoH(lse, out.lse, p.lseElems * 4));
    CHECK_CU(cuMemcpyDtoH(gotQ, dQ, p.qElems * 2));
    CHECK_CU(cuMemcpyDtoH(gotK, dK, p.kElems * 2));
    CHECK_CU(cuMemcpyDtoH(gotV, dV, p.kElems * 2));
    referenceBackward(&p, o, lse, hostDO, wantQ, wantK, wantV);
    qErr = gradientError(gotQ, wantQ, p.qElems, &nans);
    kErr = gradientError(gotK, wantK, p.kElems, &nans);
    vErr = gradientError(gotV, wantV, p.kElems, &nans);
    ok = nans == 0 && qErr <= 2e-2 && kErr <= 2e-2 && vErr <= 2e-2;
    printf("[%s] %-40s B=%lld H=%lld Hkv=%lld M=%lld N=%lld: dQ %.2e dK %.2e dV %.2e NaN %ld\n",
           ok ? "ok  " : "FAIL", name, (long long)B, (long long)H, (long long)Hkv, (long long)M,
           (long long)N, qErr, kErr, vErr, nans);
    if (!ok)
      fail(name, "gradient error over the bound (2e-2) or unwritten elements");
    free(o);
    free(lse);
    free(gotQ);
    free(gotK);
    free(gotV);
    free(wantQ);
    free(wantK);
    free(wantV);
  }
  free(hostDO);
  cuMemFree(dO);
  cuMemFree(dQ);
  cuMemFree(dK);
  cuMemFree(dV);
  cuMemFree(workspace);
  cuMemFree(out.o);
  cuMemFree(out.lse);
  tearDown(&p);
}

/* Test 10 on the host: causal_backward_check on fake (never dereferenced) device addresses,
 * and the workspace's size. */
static void backwardHostChecks(void) {
  const char *a = (const char *)(uintptr_t)0x100000; /* 256-byte aligned */
  void *w = (void *)(uintptr_t)0x400000;
  const float *lse = (const float *)(uintptr_t)0x200000;
  const int64_t B = 2, H = 4, Hkv = 2, M = 200, N = 300;
  int64_t s[26];
  struct {
    const char *name, *expected; /* expected: NULL = accepted, else a part of the reason */
    int64_t H, Hkv;
    int stride;    /* >= 0: the public-order stride set to value */
    int64_t value;
    int dkOffset;  /* added to d_k */
    int workspace; /* 0: w, 1: NULL, 2: w + 16 */
  } cases[] = {
      {"backward: contiguous", NULL, H, Hkv, -1, 0, 0, 0},
      {"backward: H % Hkv", "multiple of Hkv", 6, 4, -1, 0, 0, 0},
      {"backward: odd d_o stride", "even", H, Hkv, 16, D + 1, 0, 0},
      {"backward: d_v stride not a multiple of 8", "multiples of 8", H, Hkv, 25, D + 4, 0, 0},
      {"backward: negative dq stride", "negative", H, Hkv, 18, -D, 0, 0},
      {"backward: d_k misaligned", "16-byte", H, Hkv, -1, 0, 8, 0},
      {"backward: NULL workspace", "workspace", H, Hkv, -1, 0, 0, 1},
      {"backward: misaligned workspace", "256-byte", H, Hkv, -1, 0, 0, 2},
  };
  size_t i;
  int j;
  for (i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const char *why;
    const void *workspace = cases[i].workspace == 0   ? w
                            : cases[i].workspace == 1 ? NULL
                                                      : (const char *)w + 16;
    /* Contiguous, in the public order: q, k, v, o, lse, then dO, dQ, dK, dV. */
    const int64_t contiguous[26] = {
        cases[i].H * M * D, M * D, D, Hkv * N * D, N * D, D, Hkv * N * D, N * D, D,
        cases[i].H * M * D, M * D, D, cases[i].H * M, M, cases[i].H * M * D, M * D, D,
        cases[i].H * M * D, M * D, D, Hkv * N * D, N * D, D, Hkv * N * D, N * D, D};
    for (j = 0; j < 26; ++j)
      s[j] = contiguous[j];
    if (cases[i].stride >= 0)
      s[cases[i].stride] = cases[i].value;
    why = causal_backward_check(a, a, a, a, a, lse, a, a + cases[i].dkOffset, a, B, cases[i].H,
                                cases[i].Hkv, M, N, s, workspace);
    expectAnswer(cases[i].name, why, cases[i].expected, 1, "causal_backward_check's answer");
  }
  {
    /* NULL strides: contiguous; and the launch refuses before any driver call. */
    const char *why = causal_backward_check(a, a, a, a, a, lse, a, a, a, B, H, Hkv, M, N, NULL, w);
    CUresult r = causal_backward_launch(NULL, a, a, a, a, a, lse, (void *)(uintptr_t)a,
                                        (void *)(uintptr_t)a, (void *)(uintptr_t)a, B, H, Hkv, M,
                                        N, NULL, NULL);
    int ok = why == NULL && r == CUDA_ERROR_INVALID_VALUE;
    printf("[%s] backward: contiguous accepted, a NULL workspace refused before the driver (%s)\n",
           ok ? "ok  " : "FAIL", errorName(r));
    if (!ok)
      fail("backward: NULL strides and a NULL workspace", why ? why : errorName(r));
  }
  {
    /* The row sums (B*H*M floats), then, unless deterministic, the dQ accumulator, each
     * 256-byte aligned (launch_abi::backwardWorkspace); 0 for sizes the launcher refuses. */
    size_t rows = (size_t)(B * H * M) * 4, want = (rows + 255) / 256 * 256;
    if (!CAUSAL_BACKWARD_DETERMINISTIC)
      want += ((size_t)(B * H * M) * D * 4 + 255) / 256 * 256;
    if (causal_backward_workspace_bytes(B, H, M) != want ||
        causal_backward_workspace_bytes(0, H, M) != 0 ||
        causal_backward_workspace_bytes(65535, 65535, (int64_t)1 << 30) != 0)
      fail("causal_backward_workspace_bytes", "not the launch ABI's layout");
    else
      printf("[ok  ] backward: workspace of %zu bytes for B=%lld H=%lld M=%lld%s\n", want,
             (long long)B, (long long)H, (long long)M,
             CAUSAL_BACKWARD_DETERMINISTIC ? " (deterministic: no dQ accumulator)" : "");
  }
}

static void expectRejected(const char *name, const char *expected, const void *q, const void *k,
                           const void *v, void *o, float *lse, int64_t H, int64_t Hkv,
                           const int64_t *strides) {
  const char *why = causal_check(q, k, v, o, lse, 1, H, Hkv, 64, 64, strides);
  CUresult r = causal_launch(NULL, q, k, v, o, lse, 1, H, Hkv, 64, 64, strides);
  int ok = r == CUDA_ERROR_INVALID_VALUE && why != NULL && strstr(why, expected) != NULL;
  printf("[%s] %-40s -> %s (\"%s\")\n", ok ? "ok  " : "FAIL", name, errorName(r),
         why ? why : "(accepted)");
  if (!ok)
    fail(name, "expected CUDA_ERROR_INVALID_VALUE and a reason");
}

/* gqa with 6 query heads (it declares 8): refused, and its poisoned output stays untouched. */
static void gqaRefusedWritesNothing(CUstream stream) {
  const int64_t B = 1, H = 6, Hkv = 2, M = 128, N = 128;
  size_t qBytes = (size_t)(B * H * M * GQA_HEAD_DIM) * GQA_ELEMENT_BYTES;
  size_t kvBytes = (size_t)(B * Hkv * N * GQA_HEAD_DIM) * GQA_ELEMENT_BYTES;
  size_t lseBytes = (size_t)(B * H * M) * sizeof(float);
  CUdeviceptr q, k, v, o, lse;
  unsigned char *host = malloc(qBytes);
  size_t i;
  int untouched = 1, ok;
  CUresult r;
  CHECK_CU(cuMemAlloc(&q, qBytes));
  CHECK_CU(cuMemAlloc(&k, kvBytes));
  CHECK_CU(cuMemAlloc(&v, kvBytes));
  CHECK_CU(cuMemAlloc(&o, qBytes));
  CHECK_CU(cuMemAlloc(&lse, lseBytes));
  CHECK_CU(cuMemsetD8(q, 0, qBytes));
  CHECK_CU(cuMemsetD8(k, 0, kvBytes));
  CHECK_CU(cuMemsetD8(v, 0, kvBytes));
  CHECK_CU(cuMemsetD8(o, 0xFF, qBytes));
  CHECK_CU(cuMemsetD8(lse, 0xFF, lseBytes));
  r = gqa_launch(stream, (const void *)(uintptr_t)q, (const void *)(uintptr_t)k,
                 (const void *)(uintptr_t)v, (void *)(uintptr_t)o, (float *)(uintptr_t)lse, B, H,
                 Hkv, M, N, NULL);
  CHECK_CU(cuStreamSynchronize(stream));
  CHECK_CU(cuMemcpyDtoH(host, o, qBytes));
  for (i = 0; i < qBytes; ++i)
    untouched &= host[i] == 0xFF;
  ok = r == CUDA_ERROR_INVALID_VALUE && untouched;
  printf("[%s] %-40s -> %s, O %s\n", ok ? "ok  " : "FAIL", "gqa with 6 heads (declares 8)",
         errorName(r), untouched ? "untouched" : "WRITTEN");
  if (!ok)
    fail("gqa with 6 heads", "expected CUDA_ERROR_INVALID_VALUE and O untouched");
  cuMemFree(q);
  cuMemFree(k);
  cuMemFree(v);
  cuMemFree(o);
  cuMemFree(lse);
  free(host);
}

static void validation(CUstream stream) {
  CUdeviceptr buffer;
  int64_t s[14] = {2 * 64 * 64, 64 * 64, 64, 64 * 64, 64 * 64, 64, 64 * 64, 64 * 64, 64,
                   2 * 64 * 64, 64 * 64, 64, 2 * 64, 64};
  char *base;
  CHECK_CU(cuMemAlloc(&buffer, 1 << 20));
  base = (char *)(uintptr_t)buffer;
  expectRejected("H not a multiple of Hkv", "multiple of Hkv", base, base, base, base,
                 (float *)base, 3, 2, NULL);
  s[2] = 65;
  expectRejected("odd q row stride", "even", base, base, base, base, (float *)base, 2, 2, s);
  s[2] = 64;
  expectRejected("k not 16-byte aligned", "16-byte", base, base + 4, base, base, (float *)base, 2,
                 2, s);
  expectRejected("lse NULL", "NULL", base, base, base, base, NULL, 2, 2, s);
  cuMemFree(buffer);
  gqaRefusedWritesNothing(stream);
}

static double nowMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void cubinLoads(const char *path) {
  CUmodule module;
  CUfunction function;
  double t0 = nowMs(), ms;
  CUresult r = cuModuleLoad(&module, path);
  ms = nowMs() - t0;
  if (r != CUDA_SUCCESS) {
    printf("[FAIL] cuModuleLoad(%s): %s\n", path, errorName(r));
    fail("the --emit cubin file loads", errorName(r));
    return;
  }
  r = cuModuleGetFunction(&function, module, CAUSAL_ENTRY);
  printf("[%s] cuModuleLoad(%s) and cuModuleGetFunction(%s): %s (load %.2f ms)\n",
         r == CUDA_SUCCESS ? "ok  " : "FAIL", path, CAUSAL_ENTRY, errorName(r), ms);
  if (r != CUDA_SUCCESS)
    fail("the --emit cubin file has the kernel", errorName(r));
  cuModuleUnload(module);
}

/* The PTX through the driver's JIT: the runtime's path (tilefuse compiles to PTX in process). */
static void ptxLoads(const char *path) {
  CUmodule module;
  CUfunction function;
  FILE *f = fopen(path, "rb");
  char *text;
  long size;
  double t0, ms;
  CUresult r;
  if (!f) {
    fail("the PTX file opens", path);
    return;
  }
  fseek(f, 0, SEEK_END);
  size = ftell(f);
  fseek(f, 0, SEEK_SET);
  text = calloc((size_t)size + 1, 1);
  if (fread(text, 1, (size_t)size, f) != (size_t)size)
    fail("the PTX file reads", path);
  fclose(f);
  t0 = nowMs();
  r = cuModuleLoadData(&module, text);
  ms = nowMs() - t0;
  if (r == CUDA_SUCCESS)
    r = cuModuleGetFunction(&function, module, CAUSAL_ENTRY);
  printf("[%s] cuModuleLoadData(%s), the driver's JIT: %s (load %.2f ms%s)\n",
         r == CUDA_SUCCESS ? "ok  " : "FAIL", path, errorName(r), ms,
         getenv("CUDA_CACHE_DISABLE") ? ", JIT cache disabled" : "");
  if (r != CUDA_SUCCESS)
    fail("the PTX loads", errorName(r));
  else
    cuModuleUnload(module);
  free(text);
}

/* Test 0, on the host: gqa.h embeds the sizes kernels/gqa.mlir declares and checks them before
 * anything else, without the driver. */
static void declaredSizeChecks(void) {
  const char *a = (const char *)(uintptr_t)0x100000;
  float *lse = (float *)(uintptr_t)0x200000;
  void *o = (void *)(uintptr_t)0x300000;
  struct {
    const char *name, *expected; /* NULL: accepted, else the whole reason */
    int64_t B, H, Hkv, M, N;
  } cases[] = {
      {"gqa as declared", NULL, 2, 8, 2, 1000, 777},
      {"gqa with 6 heads", "Q dimension 1 (H) is 6 but the kernel declares 8", 2, 6, 2, 1000,
       777},
      {"gqa with 1 kv head", "K dimension 1 (Hkv) is 1 but the kernel declares 2", 2, 8, 1, 1000,
       777},
      {"gqa with 16 and 4 heads", "Q dimension 1 (H) is 16 but the kernel declares 8", 1, 16, 4,
       64, 64},
  };
  size_t i;
  for (i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const char *why = gqa_check(a, a, a, o, lse, cases[i].B, cases[i].H, cases[i].Hkv,
                                cases[i].M, cases[i].N, NULL);
    expectAnswer(cases[i].name, why, cases[i].expected, 0, "gqa_check's answer");
  }
  {
    /* Refused before any driver call: without a driver (the toolkit's stub) the first call
     * would fail with another code. */
    CUresult r = gqa_launch(NULL, a, a, a, o, lse, 2, 6, 2, 1000, 777, NULL);
    int ok = r == CUDA_ERROR_INVALID_VALUE;
    printf("[%s] launch: %-31s -> CUresult %d (%s)\n", ok ? "ok  " : "FAIL", "gqa with 6 heads",
           (int)r, errorName(r));
    if (!ok)
      fail("gqa_launch with 6 heads", "expected CUDA_ERROR_INVALID_VALUE");
  }
  {
    /* The embedded table, in the ABI's order (Q, K, V, O, LSE); -1: any size. */
    static const int64_t expected[5][4] = {
        {-1, 8, -1, 64}, {-1, 2, -1, 64}, {-1, 2, -1, 64}, {-1, 8, -1, 64}, {-1, 8, -1, -1}};
    int same = memcmp(gqa_declared_sizes, expected, sizeof expected) == 0;
    printf("[%s] gqa_declared_sizes holds H = 8, Hkv = 2, D = 64\n", same ? "ok  " : "FAIL");
    if (!same)
      fail("gqa_declared_sizes", "not gqa's signature");
  }
  {
    /* causal declares only D: any head counts. */
    const char *why = causal_check(a, a, a, o, lse, 1, 6, 3, 64, 64, NULL);
    printf("[%s] check: %-32s -> %s\n", why == NULL ? "ok  " : "FAIL", "causal with 6 and 3 heads",
           why ? why : "accepted");
    if (why != NULL)
      fail("causal with 6 and 3 heads", why);
  }
}

/* Test 0, on the host: causal_check on fake (never dereferenced) device addresses. */
static void hostChecks(void) {
  const char *a = (const char *)(uintptr_t)0x100000; /* 16-byte aligned */
  float *lse = (float *)(uintptr_t)0x200000;
  void *o = (void *)(uintptr_t)0x300000;
  int64_t bshd[14], s[14];
  const int64_t B = 2, H = 8, Hkv = 2, M = 1000, N = 777;
  struct {
    const char *name, *expected; /* expected: NULL = accepted, else a part of the reason */
    int64_t B, H, Hkv, M, N;
    int strides; /* 0: NULL, 1: bshd, 2: s */
    int stride;       /* s = bshd with s[stride] = value */
    int64_t value;
    int pointerOffset; /* added to k */
  } cases[] = {
      {"contiguous", NULL, B, H, Hkv, M, N, 0, 0, 0, 0},
      {"B,M,H,D strides", NULL, B, H, Hkv, M, N, 1, 0, 0, 0},
      {"H % Hkv", "multiple of Hkv", B, 6, 4, M, N, 0, 0, 0, 0},
      {"zero M", "positive", B, H, Hkv, 0, N, 0, 0, 0, 0},
      {"B over 65535", "65535", 70000, H, Hkv, 1, 1, 0, 0, 0, 0},
      {"M of 2^31", "below 2^31", 1, 1, 1, (int64_t)1 << 31, N, 2, 2, 0, 0},
      {"q larger than 2^31 elements", "q spans", 1, H, Hkv, (int64_t)1 << 23, N, 0, 0, 0, 0},
      {"negative stride", "negative", B, H, Hkv, M, N, 2, 4, -64, 0},
      {"odd o stride", "even", B, H, Hkv, M, N, 2, 11, 8 * 64 + 1, 0},
      {"v stride not a multiple of 8", "multiples of 8", B, H, Hkv, M, N, 2, 8, 68, 0},
      {"k misaligned", "16-byte", B, H, Hkv, M, N, 0, 0, 0, 8},
      {"huge stride (no overflow)", "spans", B, H, Hkv, M, N, 2, 0, (int64_t)1 << 62, 0},
  };
  size_t i;
  int j;
  /* Q, O: B x M x H x D storage; K, V, LSE contiguous. */
  bshd[0] = bshd[9] = M * H * D;
  bshd[1] = bshd[10] = D;
  bshd[2] = bshd[11] = H * D;
  bshd[5] = bshd[8] = D;
  bshd[4] = bshd[7] = N * D;
  bshd[3] = bshd[6] = Hkv * N * D;
  bshd[13] = M;
  bshd[12] = H * M;
  for (i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const char *why;
    for (j = 0; j < 14; ++j)
      s[j] = bshd[j];
    if (cases[i].strides == 2)
      s[cases[i].stride] = cases[i].value;
    why = causal_check(a, a + cases[i].pointerOffset, a, o, lse, cases[i].B, cases[i].H,
                       cases[i].Hkv, cases[i].M, cases[i].N,
                       cases[i].strides == 0 ? NULL : cases[i].strides == 1 ? bshd : s);
    expectAnswer(cases[i].name, why, cases[i].expected, 1, "causal_check's answer");
  }
  declaredSizeChecks();
  backwardHostChecks();
  /* The split launcher refuses a split count below 1 and a missing workspace before it needs
   * the driver. */
  if (causal_split_launch(NULL, a, a, a, o, lse, 1, 4, 2, 64, 64, NULL, 0x400000, 0) !=
          CUDA_ERROR_INVALID_VALUE ||
      causal_split_launch(NULL, a, a, a, o, lse, 1, 4, 2, 64, 64, NULL, 0, 3) !=
          CUDA_ERROR_INVALID_VALUE)
    fail("split launches without splits or workspace", "not refused");
  else
    printf("[ok  ] check: split count 0 and a NULL workspace refused\n");
  /* The varlen launcher refuses missing offsets and contiguous (NULL) strides. */
  {
    const int32_t *cu = (const int32_t *)(uintptr_t)0x500000;
    const char *noOffsets =
        causal_varlen_check(a, a, a, o, lse, 2, 8, 2, 64, 64, bshd, NULL, cu, 128, 128);
    const char *noStrides =
        causal_varlen_check(a, a, a, o, lse, 2, 8, 2, 64, 64, NULL, cu, cu, 128, 128);
    const char *accepted =
        causal_varlen_check(a, a, a, o, lse, 2, 8, 2, 64, 64, bshd, cu, cu, 128, 128);
    if (!noOffsets || !strstr(noOffsets, "cu_seqlens") || !noStrides ||
        !strstr(noStrides, "strides") || accepted != NULL)
      fail("varlen checks", accepted ? accepted : "offsets or strides not refused");
    else
      printf("[ok  ] check: varlen without offsets or strides refused, with both accepted\n");
  }
  /* The paged launcher refuses a missing table and contiguous (NULL) strides. */
  {
    const int32_t *t = (const int32_t *)(uintptr_t)0x500000;
    const char *noTable = causal_paged_check(a, a, a, o, lse, 2, 8, 2, 64, 64, bshd, NULL, 4, 4,
                                             t, 16, 8);
    const char *noStrides =
        causal_paged_check(a, a, a, o, lse, 2, 8, 2, 64, 64, NULL, t, 4, 4, t, 16, 8);
    const char *accepted =
        causal_paged_check(a, a, a, o, lse, 2, 8, 2, 64, 64, bshd, t, 4, 4, t, 16, 8);
    if (!noTable || !strstr(noTable, "page_table") || !noStrides ||
        !strstr(noStrides, "strides") || accepted != NULL)
      fail("paged checks", accepted ? accepted : "table or strides not refused");
    else
      printf("[ok  ] check: paged without a table or strides refused, with both accepted\n");
  }
}

int main(int argc, char **argv) {
  CUdevice device;
  CUcontext context;
  CUstream stream;
  char name[256] = "";
  int major = 0, minor = 0;
  CUresult r;
  int count = 0;
  hostChecks();
  r = cuInit(0);
  if (r == CUDA_SUCCESS)
    r = cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count == 0) {
    printf("%s\n", failures ? "FAIL" : "host checks PASS");
    printf("skipped: no GPU (cuInit/cuDeviceGetCount: CUresult %d, %s)\n", (int)r,
           r != CUDA_SUCCESS ? errorName(r) : "no device");
    return failures ? 1 : 0;
  }
  CHECK_CU(cuDeviceGet(&device, 0));
  CHECK_CU(cuDeviceGetName(name, sizeof name, device));
  CHECK_CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
  CHECK_CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
  printf("%s (compute capability %d.%d); header: %s %s, head dim %d, Br %d, Bc %d, %d threads\n",
         name, major, minor, CAUSAL_ENTRY, CAUSAL_CHIP, CAUSAL_HEAD_DIM, CAUSAL_BLOCK_M,
         CAUSAL_BLOCK_N, CAUSAL_THREADS);
  /* The application's context: the primary one, as the CUDA runtime would use. The launcher
   * loads its module into it (from threads with no current context too). */
  CHECK_CU(cuDevicePrimaryCtxRetain(&context, device));
  CHECK_CU(cuCtxSetCurrent(context));

  concurrentFirstLaunch();
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  one("M < N (causal, top-left aligned)", 1, 2, 1, 100, 333, 0, stream);
  one("M > N", 1, 2, 2, 333, 100, 0, stream);
  one("strided (B,M,H,D) Q/O, padded K/V/LSE", 2, 4, 1, 257, 190, 1, stream);
  one("one row, one key", 1, 1, 1, 1, 1, 0, stream);
  splitLaunches(stream);
  varlenLaunches(stream);
  pagedLaunches(stream);
  pagedVarlenLaunches(stream);
  backwardLaunch("backward", 1, 2, 2, 200, 200, stream);
  backwardLaunch("backward: grouped heads, M < N", 1, 2, 1, 77, 200, stream);
  validation(stream);
  CHECK_CU(cuStreamDestroy(stream));
  if (argc > 1)
    cubinLoads(argv[1]);
  else
    fail("the --emit cubin file loads", "no cubin path given (argv[1])");
  if (argc > 2)
    ptxLoads(argv[2]);

  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
