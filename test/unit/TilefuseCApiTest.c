/*===- TilefuseCApiTest.c - tilefuse.h from C, against libtilefuse.so -----===*
 *
 * tilefuse-c-api-test: the header compiles as C, libtilefuse.so exports what it declares, a
 * bundled kernel compiles (PTX; explicit arch, so no GPU is needed) and comes back from the
 * cache, errors are status codes with messages (DSL errors with file:line:col), a launch with
 * head counts the kernel does not declare is refused before the driver is needed, and a launch
 * without a GPU says so. Run with TILEFUSE_CACHE_DIR set to a fresh directory.
 *
 *===----------------------------------------------------------------------===*/
#include "tilefuse/tilefuse.h"
#include "tilefuse/tilefuse_cuda.h" /* both headers together: one tilefuse_status */

#include <stdio.h>
#include <string.h>

static int failures = 0;

static void expect(int condition, const char *what, const char *message) {
  if (condition)
    return;
  ++failures;
  fprintf(stderr, "FAILED: %s (message: %s)\n", what, message);
}

static const char *brokenSource =
    "func.func @broken(%Q: memref<?x?x?x64xbf16>) {\n"
    "  %q = tile.lod %Q : memref<?x?x?x64xbf16> -> tensor<?x?x?x64xbf16>\n"
    "  return\n"
    "}\n";

int main(void) {
  char err[4096];
  char tiny[6];
  tilefuse_spec spec;
  tilefuse_attention *kernel = NULL, *again = NULL;
  /* A 16-byte aligned device address for launches that must not get as far as the GPU. */
  void *fake = (void *)(size_t)0x10000;
  int status;

  printf("%s\n", tilefuse_version());
  expect(strncmp(tilefuse_version(), "tilefuse ", 9) == 0, "version", tilefuse_version());

  tilefuse_spec_init(&spec);
  expect(spec.size == sizeof spec && spec.kernel == NULL && spec.block_m == 0, "spec_init", "");
  spec.kernel = "causal";
  spec.arch = "sm_90a";
  spec.head_dim = 128;
  status = tilefuse_attention_get(&spec, &kernel, err, sizeof err);
  expect(status == TILEFUSE_OK && kernel != NULL, "get causal, head dim 128", err);
  if (kernel) {
    expect(strcmp(tilefuse_attention_name(kernel), "causal") == 0, "name", "");
    expect(strcmp(tilefuse_attention_dtype(kernel), "bf16") == 0, "dtype", "");
    expect(strcmp(tilefuse_attention_arch(kernel), "sm_90a") == 0, "arch", "");
    expect(tilefuse_attention_head_dim(kernel) == 128, "head_dim", "");
    expect(strstr(tilefuse_attention_ptx(kernel), ".entry causal") != NULL, "ptx", "");
    expect(strstr(tilefuse_attention_metadata(kernel), "\"head_dim\": 128") != NULL, "metadata",
           tilefuse_attention_metadata(kernel));
    expect(strcmp(tilefuse_attention_origin(kernel), "compiled") == 0 ||
               strcmp(tilefuse_attention_origin(kernel), "disk") == 0,
           "origin of the first get", tilefuse_attention_origin(kernel));
    /* No GPU, no tuning database entry and no explicit configuration: the default, at head dim
     * 128 on sm_90a the warp-specialized kernel. */
    expect(strstr(tilefuse_attention_config(kernel), "Br=128,Bc=128,rows_per_warp=16,mma=wgmma") ==
                   tilefuse_attention_config(kernel) &&
               strstr(tilefuse_attention_config(kernel), "warp_specialize=true") != NULL,
           "config", tilefuse_attention_config(kernel));
  }
  status = tilefuse_attention_get(&spec, &again, err, sizeof err);
  expect(status == TILEFUSE_OK && again != NULL &&
             strcmp(tilefuse_attention_origin(again), "memory") == 0,
         "the second get comes from memory", err);
  tilefuse_attention_release(again);

  /* Split-KV: its own kernel, the split launch ABI in its metadata. */
  spec.split_kv = 1;
  status = tilefuse_attention_get(&spec, &again, err, sizeof err);
  expect(status == TILEFUSE_OK && again != NULL &&
             strstr(tilefuse_attention_metadata(again), "\"split_kv\": true") != NULL &&
             strstr(tilefuse_attention_ptx(again), "atom.global.add") != NULL,
         "split_kv", err);
  expect(again != NULL && strstr(tilefuse_attention_metadata(again), "\"pack_gqa\": true") != NULL,
         "split kernels pack GQA groups", tilefuse_attention_metadata(again));
  if (again) {
    /* A caller's split count is checked before the driver is needed. */
    status = tilefuse_attention_launch_split(again, NULL, fake, fake, fake, fake, (float *)fake, 1,
                                             1, 1, 1, 1, 128, NULL, -1, err, sizeof err);
    expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT && strstr(err, "kvSplits -1") != NULL,
           "a negative split count", err);
    tilefuse_attention_release(again);
  }
  spec.split_kv = 0;
  status = tilefuse_attention_launch_split(kernel, NULL, fake, fake, fake, fake, (float *)fake, 1, 1,
                                           1, 1, 1, 128, NULL, 3, err, sizeof err);
  expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT && strstr(err, "without split-KV") != NULL,
         "split launch of an unsplit kernel", err);

  /* Varlen: its own kernel, the varlen launch ABI in its metadata; its launches need the
   * strides, and a varlen kernel is not split. */
  spec.varlen = 1;
  status = tilefuse_attention_get(&spec, &again, err, sizeof err);
  expect(status == TILEFUSE_OK && again != NULL &&
             strstr(tilefuse_attention_metadata(again), "\"varlen\": true") != NULL,
         "varlen", err);
  if (again) {
    static const int32_t offsets[3] = {0, 20, 50};
    status = tilefuse_attention_launch_varlen(again, NULL, fake, fake, fake, fake, (float *)fake,
                                              2, 1, 1, 30, 30, 128, NULL, offsets, offsets, 50,
                                              50, err, sizeof err);
    expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT && strstr(err, "needs the strides") != NULL,
           "a varlen launch without strides", err);
    tilefuse_attention_release(again);
  }
  spec.split_kv = 1;
  status = tilefuse_attention_get(&spec, &again, err, sizeof err);
  expect(status == TILEFUSE_OK && again != NULL &&
             strstr(tilefuse_attention_metadata(again), "\"split_kv\": true") != NULL &&
             strstr(tilefuse_attention_metadata(again), "\"varlen\": true") != NULL,
         "varlen and split", err);
  if (again)
    tilefuse_attention_release(again);
  spec.split_kv = 0;
  /* Varlen over a paged cache (chunked prefill): both in the metadata, its own launch. */
  spec.paged_kv = 1;
  status = tilefuse_attention_get(&spec, &again, err, sizeof err);
  expect(status == TILEFUSE_OK && again != NULL &&
             strstr(tilefuse_attention_metadata(again), "\"varlen\": true") != NULL &&
             strstr(tilefuse_attention_metadata(again), "\"paged_kv\": true") != NULL,
         "paged varlen", err);
  if (again) {
    static const int32_t offsets[3] = {0, 20, 50}, table[4] = {0, 1, 2, 3}, lengths[2] = {30, 7};
    status = tilefuse_attention_launch_paged_varlen(
        again, NULL, fake, fake, fake, fake, (float *)fake, 2, 1, 1, 30, 30, 128, NULL, table, 2,
        2, lengths, 16, 4, offsets, 50, err, sizeof err);
    expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT && strstr(err, "needs the strides") != NULL,
           "a paged varlen launch without strides", err);
    /* A varlen launch of it lacks the page table. */
    status = tilefuse_attention_launch_varlen(again, NULL, fake, fake, fake, fake, (float *)fake,
                                              2, 1, 1, 30, 30, 128, NULL, offsets, offsets, 50,
                                              50, err, sizeof err);
    expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT, "a paged varlen kernel's varlen launch",
           err);
    tilefuse_attention_release(again);
  }
  spec.paged_kv = 0;
  status = tilefuse_attention_launch_paged_varlen(
      NULL, NULL, fake, fake, fake, fake, (float *)fake, 2, 1, 1, 30, 30, 128, NULL, NULL, 1, 1,
      NULL, 16, 1, NULL, 0, err, sizeof err);
  expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT && strstr(err, "kernel is NULL") != NULL,
         "paged varlen launch of NULL", err);
  spec.varlen = 0;
  status = tilefuse_attention_launch_varlen(NULL, NULL, fake, fake, fake, fake, (float *)fake, 2,
                                            1, 1, 30, 30, 128, NULL, NULL, NULL, 0, 0, err,
                                            sizeof err);
  expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT && strstr(err, "kernel is NULL") != NULL,
         "varlen launch of NULL", err);

  /* Errors. */
  spec.kernel = "no_such_kernel";
  status = tilefuse_attention_get(&spec, &again, err, sizeof err);
  expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT && again == NULL &&
             strstr(err, "no_such_kernel") != NULL,
         "unknown kernel", err);
  spec.kernel = NULL;
  spec.source = brokenSource;
  spec.source_name = "user/broken.mlir";
  status = tilefuse_attention_get(&spec, &again, err, sizeof err);
  expect(status == TILEFUSE_ERROR_COMPILE && strstr(err, "user/broken.mlir:2:") != NULL,
         "a DSL error with file:line:col", err);
  status = tilefuse_attention_get(&spec, &again, tiny, sizeof tiny);
  expect(strlen(tiny) == sizeof tiny - 1, "messages are truncated to errlen", tiny);
  spec.size = 8;
  status = tilefuse_attention_get(&spec, &again, err, sizeof err);
  expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT && strstr(err, "tilefuse_spec_init"),
         "an uninitialized spec", err);
  status = tilefuse_attention_get(NULL, &again, err, sizeof err);
  expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT, "NULL spec", err);
  status = tilefuse_attention_launch(NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, 1, 1, 1, 1, 64,
                                     NULL, err, sizeof err);
  expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT, "launch of NULL", err);

  /* kernels/gqa.mlir declares 8 query and 2 key/value heads: 6 query heads are refused (they
   * used to run and return wrong output), on any machine. */
  tilefuse_spec_init(&spec);
  spec.kernel = "gqa";
  spec.arch = "sm_90a";
  status = tilefuse_attention_get(&spec, &again, err, sizeof err);
  expect(status == TILEFUSE_OK && again != NULL, "get gqa", err);
  if (again) {
    status = tilefuse_attention_launch(again, NULL, fake, fake, fake, fake, (float *)fake, 1, 6, 2,
                                       128, 128, 64, NULL, err, sizeof err);
    expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT &&
               strstr(err, "Q dimension 1 (H) is 6 but the kernel declares 8") != NULL,
           "gqa launched with 6 heads", err);
    tilefuse_attention_release(again);
  }

  /* The float64 reference from the kernel's own text, on host arrays: causal, one head, 3 query
   * rows, 2 keys, D = 16. Row 0 sees key 0 only, so O's row 0 is V's row 0 and its logsumexp is
   * its one scaled score; rows 1 and 2 see both keys. */
  {
    double q[3 * 16], k[2 * 16], v[2 * 16], o[3 * 16], lse[3];
    int i;
    for (i = 0; i < 3 * 16; ++i)
      q[i] = 0.1 * (i % 7) - 0.3;
    for (i = 0; i < 2 * 16; ++i) {
      k[i] = 0.05 * (i % 5);
      v[i] = 1.0 + i;
    }
    tilefuse_spec_init(&spec);
    spec.kernel = "causal";
    spec.head_dim = 16;
    status = tilefuse_reference_attention(&spec, q, k, v, o, lse, 1, 1, 1, 3, 2, 16, NULL, err,
                                          sizeof err);
    expect(status == TILEFUSE_OK, "reference of causal", err);
    if (status == TILEFUSE_OK) {
      double score = 0;
      for (i = 0; i < 16; ++i)
        score += q[i] * k[i];
      expect(o[0] == v[0] && o[15] == v[15], "row 0 attends to key 0 alone", "");
      expect(lse[0] > score / 4 - 1e-12 && lse[0] < score / 4 + 1e-12,
             "row 0's logsumexp is its one score / sqrt(16)", "");
      expect(o[16] > v[0] && o[16] < v[16], "row 1 mixes both keys", "");
    }
    spec.kernel = "gqa";
    spec.head_dim = 0;
    status = tilefuse_reference_attention(&spec, q, k, v, o, lse, 1, 6, 2, 1, 1, 64, NULL, err,
                                          sizeof err);
    expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT &&
               strstr(err, "Q dimension 1 (H) is 6 but the kernel declares 8") != NULL,
           "the reference checks declared sizes too", err);
    spec.kernel = NULL;
    spec.source = brokenSource;
    spec.source_name = "user/broken.mlir";
    status = tilefuse_reference_attention(&spec, q, k, v, o, lse, 1, 1, 1, 1, 1, 64, NULL, err,
                                          sizeof err);
    expect(status == TILEFUSE_ERROR_COMPILE && strstr(err, "user/broken.mlir:2:") != NULL,
           "the reference of a broken kernel: file:line:col", err);
  }

  {
    /* The host pair, forward and derived backward on the CPU. One query row and one key: P = 1,
     * so O = V, dV = dO and dS = P (dP - D) = 0, i.e. dQ = dK = 0. */
    tilefuse_host_attention *pair = NULL;
    float hq[16], hk[16], hv[16], ho[16], hdo[16], hlse[1], hdq[16], hdk[16], hdv[16];
    double worst = 0;
    int i;
    tilefuse_spec_init(&spec);
    spec.kernel = "causal";
    spec.dtype = "f32";
    spec.head_dim = 16;
    spec.deterministic = 1;
    status = tilefuse_host_attention_get(&spec, &pair, err, sizeof err);
    expect(status == TILEFUSE_OK, "host pair of causal", err);
    for (i = 0; i < 16; ++i) {
      hq[i] = (float)(0.1 * i - 0.7);
      hk[i] = (float)(0.3 - 0.05 * i);
      hv[i] = (float)(1.0 + 0.25 * i);
      hdo[i] = (float)(0.5 - 0.125 * i);
    }
    if (status == TILEFUSE_OK) {
      status = tilefuse_host_attention_forward(pair, hq, hk, hv, ho, hlse, 1, 1, 1, 1, 1, 16, NULL,
                                               err, sizeof err);
      expect(status == TILEFUSE_OK && ho[3] == hv[3], "host forward: O = V", err);
      status = tilefuse_host_attention_backward(pair, hq, hk, hv, ho, hdo, hlse, hdq, hdk, hdv, 1,
                                                1, 1, 1, 1, 16, NULL, err, sizeof err);
      expect(status == TILEFUSE_OK, "host backward", err);
      for (i = 0; i < 16; ++i) {
        double a = hdq[i] < 0 ? -hdq[i] : hdq[i], b = hdk[i] < 0 ? -hdk[i] : hdk[i];
        worst = a > worst ? a : worst;
        worst = b > worst ? b : worst;
      }
      expect(status == TILEFUSE_OK && hdv[5] == hdo[5] && worst < 1e-5,
             "host backward: dV = dO, dQ = dK = 0", err);
      status = tilefuse_host_attention_backward(NULL, hq, hk, hv, ho, hdo, hlse, hdq, hdk, hdv, 1,
                                                1, 1, 1, 1, 16, NULL, err, sizeof err);
      expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT, "host backward of NULL", err);
    }
    tilefuse_host_attention_release(pair);
    spec.dtype = "f64";
    status = tilefuse_host_attention_get(&spec, &pair, err, sizeof err);
    expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT && strstr(err, "dtype") != NULL,
           "host pair of an unknown dtype", err);
  }

  {
    /* The GPU backward: compiled without a GPU (an explicit arch); a spec it does not take. */
    tilefuse_backward *backward = NULL;
    tilefuse_spec_init(&spec);
    spec.kernel = "softcap";
    spec.arch = "sm_90a";
    status = tilefuse_backward_get(&spec, &backward, err, sizeof err);
    expect(status == TILEFUSE_OK && backward != NULL, "the GPU backward of softcap", err);
    if (status == TILEFUSE_OK && tilefuse_gpu_available(err, sizeof err) != TILEFUSE_OK) {
      status = tilefuse_backward_launch(backward, NULL, fake, fake, fake, fake, fake,
                                        (const float *)fake, fake, fake, fake, 1, 1, 1, 64, 64,
                                        64, NULL, err, sizeof err);
      expect(status == TILEFUSE_ERROR_UNAVAILABLE, "a backward launch without a GPU", err);
    }
    status = tilefuse_backward_launch(NULL, NULL, fake, fake, fake, fake, fake,
                                      (const float *)fake, fake, fake, fake, 1, 1, 1, 64, 64, 64,
                                      NULL, err, sizeof err);
    expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT, "a backward launch of NULL", err);
    tilefuse_backward_release(backward);
    spec.block_m = 64;
    spec.block_n = 32;
    status = tilefuse_backward_get(&spec, &backward, err, sizeof err);
    expect(status == TILEFUSE_ERROR_COMPILE && strstr(err, "Br = Bc") != NULL,
           "a backward with Br != Bc", err);
    tilefuse_backward_release(NULL);
  }

  if (tilefuse_gpu_available(err, sizeof err) != TILEFUSE_OK) {
    status = tilefuse_attention_launch(kernel, NULL, fake, fake, fake, fake, (float *)fake, 1, 1,
                                       1, 1, 1, 128, NULL, err, sizeof err);
    expect(status == TILEFUSE_ERROR_UNAVAILABLE, "launch without a GPU", err);
    printf("no GPU (%s): launches not run\n", err);
  }
  tilefuse_attention_release(kernel);
  tilefuse_attention_release(NULL);
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
