/*===- tilefuse_status.h - status codes of the tilefuse C APIs -----*- C -*-===*
 *
 * Shared by tilefuse.h (the JIT runtime, libtilefuse.so) and tilefuse_cuda.h (loading compiled
 * kernels, libtilefuse_cuda.so), so both headers can be included together. Values never change;
 * new ones are only added.
 *
 *===----------------------------------------------------------------------===*/
#ifndef TILEFUSE_TILEFUSE_STATUS_H
#define TILEFUSE_TILEFUSE_STATUS_H

typedef enum tilefuse_status {
  TILEFUSE_OK = 0,
  /* No CUDA driver (libcuda.so.1) or no GPU on this machine. */
  TILEFUSE_ERROR_UNAVAILABLE = 1,
  /* Bad file, metadata, kernel name, option, shape, stride or pointer; nothing was launched. */
  TILEFUSE_ERROR_INVALID_ARGUMENT = 2,
  /* A CUDA driver call failed (JIT compilation, launch, ...). */
  TILEFUSE_ERROR_CUDA = 3,
  /* The kernel's DSL text did not compile (the message has its file:line:col). */
  TILEFUSE_ERROR_COMPILE = 4
} tilefuse_status;

#endif /* TILEFUSE_TILEFUSE_STATUS_H */
