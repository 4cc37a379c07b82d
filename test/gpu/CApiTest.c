/*===- CApiTest.c - the C API, from C -------------------------------------===*
 *
 * tilefuse-capi-test: tilefuse_cuda.h compiles as C, libtilefuse_cuda.so exports what it declares,
 * bad arguments come back as status codes with messages, and (with a GPU) a module loads from
 * memory and launches. Prints "skipped: no GPU (...)" and exits 0 where there is no GPU.
 *
 *===----------------------------------------------------------------------===*/
#include "tilefuse/tilefuse_cuda.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;

static void expect(int condition, const char *what, const char *message) {
  if (condition)
    return;
  ++failures;
  fprintf(stderr, "FAILED: %s (message: %s)\n", what, message);
}

/* A module with an entry and no parameters: the launch path without any attention kernel. */
static const char *noopPtx = ".version 8.0\n"
                             ".target sm_80\n"
                             ".address_size 64\n"
                             ".visible .entry noop()\n"
                             "{\n"
                             "  ret;\n"
                             "}\n";
static const char *noopSidecar = "{\"name\": \"noop\", \"block_m\": 64, \"block_n\": 64, "
                                 "\"threads\": 128, \"head_dim\": 64, \"dtype\": \"bf16\", "
                                 "\"shared_bytes\": 0}";

int main(void) {
  char err[1024];
  char shortErr[8];
  tilefuse_kernel *kernel = NULL;
  int status;

  /* Argument checks need no GPU. */
  status = tilefuse_cuda_launch(NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, 1, 1, 1, 1, 64, NULL,
                                err, sizeof err);
  expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT, "launch of a NULL kernel", err);
  status = tilefuse_cuda_load(NULL, NULL, &kernel, shortErr, sizeof shortErr);
  expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT, "load of a NULL path", shortErr);
  expect(strlen(shortErr) == sizeof shortErr - 1, "messages are truncated to errlen", shortErr);
  tilefuse_cuda_free(NULL);

  status = tilefuse_cuda_available(err, sizeof err);
  if (status == TILEFUSE_ERROR_UNAVAILABLE) {
    if (strncmp(err, "no GPU (", 8) == 0)
      printf("skipped: %s\n", err);
    else
      printf("skipped: no GPU (%s)\n", err);
    return failures ? 1 : 0;
  }
  expect(status == TILEFUSE_OK, "a usable driver", err);

  status = tilefuse_cuda_load("/nonexistent/kernel.ptx", NULL, &kernel, err, sizeof err);
  expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT && kernel == NULL, "load of a missing file",
         err);
  expect(strstr(err, "cannot read /nonexistent/kernel.json") != NULL, "names the missing file",
         err);

  status = tilefuse_cuda_load_data(noopPtx, noopSidecar, &kernel, err, sizeof err);
  expect(status == TILEFUSE_OK && kernel != NULL, "load from memory", err);
  if (kernel) {
    /* Any aligned addresses: the kernel reads none of its (absent) parameters. */
    const void *fake = (const void *)(size_t)0x10000;
    expect(strcmp(tilefuse_cuda_kernel_name(kernel), "noop") == 0, "name", "");
    expect(strcmp(tilefuse_cuda_kernel_dtype(kernel), "bf16") == 0, "dtype", "");
    expect(tilefuse_cuda_kernel_head_dim(kernel) == 64, "head_dim", "");
    status = tilefuse_cuda_launch(kernel, NULL, fake, fake, fake, (void *)fake, (void *)fake, 2,
                                  8, 2, 100, 100, 64, NULL, err, sizeof err);
    expect(status == TILEFUSE_OK, "launch", err);
    status = tilefuse_cuda_launch(kernel, NULL, fake, fake, fake, (void *)fake, (void *)fake, 2,
                                  8, 3, 100, 100, 64, NULL, err, sizeof err);
    expect(status == TILEFUSE_ERROR_INVALID_ARGUMENT && strstr(err, "multiple of Hkv"),
           "launch with H % Hkv != 0", err);
    tilefuse_cuda_free(kernel);
  }
  printf(failures ? "capi: FAILED\n" : "capi: ok\n");
  return failures ? 1 : 0;
}
