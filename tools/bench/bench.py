#!/usr/bin/env python3
"""tilefuse against its peers, on one GPU, in one run, on identical inputs.

Implementations:
  tilefuse    the compiled kernels (--ptx-dir: NAME.ptx + NAME.json) through the C API
              (libtilefuse_cuda.so, --lib) with ctypes
  sdpa-flash  torch SDPA, FLASH_ATTENTION backend (FlashAttention-2)
  sdpa-cudnn  torch SDPA, CUDNN_ATTENTION backend (the baseline of the ratios)
  flex        torch.compile'd FlexAttention; a causal block mask for causal
  flex-paged  decode rows only: the same FlexAttention (FlexDecoding) on a paged KV cache with a
              paged block mask, through torch's PagedAttention (below)

Grid: bf16; head dim 64 and 128; M = N in 1k, 2k, 4k, 8k, 16k; causal and not; 16k tokens per
batch (B = 16384 // N); hidden 2048 (H = 2048 // D). FLOPs = 4 B H M N D, halved for causal.
Each time is the median of >= 20 repetitions timed with CUDA events after a warm-up, with the L2
cache flushed before each repetition; the repetitions of a row's columns are interleaved (one
call of each per round, the order rotated), so drift during a row falls on all of them alike. tilefuse's output is checked against SDPA's once per
configuration (max |O - O_sdpa| / max |O_sdpa|). Backends that cannot run print n/a.

Kernels are recognised by their sidecar, whatever the file is called: "name" attention
(non-causal) or causal, "head_dim", "dtype".

  python3 tools/bench/bench.py --ptx-dir build-gpu/kernels --lib build-gpu/libtilefuse_cuda.so

Varlen prefill (--varlen MAX,...): per MAX, a mix of sequence lengths (the longest MAX, the
others drawn from MAX/8 ... MAX, at least --tokens or 3 MAX tokens in all), causal and not. The
varlen kernels of a --variant directory (sidecar "varlen") run the sequences packed (THD, as
FlashAttention's varlen API takes them); every other column runs the same sequences padded to
MAX in a B x H x MAX x D batch. A packed column's TFLOP/s counts the sequences' own FLOPs
(4 H L^2 D each, halved for causal), a padded column's the padded batch's: the same measure of
how busy each keeps the GPU. "useful" TFLOP/s (the sequences' FLOPs over every column's time)
are in the JSON. So is each packed column's block-quantization bound ("block_bound", the last
printed column for the first packed one): the packed/padded ratio a perfectly busy GPU would
reach with that kernel's Br x Bc blocks (each sequence computes whole blocks, under a causal
mask the ones it visits), against which a measured ratio reads.

Tile configurations side by side: --variant NAME=DIR (repeatable) adds a column "tf:NAME" timing
the kernels of DIR (e.g. compiled with other --block-m/--rows-per-warp/--q-operand).

FlexAttention on a paged cache (--decode, --impls ...,flex-paged): a column flex-paged@P for each
page size P of --flex-page-size (default 128). torch's PagedAttention
(torch.nn.attention.experimental._paged_attention: reserve, assign) builds the cache from the
same K and V in the pages of a tilefuse @P column: the same page table (the pages in the random
order seeded by P) and, with --flex-page-layout nhd (the default), byte for byte the same
[pages, P, Hkv, D] cache, which FlexAttention reads through a [1, Hkv, pages * P, D] view; hsd
is PagedAttention's own [1, Hkv, pages * P, D] cache (an @Phnd cache has no such view). The
logical block mask (the N keys in P-row key blocks) goes through convert_logical_block_mask, and
the flex column's compiled flex_attention runs on the cache. --flex-paged-mask create builds the
logical mask with create_block_mask, as torch's paged tests do; partial lists every block as
partial (mask_mod on each), as vLLM's FlexAttention backend does. It matters for speed: where a
mask carries full-block lists (create_block_mask's always do, even empty ones), FlexDecoding
sizes its key splits by the whole cache (pages * P rows, B times a sequence); without them, by
the blocks listed.

The page size is the mask's key block size (convert_logical_block_mask requires that), and
FlexDecoding's key tile (BLOCK_N, 64 rows in torch 2.11) must divide it. 128 runs, and so do
multiples of 64; 16 and 32 run where the decode kernel shrinks its tile to a smaller block, as
torch 2.11's does. Other sizes are n/a with that reason, and so is the column on a torch without
PagedAttention or where torch fails, the reason printed once. The output is checked against the
float reference as tilefuse's is; past a relative error of 2e-2 the cell reads WRONG, and its
GB/s moves to the row's "wrong" in the JSON.

The autotuner's winners: --tuned-dir DIR adds the column "tuned" beside "tilefuse" (the default
configurations), timing the kernels `tilefuse tune --emit-dir DIR` wrote on this GPU. Their
sidecars carry "seq_bucket": a row takes the kernel tuned for its bucket (the next power of two
of N, 512 ... 65536), else one without a bucket. `tilefuse tune` needs the self-contained build
(the GPU machine has no LLVM):

  build-gpu/tilefuse tune --kernel attention --seq 1024,2048,4096,8192,16384 \
      --emit-dir build-gpu/tuned                         # and causal, and --head-dim 128
  python3 tools/bench/bench.py --tuned-dir build-gpu/tuned

The backward (--backward): the grid's configurations, each column timing dQ, dK and dV alone,
given Q, K, V, O, dO and LSE. tilefuse: the derived backward of --backward-dir (`tilefuse compile
--backward`: the three phases preprocess, key_gradients and query_gradients in one PTX module,
the sidecar a JSON array of their metadata, named attention_backward_* or causal_backward_*),
after the forward kernel of --ptx-dir wrote O and LSE once; the default backwards (atomic dQ,
or, above head dim 64 on sm_90a, the ordered dQ loop, which is faster there), or with
--backward-deterministic only the bitwise-reproducible ones (sidecar "deterministic"). The peers:
torch.autograd.grad of an SDPA (flash, cuDNN) or FlexAttention forward run once on inputs that
require grad, the graph retained so every call runs the same backward. FLOPs = 2.5 x the
forward's (five matrix products against two). tilefuse's dQ, dK and dV are checked against SDPA
flash's (else cuDNN's), max |dX - dX_sdpa| / max |dX_sdpa| each; past BACKWARD_TOLERANCE the row
says WRONG. The columns tf/flash and tf/cudnn are tilefuse's speed over theirs.
--backward-variant NAME=DIR (repeatable) adds a column tf:NAME timing the backwards of DIR, in
the same interleaved rounds, its gradients checked the same way (e.g. another configuration's
or the previous compiler's kernels, against the default set of --backward-dir).

  build/tools/tilefuse compile --kernel causal --backward --head-dim 128 \
      -o build-gpu/kernels-backward/causal_backward_d128.ptx   # scripts/build-gpu.sh does all
  python3 tools/bench/bench.py --backward --backward-dir build-gpu/kernels-backward
"""

import argparse
import ctypes
import datetime
import itertools
import json
import math
import os
import pathlib
import random
import statistics
import sys

IMPLS = ("tilefuse", "sdpa-flash", "sdpa-cudnn", "flex", "flex-paged")
DECODE_ONLY = ("flex-paged",)  # left out of the default --impls of the grid and varlen rows
BASELINE = "sdpa-cudnn"
# --backward: the columns tilefuse's speed is quoted against, and the SDPA columns whose
# gradients check tilefuse's, in order of preference.
BACKWARD_PEERS = ("sdpa-flash", "sdpa-cudnn")
# A --backward row's largest max |dX - dX_sdpa| / max |dX_sdpa| before it reads WRONG: two bf16
# backwards differ by the rounding of P, dS and the gradients (~1e-2 at most); a wrong kernel
# (a block missed, a wrong scale or LSE) is off by far more.
BACKWARD_TOLERANCE = 5e-2
# Backward FLOPs over the forward's: the forward's two matrix products (S = Q K^T, O = P V), the
# backward's five (S again, dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q); FlashAttention's
# convention.
BACKWARD_FLOP_FACTOR = 2.5


class Unavailable(Exception):
    """An implementation cannot run this configuration (reason in the message)."""


# ---------------------------------------------------------------------------------------------
# tilefuse through its C API
# ---------------------------------------------------------------------------------------------


class Tilefuse:
    """libtilefuse_cuda.so and the attention / causal kernels of a directory (and, given
    backward_dir, the derived backwards of another: --backward)."""

    def __init__(self, lib_path, ptx_dir, kv_splits=0, page_size=16, page_layout="nhd",
                 backward_dir=None, backward_deterministic=False):
        # (causal, head_dim, dtype, seq bucket or None) -> (kernel handle, sidecar path, scale)
        self.kernels = {}
        # (causal, head_dim, dtype) -> (backward handle, sidecar path, scale): the backwards of
        # backward_dir with deterministic dQ or without, as backward_deterministic asks
        self.backward_kernels = {}
        self.backward_dir = backward_dir
        self.backward_deterministic = backward_deterministic
        self.backward_error = None  # why there are no backwards (where backward_dir is given)
        self.paged = set()  # the keys of paged-KV kernels (sidecar "paged_kv")
        self.varlen = set()  # the keys of varlen kernels (sidecar "varlen")
        self.kv_splits = kv_splits  # a split-KV kernel's key splits (0: the launcher's choice)
        self.page_size = page_size  # a paged kernel's rows per page
        # a paged cache's layout: nhd, [pages, page size, Hkv, D] (vLLM's), or hnd,
        # [pages, Hkv, page size, D] (FlashInfer's other one: a head's rows of a page adjacent)
        self.page_layout = page_layout
        self.error = None
        self._err = ctypes.create_string_buffer(4096)
        try:
            lib = ctypes.CDLL(str(lib_path))
        except OSError as e:
            self.error = f"cannot load {lib_path}: {e}"
            return
        vp, i64 = ctypes.c_void_p, ctypes.c_int64
        lib.tilefuse_cuda_load.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                                           ctypes.POINTER(vp), ctypes.c_char_p, ctypes.c_size_t]
        lib.tilefuse_cuda_launch_split.argtypes = ([vp, vp] + [vp] * 5 + [i64] * 6 +
                                                   [ctypes.POINTER(i64), i64, ctypes.c_char_p,
                                                    ctypes.c_size_t])
        i32p = ctypes.c_void_p
        lib.tilefuse_cuda_launch_paged.argtypes = ([vp, vp] + [vp] * 5 + [i64] * 6 +
                                                   [ctypes.POINTER(i64), i32p, i64, i64, i32p,
                                                    i64, i64, i64, ctypes.c_char_p,
                                                    ctypes.c_size_t])
        lib.tilefuse_cuda_launch_varlen.argtypes = ([vp, vp] + [vp] * 5 + [i64] * 6 +
                                                    [ctypes.POINTER(i64), i32p, i32p, i64, i64,
                                                     ctypes.c_char_p, ctypes.c_size_t])
        lib.tilefuse_cuda_free.argtypes = [vp]
        lib.tilefuse_cuda_available.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        self.lib = lib
        if lib.tilefuse_cuda_available(self._err, len(self._err)) != 0:
            self.error = self._err.value.decode()
            return
        for sidecar in sorted(pathlib.Path(ptx_dir).glob("*.json")):
            self._load(sidecar)
        if not self.kernels:
            self.error = f"no attention/causal kernels in {ptx_dir}"
        if backward_dir is not None:
            self._load_backwards(lib_path, backward_dir)

    def _load_backwards(self, lib_path, backward_dir):
        lib = self.lib
        if not hasattr(lib, "tilefuse_cuda_backward_load"):
            self.backward_error = (f"{lib_path} has no tilefuse_cuda_backward_load (built before "
                                   f"the derived backward: scripts/build-gpu.sh)")
            return
        vp, i64 = ctypes.c_void_p, ctypes.c_int64
        lib.tilefuse_cuda_backward_load.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                                                    ctypes.POINTER(vp), ctypes.c_char_p,
                                                    ctypes.c_size_t]
        # stream, q, k, v, o, d_o, lse, d_q, d_k, d_v; B, H, Hkv, M, N, D; strides; err, errlen
        lib.tilefuse_cuda_backward_launch.argtypes = ([vp, vp] + [vp] * 9 + [i64] * 6 +
                                                      [ctypes.POINTER(i64), ctypes.c_char_p,
                                                       ctypes.c_size_t])
        for sidecar in sorted(pathlib.Path(backward_dir).glob("*.json")):
            self._load_backward(sidecar)
        if not self.backward_kernels:
            self.backward_error = (f"no {'deterministic ' if self.backward_deterministic else ''}"
                                   f"attention/causal backwards in {backward_dir}")

    def _load_backward(self, sidecar):
        """A derived backward, recognised by its sidecar whatever the file is called: a JSON
        array of its phases' metadata in launch order, the kernels named
        <kernel>_backward_<phase> with the kernel attention or causal."""
        ptx = sidecar.with_suffix(".ptx")
        try:
            phases = json.loads(sidecar.read_text())
            if not isinstance(phases, list):
                return  # a forward kernel's sidecar
            first = phases[0]
            name, head_dim, dtype = first["name"], int(first["head_dim"]), first["dtype"]
            # The backward's scale is the forward's, which the sidecars of the bundled kernels
            # leave at 1 / sqrt(D), as _load does.
            scale = float(first.get("scale", 1 / math.sqrt(head_dim)))
            deterministic = bool(first.get("deterministic", False))
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            print(f"tilefuse: skipping {sidecar}: {e}", file=sys.stderr)
            return
        kernel = next((k for k in ("attention", "causal") if name.startswith(k + "_backward")),
                      None)
        # --backward-deterministic times the deterministic backwards only; otherwise any:
        # above head dim 64 on sm_90a the default backward is the ordered (deterministic) one.
        if kernel is None or (self.backward_deterministic and not deterministic) or \
                not ptx.exists():
            return
        key = (kernel == "causal", head_dim, dtype)
        if key in self.backward_kernels:
            print(f"tilefuse: {sidecar} duplicates {self.backward_kernels[key][1]}; keeping the "
                  f"first", file=sys.stderr)
            return
        handle = ctypes.c_void_p()
        if self.lib.tilefuse_cuda_backward_load(str(ptx).encode(), str(sidecar).encode(),
                                                ctypes.byref(handle), self._err,
                                                len(self._err)) != 0:
            print(f"tilefuse: cannot load {ptx}: {self._err.value.decode()}", file=sys.stderr)
            return
        self.backward_kernels[key] = (handle, sidecar, scale)

    def _load(self, sidecar):
        ptx = sidecar.with_suffix(".ptx")
        try:
            meta = json.loads(sidecar.read_text())
            if isinstance(meta, list):
                return  # a derived backward's sidecar (its phases): _load_backward's
            name, head_dim, dtype = meta["name"], int(meta["head_dim"]), meta["dtype"]
            scale = float(meta.get("scale", 1 / math.sqrt(head_dim)))
            bucket = int(meta["seq_bucket"]) if "seq_bucket" in meta else None
        except (OSError, ValueError, KeyError) as e:
            print(f"tilefuse: skipping {sidecar}: {e}", file=sys.stderr)
            return
        if name not in ("attention", "causal") or not ptx.exists():
            return
        key = (name == "causal", head_dim, dtype, bucket)
        if key in self.kernels:
            print(f"tilefuse: {sidecar} duplicates {self.kernels[key][1]}; keeping the first",
                  file=sys.stderr)
            return
        handle = ctypes.c_void_p()
        if self.lib.tilefuse_cuda_load(str(ptx).encode(), str(sidecar).encode(),
                                       ctypes.byref(handle), self._err, len(self._err)) != 0:
            print(f"tilefuse: cannot load {ptx}: {self._err.value.decode()}", file=sys.stderr)
            return
        self.kernels[key] = (handle, sidecar, scale)
        if meta.get("paged_kv"):
            self.paged.add(key)
        if meta.get("varlen"):
            self.varlen.add(key)

    def _varlen_key(self, causal, head_dim, dtype, max_len):
        """The varlen kernel tuned for the longest sequence's bucket (`tilefuse tune --varlen`),
        else one without a bucket; None if neither."""
        for key in ((causal, head_dim, dtype, seq_bucket(max_len)),
                    (causal, head_dim, dtype, None)):
            if key in self.varlen:
                return key
        return None

    def varlen_blocks(self, causal, head_dim, dtype, max_len):
        """(block_m, block_n) of the varlen kernel prepare_varlen runs, from its sidecar."""
        key = self._varlen_key(causal, head_dim, dtype, max_len)
        if key is None:
            return None
        try:
            meta = json.loads(pathlib.Path(self.kernels[key][1]).read_text())
            return int(meta["block_m"]), int(meta["block_n"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def prepare_varlen(self, torch, q, k, v, cu_q, cu_k, max_q, max_k, causal, scale):
        """q, k, v: packed [tokens, heads, D]; cu_q, cu_k: the B + 1 int32 offsets (device);
        max_q, max_k: the longest query and key sequences."""
        if self.error:
            raise Unavailable(self.error)
        T, H, D = q.shape
        Hkv = k.shape[1]
        dtype = "bf16" if q.dtype == torch.bfloat16 else "f16"
        key = self._varlen_key(causal, D, dtype, max(max_q, max_k))
        if key is None:
            raise Unavailable(f"no varlen {'causal' if causal else 'attention'} kernel for D={D}")
        kernel = self.kernels[key]
        o = torch.empty_like(q)
        lse = torch.empty((H, T), device=q.device, dtype=torch.float32)
        # THD: [tokens, heads, D]; the batch strides are not read
        strides = (ctypes.c_int64 * 14)(0, q.stride(1), q.stride(0), 0, k.stride(1), k.stride(0),
                                        0, v.stride(1), v.stride(0), 0, o.stride(1), o.stride(0),
                                        0, lse.stride(0))
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        B = cu_q.numel() - 1
        args = (kernel[0], stream, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                lse.data_ptr(), B, H, Hkv, max_q, max_k, D, strides, cu_q.data_ptr(),
                cu_k.data_ptr(), T, k.shape[0], self._err, len(self._err))
        launch = self.lib.tilefuse_cuda_launch_varlen
        buffers = (o, lse, cu_q, cu_k)

        def run():
            if launch(*args) != 0:
                raise RuntimeError(f"tilefuse launch: {self._err.value.decode()}")
            return buffers[0]

        return run

    def prepare(self, torch, q, k, v, causal, scale):
        if self.error:
            raise Unavailable(self.error)
        B, H, M, D = q.shape
        Hkv, N = k.shape[1], k.shape[2]
        dtype = "bf16" if q.dtype == torch.bfloat16 else "f16"
        key = (causal, D, dtype, seq_bucket(max(M, N)))
        if key not in self.kernels:
            key = (causal, D, dtype, None)
        kernel = self.kernels.get(key)
        if kernel is None:
            raise Unavailable(f"no {'causal' if causal else 'attention'} kernel for D={D}")
        if abs(scale - kernel[2]) > 1e-9 * scale:
            raise Unavailable(f"the kernel's softmax scale is {kernel[2]}, not {scale}")
        if key in self.varlen:
            raise Unavailable("a varlen kernel runs packed sequences (--varlen)")
        o = torch.empty_like(q)
        lse = torch.empty((B, H, M), device=q.device, dtype=torch.float32)
        strides = (ctypes.c_int64 * 14)(*q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
                                        *o.stride()[:3], *lse.stride()[:2])
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        args = (kernel[0], stream, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                lse.data_ptr(), B, H, Hkv, M, N, D, strides, self.kv_splits, self._err,
                len(self._err))
        launch = self.lib.tilefuse_cuda_launch_split
        buffers = (o, lse)
        if key in self.paged:
            # The same keys and values in vLLM's cache layout, [pages, page size, Hkv, D], the
            # sequences' pages in a random order (timed on the cache, not on k and v).
            P = self.page_size
            order, table, per_sequence, pages = page_table(torch, B, N, P, q.device)
            lengths = torch.full((B,), N, device=q.device, dtype=torch.int32)
            caches = []
            for x in (k, v):
                padded = torch.zeros((B, Hkv, per_sequence * P, D), device=q.device,
                                     dtype=x.dtype)
                padded[:, :, :N] = x
                # pages x Hkv x P x D, as views of the cache in either layout
                if self.page_layout == "hnd":
                    cache = torch.empty((pages, Hkv, P, D), device=q.device, dtype=x.dtype)
                    view = cache
                else:
                    cache = torch.empty((pages, P, Hkv, D), device=q.device, dtype=x.dtype)
                    view = cache.permute(0, 2, 1, 3)
                view[order] = padded.view(B, Hkv, per_sequence, P, D).permute(
                    0, 2, 1, 3, 4).reshape(pages, Hkv, P, D)
                caches.append(view)
            kc, vc = caches
            strides = (ctypes.c_int64 * 14)(*q.stride()[:3], *kc.stride()[:3], *vc.stride()[:3],
                                            *o.stride()[:3], *lse.stride()[:2])
            args = (kernel[0], stream, q.data_ptr(), kc.data_ptr(), vc.data_ptr(), o.data_ptr(),
                    lse.data_ptr(), B, H, Hkv, M, N, D, strides, table.data_ptr(), per_sequence,
                    per_sequence, lengths.data_ptr(), P, pages, self.kv_splits, self._err,
                    len(self._err))
            launch = self.lib.tilefuse_cuda_launch_paged
            buffers = (o, lse, kc, vc, table, lengths)

        # args holds only the buffers' addresses: `run` keeps the buffers alive, or a freed one
        # would be the next allocation while the launches still use it.

        def run():
            if launch(*args) != 0:
                raise RuntimeError(f"tilefuse launch: {self._err.value.decode()}")
            return buffers[0]

        run.lse = lse  # the forward's LSE, which the backward reads (prepare_backward)
        return run

    def prepare_backward(self, torch, q, k, v, d_o, causal, scale):
        """The derived backward of q, k, v (B x H x M x D, k and v B x Hkv x N x D) for the
        incoming gradient d_o: the forward kernel runs once here for the O and LSE the backward
        reads; the returned run() launches the backward alone and returns (dQ, dK, dV)."""
        if self.error:
            raise Unavailable(self.error)
        if self.backward_error:
            raise Unavailable(self.backward_error)
        B, H, M, D = q.shape
        Hkv, N = k.shape[1], k.shape[2]
        dtype = "bf16" if q.dtype == torch.bfloat16 else "f16"
        backward = self.backward_kernels.get((causal, D, dtype))
        if backward is None:
            raise Unavailable(f"no {'deterministic ' if self.backward_deterministic else ''}"
                              f"{'causal' if causal else 'attention'} backward for D={D} "
                              f"{dtype} in {self.backward_dir}")
        handle, _, backward_scale = backward
        if abs(scale - backward_scale) > 1e-9 * scale:
            raise Unavailable(f"the backward's softmax scale is {backward_scale}, not {scale}")
        forward = self.prepare(torch, q, k, v, causal, scale)
        o, lse = forward(), forward.lse
        d_q, d_k, d_v = (torch.empty_like(x) for x in (q, k, v))
        # The C API's order: every dimension but the innermost of q, k, v, o, lse (the forward
        # launch's 14 strides), then of d_o, d_q, d_k, d_v.
        tensors = (q, k, v, o, d_o, lse, d_q, d_k, d_v)
        in_stride_order = (q, k, v, o, lse, d_o, d_q, d_k, d_v)
        strides = (ctypes.c_int64 * 26)(*(s for x in in_stride_order for s in x.stride()[:-1]))
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        args = (handle, stream, *(x.data_ptr() for x in tensors), B, H, Hkv, M, N, D, strides,
                self._err, len(self._err))
        launch = self.lib.tilefuse_cuda_backward_launch
        # As in prepare: `run` keeps every buffer whose address args holds alive.
        buffers = {"forward": (o, lse), "gradients": (d_q, d_k, d_v)}

        def run():
            if launch(*args) != 0:
                raise RuntimeError(f"tilefuse backward launch: {self._err.value.decode()}")
            return buffers["gradients"]

        return run


def page_table(torch, B, N, P, device):
    """The pages of B sequences of N keys in P-row pages, as every paged column of page size P
    lays them out: the B * ceil(N / P) pages in a random order seeded by P, logical page i (of
    sequence i // per_sequence) in physical page order[i]. Returns order, the [B, per_sequence]
    int32 table (table[b, j]: sequence b's page j), per_sequence and the page count."""
    per_sequence = (N + P - 1) // P
    pages = B * per_sequence
    gen = torch.Generator(device=device).manual_seed(P)
    order = torch.randperm(pages, device=device, generator=gen)
    table = order.view(B, per_sequence).to(torch.int32).contiguous()
    return order, table, per_sequence, pages


def seq_bucket(n):
    """The tuning database's sequence bucket (tilefuse::runtime::jit::sequenceBucket)."""
    bucket = 512
    while bucket < n and bucket < 65536:
        bucket *= 2
    return bucket


# ---------------------------------------------------------------------------------------------
# The peers
# ---------------------------------------------------------------------------------------------


def sdpa(backend_name):
    def prepare(torch, q, k, v, causal, scale):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = getattr(SDPBackend, backend_name, None)
        if backend is None:
            raise Unavailable(f"this torch has no SDPBackend.{backend_name}")
        fn = torch.nn.functional.scaled_dot_product_attention

        # Grouped-query heads (decode rows): SDPA maps query head h to key/value head
        # h // (H / Hkv) as tilefuse does.
        gqa = {"enable_gqa": True} if q.shape[1] != k.shape[1] else {}

        def run():
            with sdpa_kernel([backend]):
                return fn(q, k, v, is_causal=causal, scale=scale, **gqa)

        return run

    return prepare


def flex(torch, q, k, v, causal, scale):
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError as e:
        raise Unavailable(f"no FlexAttention: {e}")
    compiled = _compiled_flex(torch, flex_attention)
    block_mask = None
    if causal:
        block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, None, None,
                                       q.shape[2], k.shape[2], device=q.device)
    # Grouped-query heads (decode rows) as SDPA and tilefuse map them; with one query row,
    # flex_attention runs its decoding kernel (FlexDecoding).
    gqa = q.shape[1] != k.shape[1]
    return lambda: compiled(q, k, v, block_mask=block_mask, scale=scale, enable_gqa=gqa)


_flex_cache = {}


def _compiled_flex(torch, flex_attention):
    if "fn" not in _flex_cache:
        # Every shape of the grid compiles once; past dynamo's recompile limit flex_attention
        # would silently run eagerly (materialized scores), which is not what is measured here.
        for limit in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                      "accumulated_cache_size_limit"):
            if hasattr(torch._dynamo.config, limit):
                setattr(torch._dynamo.config, limit,
                        max(getattr(torch._dynamo.config, limit), 256))
        _flex_cache["fn"] = torch.compile(flex_attention, dynamic=False)
    return _flex_cache["fn"]


def leaves_requiring_grad(q, k, v):
    """q, k, v as autograd leaves (the same storage): what a training step differentiates."""
    return tuple(x.detach().requires_grad_() for x in (q, k, v))


def sdpa_backward(backend_name):
    """--backward: SDPA's forward on `backend_name` once, then run() -> the backward alone,
    torch.autograd.grad(O, (q, k, v), dO), the graph retained for the next call."""

    def prepare(torch, q, k, v, d_o, causal, scale):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = getattr(SDPBackend, backend_name, None)
        if backend is None:
            raise Unavailable(f"this torch has no SDPBackend.{backend_name}")
        leaves = leaves_requiring_grad(q, k, v)
        # The forward picks the backend, and its autograd node that backend's backward; the timed
        # call stays in the same context all the same, as the forward columns' calls do.
        with sdpa_kernel([backend]):
            out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal,
                                                                   scale=scale)

        def run():
            with sdpa_kernel([backend]):
                return torch.autograd.grad(out, leaves, d_o, retain_graph=True)

        return run

    return prepare


def flex_backward(torch, q, k, v, d_o, causal, scale):
    """--backward: the compiled FlexAttention's forward once (as the flex column runs it), then
    run() -> its backward alone (compiled at the first call), the graph retained."""
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError as e:
        raise Unavailable(f"no FlexAttention: {e}")
    # AOTAutograd may compile a backward that reuses ("donates") the saved tensors' memory,
    # which a retained graph's next call still reads: torch then refuses retain_graph=True and
    # names this switch.
    from torch._functorch import config as functorch_config
    if hasattr(functorch_config, "donated_buffer"):
        functorch_config.donated_buffer = False
    compiled = _compiled_flex(torch, flex_attention)
    block_mask = None
    if causal:
        block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, None, None,
                                       q.shape[2], k.shape[2], device=q.device)
    leaves = leaves_requiring_grad(q, k, v)
    out = compiled(*leaves, block_mask=block_mask, scale=scale)
    return lambda: torch.autograd.grad(out, leaves, d_o, retain_graph=True)


# A flex-paged column's largest max |O - O_ref| / max |O_ref| against the float reference: the
# bf16 output alone is off by up to ~4e-3 (the tilefuse decode columns read 2e-3 to 4e-3).
FLEX_PAGED_TOLERANCE = 2e-2


def flex_paged(page_size, layout, mask_form):
    """Decode rows: FlexAttention (FlexDecoding) on a paged cache of `page_size`-row pages that
    torch's PagedAttention builds from the same K and V, in the pages of a tilefuse @P column
    (page_table), through the logical block mask converted to the paged one (module doc)."""

    def prepare(torch, q, k, v, causal, scale):
        try:
            from torch.nn.attention.experimental._paged_attention import PagedAttention
            from torch.nn.attention.flex_attention import (BlockMask, create_block_mask,
                                                           flex_attention)
        except ImportError as e:
            raise Unavailable(f"no PagedAttention in torch {torch.__version__}: {e}")
        B, H, M, D = q.shape
        Hkv, N = k.shape[1], k.shape[2]
        P = page_size
        if M != 1:
            raise Unavailable("decode rows only")
        if P < 16 or (P & (P - 1) and P % 64):
            # The page is the mask's key block, which FlexDecoding's key tile must divide: 64
            # rows (torch 2.11), or the block itself where that is smaller (a power of two, and
            # at least 16 rows as a Triton dot operand).
            raise Unavailable(f"page size {P}: FlexDecoding's key tile (a power of two, 16 to "
                              f"64 rows) cannot divide it")
        _, table, per_sequence, pages = page_table(torch, B, N, P, q.device)

        paged = PagedAttention(pages, P, B, device=q.device)
        # reserve hands out the pages at the end of empty_pages first, so listed backwards by
        # sequence it gives sequence b the pages table[b], those of the tilefuse @P columns.
        # empty_pages is internal: the page table it produced is checked.
        paged.empty_pages = table.flip(0).reshape(-1).tolist()
        for b in range(B):
            paged.reserve(torch.tensor(b), torch.tensor(N, device=q.device))
        if not torch.equal(paged.page_table[:B, :per_sequence], table.long()):
            raise Unavailable("PagedAttention.reserve allocated other pages than the tilefuse "
                              "columns' page table")

        # PagedAttention addresses a cache as [1, Hkv, pages * P, D] (row p * P + r: row r of
        # page p); nhd is that view of the tilefuse columns' [pages, P, Hkv, D] cache.
        caches = []
        for x in (k, v):
            if layout == "nhd":
                cache = torch.zeros((pages, P, Hkv, D), device=q.device, dtype=x.dtype).view(
                    1, pages * P, Hkv, D).transpose(1, 2)
            else:
                cache = torch.zeros((1, Hkv, pages * P, D), device=q.device, dtype=x.dtype)
            caches.append(cache)
        kc, vc = caches
        # Every sequence's N rows to their pages; the rows past N of a last page stay zero, as
        # in the tilefuse caches.
        positions = torch.arange(N, device=q.device, dtype=torch.int32).expand(B, N)
        paged.assign(torch.arange(B, device=q.device), positions, k, v, kc, vc)

        # The logical mask: every key of the sequence (M = 1, so causal is moot), in key blocks
        # of one page, as convert_logical_block_mask requires; query blocks of FlexAttention's
        # default 128. The bound is in the logical mask since the paged mask_mod of some torch
        # versions does not stop at a sequence's length (2.11's does only given kv_len); it is
        # applied to partial blocks only.
        def within_sequence(b, h, q_idx, kv_idx):
            return kv_idx < N

        if mask_form == "partial":
            blocks = torch.full((B, 1, 1), per_sequence, device=q.device, dtype=torch.int32)
            indices = torch.arange(per_sequence, device=q.device, dtype=torch.int32).expand(
                B, 1, 1, per_sequence).contiguous()
            logical = BlockMask.from_kv_blocks(blocks, indices, BLOCK_SIZE=(128, P),
                                               mask_mod=within_sequence, seq_lengths=(1, N))
        else:
            logical = create_block_mask(within_sequence, B, None, 1, N, device=q.device,
                                        BLOCK_SIZE=(128, P))
        block_mask = paged.convert_logical_block_mask(logical)

        # No score_mod: the scores need no position, and the mask already drops every row that
        # is not the sequence's. One block-mask head and enable_gqa keep FlexDecoding's grouped
        # heads, as in the flex column.
        compiled = _compiled_flex(torch, flex_attention)
        gqa = H != Hkv
        return lambda: compiled(q, kc, vc, block_mask=block_mask, scale=scale, enable_gqa=gqa)

    return prepare


# ---------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------


def interleaved_medians(torch, fns, warmup, reps, flush):
    """Median ms of `reps` event-timed calls of each function in `fns` (name -> fn), after
    `warmup` calls each, flushing the L2 before each call. The repetitions are interleaved, one
    call of every function per round with the order rotated each round, so that clock and
    temperature drift during a row fall on every column alike (timed back to back, the first
    column of a row ran up to 10% faster than the same kernel in a later one)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    names = list(fns)
    events = {name: [] for name in names}
    for r in range(reps):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            flush.zero_()
            start.record()
            fns[name]()
            end.record()
            events[name].append((start, end))
    torch.cuda.synchronize()
    return {name: statistics.median(s.elapsed_time(e) for s, e in pairs)
            for name, pairs in events.items()}


def prepare_column(torch, result, impl, prepare, outputs, ready, reasons=None):
    """Prepares one column of a row: `prepare()` gives the timed function, whose first call (also
    its warm-up and compile) is kept in outputs (a tensor, or a tuple of them: a backward's
    gradients); a failure is the column's n/a in `result`, printed unless `reasons` (column ->
    the last reason printed) shows it was already."""
    try:
        fn = prepare()
        first = fn()
        outputs[impl] = (tuple(x.clone() for x in first) if isinstance(first, tuple)
                         else first.clone())
        torch.cuda.synchronize()
        ready[impl] = fn
    except Exception as e:
        reason = f"{type(e).__name__}: {str(e).strip()[:200]}"
        result["n/a"][impl] = reason
        if reasons is None or reasons.get(impl) != reason:
            print(f"  {impl}: n/a: {reason}", file=sys.stderr)
            if reasons is not None:
                reasons[impl] = reason


def fmt_tflops(result, impl):
    t = result["tflops"].get(impl)
    if t is None:
        return "n/a"
    base = result["tflops"].get(BASELINE)
    return f"{t:6.1f}" + (f" ({t / base:4.2f}x)" if base and impl != BASELINE else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ptx-dir", default="build-gpu/kernels")
    parser.add_argument("--lib", default="build-gpu/libtilefuse_cuda.so")
    default_out = os.path.join(os.environ["OUT"], "bench.json") if os.environ.get("OUT") else None
    parser.add_argument("--out", default=default_out, help="JSON results (default $OUT/bench.json)")
    parser.add_argument("--seq", default="1024,2048,4096,8192,16384", help="M = N values")
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    parser.add_argument("--tokens", type=int, default=16384, help="B * N")
    parser.add_argument("--hidden", type=int, default=2048, help="H * D")
    parser.add_argument("--impls", default=None,
                        help=f"of {','.join(IMPLS)} (default: all; {','.join(DECODE_ONLY)} in "
                             f"--decode rows only)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--variant", action="append", default=[],
                        metavar="NAME=DIR[:S][@P[hnd]]",
                        help="also time the kernels of DIR as column tf:NAME (repeatable); "
                             ":S launches split-KV kernels with S key splits, @P paged-KV "
                             "kernels with P rows per page (default 16) in vLLM's [pages, P, "
                             "Hkv, D] cache, @Phnd in a [pages, Hkv, P, D] one")
    parser.add_argument("--tuned-dir", default=None, metavar="DIR",
                        help="column 'tuned': the kernels `tilefuse tune --emit-dir DIR` wrote")
    parser.add_argument("--decode", default=None, metavar="N,N,...",
                        help="decode rows instead of the grid: one query row per sequence, "
                             "these key/value lengths, GB/s of K and V read beside a device copy")
    parser.add_argument("--varlen", default=None, metavar="MAX,MAX,...",
                        help="varlen prefill rows instead of the grid: a mix of sequence lengths "
                             "up to each MAX, packed for varlen kernels, padded for the others")
    parser.add_argument("--decode-shape", default="8,32,8,128", metavar="B,H,Hkv,D",
                        help="--decode: batch, query heads, key/value heads, head dim")
    parser.add_argument("--decode-layout", choices=("bhsd", "bshd"), default="bhsd",
                        help="--decode: K and V stored B x Hkv x N x D (a head's rows adjacent) "
                             "or B x N x Hkv x D (a token's heads adjacent, as a KV cache "
                             "appends them; every column reads the same strided views)")
    parser.add_argument("--flex-page-size", default="128", metavar="P,P,...",
                        help="flex-paged: rows per page, a column flex-paged@P each (default "
                             "128, FlexAttention's block size; the module doc says which run)")
    parser.add_argument("--flex-page-layout", choices=("nhd", "hsd"), default="nhd",
                        help="flex-paged: the cache the tilefuse @P columns read, [pages, P, Hkv, "
                             "D], or PagedAttention's own [1, Hkv, pages * P, D]")
    parser.add_argument("--flex-paged-mask", choices=("create", "partial"), default="create",
                        help="flex-paged: the logical block mask from create_block_mask, or every "
                             "block partial (as vLLM builds it)")
    parser.add_argument("--backward", action="store_true",
                        help="the grid's backward instead of its forward: dQ, dK, dV given Q, K, "
                             "V, O, dO and LSE (tilefuse: the derived backwards of "
                             "--backward-dir after the forward kernels of --ptx-dir)")
    parser.add_argument("--backward-dir", default="build-gpu/kernels-backward", metavar="DIR",
                        help="--backward: the kernels of `tilefuse compile --backward`")
    parser.add_argument("--backward-variant", action="append", default=[], metavar="NAME=DIR",
                        help="--backward: also time the backwards of DIR as column tf:NAME "
                             "(repeatable)")
    parser.add_argument("--backward-deterministic", action="store_true",
                        help="--backward: time only the deterministic backwards "
                             "(--deterministic: bitwise reproducible dQ)")
    args = parser.parse_args()
    if args.reps < 20:
        parser.error("--reps must be at least 20")
    if args.backward_deterministic and not args.backward:
        parser.error("--backward-deterministic is an option of --backward")
    if args.backward_variant and not args.backward:
        parser.error("--backward-variant is an option of --backward")
    backward_variants = {}  # column -> DIR
    for item in args.backward_variant:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            parser.error(f"--backward-variant takes NAME=DIR, not {item!r}")
        backward_variants["tf:" + name] = path
    if args.backward and (args.decode or args.varlen):
        parser.error("--backward times the grid's rows, not --decode or --varlen ones")
    if args.backward and (args.variant or args.tuned_dir):
        parser.error("--variant and --tuned-dir time forward kernels; --backward the derived "
                     "backwards of --backward-dir")
    decode_rows = args.decode and not args.varlen  # --varlen takes precedence
    if args.impls is None:
        impls = [i for i in IMPLS if decode_rows or i not in DECODE_ONLY]
    else:
        impls = [i for i in args.impls.split(",") if i]
    for impl in impls:
        if impl not in IMPLS:
            parser.error(f"unknown implementation {impl} (have {', '.join(IMPLS)})")
        if impl in DECODE_ONLY and not decode_rows:
            parser.error(f"{impl} times decode rows only (--decode)")
    try:
        flex_pages = [int(x) for x in args.flex_page_size.split(",") if x]
    except ValueError:
        flex_pages = []
    if not flex_pages or min(flex_pages) <= 0:
        parser.error(f"--flex-page-size takes positive page sizes, not {args.flex_page_size!r}")
    if "flex-paged" in impls:  # a column per page size, where flex-paged was asked for
        at = impls.index("flex-paged")
        impls[at:at + 1] = [f"flex-paged@{P}" for P in dict.fromkeys(flex_pages)]
    variants = {}  # column -> (DIR, key splits, page size)
    for item in args.variant:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            parser.error(f"--variant takes NAME=DIR[:S][@P], not {item!r}")
        page_size, page_layout = 16, "nhd"
        head, at, tail = path.rpartition("@")
        if at and tail.endswith("hnd"):
            tail, page_layout = tail[:-3], "hnd"
        if at and tail.isdigit() and int(tail) > 0:
            path, page_size = head, int(tail)
        head, colon, tail = path.rpartition(":")
        splits = 0
        if colon and tail.isdigit():
            path, splits = head, int(tail)
        variants["tf:" + name] = (path, splits, page_size, page_layout)
    if args.tuned_dir:
        variants["tuned"] = (args.tuned_dir, 0, 16, "nhd")
    impls += list(variants)

    try:
        import torch
    except ImportError as e:
        sys.exit(f"bench: needs PyTorch: {e}")
    if not torch.cuda.is_available():
        sys.exit("bench: no CUDA device")
    device = torch.device("cuda")
    torch.empty(1, device=device)  # makes torch's (primary) context current for tilefuse
    flush = torch.empty(256 << 20, dtype=torch.int8, device=device)  # > the L2 of any GPU

    preparers = {"sdpa-flash": sdpa("FLASH_ATTENTION"), "sdpa-cudnn": sdpa("CUDNN_ATTENTION"),
                 "flex": flex}
    for P in flex_pages:
        preparers[f"flex-paged@{P}"] = flex_paged(P, args.flex_page_layout, args.flex_paged_mask)
    if "tilefuse" in impls:
        tilefuse = Tilefuse(args.lib, args.ptx_dir,
                            backward_dir=args.backward_dir if args.backward else None,
                            backward_deterministic=args.backward_deterministic)
        preparers["tilefuse"] = tilefuse.prepare
        if tilefuse.error:
            print(f"tilefuse: n/a ({tilefuse.error})", file=sys.stderr)
        for (causal, d, dtype, _), (_, path, _) in sorted(tilefuse.kernels.items(),
                                                           key=lambda item: str(item[0])):
            print(f"tilefuse: {path.name}: {'causal' if causal else 'attention'} D={d} {dtype}",
                  file=sys.stderr)
        if tilefuse.backward_error:
            print(f"tilefuse: backward n/a ({tilefuse.backward_error})", file=sys.stderr)
        for (causal, d, dtype), (_, path, _) in sorted(tilefuse.backward_kernels.items()):
            print(f"tilefuse: {path.name}: {'causal' if causal else 'attention'} backward D={d} "
                  f"{dtype}{' deterministic' if args.backward_deterministic else ''}",
                  file=sys.stderr)

    variant_kernels = {}  # impl -> its Tilefuse, for the report
    for impl, (path, splits, page_size, page_layout) in variants.items():
        variant = Tilefuse(args.lib, path, kv_splits=splits, page_size=page_size,
                           page_layout=page_layout)
        variant_kernels[impl] = variant
        preparers[impl] = variant.prepare
        if variant.error:
            print(f"{impl}: n/a ({variant.error})", file=sys.stderr)
        for (causal, d, dtype, bucket), (_, kpath, _) in sorted(variant.kernels.items(),
                                                                 key=lambda item: str(item[0])):
            print(f"{impl}: {kpath.name}: {'causal' if causal else 'attention'} D={d} {dtype}"
                  f"{'' if bucket is None else f' N<={bucket}'}", file=sys.stderr)

    if args.backward:
        backward_preparers = {"sdpa-flash": sdpa_backward("FLASH_ATTENTION"),
                              "sdpa-cudnn": sdpa_backward("CUDNN_ATTENTION"),
                              "flex": flex_backward}
        if "tilefuse" in impls:
            backward_preparers["tilefuse"] = tilefuse.prepare_backward
        # Each --backward-variant: the forward kernels of --ptx-dir (O and LSE), its own
        # backwards.
        for column, path in backward_variants.items():
            variant = Tilefuse(args.lib, args.ptx_dir, backward_dir=path,
                               backward_deterministic=args.backward_deterministic)
            backward_preparers[column] = variant.prepare_backward
            if variant.error:
                print(f"{column}: n/a ({variant.error})", file=sys.stderr)
            if variant.backward_error:
                print(f"{column}: backward n/a ({variant.backward_error})", file=sys.stderr)
            for (causal, d, dtype), (_, kpath, _) in sorted(variant.backward_kernels.items()):
                print(f"{column}: {kpath.name}: {'causal' if causal else 'attention'} backward "
                      f"D={d} {dtype}", file=sys.stderr)
        impls += list(backward_variants)
        results = run_backward(args, torch, device, flush, impls, backward_preparers)
        write_report(args, torch, impls, tilefuse if "tilefuse" in impls else None, {},
                     results)
        return

    if args.varlen or args.decode:
        run = run_varlen if args.varlen else run_decode
        results = run(args, torch, device, flush, impls, preparers, variants, variant_kernels)
        write_report(args, torch, impls, tilefuse if "tilefuse" in impls else None,
                     variant_kernels, results)
        return

    results, reasons = [], {}
    header = (f"{'config':<34}" + "".join(f"{i:>18}" for i in impls) + f"{'tilefuse err':>14}")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}; "
          f"TFLOP/s (x {BASELINE}), median of {args.reps}")
    print(header)
    for head_dim in [int(x) for x in args.head_dims.split(",")]:
        for n in [int(x) for x in args.seq.split(",")]:
            for causal in {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]:
                B, H = max(1, args.tokens // n), args.hidden // head_dim
                scale = 1 / math.sqrt(head_dim)
                gen = torch.Generator(device=device).manual_seed(n * 1000 + head_dim)
                q, k, v = (torch.randn((B, H, n, head_dim), device=device, dtype=torch.bfloat16,
                                       generator=gen) for _ in range(3))
                flops = 4 * B * H * n * n * head_dim / (2 if causal else 1)
                config = (f"bf16 d{head_dim} N={n} B={B} H={H} "
                          f"{'causal' if causal else 'full'}")
                result = {"dtype": "bf16", "head_dim": head_dim, "M": n, "N": n, "B": B, "H": H,
                          "causal": causal, "flops": flops, "ms": {}, "tflops": {},
                          "n/a": {}, "tilefuse_max_rel_err": None}
                outputs, ready = {}, {}

                def not_available(impl, e):  # any backend failure is that backend's n/a
                    reason = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200]}" \
                        if str(e).strip() else type(e).__name__
                    result["n/a"][impl] = reason
                    if reasons.get(impl) != reason:
                        reasons[impl] = reason
                        print(f"  {impl}: n/a: {reason}", file=sys.stderr)

                for impl in impls:
                    try:
                        fn = preparers[impl](torch, q, k, v, causal, scale)
                        outputs[impl] = fn().clone()  # also the first warm-up (and compile)
                        torch.cuda.synchronize()
                        ready[impl] = fn
                    except Exception as e:
                        not_available(impl, e)
                try:
                    for impl, ms in interleaved_medians(torch, ready, args.warmup, args.reps,
                                                        flush).items():
                        result["ms"][impl] = ms
                        result["tflops"][impl] = flops / (ms * 1e-3) / 1e12
                except Exception as e:  # a failure while timing: every column of the row
                    for impl in ready:
                        not_available(impl, e)
                torch.cuda.synchronize()
                mine = [i for i in outputs if i == "tilefuse" or i in variants]
                if mine:
                    with torch.no_grad():
                        ref = torch.nn.functional.scaled_dot_product_attention(
                            q, k, v, is_causal=causal, scale=scale).float()
                        errors = {}
                        for impl in mine:
                            got = outputs[impl].float()
                            errors[impl] = math.nan if torch.isnan(got).any().item() else (
                                (got - ref).abs().max() / ref.abs().max()).item()
                    result["max_rel_err"] = errors
                    # the error column: the worst of the tilefuse columns
                    err = math.nan if any(math.isnan(e) for e in errors.values()) else max(
                        errors.values())
                    result["tilefuse_max_rel_err"] = err
                    result["tilefuse_nan"] = math.isnan(err)
                base = result["tflops"].get(BASELINE)
                result["ratio_to_baseline"] = {
                    i: t / base for i, t in result["tflops"].items()} if base else {}
                err = result["tilefuse_max_rel_err"]
                err_text = "n/a" if err is None else (
                    "NaN" if result.get("tilefuse_nan") else f"{err:.1e}")
                print(f"{config:<34}" + "".join(f"{fmt_tflops(result, i):>18}" for i in impls) +
                      f"{err_text:>14}", flush=True)
                results.append(result)
                del q, k, v, outputs

    write_report(args, torch, impls, tilefuse if "tilefuse" in impls else None, variant_kernels,
                 results)


def write_report(args, torch, impls, tilefuse, variant_kernels, results):
    if args.out:
        report = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(),
            "capability": ".".join(map(str, torch.cuda.get_device_capability())),
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "command": sys.argv, "reps": args.reps, "warmup": args.warmup,
            "baseline": BASELINE,
            "tilefuse_kernels": {str(path): json.loads(path.read_text())
                                 for _, path, _ in tilefuse.kernels.values()}
            if tilefuse else {},
            # the tuned (and other variant) columns' sidecars: configuration, bucket, tuned_ms
            "variant_kernels": {impl: {str(path): json.loads(path.read_text())
                                       for _, path, _ in v.kernels.values()}
                                for impl, v in variant_kernels.items()},
            # --backward: the derived backwards' sidecars (each its phases' metadata)
            "tilefuse_backward_kernels": {str(path): json.loads(path.read_text())
                                          for _, path, _ in tilefuse.backward_kernels.values()}
            if tilefuse else {},
            "results": results,
        }
        pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.out}")


def varlen_lengths(max_len, tokens, seed):
    """The longest sequence, then lengths drawn from max_len/8 ... max_len up to `tokens`."""
    rng = random.Random(seed)
    lengths = [max_len]
    while sum(lengths) < tokens:
        lengths.append(rng.randint(max(1, max_len // 8), max_len))
    return lengths


def visited_blocks(length, block_m, block_n, causal):
    """Elements of the Br x Bc blocks a tiled kernel computes for one sequence of `length` rows
    and keys: every block, or under a causal mask row block i's first ceil(min(L, (i+1)Br) / Bc)
    key blocks."""
    row_blocks = -(-length // block_m)
    if not causal:
        return row_blocks * block_m * -(-length // block_n) * block_n
    return sum(-(-min(length, (i + 1) * block_m) // block_n)
               for i in range(row_blocks)) * block_m * block_n


def block_bound(lengths, max_len, block_m, block_n, causal):
    """The packed/padded TFLOP/s ratio at which a perfectly busy GPU would run the packed
    sequences with Br x Bc blocks: the share of its block elements that are the sequences' own
    (L^2, halved under a causal mask), over the same share for the padded batch's sequences of
    max_len."""
    div = 2 if causal else 1
    packed = (sum(L * L for L in lengths) / div /
              sum(visited_blocks(L, block_m, block_n, causal) for L in lengths))
    padded = max_len * max_len / div / visited_blocks(max_len, block_m, block_n, causal)
    return packed / padded


def run_varlen(args, torch, device, flush, impls, preparers, variants, variant_kernels):
    """Varlen prefill rows: packed columns (varlen kernels) against padded ones (module doc)."""
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}; "
          f"varlen prefill bf16: TFLOP/s (packed: the sequences' FLOPs; padded: the padded "
          f"batch's), median of {args.reps}")
    header = list(impls)
    if "tilefuse" in impls:
        header.insert(header.index("tilefuse") + 1, "tilefuse:bshd")
    print(f"{'config':<40}" + "".join(f"{i:>18}" for i in header) + f"{'varlen err':>14}" +
          f"{'bound':>8}")
    results = []
    for head_dim in [int(x) for x in args.head_dims.split(",")]:
        for max_len in [int(x) for x in args.varlen.split(",")]:
            lengths = varlen_lengths(max_len, max(args.tokens, 3 * max_len), max_len + head_dim)
            B, H, T = len(lengths), args.hidden // head_dim, sum(lengths)
            gen = torch.Generator(device=device).manual_seed(max_len * 1000 + head_dim)
            q, k, v = (torch.randn((B, H, max_len, head_dim), device=device,
                                   dtype=torch.bfloat16, generator=gen) for _ in range(3))
            packed = [torch.cat([x[b, :, :L].transpose(0, 1) for b, L in enumerate(lengths)])
                      .contiguous() for x in (q, k, v)]
            cu = torch.tensor([0] + list(itertools.accumulate(lengths)), device=device,
                              dtype=torch.int32)
            scale = 1 / math.sqrt(head_dim)
            for causal in {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]:
                div = 2 if causal else 1
                real = sum(4 * H * L * L * head_dim for L in lengths) / div
                padded = 4 * B * H * max_len * max_len * head_dim / div
                config = (f"bf16 d{head_dim} max={max_len} B={B} T={T} "
                          f"{'causal' if causal else 'full'}")
                result = {"mode": "varlen", "dtype": "bf16", "head_dim": head_dim, "H": H,
                          "lengths": lengths, "causal": causal, "flops": real,
                          "padded_flops": padded, "ms": {}, "tflops": {}, "useful_tflops": {},
                          "packed": [], "n/a": {}, "max_rel_err": {}, "block_bound": {}}
                ready, outputs = {}, {}
                columns = list(impls)
                if "tilefuse" in impls:
                    # The padded batch stored B x MAX x H x D (a token's heads adjacent, as
                    # the packed rows are): the layout's share of the packed column's time.
                    columns.insert(columns.index("tilefuse") + 1, "tilefuse:bshd")
                bshd = [x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k, v)]
                for impl in columns:
                    kernels = variant_kernels.get(impl)
                    if kernels is not None and kernels.varlen:
                        result["packed"].append(impl)
                        blocks = kernels.varlen_blocks(causal, head_dim, "bf16", max_len)
                        if blocks:
                            result["block_bound"][impl] = block_bound(lengths, max_len, *blocks,
                                                                      causal)
                        prepare = (lambda kernels=kernels: kernels.prepare_varlen(
                            torch, *packed, cu, cu, max_len, max_len, causal, scale))
                    elif impl == "tilefuse:bshd":
                        prepare = lambda: preparers["tilefuse"](torch, *bshd, causal, scale)
                    else:
                        prepare = lambda impl=impl: preparers[impl](torch, q, k, v, causal, scale)
                    prepare_column(torch, result, impl, prepare, outputs, ready)
                for impl, ms in interleaved_medians(torch, ready, args.warmup, args.reps,
                                                    flush).items():
                    result["ms"][impl] = ms
                    flops = real if impl in result["packed"] else padded
                    result["tflops"][impl] = flops / (ms * 1e-3) / 1e12
                    result["useful_tflops"][impl] = real / (ms * 1e-3) / 1e12
                # The packed outputs against SDPA on each sequence alone.
                with torch.no_grad():
                    for impl in result["packed"]:
                        if impl not in outputs:
                            continue
                        got, worst = outputs[impl].float(), 0.0
                        for b, L in enumerate(lengths):
                            ref = torch.nn.functional.scaled_dot_product_attention(
                                q[b:b + 1, :, :L], k[b:b + 1, :, :L], v[b:b + 1, :, :L],
                                is_causal=causal, scale=scale).float()[0].transpose(0, 1)
                            mine = got[cu[b].item():cu[b + 1].item()]
                            if torch.isnan(mine).any().item():
                                worst = math.nan
                                break
                            worst = max(worst, ((mine - ref).abs().max() /
                                                ref.abs().max()).item())
                        result["max_rel_err"][impl] = worst
                errs = list(result["max_rel_err"].values())
                err_text = "n/a" if not errs else ("NaN" if any(map(math.isnan, errs)) else
                                                    f"{max(errs):.1e}")
                bounds = [result["block_bound"][i] for i in result["packed"]
                          if i in result["block_bound"]]
                bound_text = f"{bounds[0]:.3f}" if bounds else "n/a"
                print(f"{config:<40}" + "".join(f"{fmt_tflops(result, i):>18}" for i in columns) +
                      f"{err_text:>14}{bound_text:>8}", flush=True)
                results.append(result)
            del q, k, v, packed, bshd, outputs
    return results


def run_decode(args, torch, device, flush, impls, preparers, variants, variant_kernels):
    """Decode rows: M = 1 per sequence, full attention over N keys; GB/s of K and V read (each
    byte once), and the device's copy bandwidth on a buffer of the same size (bytes read plus
    bytes written per second, as a device-to-device copy is quoted) in the same interleaved
    timing, so the ratio to the copy is measured, not assumed."""
    B, H, Hkv, D = (int(x) for x in args.decode_shape.split(","))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}; "
          f"decode B={B} H={H} Hkv={Hkv} D={D} bf16, K and V {args.decode_layout}: GB/s of K and "
          f"V read (x copy), median of {args.reps}")
    columns = impls + ["copy"]
    # flex-paged columns, checked against the float reference in a column of their own
    flex_paged_columns = [i for i in impls if i.startswith("flex-paged@")]
    print(f"{'KV length':<12}" + "".join(f"{i:>18}" for i in columns) + f"{'tilefuse err':>14}" +
          (f"{'flex-paged err':>16}" if flex_paged_columns else ""))
    results, reasons = [], {}
    for n in [int(x) for x in args.decode.split(",")]:
        gen = torch.Generator(device=device).manual_seed(n)
        q = torch.randn((B, H, 1, D), device=device, dtype=torch.bfloat16, generator=gen)
        if args.decode_layout == "bshd":
            k, v = (torch.randn((B, n, Hkv, D), device=device, dtype=torch.bfloat16,
                                generator=gen).transpose(1, 2) for _ in range(2))
        else:
            k, v = (torch.randn((B, Hkv, n, D), device=device, dtype=torch.bfloat16,
                                generator=gen) for _ in range(2))
        scale = 1 / math.sqrt(D)
        kv_bytes = 2 * B * Hkv * n * D * 2
        src = torch.empty(kv_bytes, dtype=torch.int8, device=device)
        dst = torch.empty_like(src)
        result = {"mode": "decode", "layout": args.decode_layout, "B": B, "H": H, "Hkv": Hkv,
                  "D": D, "M": 1, "N": n,
                  "bytes": kv_bytes, "ms": {}, "gbps": {}, "n/a": {}, "max_rel_err": {}}
        if flex_paged_columns:
            result["flex_paged"] = {"layout": args.flex_page_layout,
                                    "mask": args.flex_paged_mask,
                                    "tolerance": FLEX_PAGED_TOLERANCE}
            result["flex_paged_max_rel_err"], result["wrong"] = {}, {}
        ready, outputs = {"copy": lambda: dst.copy_(src)}, {}
        # A varlen column (a kernel compiled --varlen --split-kv) runs the same rows packed: B
        # sequences of one query row over n keys each, [tokens, heads, D].
        packed = None
        for impl in impls:
            kernels = variant_kernels.get(impl)
            if kernels is not None and kernels.varlen:
                if packed is None:
                    packed = (q.transpose(1, 2).reshape(B, H, D).contiguous(),
                              k.transpose(1, 2).reshape(B * n, Hkv, D).contiguous(),
                              v.transpose(1, 2).reshape(B * n, Hkv, D).contiguous(),
                              torch.arange(B + 1, device=device, dtype=torch.int32),
                              torch.arange(B + 1, device=device, dtype=torch.int32) * n)

                def prepare(kernels=kernels):
                    run = kernels.prepare_varlen(torch, *packed, 1, n, False, scale)
                    return lambda: run().view(B, 1, H, D).transpose(1, 2)
            else:
                prepare = lambda impl=impl: preparers[impl](torch, q, k, v, False, scale)
            prepare_column(torch, result, impl, prepare, outputs, ready, reasons)
        for impl, ms in interleaved_medians(torch, ready, args.warmup, args.reps, flush).items():
            result["ms"][impl] = ms
            moved = 2 * kv_bytes if impl == "copy" else kv_bytes  # the copy reads and writes
            result["gbps"][impl] = moved / (ms * 1e-3) / 1e9
        with torch.no_grad():
            ref = torch.nn.functional.scaled_dot_product_attention(
                q.float(), k.float(), v.float(), scale=scale, enable_gqa=H != Hkv)
            for impl in outputs:
                mine = impl == "tilefuse" or impl in variants
                if not mine and impl not in flex_paged_columns:
                    continue
                got = outputs[impl].float()
                err = math.nan if torch.isnan(got).any().item() \
                    else ((got - ref).abs().max() / ref.abs().max()).item()
                if mine:
                    result["max_rel_err"][impl] = err
                    continue
                result["flex_paged_max_rel_err"][impl] = err
                # A wrong result's speed is no measure: its GB/s leaves the column.
                if not err <= FLEX_PAGED_TOLERANCE:  # NaN included
                    result["wrong"][impl] = {"max_rel_err": err,
                                             "gbps": result["gbps"].pop(impl, None)}
                    print(f"  {impl}: WRONG: max |O - O_ref| / max |O_ref| = {err:.1e} > "
                          f"{FLEX_PAGED_TOLERANCE:.0e}", file=sys.stderr)
        copy = result["gbps"]["copy"]
        cells = []
        for impl in columns:
            g = result["gbps"].get(impl)
            cells.append("WRONG" if impl in result.get("wrong", {}) else "n/a" if g is None else
                         f"{g:7.0f}" + ("" if impl == "copy" else f" ({g / copy:4.2f}x)"))

        def worst(errs):
            return "n/a" if not errs else ("NaN" if any(map(math.isnan, errs)) else
                                           f"{max(errs):.1e}")

        err_text = f"{worst(list(result['max_rel_err'].values())):>14}"
        if flex_paged_columns:
            err_text += f"{worst(list(result['flex_paged_max_rel_err'].values())):>16}"
        print(f"{n:<12}" + "".join(f"{c:>18}" for c in cells) + err_text, flush=True)
        results.append(result)
        del q, k, v, src, dst, outputs, packed, ready
    return results


def run_backward(args, torch, device, flush, impls, preparers):
    """Backward rows: dQ, dK and dV for the grid's configurations, each column's backward timed
    alone; TFLOP/s at BACKWARD_FLOP_FACTOR x the forward's FLOPs, tilefuse's speed over each of
    BACKWARD_PEERS', and its gradients checked against SDPA's (module doc)."""
    ratio_columns = [f"tf/{peer.removeprefix('sdpa-')}" for peer in BACKWARD_PEERS]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}; "
          f"backward (dQ, dK, dV) bf16"
          f"{', deterministic dQ' if args.backward_deterministic else ''}: TFLOP/s "
          f"({BACKWARD_FLOP_FACTOR} x the forward's FLOPs), median of {args.reps}")
    print(f"{'config':<34}" + "".join(f"{i:>18}" for i in impls) +
          "".join(f"{c:>10}" for c in ratio_columns) + f"{'dQ/dK/dV err':>30}")
    results, reasons = [], {}
    for head_dim in [int(x) for x in args.head_dims.split(",")]:
        for n in [int(x) for x in args.seq.split(",")]:
            for causal in {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]:
                B, H = max(1, args.tokens // n), args.hidden // head_dim
                scale = 1 / math.sqrt(head_dim)
                gen = torch.Generator(device=device).manual_seed(n * 1000 + head_dim)
                q, k, v, d_o = (torch.randn((B, H, n, head_dim), device=device,
                                            dtype=torch.bfloat16, generator=gen)
                                for _ in range(4))
                forward_flops = 4 * B * H * n * n * head_dim / (2 if causal else 1)
                flops = BACKWARD_FLOP_FACTOR * forward_flops
                config = (f"bf16 d{head_dim} N={n} B={B} H={H} "
                          f"{'causal' if causal else 'full'}")
                result = {"mode": "backward", "dtype": "bf16", "head_dim": head_dim, "M": n,
                          "N": n, "B": B, "H": H, "causal": causal,
                          "deterministic": args.backward_deterministic,
                          "forward_flops": forward_flops, "flops": flops, "ms": {}, "tflops": {},
                          "n/a": {}, "grad_reference": None, "tilefuse_grad_max_rel_err": None}
                outputs, ready = {}, {}
                for impl in impls:
                    prepare_column(torch, result, impl,
                                   lambda impl=impl: preparers[impl](torch, q, k, v, d_o, causal,
                                                                     scale),
                                   outputs, ready, reasons)
                try:
                    for impl, ms in interleaved_medians(torch, ready, args.warmup, args.reps,
                                                        flush).items():
                        result["ms"][impl] = ms
                        result["tflops"][impl] = flops / (ms * 1e-3) / 1e12
                except Exception as e:  # a failure while timing: every column of the row
                    reason = f"{type(e).__name__}: {str(e).strip()[:200]}"
                    for impl in ready:
                        result["n/a"][impl] = reason
                    print(f"  timing: n/a: {reason}", file=sys.stderr)
                torch.cuda.synchronize()

                mine = result["tflops"].get("tilefuse")
                result["tilefuse_ratio"] = {peer: mine / result["tflops"][peer]
                                            for peer in BACKWARD_PEERS
                                            if mine and peer in result["tflops"]}
                base = result["tflops"].get(BASELINE)
                result["ratio_to_baseline"] = {
                    i: t / base for i, t in result["tflops"].items()} if base else {}
                err_text = "n/a"
                mine_columns = [i for i in outputs if i == "tilefuse" or i.startswith("tf:")]
                if mine_columns:
                    err_text = check_backward(torch, result, outputs, impls, lambda peer: (
                        preparers[peer](torch, q, k, v, d_o, causal, scale)), reasons,
                        mine_columns)
                cells = [f"{result['tflops'][i]:6.1f}" if i in result["tflops"] else "n/a"
                         for i in impls]
                ratios = [f"{result['tilefuse_ratio'][peer]:4.2f}x"
                          if peer in result["tilefuse_ratio"] else "n/a"
                          for peer in BACKWARD_PEERS]
                print(f"{config:<34}" + "".join(f"{c:>18}" for c in cells) +
                      "".join(f"{r:>10}" for r in ratios) + f"{err_text:>30}", flush=True)
                results.append(result)
                # The peers' retained graphs hold their saved tensors: freed before the next row.
                del q, k, v, d_o, outputs, ready
    return results


def check_backward(torch, result, outputs, impls, prepare_peer, reasons, columns):
    """The dQ, dK and dV of tilefuse's `columns` (tilefuse, tf:NAME) against the first of
    BACKWARD_PEERS' that ran, else against one run here untimed (a peer left out of --impls);
    into `result` (tilefuse's as tilefuse_grad_*, every column's in grad_max_rel_err). Returns
    the row's error cell: tilefuse's, else the first column's."""
    peer = next((p for p in BACKWARD_PEERS if p in outputs), None)
    untimed = [p for p in BACKWARD_PEERS if p not in impls]
    while peer is None and untimed:
        candidate = untimed.pop(0)
        prepare_column(torch, {"n/a": {}}, candidate, lambda: prepare_peer(candidate), outputs,
                       {}, reasons)
        if candidate in outputs:
            peer = candidate
    if peer is None:
        return "no SDPA"
    result["grad_reference"] = peer
    result["grad_max_rel_err"], result["grad_wrong"] = {}, {}
    cells = {}
    for column in columns:
        errors = {}
        with torch.no_grad():
            for name, got, ref in zip(("dq", "dk", "dv"), outputs[column], outputs[peer]):
                got, ref = got.float(), ref.float()
                errors[name] = math.nan if torch.isnan(got).any().item() else (
                    (got - ref).abs().max() / ref.abs().max()).item()
        wrong = not all(e <= BACKWARD_TOLERANCE for e in errors.values())  # NaN included
        result["grad_max_rel_err"][column] = errors
        result["grad_wrong"][column] = wrong
        if column == "tilefuse":
            result["tilefuse_grad_max_rel_err"] = errors
            result["tilefuse_grad_wrong"] = wrong
        text = "/".join("NaN" if math.isnan(e) else f"{e:.1e}" for e in errors.values())
        if wrong:
            print(f"  {column}: WRONG: dQ/dK/dV max |dX - dX_{peer}| / max |dX_{peer}| = "
                  f"{text} > {BACKWARD_TOLERANCE:.0e}", file=sys.stderr)
        cells[column] = text + (" WRONG" if wrong else "")
    return cells.get("tilefuse", cells[columns[0]])


if __name__ == "__main__":
    main()
