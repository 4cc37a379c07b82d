//===- tilefuse.cpp - the tilefuse command line ---------------------------===//
//
//   tilefuse run  [--kernel NAME | --file F.mlir] [--dtype bf16|f16|f32] [--B --H --Hkv --M --N]
//                 [--block-m --block-n]
//       Compiles a kernel and runs it on random inputs, on the GPU where there is one (--device),
//       else on the CPU reference backend, and compares it with the float64 reference; prints the
//       error (and, on the CPU, the key/value blocks visited). Exit code 1 when the error is over
//       the bound. --backward [--deterministic]: the forward, then the derived backward (tiled,
//       on the CPU reference backend), dQ, dK and dV checked against the float64 backward.
//   tilefuse compile (--kernel NAME | FILE.mlir) [--arch sm_90a|sm_80] [--dtype --head-dim]
//                    [--block-m --block-n | --config Br=..,Bc=..] [--emit ptx|cubin|header]
//                    [--name SYMBOL] [--ptxas PATH] [--mlir-timing --mlir-print-ir-after-all ...]
//                    -o OUT
//       Compiles ahead of time: PTX (with the launch metadata in OUT.json beside it), a cubin
//       (through ptxas; OUT.json too) or a C header with the cubin and a launcher.
//   tilefuse tune (--kernel NAME | FILE.mlir) [--head-dim --dtype --seq N,.. --varlen] [--emit-dir DIR]
//       Autotunes on this GPU into the tuning database (TuneCommand.cpp); `compile --tuned`
//       compiles with its configuration.
//   tilefuse bench-compile [--kernel NAME] [--arch] [--repeat N]
//       Times a cold compile to PTX (and a driver load where there is a GPU) and cache hits.
//   tilefuse list
//       The bundled kernels.
//
//===----------------------------------------------------------------------===//
#include "TuneCommand.h"
#include "CurrentGpu.h"

#include "tilefuse/codegen/Passes.h"
#include "tilefuse/kernels/Registry.h"
#include "tilefuse/passes/Passes.h"
#include "tilefuse/passes/gpu/Passes.h"
#include "tilefuse/runtime/AotHeader.h"
#include "tilefuse/runtime/Compiler.h"
#include "tilefuse/runtime/CpuBackwardKernel.h"
#include "tilefuse/runtime/CpuKernel.h"
#include "tilefuse/runtime/Float64Reference.h"
#include "tilefuse/runtime/KernelCache.h"
#include "tilefuse/runtime/Ptxas.h"
#include "tilefuse/runtime/Reference.h"
#include "tilefuse/runtime/Tilefuse.h"
#include "tilefuse/runtime/cuda/CudaBackwardKernel.h"
#include "tilefuse/runtime/cuda/CudaKernel.h"
#include "tilefuse/runtime/device/LaunchAbi.h"
#include "tilefuse/runtime/jit/TuningDatabase.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/xxhash.h"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

using namespace tilefuse;
using namespace tilefuse::runtime;
namespace cl = llvm::cl;

static cl::SubCommand
    runCmd("run",
           "Compile a kernel and run it on random inputs (on the GPU where there is one, else on "
           "the CPU reference backend); check it against the float64 reference");
static cl::SubCommand listCmd("list", "List the bundled kernels");
static cl::SubCommand
    compileCmd("compile",
               "Compile a kernel ahead of time to PTX, a cubin, a C header with an embedded "
               "cubin, or its float64 reference");
static cl::SubCommand benchCompileCmd(
    "bench-compile",
    "Time a cold compile to PTX (and a driver load with a GPU), a disk-cache hit and a "
    "memory-cache hit");
// One category per subcommand: `tilefuse SUB --help` lists it (and the generic options), while
// LLVM's own options are hidden (hideLlvmOptions).
static cl::OptionCategory runCategory("tilefuse run options");
static cl::OptionCategory compileCategory(
    "tilefuse compile options",
    "  tilefuse compile (--kernel NAME | FILE.mlir) [--arch sm_90a|sm_80] [--dtype ...]\n"
    "                   [--head-dim ...] [--config Br=64,Bc=64]\n"
    "                   --emit ptx|cubin|header|reference|tiled -o OUT\n"
    "  ptx: OUT (PTX text) and OUT with .json (the launch metadata: name, block_m, block_n, threads,\n"
    "       head_dim, dtype, shared_bytes, declared_sizes) beside it, as the runtime loads them.\n"
    "  cubin: the PTX assembled by ptxas for --arch, and the same .json (ptxas: --ptxas, else\n"
    "       TILEFUSE_PTXAS, CUDA_HOME/bin or CUDA_PATH/bin (the first set), PATH, /usr/local/cuda/bin).\n"
    "  header: a C99 header (needs only <cuda.h> and -lcuda) with the cubin as a byte array and\n"
    "       CUresult NAME_launch(CUstream, q, k, v, o, lse, B, H, Hkv, M, N, strides[14]);\n"
    "       with --backward, NAME_backward_launch(CUstream, q, k, v, o, d_o, lse, d_q, d_k, d_v,\n"
    "       B, H, Hkv, M, N, strides[26], workspace) and NAME_backward_workspace_bytes(B, H, M).\n"
    "  reference: the kernel's float64 reference (its written form evaluated naively) as an\n"
    "       object for the baseline CPU, defining _mlir_ciface_NAME_reference; link it with\n"
    "       `cc -shared -o NAME.reference.so OUT -lm` to check the kernel without the compiler;\n"
    "       with --backward, its derived backward's (NAME_backward_reference: dQ, dK, dV).\n"
    "  tiled (--backward only): the derived backward tiled in FlashAttention-2's schedule, as MLIR.");
static cl::OptionCategory benchCompileCategory("tilefuse bench-compile options");

static cl::opt<std::string> cInput(cl::Positional, cl::desc("[FILE.mlir]"), cl::init(""),
                                   cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<std::string> cKernel("kernel",
                                    cl::desc("A bundled kernel (`tilefuse list`) instead of a "
                                             "file"),
                                    cl::init(""), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<std::string> cArch("arch", cl::desc("Target chip: sm_90a (H100/H200) or sm_80 "
                                                   "(A100; runs on 8.x)"),
                                  cl::init("sm_90a"), cl::sub(compileCmd),
                                  cl::cat(compileCategory));
static cl::opt<std::string> cPtxVersion(
    "ptx-features", cl::desc("NVPTX features, i.e. the PTX version: +ptx80 ... +ptx90"),
    cl::init("+ptx80"), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<std::string> cDtype("dtype",
                                   cl::desc("Storage type of Q, K, V, O: bf16 or f16 (default: "
                                            "as the kernel is written)"),
                                   cl::init(""), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<int64_t> cHeadDim("head-dim",
                                 cl::desc("Specialize to this head dimension (default: as the "
                                          "kernel is written)"),
                                 cl::init(0), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<int64_t> cBlockM("block-m",
                                cl::desc("Br: rows of Q per program, a multiple of 16 up to "
                                         "256 (0: the tuned default for the head dimension)"),
                                cl::init(0), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<int64_t> cBlockN("block-n",
                                cl::desc("Bc: keys per block, a multiple of 16 (0: tuned)"),
                                cl::init(0), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::list<std::string> cParams(
    "param",
    cl::desc("Variant parameter NAME=VALUE: the kernel constant marked {tile.param = NAME} "
             "(repeatable; e.g. --param window_left=256)"),
    cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<int64_t> cRowsPerWarp(
    "rows-per-warp",
    cl::desc("Rows of Q each warp owns: 16, or 32 (two m16 tiles reuse each K/V fragment; "
             "block-m must then be a multiple of 32); 0: tuned for the head dimension"),
    cl::init(0), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<std::string> cMma(
    "mma",
    cl::desc("Matrix instruction: sync (mma.sync, any sm_80+) or wgmma (sm_90a warpgroup MMAs; "
             "block-m a multiple of 64, rows-per-warp 16); empty: tuned for the chip"),
    cl::init(""), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<std::string> cQOperand(
    "q-operand",
    cl::desc("Where the Q block lives: registers (loaded once) or shared (ldmatrix per k-step; "
             "frees registers for rows-per-warp 32 at large head dimensions); empty: tuned"),
    cl::init(""), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<std::string> cCopyIssue(
    "copy-issue",
    cl::desc("When key/value copies into a buffer with pending readers start: eager (barrier, "
             "copy) or at-barrier (after the next barrier; one fewer per block); empty: tuned"),
    cl::init(""), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<std::string> cConfig(
    "config",
    cl::desc("Comma-separated KEY=VALUE settings that override the options above: Br or block_m, "
             "Bc or block_n, D or head_dim, dtype, and the tile configuration's keys (mma, q, "
             "stages, pack_gqa, warp_specialize=true|false, softmax_overlap=true|false, "
             "pingpong=true|false, persistent=true|false, "
             "row_order=ascending|descending|grouped|paired, q_tma=true|false, o_tma=true|false, "
             "prefetch_values=true|false, ctas_per_sm, overlap_tiles=true|false, "
             "row_align=start|end, row_sum_mma=true|false, key_tail=N; e.g. --config Br=128,Bc=64 or --config "
             "warp_specialize=false)"),
    cl::init(""), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<std::string> cEmit("emit",
                                  cl::desc("What to write: ptx (+ .json), cubin (+ .json, needs "
                                           "ptxas), header (C, cubin embedded, needs ptxas) or "
                                           "reference (the float64 reference, an object file)"),
                                  cl::init("ptx"), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<bool> cBackward("backward",
                               cl::desc("The derived backward: its three kernels (ptx, cubin, or "
                                        "header: their launcher), with --emit reference its "
                                        "float64 reference, with --emit tiled its tiled form"),
                               cl::init(false), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<bool> cSplitKv("split-kv",
                              cl::desc("Split-KV (tile-split-kv): each row block's keys shared "
                                       "out over S CTAs chosen at launch (decode); not header"),
                              cl::init(false), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<bool> cPagedKv("paged-kv",
                              cl::desc("Paged KV (tile-paged-kv): K and V are paged caches read "
                                       "through a page table and per-sequence lengths"),
                              cl::init(false), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<int64_t> cPageSize("page-size",
                                  cl::desc("--paged-kv: rows per page, fixed in the kernel "
                                           "(divisions by a constant; 0: any, given at launch)"),
                                  cl::init(0), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<bool> cVarlen("varlen",
                             cl::desc("Varlen (tile-varlen): packed batches of variable-length "
                                      "sequences read through cumulative offsets (cu_seqlens)"),
                             cl::init(false), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<int64_t> cSeqLen(
    "seq-len",
    cl::desc("The defaults for sequences of this many keys: up to 1024 the short-sequence "
             "kernel where it differs (d64 under a causal-like mask: one warpgroup); the sidecar "
             "records its seq_bucket, which bench.py matches a row's length against (0: any "
             "length, the long-sequence defaults)"),
    cl::init(0), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<bool> cDeterministic(
    "deterministic",
    cl::desc("--backward: dQ by the ordered loop over key blocks (bitwise reproducible; on "
             "sm_90a above head dim 64 it is the default) instead of atomic adds"),
    cl::init(false), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<std::string> cOutput("o", cl::desc("Output file ('-': standard output, no .json)"),
                                    cl::value_desc("OUT"), cl::init("-"), cl::sub(compileCmd),
                                    cl::cat(compileCategory));
static cl::opt<std::string> cName("name",
                                  cl::desc("--emit header: the C prefix of its names "
                                           "(NAME_launch, ...; default: the kernel's name)"),
                                  cl::init(""), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::opt<std::string> cPtxas("ptxas",
                                   cl::desc("The ptxas to run (default: TILEFUSE_PTXAS, "
                                            "CUDA_HOME/bin, CUDA_PATH/bin, PATH, "
                                            "/usr/local/cuda/bin)"),
                                   cl::init(""), cl::sub(compileCmd), cl::cat(compileCategory));
static cl::list<std::string> cPtxasOptions(
    "Xptxas", cl::desc("Pass an option to ptxas (repeatable), e.g. -Xptxas=-v"),
    cl::sub(compileCmd), cl::cat(compileCategory));

static cl::opt<std::string> bKernel("kernel", cl::desc("Bundled kernel to compile"),
                                    cl::init("attention"), cl::sub(benchCompileCmd),
                                    cl::cat(benchCompileCategory));
static cl::opt<std::string> bArch("arch", cl::desc("Target chip"), cl::init("sm_90a"),
                                  cl::sub(benchCompileCmd), cl::cat(benchCompileCategory));
static cl::opt<int> bRepeat("repeat", cl::desc("Timed repetitions of each step"), cl::init(10),
                            cl::sub(benchCompileCmd), cl::cat(benchCompileCategory));

static cl::opt<std::string> kernelName("kernel", cl::desc("Bundled kernel (see `tilefuse list`)"),
                                       cl::init("attention"), cl::sub(runCmd),
                                       cl::cat(runCategory));
static cl::opt<std::string> kernelFile("file", cl::desc("A DSL file instead of a bundled kernel"),
                                       cl::sub(runCmd), cl::cat(runCategory));
static cl::opt<std::string> dtype("dtype", cl::desc("Storage type: bf16, f16 or f32"),
                                  cl::init("bf16"), cl::sub(runCmd), cl::cat(runCategory));
static cl::opt<int64_t> runHeadDim("head-dim",
                                   cl::desc("Head dimension, for a kernel written for any (0: as "
                                            "written)"),
                                   cl::init(0), cl::sub(runCmd), cl::cat(runCategory));
static cl::opt<int64_t> optB("B", cl::desc("batch"), cl::init(2), cl::sub(runCmd),
                             cl::cat(runCategory));
static cl::opt<int64_t> optH("H", cl::desc("query heads"), cl::init(8), cl::sub(runCmd),
                             cl::cat(runCategory));
static cl::opt<int64_t> optHkv("Hkv", cl::desc("key/value heads (0: same as H)"), cl::init(0),
                               cl::sub(runCmd), cl::cat(runCategory));
static cl::opt<int64_t> optM("M", cl::desc("query length"), cl::init(300), cl::sub(runCmd),
                             cl::cat(runCategory));
static cl::opt<int64_t> optN("N", cl::desc("key length"), cl::init(300), cl::sub(runCmd),
                             cl::cat(runCategory));
static cl::opt<int64_t> blockM("block-m", cl::desc("Br"), cl::init(64), cl::sub(runCmd),
                               cl::cat(runCategory));
static cl::opt<int64_t> blockN("block-n", cl::desc("Bc"), cl::init(64), cl::sub(runCmd),
                               cl::cat(runCategory));
static cl::opt<std::string> device("device",
                                   cl::desc("auto (the GPU where one exists), gpu or cpu"),
                                   cl::init("auto"), cl::sub(runCmd), cl::cat(runCategory));
static cl::opt<unsigned> seed("seed", cl::desc("random seed"), cl::init(1), cl::sub(runCmd),
                              cl::cat(runCategory));
static cl::opt<bool> runSplitKv(
    "split-kv",
    cl::desc("Run the split-KV kernel (tile-split-kv, GQA-packed as split kernels are): each "
             "row block's keys shared out over --kv-splits programs and merged"),
    cl::init(false), cl::sub(runCmd), cl::cat(runCategory));
static cl::opt<bool> runPagedKv(
    "paged-kv",
    cl::desc("Run the kernel on a paged K/V cache (tile-paged-kv): vLLM's [pages, page size, Hkv, "
             "D] layout, the pages in a random order, sequences of ragged lengths (N the longest)"),
    cl::init(false), cl::sub(runCmd), cl::cat(runCategory));
static cl::opt<bool> runVarlen(
    "varlen",
    cl::desc("Run the kernel on a packed batch of variable-length sequences (tile-varlen; the "
             "THD layout of FlashAttention's varlen API): ragged query and key lengths (M and N "
             "the longest), packed one after another; with --paged-kv, packed queries over the "
             "paged cache (chunked prefill)"),
    cl::init(false), cl::sub(runCmd), cl::cat(runCategory));
static cl::opt<int64_t> runPageSize("page-size",
                                    cl::desc("--paged-kv: rows per page (fixed in the kernel)"),
                                    cl::init(16), cl::sub(runCmd), cl::cat(runCategory));
static cl::opt<int64_t> runKvSplits(
    "kv-splits",
    cl::desc("--split-kv: key splits per row block (0: the launcher's choice on the GPU, 4 on "
             "the CPU)"),
    cl::init(0), cl::sub(runCmd), cl::cat(runCategory));
static cl::opt<bool> runBackward(
    "backward",
    cl::desc("Run the kernel's derived backward (tiled, on the CPU reference backend) after its "
             "forward, and check dQ, dK and dV against the float64 backward"),
    cl::init(false), cl::sub(runCmd), cl::cat(runCategory));
static cl::opt<bool> runDeterministic(
    "deterministic",
    cl::desc("--backward: dQ by the ordered loop over key blocks (bitwise reproducible) instead "
             "of atomic adds"),
    cl::init(false), cl::sub(runCmd), cl::cat(runCategory));
static cl::opt<std::string> runConfig(
    "config",
    cl::desc("The GPU kernel's tile configuration, KEY=VALUE settings as `compile --config` takes "
             "them (Br, Bc, mma, q, stages, warp_specialize, ...); with --backward the backward "
             "takes its Br, Bc, rows_per_warp, mma and row_order. --block-m, --block-n and "
             "--row-order given explicitly win. The CPU reference backend takes its Br, Bc and "
             "row_order"),
    cl::init(""), cl::sub(runCmd), cl::cat(runCategory));
static cl::opt<std::string> runRowOrder(
    "row-order",
    cl::desc("The grid's row-block order (TileConfig row_order, tile-order-row-blocks): "
             "ascending, descending (the forward's row blocks and the backward's dQ grid last "
             "first), grouped (descending, the (batch, head) pairs in L2-sized groups run level "
             "by level) or paired (a persistent kernel's tile loop dealing row blocks i and "
             "R - 1 - i of a pair to one program; descending on the CPU backend); on the GPU and "
             "the CPU backend alike. Not given: the kernel's default "
             "(on sm_90a, descending for a padded forward whose mask compares q_idx with "
             "kv_idx; ascending elsewhere and on the CPU backend)"),
    cl::init("ascending"), cl::sub(runCmd), cl::cat(runCategory));

/// `run`'s GPU configuration: --config, then the explicit --block-m / --block-n / --row-order.
static llvm::Expected<TileConfig> runTileConfig() {
  auto tiles = TileConfig::parse(runConfig);
  if (!tiles)
    return tiles.takeError();
  if (blockM.getNumOccurrences())
    tiles->blockM = blockM;
  if (blockN.getNumOccurrences())
    tiles->blockN = blockN;
  if (runRowOrder.getNumOccurrences())
    if (llvm::Error error = tiles->set("row_order", runRowOrder))
      return std::move(error);
  return tiles;
}

static double relError(const std::vector<double> &got, const std::vector<double> &want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i]) && got[i] == want[i])
      continue;
    double d = got[i] - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

static int runOnCpu(const std::string &text, const std::string &bufferName,
                    const ReferenceKernel &reference);
static int runBackwardOnCpu(const std::string &text, const std::string &bufferName,
                            const ReferenceKernel &reference);
static int runOnGpu(const std::string &text, const std::string &bufferName,
                    const ReferenceKernel &reference);
static int runBackwardOnGpu(const std::string &text, const std::string &bufferName,
                            const ReferenceKernel &reference);

static int runMain() {
  std::string text, bufferName, name = kernelName;
  if (!kernelFile.empty()) {
    auto buf = llvm::MemoryBuffer::getFile(kernelFile);
    if (!buf) {
      fmt::print(stderr, "error: cannot read {}: {}\n", kernelFile.getValue(),
                 buf.getError().message());
      return 2;
    }
    text = (*buf)->getBuffer().str();
    bufferName = kernelFile;
  } else {
    const kernels::KernelSource *k = kernels::find(kernelName);
    if (!k) {
      fmt::print(stderr, "error: no bundled kernel named '{}' (see `tilefuse list`)\n", name);
      return 2;
    }
    text = k->text;
    bufferName = k->fileName;
  }
  if (dtype != "bf16" && dtype != "f16" && dtype != "f32") {
    fmt::print(stderr, "error: --dtype must be bf16, f16 or f32, not '{}'\n", dtype.getValue());
    return 2;
  }

  // The float64 reference comes from the same text (its written form, evaluated naively), so a
  // user's --file kernel is checked exactly like a bundled one.
  ReferenceOptions referenceOptions;
  referenceOptions.headDim = runHeadDim;
  auto reference = ReferenceKernel::compile(text, bufferName, referenceOptions);
  if (!reference) {
    fmt::print(stderr, "{}\n", llvm::toString(reference.takeError()));
    return 1;
  }

  if (runDeterministic && !runBackward) {
    fmt::print(stderr, "error: --deterministic is an option of --backward\n");
    return 2;
  }
  // --row-order's value named as its own (runTileConfig sets it over --config's).
  if (TileConfig probe; runRowOrder.getNumOccurrences())
    if (llvm::Error error = probe.set("row_order", runRowOrder)) {
      fmt::print(stderr, "error: --row-order: {}\n", llvm::toString(std::move(error)));
      return 2;
    }
  if (auto tiles = runTileConfig(); !tiles) {
    fmt::print(stderr, "error: --config: {}\n", llvm::toString(tiles.takeError()));
    return 2;
  }
  if (runKvSplits != 0 && !runSplitKv) {
    fmt::print(stderr, "error: --kv-splits is an option of --split-kv\n");
    return 2;
  }
  if (runKvSplits < 0) {
    fmt::print(stderr, "error: --kv-splits must be 0 (the launcher's choice) or more, not {}\n",
               runKvSplits.getValue());
    return 2;
  }
  if (runPagedKv && runBackward) {
    fmt::print(stderr, "error: --paged-kv is a forward kernel; --backward runs on contiguous "
                       "K and V\n");
    return 2;
  }
  if (runPageSize < 1) {
    fmt::print(stderr, "error: --page-size must be positive, not {}\n", runPageSize.getValue());
    return 2;
  }
  if (runVarlen && runBackward) {
    fmt::print(stderr, "error: --varlen runs the forward kernel\n");
    return 2;
  }
  if (runSplitKv && runBackward) {
    fmt::print(stderr, "error: --split-kv is a forward kernel; --backward runs the unsplit one\n");
    return 2;
  }

  // The GPU where one exists (and the storage type is one the GPU path takes), else the CPU.
  bool onGpu = false;
  if (device != "cpu") {
    auto driver = cuda::Driver::get();
    if (driver && dtype == "f32") {
      if (device == "gpu") {
        fmt::print(stderr, "error: the GPU path takes bf16 or f16, not f32\n");
        return 2;
      }
      fmt::print("device       f32 runs on the CPU reference backend only\n");
    } else if (driver) {
      onGpu = true;
    } else {
      std::string why = llvm::toString(driver.takeError());
      if (device == "gpu") {
        fmt::print(stderr, "error: {}\n", why);
        return 1;
      }
      fmt::print("device       no GPU ({}): the CPU reference backend runs it\n", why);
    }
  }
  if (!onGpu && !runConfig.empty())
    fmt::print("config       --config {}: the CPU reference backend takes its Br, Bc and "
               "row_order; the other settings configure GPU code\n",
               runConfig.getValue());
  if (runBackward)
    return onGpu ? runBackwardOnGpu(text, bufferName, **reference)
                 : runBackwardOnCpu(text, bufferName, **reference);
  return onGpu ? runOnGpu(text, bufferName, **reference)
               : runOnCpu(text, bufferName, **reference);
}

/// The inputs of a run, drawn once: storage-typed bytes for the kernel and the values the
/// reference sees (the same, rounded to the storage type).
struct RunInputs {
  reference::Problem p;
  ElementType et = ElementType::BF16;
  std::vector<char> q, k, v;
  std::vector<double> qSeen, kSeen, vSeen;
  /// --paged-kv: each sequence's first lengths[b] keys and values of k and v, in caches of
  /// `pages` pages of pageSize rows ([pages, pageSize, Hkv, D]), and the page table.
  struct Paged {
    int64_t pageSize = 0, pages = 0, perSequence = 0;
    std::vector<int64_t> lengths;
    std::vector<int32_t> table, lengths32;
    std::vector<char> kCache, vCache;
  };
  std::optional<Paged> paged;
  /// --varlen: each sequence's first queryLengths[b] query rows and keyLengths[b] key rows of
  /// q, k and v, packed one sequence after another ([tokens, heads, D]) at the offsets cuQ and
  /// cuK.
  struct Packed {
    std::vector<int64_t> queryLengths, keyLengths;
    std::vector<int32_t> cuQ, cuK;
    std::vector<char> q, k, v;
  };
  std::optional<Packed> packed;

  /// A packed output's rows back in the padded B x H x M layout (rows past a sequence's length
  /// zero, as the per-sequence reference leaves them): O's bytes and LSE ([H, tokens]).
  void unpack(const std::vector<char> &oPacked, const std::vector<float> &lsePacked,
              std::vector<char> &o, std::vector<float> &lse) const {
    size_t rowBytes = p.D * reference::elementSize(et);
    int64_t tokens = packed->cuQ.back();
    o.assign(size_t(p.B * p.H * p.M) * rowBytes, 0);
    reference::unpackRows(oPacked.data(), o.data(), rowBytes, p.H, p.M, packed->queryLengths,
                          packed->cuQ);
    lse.assign(size_t(p.B * p.H * p.M), 0.0f);
    reference::unpackLseRows(lsePacked.data(), lse.data(), p.H, p.M, tokens,
                             packed->queryLengths, packed->cuQ);
  }
};

/// [pages, page size, Hkv, D]: a page, a head, a row.
static std::array<int64_t, 3> pagedStrides(const reference::Problem &p, int64_t pageSize) {
  return {pageSize * p.Hkv * p.D, p.D, p.Hkv * p.D};
}

static RunInputs drawInputs(const ReferenceKernel &f64Reference, int64_t headDim,
                            ElementType et) {
  RunInputs in;
  reference::Problem &p = in.p;
  p.B = optB;
  p.H = optH;
  p.Hkv = optHkv ? optHkv : optH;
  p.M = optM;
  p.N = optN;
  p.D = headDim;
  // Sizes the kernel declares in its signature (gqa's 8 query and 2 key/value heads) win.
  const cuda::DeclaredSizes &declared = f64Reference.declaredSizes();
  auto fixed = [&](int tensor, int dim, int64_t &size) {
    if (declared.sizes[tensor][dim] != cuda::DeclaredSizes::dynamic)
      size = declared.sizes[tensor][dim];
  };
  if (!optHkv) // unless given, as many key/value heads as query heads, unless declared
    p.Hkv = declared.sizes[0][1] != cuda::DeclaredSizes::dynamic ? declared.sizes[0][1] : p.H;
  fixed(0, 0, p.B);
  fixed(0, 1, p.H);
  fixed(0, 2, p.M);
  fixed(1, 1, p.Hkv);
  fixed(1, 2, p.N);
  in.et = et;
  size_t es = reference::elementSize(et);
  std::mt19937 rng(seed);
  auto draw = [&](size_t n) { return reference::randomNormal(n, rng); };
  size_t nq = p.B * p.H * p.M * p.D, nk = p.B * p.Hkv * p.N * p.D;
  in.q.resize(nq * es);
  in.k.resize(nk * es);
  in.v.resize(nk * es);
  in.qSeen = reference::storeAs(et, draw(nq), in.q.data());
  in.kSeen = reference::storeAs(et, draw(nk), in.k.data());
  in.vSeen = reference::storeAs(et, draw(nk), in.v.data());
  if (runPagedKv) {
    // Ragged: the first sequence has N keys, the others fewer (one has a single key when B > 2).
    RunInputs::Paged &paged = in.paged.emplace();
    int64_t ps = runPageSize;
    paged.pageSize = ps;
    for (int64_t b = 0; b < p.B; ++b)
      paged.lengths.push_back(b == 0 ? p.N : b == 2 ? 1 : std::max<int64_t>(1, p.N - b * p.N / 3));
    paged.perSequence = (p.N + ps - 1) / ps;
    paged.pages = p.B * paged.perSequence + 1;
    std::vector<int32_t> order(paged.pages);
    for (int64_t i = 0; i < paged.pages; ++i)
      order[i] = int32_t(i);
    std::shuffle(order.begin(), order.end(), rng);
    paged.table.assign(order.begin(), order.begin() + p.B * paged.perSequence);
    size_t rowBytes = p.D * es;
    paged.kCache.assign(size_t(paged.pages * ps * p.Hkv) * rowBytes, char(0xff));
    paged.vCache = paged.kCache;
    for (int64_t b = 0; b < p.B; ++b) {
      paged.lengths32.push_back(int32_t(paged.lengths[b]));
      for (int64_t n = 0; n < paged.lengths[b]; ++n)
        for (int64_t h = 0; h < p.Hkv; ++h) {
          int64_t page = paged.table[b * paged.perSequence + n / ps];
          size_t to = size_t((page * ps + n % ps) * p.Hkv + h) * rowBytes;
          size_t from = size_t((b * p.Hkv + h) * p.N + n) * rowBytes;
          std::memcpy(&paged.kCache[to], &in.k[from], rowBytes);
          std::memcpy(&paged.vCache[to], &in.v[from], rowBytes);
        }
    }
  }
  if (runVarlen) {
    // Ragged, as --paged-kv's: the first sequence is the longest, one has a single row.
    RunInputs::Packed &packed = in.packed.emplace();
    auto ragged = [&](int64_t longest, int64_t b) {
      return b == 0 ? longest : b == 2 ? 1 : std::max<int64_t>(1, longest - b * longest / 3);
    };
    for (int64_t b = 0; b < p.B; ++b) {
      packed.queryLengths.push_back(ragged(p.M, b));
      packed.keyLengths.push_back(ragged(p.N, b));
    }
    // Over a paged cache (chunked prefill) the keys are the cache's: its lengths.
    if (in.paged)
      packed.keyLengths = in.paged->lengths;
    packed.cuQ = reference::sequenceOffsets(packed.queryLengths);
    packed.cuK = reference::sequenceOffsets(packed.keyLengths);
    size_t rowBytes = p.D * es;
    packed.q = reference::packRows(in.q.data(), rowBytes, p.H, p.M, packed.queryLengths,
                                   packed.cuQ, packed.cuQ.back(), 0);
    packed.k = reference::packRows(in.k.data(), rowBytes, p.Hkv, p.N, packed.keyLengths,
                                   packed.cuK, packed.cuK.back(), 0);
    packed.v = reference::packRows(in.v.data(), rowBytes, p.Hkv, p.N, packed.keyLengths,
                                   packed.cuK, packed.cuK.back(), 0);
  }
  return in;
}

/// Compares O (storage-typed bytes) and LSE with the float64 reference; prints and returns the
/// exit code.
static int checkAgainstReference(const ReferenceKernel &referenceKernel, const RunInputs &in,
                                 const std::vector<char> &o, const std::vector<float> &lse,
                                 double bound) {
  const reference::Problem &p = in.p;
  std::vector<double> q = in.qSeen, k = in.kSeen, v = in.vSeen;
  std::vector<double> refO(p.B * p.H * p.M * p.D), refL(p.B * p.H * p.M);
  // Paged or varlen, each sequence on its own keys (and, varlen, its own query rows).
  const std::vector<int64_t> *keyLengths = in.paged    ? &in.paged->lengths
                                           : in.packed ? &in.packed->keyLengths
                                                       : nullptr;
  if (llvm::Error e = reference::runPerSequence(
          referenceKernel, p, keyLengths, q.data(), k.data(), v.data(), refO.data(), refL.data(),
          in.packed ? &in.packed->queryLengths : nullptr)) {
    fmt::print(stderr, "error: {}\n", llvm::toString(std::move(e)));
    return 1;
  }
  auto got = reference::loadAs(in.et, o.data(), refO.size());
  std::vector<double> l(lse.begin(), lse.end());
  double eO = relError(got, refO), eL = relError(l, refL);
  bool ok = eO <= bound && eL <= 1e-5;
  fmt::print("error        O {:.2e} (bound {:.0e})   LSE {:.2e} (bound 1e-05)   vs float64\n", eO,
             bound, eL);
  fmt::print("result       {}\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

static double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

static int runOnCpu(const std::string &text, const std::string &bufferName,
                    const ReferenceKernel &reference) {
  CpuCompileOptions opts;
  opts.elementType = dtype;
  opts.headDim = runHeadDim;
  // Of the configuration the CPU backend takes the block sizes, the row order and alignment.
  TileConfig tiles = cantFail(runTileConfig());
  const int64_t br = tiles.blockM.value_or(blockM), bc = tiles.blockN.value_or(blockN);
  opts.blockM = br;
  opts.blockN = bc;
  opts.instrument = true;
  opts.descendingRows = tiles.longestFirst();
  opts.groupedRows = tiles.rowOrder == RowOrder::Grouped;
  opts.alignRowsToEnd = tiles.alignRowsToEnd.value_or(false);
  // The split kernel packed as the GPU compiles it (splitKvTileConfig's pack_gqa).
  opts.splitKv = runSplitKv;
  opts.packGqa = runSplitKv && splitKvTileConfig(0, "").packGqa.value_or(false);
  opts.pagedKv = runPagedKv;
  opts.pageSize = runPagedKv ? runPageSize.getValue() : 0;
  opts.varlen = runVarlen;
  int64_t splits = runSplitKv ? (runKvSplits > 0 ? runKvSplits.getValue() : 4) : 1;
  auto t0 = std::chrono::steady_clock::now();
  auto kernel = CpuKernel::compile(text, bufferName, opts);
  if (!kernel) {
    fmt::print(stderr, "{}\n", llvm::toString(kernel.takeError()));
    return 1;
  }
  double compileMs = msSince(t0);
  std::string name = (*kernel)->name().str();
  RunInputs in = drawInputs(reference, (*kernel)->headDim(), (*kernel)->elementType());
  const reference::Problem &p = in.p;
  size_t es = reference::elementSize(in.et);
  std::vector<char> ob(p.B * p.H * p.M * p.D * es, 0x7f);
  std::vector<float> lseb(p.B * p.H * p.M, NAN);
  BlockCounts counts;
  auto qv = HostView::contiguous(in.q.data(), {p.B, p.H, p.M, p.D});
  auto kv = HostView::contiguous(in.k.data(), {p.B, p.Hkv, p.N, p.D});
  auto vv = HostView::contiguous(in.v.data(), {p.B, p.Hkv, p.N, p.D});
  auto ov = HostView::contiguous(ob.data(), {p.B, p.H, p.M, p.D});
  auto lv = HostView::contiguous(lseb.data(), {p.B, p.H, p.M, 0}, 3);
  PagedKV paged;
  if (in.paged) {
    std::array<int64_t, 3> strides = pagedStrides(p, in.paged->pageSize);
    for (auto [view, cache] : {std::pair{&kv, &in.paged->kCache}, {&vv, &in.paged->vCache}}) {
      view->data = cache->data();
      view->sizes = {in.paged->pages, p.Hkv, in.paged->pageSize, p.D};
      view->strides = {strides[0], strides[1], strides[2], 1};
    }
    paged.pageTable = in.paged->table.data();
    paged.pagesPerSequence = paged.tableStride = in.paged->perSequence;
    paged.kvLengths = in.paged->lengths32.data();
  }
  // Varlen: the packed tensors ([tokens, heads, D], LSE [H, tokens]) and their offsets.
  Varlen varlen;
  std::vector<char> oPacked;
  std::vector<float> lsePacked;
  if (in.packed) {
    int64_t tokensQ = in.packed->cuQ.back(), tokensK = in.packed->cuK.back();
    oPacked.assign(size_t(tokensQ * p.H * p.D) * es, char(0xff));
    lsePacked.assign(size_t(p.H * tokensQ), NAN);
    qv = Varlen::tokens(in.packed->q.data(), p.B, p.H, p.M, p.D);
    if (!in.paged) { // paged, K and V are the caches and the key offsets are not read
      kv = Varlen::tokens(in.packed->k.data(), p.B, p.Hkv, p.N, p.D);
      vv = Varlen::tokens(in.packed->v.data(), p.B, p.Hkv, p.N, p.D);
    }
    ov = Varlen::tokens(oPacked.data(), p.B, p.H, p.M, p.D);
    lv = Varlen::lse(lsePacked.data(), p.B, p.H, p.M, tokensQ);
    varlen = Varlen::of(in.packed->cuQ.data(), in.paged ? nullptr : in.packed->cuK.data(),
                        tokensQ, tokensK);
  }
  t0 = std::chrono::steady_clock::now();
  if (llvm::Error e = (*kernel)->run(qv, kv, vv, ov, lv, &counts, splits,
                                     in.paged ? &paged : nullptr, in.packed ? &varlen : nullptr)) {
    fmt::print(stderr, "error: {}\n", llvm::toString(std::move(e)));
    return 1;
  }
  double runMs = msSince(t0);
  if (in.packed)
    in.unpack(oPacked, lsePacked, ob, lseb);

  launch_abi::Grid grid = launch_abi::programGrid(p.B, p.H, p.Hkv, p.M, br, opts.packGqa);
  int64_t programs = grid.batch * grid.heads * grid.rowBlocks;
  int64_t allBlocks = programs * ((p.N + bc - 1) / bc);
  fmt::print("kernel       {} ({}), {} on the CPU reference backend\n", name, bufferName,
             dtype.getValue());
  fmt::print("shape        B={} H={} Hkv={} M={} N={} D={}  Br={} Bc={}\n", p.B, p.H, p.Hkv, p.M,
             p.N, p.D, br, bc);
  if (runSplitKv)
    fmt::print("split-KV     {} key splits per row block{}\n", splits,
               opts.packGqa ? ", GQA-packed" : "");
  if (in.paged)
    fmt::print("paged KV     {} pages of {} rows, lengths {}\n", in.paged->pages,
               in.paged->pageSize, fmt::join(in.paged->lengths, ", "));
  if (in.packed)
    fmt::print("varlen       query lengths {}{}, packed\n", fmt::join(in.packed->queryLengths, ", "),
               in.paged ? " (keys: the paged lengths)"
                        : ", key lengths " + fmt::format("{}", fmt::join(in.packed->keyLengths,
                                                                          ", ")));
  fmt::print("compile      {:.1f} ms   run {:.1f} ms\n", compileMs, runMs);
  fmt::print("blocks       {} visited of {} ({} full, {} partial)\n", counts.visited(), allBlocks,
             counts.full, counts.partial);
  // The output is rounded to the storage type once; everything before is f32.
  double bound = in.et == ElementType::F32 ? 1e-5 : in.et == ElementType::BF16 ? 8e-3 : 1e-3;
  return checkAgainstReference(reference, in, ob, lseb, bound);
}

/// A device buffer holding `host`'s bytes.
static llvm::Expected<cuda::DeviceBuffer> uploadToDevice(const std::vector<char> &host) {
  auto buffer = cuda::DeviceBuffer::allocate(host.size());
  if (!buffer)
    return buffer.takeError();
  if (llvm::Error e = buffer->upload(host.data(), host.size()))
    return std::move(e);
  return std::move(*buffer);
}

/// dQ, dK and dV of a backward run against the float64 backward of the same inputs, O and LSE.
struct GradientErrors {
  double dq = 0, dk = 0, dv = 0, bound = 0;
  bool ok() const { return dq <= bound && dk <= bound && dv <= bound; } // NaN fails
};
static llvm::Expected<GradientErrors>
checkGradients(const std::string &text, const std::string &bufferName, const RunInputs &in,
               const std::vector<double> &dOSeen, const std::vector<char> &o,
               const std::vector<float> &lse, const std::vector<char> &dq,
               const std::vector<char> &dk, const std::vector<char> &dv) {
  ReferenceOptions referenceOptions;
  referenceOptions.headDim = runHeadDim;
  auto reference = BackwardReferenceKernel::compile(text, bufferName, referenceOptions);
  if (!reference)
    return reference.takeError();
  const reference::Problem &p = in.p;
  size_t nq = p.B * p.H * p.M * p.D, nk = p.B * p.Hkv * p.N * p.D;
  auto qShape = std::array<int64_t, 4>{p.B, p.H, p.M, p.D};
  auto kShape = std::array<int64_t, 4>{p.B, p.Hkv, p.N, p.D};
  // The float64 backward sees exactly the storage-typed inputs and the forward's O and LSE.
  std::vector<double> q = in.qSeen, k = in.kSeen, v = in.vSeen, dO = dOSeen;
  std::vector<double> oSeen = reference::loadAs(in.et, o.data(), nq);
  std::vector<double> lseSeen(lse.begin(), lse.end());
  std::vector<double> refDq(nq), refDk(nk), refDv(nk);
  if (llvm::Error e = (*reference)->run(
          HostView::contiguous(q.data(), qShape), HostView::contiguous(k.data(), kShape),
          HostView::contiguous(v.data(), kShape), HostView::contiguous(oSeen.data(), qShape),
          HostView::contiguous(dO.data(), qShape),
          HostView::contiguous(lseSeen.data(), {p.B, p.H, p.M, 0}, 3),
          HostView::contiguous(refDq.data(), qShape), HostView::contiguous(refDk.data(), kShape),
          HostView::contiguous(refDv.data(), kShape)))
    return std::move(e);
  GradientErrors errors;
  errors.dq = relError(reference::loadAs(in.et, dq.data(), nq), refDq);
  errors.dk = relError(reference::loadAs(in.et, dk.data(), nk), refDk);
  errors.dv = relError(reference::loadAs(in.et, dv.data(), nk), refDv);
  // Each gradient is rounded to the storage type once; everything before is f32.
  errors.bound = in.et == ElementType::F32 ? 1e-5 : in.et == ElementType::BF16 ? 8e-3 : 1e-3;
  return errors;
}

/// A random dO for `in`'s problem: its storage-typed bytes, and the values the reference sees.
static std::vector<double> drawOutputGradient(const RunInputs &in, std::vector<char> &dO) {
  const reference::Problem &p = in.p;
  size_t nq = p.B * p.H * p.M * p.D;
  std::mt19937 rng(seed + 1);
  dO.assign(nq * reference::elementSize(in.et), 0);
  return reference::storeAs(in.et, reference::randomNormal(nq, rng), dO.data());
}

/// A 64-bit digest of each gradient's bytes: two runs of a deterministic backward print the same.
static void printGradientDigests(const std::vector<char> &dq, const std::vector<char> &dk,
                                 const std::vector<char> &dv) {
  auto digest = [](const std::vector<char> &bytes) {
    return llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(
        reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()));
  };
  fmt::print("digest       dQ {:016x}   dK {:016x}   dV {:016x}\n", digest(dq), digest(dk),
             digest(dv));
}

static void printGradientErrors(const GradientErrors &e) {
  fmt::print("error        dQ {:.2e}   dK {:.2e}   dV {:.2e}   (bound {:.0e}) vs float64\n", e.dq,
             e.dk, e.dv, e.bound);
  fmt::print("result       {}\n", e.ok() ? "PASS" : "FAIL");
}

/// The forward, then the derived backward, both tiled on the CPU reference backend, on random
/// inputs (dO too); dQ, dK and dV against the float64 backward of the same inputs, O and LSE.
static int runBackwardOnCpu(const std::string &text, const std::string &bufferName,
                            const ReferenceKernel &forwardReference) {
  CpuBackwardOptions opts;
  opts.elementType = dtype;
  opts.headDim = runHeadDim;
  // Of the configuration the CPU backend takes the block sizes and the row order.
  TileConfig tiles = cantFail(runTileConfig());
  const int64_t br = tiles.blockM.value_or(blockM), bc = tiles.blockN.value_or(blockN);
  opts.blockM = br;
  opts.blockN = bc;
  opts.deterministic = runDeterministic;
  opts.instrument = true;
  opts.descendingRows = tiles.longestFirst();
  auto t0 = std::chrono::steady_clock::now();
  auto kernel = CpuBackwardKernel::compile(text, bufferName, opts);
  if (!kernel) {
    fmt::print(stderr, "{}\n", llvm::toString(kernel.takeError()));
    return 1;
  }
  double compileMs = msSince(t0);
  RunInputs in = drawInputs(forwardReference, (*kernel)->headDim(), (*kernel)->elementType());
  const reference::Problem &p = in.p;
  size_t es = reference::elementSize(in.et);
  size_t nq = p.B * p.H * p.M * p.D, nk = p.B * p.Hkv * p.N * p.D;
  std::vector<char> dO;
  std::vector<double> dOSeen = drawOutputGradient(in, dO);
  // Poison: 0xFF bytes are NaN in every storage type, so an element never written fails.
  std::vector<char> o(nq * es, static_cast<char>(0xff)), dq(nq * es, static_cast<char>(0xff)),
      dk(nk * es, static_cast<char>(0xff)), dv(nk * es, static_cast<char>(0xff));
  std::vector<float> lse(p.B * p.H * p.M, NAN);
  auto qShape = std::array<int64_t, 4>{p.B, p.H, p.M, p.D};
  auto kShape = std::array<int64_t, 4>{p.B, p.Hkv, p.N, p.D};
  auto lv = HostView::contiguous(lse.data(), {p.B, p.H, p.M, 0}, 3);
  t0 = std::chrono::steady_clock::now();
  if (llvm::Error e = (*kernel)->forward(
          HostView::contiguous(in.q.data(), qShape), HostView::contiguous(in.k.data(), kShape),
          HostView::contiguous(in.v.data(), kShape), HostView::contiguous(o.data(), qShape), lv)) {
    fmt::print(stderr, "error: {}\n", llvm::toString(std::move(e)));
    return 1;
  }
  double forwardMs = msSince(t0);
  BlockCounts counts;
  t0 = std::chrono::steady_clock::now();
  if (llvm::Error e = (*kernel)->backward(
          HostView::contiguous(in.q.data(), qShape), HostView::contiguous(in.k.data(), kShape),
          HostView::contiguous(in.v.data(), kShape), HostView::contiguous(o.data(), qShape),
          HostView::contiguous(dO.data(), qShape), lv, HostView::contiguous(dq.data(), qShape),
          HostView::contiguous(dk.data(), kShape), HostView::contiguous(dv.data(), kShape),
          &counts)) {
    fmt::print(stderr, "error: {}\n", llvm::toString(std::move(e)));
    return 1;
  }
  double backwardMs = msSince(t0);
  auto errors = checkGradients(text, bufferName, in, dOSeen, o, lse, dq, dk, dv);
  if (!errors) {
    fmt::print(stderr, "{}\n", llvm::toString(errors.takeError()));
    return 1;
  }

  int64_t rowBlocks = (p.M + br - 1) / br, colBlocks = (p.N + bc - 1) / bc;
  int64_t allBlocks = p.B * p.H * rowBlocks * colBlocks * (runDeterministic ? 2 : 1);
  fmt::print("kernel       {} ({}), {}, forward and derived backward on the CPU reference "
             "backend\n",
             (*kernel)->name().str(), bufferName, dtype.getValue());
  fmt::print("shape        B={} H={} Hkv={} M={} N={} D={}  Br={} Bc={}  dQ {}\n", p.B, p.H,
             p.Hkv, p.M, p.N, p.D, br, bc,
             runDeterministic ? "deterministic (ordered key loop)" : "atomic");
  fmt::print("compile      {:.1f} ms   forward {:.1f} ms   backward {:.1f} ms\n", compileMs,
             forwardMs, backwardMs);
  fmt::print("blocks       backward {} visited of {} ({} full, {} partial)\n", counts.visited(),
             allBlocks, counts.full, counts.partial);
  printGradientDigests(dq, dk, dv);
  printGradientErrors(*errors);
  return errors->ok() ? 0 : 1;
}

/// The forward on the GPU (its default configuration), then the derived backward's three
/// kernels (compileBackwardToPTX, CudaBackwardKernel) on its O and LSE; dQ, dK and dV against
/// the float64 backward of the same inputs, O and LSE.
static int runBackwardOnGpu(const std::string &text, const std::string &bufferName,
                            const ReferenceKernel &forwardReference) {
  auto fail = [](llvm::Error e) {
    fmt::print(stderr, "error: {}\n", llvm::toString(std::move(e)));
    return 1;
  };
  auto gpu = tools::currentGpu();
  if (!gpu)
    return fail(gpu.takeError());
  const cuda::DeviceInfo *dev = &gpu->device;
  PtxCompileOptions opts;
  opts.elementType = dtype;
  opts.headDim = runHeadDim;
  opts.chip = gpu->chip;
  // The forward (O and LSE) takes --config as given and --row-order; --block-m / --block-n are
  // the backward's (Br = Bc), which takes its own fields of the whole configuration.
  TileConfig tiles = cantFail(runTileConfig());
  opts.tiles = cantFail(TileConfig::parse(runConfig));
  opts.tiles.rowOrder = tiles.rowOrder;
  auto t0 = std::chrono::steady_clock::now();
  auto forwardPtx = compileToPTX(text, bufferName, opts);
  if (!forwardPtx) {
    fmt::print(stderr, "{}\n", llvm::toString(forwardPtx.takeError()));
    return 1;
  }
  PtxCompileOptions backwardOpts = opts;
  backwardOpts.tiles = TileConfig();
  backwardOpts.tiles.blockM = tiles.blockM;
  backwardOpts.tiles.blockN = tiles.blockN;
  backwardOpts.tiles.rowsPerWarp = tiles.rowsPerWarp;
  backwardOpts.tiles.mma = tiles.mma;
  // The dQ grid takes the order's direction: grouped and paired order the forward's programs.
  if (tiles.rowOrder)
    backwardOpts.tiles.rowOrder = tiles.longestFirst() ? RowOrder::Descending : RowOrder::Ascending;
  backwardOpts.deterministic = runDeterministic;
  auto backwardPtx = compileBackwardToPTX(text, bufferName, backwardOpts);
  if (!backwardPtx) {
    fmt::print(stderr, "{}\n", llvm::toString(backwardPtx.takeError()));
    return 1;
  }
  double compileMs = msSince(t0);
  auto metadata = cuda::KernelMetadata::parse(forwardPtx->metadataJson(), bufferName);
  if (!metadata)
    return fail(metadata.takeError());
  auto forward = cuda::CudaKernel::load(forwardPtx->ptx, *metadata);
  if (!forward)
    return fail(forward.takeError());
  std::vector<cuda::KernelMetadata> phases;
  for (const CompiledKernel &phase : *backwardPtx) {
    auto m = cuda::KernelMetadata::parse(phase.metadataJson(), bufferName);
    if (!m)
      return fail(m.takeError());
    phases.push_back(std::move(*m));
  }
  auto backward = cuda::CudaBackwardKernel::load(backwardPtx->front().ptx, std::move(phases));
  if (!backward)
    return fail(backward.takeError());

  RunInputs in = drawInputs(forwardReference, forwardPtx->headDim, metadata->dtype);
  const reference::Problem &p = in.p;
  size_t es = reference::elementSize(in.et);
  size_t nq = p.B * p.H * p.M * p.D, nk = p.B * p.Hkv * p.N * p.D, nl = p.B * p.H * p.M;
  std::vector<char> dO;
  std::vector<double> dOSeen = drawOutputGradient(in, dO);
  // Outputs poisoned (0xFF bytes are NaN in every storage type): unwritten elements fail.
  auto poisoned = [](size_t bytes) -> llvm::Expected<cuda::DeviceBuffer> {
    auto buffer = cuda::DeviceBuffer::allocate(bytes);
    if (!buffer)
      return buffer.takeError();
    if (llvm::Error e = buffer->fill(0xFF))
      return std::move(e);
    return std::move(*buffer);
  };
  auto q = uploadToDevice(in.q), k = uploadToDevice(in.k), v = uploadToDevice(in.v),
       dOd = uploadToDevice(dO);
  auto o = poisoned(nq * es), lse = poisoned(nl * 4), dq = poisoned(nq * es),
       dk = poisoned(nk * es), dv = poisoned(nk * es);
  for (auto *b : {&q, &k, &v, &dOd, &o, &lse, &dq, &dk, &dv})
    if (!*b)
      return fail(b->takeError());
  auto stream = cuda::Stream::create();
  if (!stream)
    return fail(stream.takeError());
  cuda::AttentionShape shape{p.B, p.H, p.Hkv, p.M, p.N, p.D};
  if (llvm::Error e = (*forward)->launch(
          stream->handle(),
          {q->address(), k->address(), v->address(), o->address(), lse->address()}, shape,
          cuda::AttentionStrides::contiguous(shape)))
    return fail(std::move(e));
  if (llvm::Error e = stream->synchronize())
    return fail(std::move(e));
  t0 = std::chrono::steady_clock::now();
  cuda::BackwardBuffers buffers{q->address(),  k->address(),   v->address(),
                                o->address(),  dOd->address(), lse->address(),
                                dq->address(), dk->address(),  dv->address()};
  if (llvm::Error e = (*backward)->launch(stream->handle(), buffers, shape,
                                          cuda::BackwardStrides::contiguous(shape)))
    return fail(std::move(e));
  if (llvm::Error e = stream->synchronize())
    return fail(std::move(e));
  double backwardMs = msSince(t0);
  std::vector<char> ob(nq * es), dqb(nq * es), dkb(nk * es), dvb(nk * es);
  std::vector<float> lseb(nl);
  for (auto [buffer, host, bytes] :
       {std::tuple{&*o, static_cast<void *>(ob.data()), ob.size()},
        std::tuple{&*lse, static_cast<void *>(lseb.data()), nl * 4},
        std::tuple{&*dq, static_cast<void *>(dqb.data()), dqb.size()},
        std::tuple{&*dk, static_cast<void *>(dkb.data()), dkb.size()},
        std::tuple{&*dv, static_cast<void *>(dvb.data()), dvb.size()}})
    if (llvm::Error e = buffer->download(host, bytes))
      return fail(std::move(e));
  auto errors = checkGradients(text, bufferName, in, dOSeen, ob, lseb, dqb, dkb, dvb);
  if (!errors)
    return fail(errors.takeError());

  const CompiledKernel &first = backwardPtx->front();
  fmt::print("kernel       {} ({}), {} on {} ({}): forward, then the derived backward\n",
             forwardPtx->name, bufferName, dtype.getValue(), dev->name, opts.chip);
  fmt::print("shape        B={} H={} Hkv={} M={} N={} D={}  backward Br={} Bc={}  dQ {}\n", p.B,
             p.H, p.Hkv, p.M, p.N, p.D, first.blockM, first.blockN,
             first.deterministic ? "deterministic (ordered key loop)" : "atomic");
  for (auto [i, phase] : llvm::enumerate(*backwardPtx))
    fmt::print("phase        {:<16} {} threads, {} shared bytes, {} registers, {} spill bytes\n",
               phase.backwardPhase, phase.threads, phase.sharedBytes,
               (*backward)->registersPerThread(i), (*backward)->localBytesPerThread(i));
  fmt::print("compile      {:.1f} ms (forward and backward)   backward {:.3f} ms (first launch)\n",
             compileMs, backwardMs);
  printGradientDigests(dqb, dkb, dvb);
  printGradientErrors(*errors);
  return errors->ok() ? 0 : 1;
}

static int runOnGpu(const std::string &text, const std::string &bufferName,
                    const ReferenceKernel &reference) {
  auto fail = [](llvm::Error e) {
    fmt::print(stderr, "error: {}\n", llvm::toString(std::move(e)));
    return 1;
  };
  auto gpu = tools::currentGpu();
  if (!gpu)
    return fail(gpu.takeError());
  const cuda::DeviceInfo *dev = &gpu->device;
  PtxCompileOptions opts; // unset fields: the tuned defaults for the kernel's head dimension
  opts.elementType = dtype;
  opts.headDim = runHeadDim;
  opts.tiles = cantFail(runTileConfig());
  opts.splitKv = runSplitKv;
  opts.pagedKv = runPagedKv;
  opts.pageSize = runPagedKv ? runPageSize.getValue() : 0;
  opts.varlen = runVarlen;
  opts.chip = gpu->chip;
  // The defaults for the lengths it runs (as the runtime picks them from a spec's seqLen).
  opts.shortSequences = isShortSequence(std::max(optM.getValue(), optN.getValue()));
  auto t0 = std::chrono::steady_clock::now();
  auto compiled = compileToPTX(text, bufferName, opts);
  if (!compiled) {
    fmt::print(stderr, "{}\n", llvm::toString(compiled.takeError()));
    return 1;
  }
  auto metadata = cuda::KernelMetadata::parse(compiled->metadataJson(), bufferName);
  if (!metadata)
    return fail(metadata.takeError());
  auto kernel = cuda::CudaKernel::load(compiled->ptx, *metadata);
  if (!kernel)
    return fail(kernel.takeError());
  double compileMs = msSince(t0);
  const std::string &name = compiled->name;

  RunInputs in = drawInputs(reference, compiled->headDim, metadata->dtype);
  const reference::Problem &p = in.p;
  size_t es = reference::elementSize(in.et);
  auto upload32 = [&](const std::vector<int32_t> &host) {
    return uploadToDevice(std::vector<char>(reinterpret_cast<const char *>(host.data()),
                                    reinterpret_cast<const char *>(host.data() + host.size())));
  };
  // Paged: K and V are the caches; varlen: every tensor is packed.
  auto q = uploadToDevice(in.packed ? in.packed->q : in.q),
       k = uploadToDevice(in.paged ? in.paged->kCache : in.packed ? in.packed->k : in.k),
       v = uploadToDevice(in.paged ? in.paged->vCache : in.packed ? in.packed->v : in.v);
  if (!q)
    return fail(q.takeError());
  if (!k)
    return fail(k.takeError());
  if (!v)
    return fail(v.takeError());
  int64_t tokensQ = in.packed ? in.packed->cuQ.back() : 0;
  size_t oBytes = (in.packed ? tokensQ : p.B * p.M) * p.H * p.D * es;
  size_t lseCount = (in.packed ? tokensQ : p.B * p.M) * p.H;
  auto o = cuda::DeviceBuffer::allocate(oBytes);
  if (!o)
    return fail(o.takeError());
  auto lse = cuda::DeviceBuffer::allocate(lseCount * sizeof(float));
  if (!lse)
    return fail(lse.takeError());
  // Poison the outputs (0xFF bytes are NaN in every storage type): unwritten elements fail.
  if (llvm::Error e = o->fill(0xFF))
    return fail(std::move(e));
  if (llvm::Error e = lse->fill(0xFF))
    return fail(std::move(e));
  auto stream = cuda::Stream::create();
  if (!stream)
    return fail(stream.takeError());
  cuda::AttentionShape shape{p.B, p.H, p.Hkv, p.M, p.N, p.D};
  cuda::AttentionBuffers buffers{q->address(), k->address(), v->address(), o->address(),
                                 lse->address()};
  cuda::AttentionStrides strides = cuda::AttentionStrides::contiguous(shape);
  PagedKV paged;
  std::optional<cuda::DeviceBuffer> table, lengths;
  if (in.paged) {
    std::array<int64_t, 3> cache = pagedStrides(p, in.paged->pageSize);
    strides.kB = strides.vB = cache[0];
    strides.kH = strides.vH = cache[1];
    strides.kN = strides.vN = cache[2];
    auto t = upload32(in.paged->table), l = upload32(in.paged->lengths32);
    if (!t)
      return fail(t.takeError());
    if (!l)
      return fail(l.takeError());
    table = std::move(*t);
    lengths = std::move(*l);
    paged.pageTable = reinterpret_cast<const int32_t *>(table->address());
    paged.kvLengths = reinterpret_cast<const int32_t *>(lengths->address());
    paged.pagesPerSequence = paged.tableStride = in.paged->perSequence;
    paged.pageSize = in.paged->pageSize;
    paged.pages = in.paged->pages;
  }
  Varlen varlen;
  std::optional<cuda::DeviceBuffer> cuQ, cuK;
  if (in.packed) {
    // THD: [tokens, heads, D], LSE [H, tokens]; the batch strides are not read.
    strides.qB = strides.oB = strides.lseB = 0;
    strides.qH = strides.oH = p.D;
    strides.qM = strides.oM = p.H * p.D;
    strides.lseH = tokensQ;
    if (!in.paged) { // paged, K and V are the caches (above)
      strides.kB = strides.vB = 0;
      strides.kH = strides.vH = p.D;
      strides.kN = strides.vN = p.Hkv * p.D;
    }
    auto cq = upload32(in.packed->cuQ), ck = upload32(in.packed->cuK);
    if (!cq)
      return fail(cq.takeError());
    if (!ck)
      return fail(ck.takeError());
    cuQ = std::move(*cq);
    cuK = std::move(*ck);
    // Paged, the key offsets are not read: none are passed.
    varlen = Varlen::of(reinterpret_cast<const int32_t *>(cuQ->address()),
                        in.paged ? nullptr : reinterpret_cast<const int32_t *>(cuK->address()),
                        tokensQ, in.packed->cuK.back());
  }
  t0 = std::chrono::steady_clock::now();
  if (llvm::Error e = (*kernel)->launch(stream->handle(), buffers, shape, strides, runKvSplits,
                                        in.paged ? &paged : nullptr,
                                        in.packed ? &varlen : nullptr))
    return fail(std::move(e));
  if (llvm::Error e = stream->synchronize())
    return fail(std::move(e));
  double runMs = msSince(t0);
  std::vector<char> ob(oBytes);
  std::vector<float> lseb(lseCount);
  if (llvm::Error e = o->download(ob.data(), ob.size()))
    return fail(std::move(e));
  if (llvm::Error e = lse->download(lseb.data(), lseb.size() * sizeof(float)))
    return fail(std::move(e));
  if (in.packed) {
    std::vector<char> oPacked = std::move(ob);
    std::vector<float> lsePacked = std::move(lseb);
    in.unpack(oPacked, lsePacked, ob, lseb);
  }

  fmt::print("kernel       {} ({}), {} on {} ({})\n", name, bufferName, dtype.getValue(),
             dev->name, opts.chip);
  fmt::print("shape        B={} H={} Hkv={} M={} N={} D={}  Br={} Bc={}\n", p.B, p.H, p.Hkv, p.M,
             p.N, p.D, compiled->blockM, compiled->blockN);
  if (runSplitKv)
    fmt::print("split-KV     {} key splits per row block ({}), {}\n",
               runKvSplits > 0 ? runKvSplits.getValue() : (*kernel)->splitCountFor(shape),
               runKvSplits > 0 ? "--kv-splits" : "the launcher's choice", compiled->tiles.print());
  if (in.paged)
    fmt::print("paged KV     {} pages of {} rows, lengths {}\n", in.paged->pages,
               in.paged->pageSize, fmt::join(in.paged->lengths, ", "));
  if (in.packed)
    fmt::print("varlen       query lengths {}{}, packed\n", fmt::join(in.packed->queryLengths, ", "),
               in.paged ? " (keys: the paged lengths)"
                        : ", key lengths " + fmt::format("{}", fmt::join(in.packed->keyLengths,
                                                                          ", ")));
  fmt::print("compile      {:.1f} ms (PTX + driver JIT)   run {:.3f} ms\n", compileMs, runMs);
  // P is rounded to the storage type for the P x V MMA, and O once more on the store.
  return checkAgainstReference(reference, in, ob, lseb, in.et == ElementType::BF16 ? 1e-2 : 3e-3);
}

/// Applies --config's KEY=VALUE list to the compile options: D / head_dim and dtype specialize
/// the kernel, the rest is a TileConfig (TileConfig::parse) over the options' configuration.
static bool applyConfig(llvm::StringRef config, PtxCompileOptions &opts) {
  llvm::SmallVector<llvm::StringRef> items, tileItems;
  config.split(items, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef item : items) {
    auto [key, value] = item.split('=');
    key = key.trim();
    value = value.trim();
    if (key == "dtype") {
      opts.elementType = value.str();
    } else if (key == "D" || key == "head_dim" || key == "head-dim") {
      if (value.getAsInteger(10, opts.headDim)) {
        fmt::print(stderr, "error: --config: {} needs an integer, not '{}'\n", key.str(),
                   value.str());
        return false;
      }
    } else {
      tileItems.push_back(item);
    }
  }
  auto tiles = TileConfig::parse(llvm::join(tileItems, ","));
  if (!tiles) {
    fmt::print(stderr, "error: --config: {}\n", llvm::toString(tiles.takeError()));
    return false;
  }
  opts.tiles = opts.tiles.overriddenBy(*tiles);
  return true;
}

/// Writes `bytes` to `path` ('-': stdout); false with a message on failure.
static bool writeOutput(llvm::StringRef path, llvm::StringRef bytes, bool text) {
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, text ? llvm::sys::fs::OF_Text : llvm::sys::fs::OF_None);
  if (ec) {
    fmt::print(stderr, "error: cannot write {}: {}\n", path.str(), ec.message());
    return false;
  }
  out.os() << bytes;
  out.os().flush();
  if (out.os().has_error()) {
    fmt::print(stderr, "error: cannot write {}: {}\n", path.str(), out.os().error().message());
    out.os().clear_error();
    return false;
  }
  out.keep();
  return true;
}

/// Reads --kernel NAME or a DSL file into text/bufferName; an exit code on failure.
static int readKernel(llvm::StringRef kernel, llvm::StringRef file, std::string &text,
                      std::string &bufferName) {
  if (!kernel.empty()) {
    const kernels::KernelSource *k = kernels::find(kernel);
    if (!k) {
      fmt::print(stderr, "error: no bundled kernel named '{}' (see `tilefuse list`)\n",
                 kernel.str());
      return 2;
    }
    text = k->text;
    bufferName = k->fileName;
    return 0;
  }
  if (!file.empty()) {
    auto buf = llvm::MemoryBuffer::getFile(file);
    if (!buf) {
      fmt::print(stderr, "error: cannot read {}: {}\n", file.str(), buf.getError().message());
      return 2;
    }
    text = (*buf)->getBuffer().str();
    bufferName = file.str();
    return 0;
  }
  fmt::print(stderr, "error: give a DSL file or --kernel NAME (tilefuse compile --help)\n");
  return 2;
}

static int compileMain() {
  std::string text, bufferName;
  if (int rc = readKernel(cKernel, cInput, text, bufferName))
    return rc;
  if (cEmit != "ptx" && cEmit != "cubin" && cEmit != "header" && cEmit != "reference" &&
      cEmit != "tiled") {
    fmt::print(stderr, "error: --emit must be ptx, cubin, header, reference or tiled, not '{}'\n",
               cEmit.getValue());
    return 2;
  }
  if (cBackward && (cSplitKv || cPagedKv || cVarlen)) {
    fmt::print(stderr, "error: --backward runs on contiguous tensors (no --split-kv, "
                       "--paged-kv or --varlen)\n");
    return 2;
  }
  if (cEmit == "tiled" && !cBackward) {
    fmt::print(stderr, "error: --emit tiled is the tiled form of the derived backward: give "
                       "--backward\n");
    return 2;
  }
  if (cDeterministic && !cBackward) {
    fmt::print(stderr, "error: --deterministic is an option of --backward\n");
    return 2;
  }
  if (cBackward && tools::tunedConfigRequested()) {
    fmt::print(stderr, "error: --tuned applies the tuning database's forward configurations; "
                       "the backward is not tuned (give --config Br=..,Bc=.. or leave the "
                       "defaults)\n");
    return 2;
  }
  if (cEmit == "tiled") {
    // The tiled form of the derived backward (levels 2-4), as MLIR text.
    CpuBackwardOptions bo;
    bo.blockM = cBlockM ? cBlockM.getValue() : 64;
    bo.blockN = cBlockN ? cBlockN.getValue() : 64;
    bo.deterministic = cDeterministic;
    bo.elementType = cDtype;
    bo.headDim = cHeadDim;
    bo.params.assign(cParams.begin(), cParams.end());
    auto tiled = tiledBackwardIR(text, bufferName, bo);
    if (!tiled) {
      fmt::print(stderr, "{}\n", llvm::toString(tiled.takeError()));
      return 1;
    }
    return writeOutput(cOutput, *tiled, /*text=*/true) ? 0 : 1;
  }
  if (cEmit == "reference") {
    // The kernel's float64 reference as an object for the baseline CPU, specialized as the
    // kernel (head dimension, parameters), for a shared library that checks the kernel where
    // there is no compiler: `cc -shared -o NAME.reference.so OUT -lm`.
    ReferenceOptions ro;
    ro.headDim = cHeadDim;
    ro.params.assign(cParams.begin(), cParams.end());
    auto object = cBackward ? compileBackwardReferenceObject(text, bufferName, ro)
                            : compileReferenceObject(text, bufferName, ro);
    if (!object) {
      fmt::print(stderr, "{}\n", llvm::toString(object.takeError()));
      return 1;
    }
    return writeOutput(cOutput, *object, /*text=*/false) ? 0 : 1;
  }
  // (--emit reference: the float64 reference is the same function, split or not. --emit header
  // of a split kernel: its launcher takes the workspace and the split count.)
  if (cEmit == "header" && !cName.empty() && !isValidHeaderSymbol(cName)) {
    fmt::print(stderr, "error: --name '{}' is not a C identifier starting with a letter\n",
               cName.getValue());
    return 2;
  }
  PtxCompileOptions opts;
  opts.headDim = cHeadDim;
  opts.elementType = cDtype;
  opts.params.assign(cParams.begin(), cParams.end());
  opts.chip = cArch;
  opts.features = cPtxVersion;
  opts.splitKv = cSplitKv;
  opts.pagedKv = cPagedKv;
  opts.pageSize = cPageSize;
  opts.varlen = cVarlen;
  if (cSeqLen < 0) {
    fmt::print(stderr, "error: --seq-len must be positive (or 0: any length), not {}\n",
               cSeqLen.getValue());
    return 1;
  }
  opts.shortSequences = isShortSequence(cSeqLen);
  // The single options first: TileConfig's fields, the choices read by TileConfig::set under
  // the option's own name, so their values are checked and named like --config's.
  if (cBlockM)
    opts.tiles.blockM = cBlockM;
  if (cBlockN)
    opts.tiles.blockN = cBlockN;
  if (cRowsPerWarp)
    opts.tiles.rowsPerWarp = cRowsPerWarp;
  for (cl::opt<std::string> *choice : {&cMma, &cQOperand, &cCopyIssue})
    if (!choice->empty())
      if (llvm::Error error = opts.tiles.set(choice->ArgStr, *choice)) {
        fmt::print(stderr, "error: {}\n", llvm::toString(std::move(error)));
        return 2;
      }
  if (!applyConfig(cConfig, opts))
    return 2;
  // --tuned: the tuning database's configuration for this kernel, GPU and sequence bucket
  // (tools/tilefuse/TuneCommand.cpp); explicit settings above still win.
  if (int rc = tools::applyTunedConfig(text, bufferName, opts))
    return rc;
  // TILEFUSE_DUMP_IR=<dir>: the IR of every stage, as the runtime's cache dumps it.
  if (std::optional<std::string> dump = llvm::sys::Process::GetEnv("TILEFUSE_DUMP_IR");
      dump && !dump->empty())
    opts.dumpIRDirectory =
        KernelCache::dumpDirectory(*dump, bufferName, KernelCache::computeKey(text, opts));

  // ptxas first: a missing toolkit is reported before any compiling.
  std::string ptxas;
  if (cEmit != "ptx") {
    PtxasSearch search = PtxasSearch::fromEnvironment();
    if (!cPtxas.empty())
      search.explicitPath = cPtxas;
    auto found = findPtxas(search);
    if (!found) {
      fmt::print(stderr, "error: {}\n", llvm::toString(found.takeError()));
      return 1;
    }
    ptxas = *found;
  }

  // The backward: its three phases in one module; the sidecar lists their metadata in launch
  // order.
  opts.deterministic = cDeterministic;
  llvm::Expected<std::vector<CompiledKernel>> built = std::vector<CompiledKernel>{};
  if (cBackward) {
    built = compileBackwardToPTX(text, bufferName, opts);
  } else if (auto one = compileToPTX(text, bufferName, opts)) {
    built->push_back(std::move(*one));
  } else {
    built = one.takeError();
  }
  if (!built) {
    fmt::print(stderr, "{}\n", llvm::toString(built.takeError()));
    return 1;
  }
  const CompiledKernel *compiled = &built->front();

  std::string cubin;
  if (cEmit != "ptx") {
    std::string log;
    auto assembled = assembleCubin(ptxas, compiled->ptx, opts.chip, cPtxasOptions, &log);
    if (!assembled) {
      fmt::print(stderr, "error: {}\n", llvm::toString(assembled.takeError()));
      return 1;
    }
    if (!log.empty()) // warnings, or what -Xptxas=-v asked for
      fmt::print(stderr, "{}\n", log);
    cubin = std::move(*assembled);
  }

  if (cEmit == "header") {
    AotHeaderOptions ho;
    ho.symbol = cName;
    ho.chip = opts.chip;
    ho.sourceName = bufferName;
    std::string version = ptxasVersion(ptxas);
    ho.assembler = "ptxas" + (version.empty() ? std::string() : ", " + version);
    // The backward's header launches its three kernels, from the one module's cubin.
    auto header = cBackward ? emitBackwardAotHeader(*built, cubin, ho)
                            : emitAotHeader(*compiled, cubin, ho);
    if (!header) {
      fmt::print(stderr, "error: {}\n", llvm::toString(header.takeError()));
      return 1;
    }
    return writeOutput(cOutput, *header, /*text=*/true) ? 0 : 1;
  }

  bool isPtx = cEmit == "ptx";
  if (!writeOutput(cOutput, isPtx ? llvm::StringRef(compiled->ptx) : llvm::StringRef(cubin),
                   isPtx))
    return 1;
  if (cOutput != "-") {
    llvm::SmallString<256> json(cOutput.getValue());
    llvm::sys::path::replace_extension(json, "json");
    std::string metadata = compiled->metadataJson();
    if (cBackward) {
      std::vector<std::string> phases;
      for (const CompiledKernel &phase : *built)
        phases.push_back(phase.metadataJson());
      metadata = "[\n" + llvm::join(phases, ",\n") + "\n]";
    } else if (cSeqLen > 0) {
      // The length bucket it was compiled for, as the tuner's winners record theirs.
      auto sidecar = llvm::json::parse(metadata);
      if (!sidecar) {
        fmt::print(stderr, "error: {}\n", llvm::toString(sidecar.takeError()));
        return 1;
      }
      (*sidecar->getAsObject())["seq_bucket"] = jit::sequenceBucket(cSeqLen);
      metadata = llvm::formatv("{0:2}", *sidecar).str();
    }
    if (!writeOutput(json, metadata + "\n", /*text=*/true))
      return 1;
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// bench-compile
//===----------------------------------------------------------------------===//

using Clock = std::chrono::steady_clock;
static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

static int benchCompileMain() {
  std::string text, bufferName;
  if (int rc = readKernel(bKernel, "", text, bufferName))
    return rc;
  int repeat = std::max(1, bRepeat.getValue());
  PtxCompileOptions opts;
  opts.chip = bArch;
  auto fail = [](llvm::Error e) {
    fmt::print(stderr, "error: {}\n", llvm::toString(std::move(e)));
    return 1;
  };
  fmt::print("kernel {} ({}), {}, tiles {}; {}\n", bKernel.getValue(), bufferName, opts.chip,
             opts.tiles.empty() ? std::string("default") : opts.tiles.print(),
             compilerVersion().str());

  // 1. Cold compiles: the process's first (one-time LLVM/MLIR set-up included), then fresh
  //    compiles of the same kernel (new MLIRContext each, nothing reused).
  auto t0 = Clock::now();
  auto first = compileToPTX(text, bufferName, opts);
  double firstMs = msSince(t0);
  if (!first)
    return fail(first.takeError());
  std::vector<double> compiles;
  for (int i = 0; i < repeat; ++i) {
    t0 = Clock::now();
    auto k = compileToPTX(text, bufferName, opts);
    compiles.push_back(msSince(t0));
    if (!k)
      return fail(k.takeError());
  }
  fmt::print("cold compile to PTX     first in process {:8.2f} ms   median of {} {:8.2f} ms   "
             "({} bytes of PTX)\n",
             firstMs, repeat, median(compiles), first->ptx.size());

  // 2. Cache: a fresh directory; a miss (compile + write), then disk hits (memory cleared each
  //    time: read, checksum, parse), then memory hits (key hash + map lookup).
  llvm::SmallString<128> dir;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("tilefuse-bench-cache", dir)) {
    fmt::print(stderr, "error: cannot create a temporary directory: {}\n", ec.message());
    return 1;
  }
  CacheConfig config;
  config.directory = std::string(dir);
  KernelCache cache(config);
  t0 = Clock::now();
  auto miss = cache.getOrCompile(text, bufferName, opts);
  double missMs = msSince(t0);
  if (!miss)
    return fail(miss.takeError());
  std::vector<double> diskHits, memoryHits, keys;
  for (int i = 0; i < repeat; ++i) {
    cache.clearMemory();
    t0 = Clock::now();
    auto hit = cache.getOrCompile(text, bufferName, opts);
    diskHits.push_back(msSince(t0));
    if (!hit)
      return fail(hit.takeError());
    if (hit->source != CacheSource::Disk) {
      fmt::print(stderr, "error: expected a disk hit, got {}\n",
                 cacheSourceName(hit->source).str());
      return 1;
    }
  }
  for (int i = 0; i < 100 * repeat; ++i) {
    t0 = Clock::now();
    auto hit = cache.getOrCompile(text, bufferName, opts);
    memoryHits.push_back(msSince(t0));
    if (!hit)
      return fail(hit.takeError());
  }
  for (int i = 0; i < 100 * repeat; ++i) {
    t0 = Clock::now();
    std::string key = KernelCache::computeKey(text, opts);
    keys.push_back(msSince(t0));
  }
  fmt::print("cache miss              compile + write entry {:8.2f} ms\n", missMs);
  fmt::print("disk cache hit          median of {} {:8.3f} ms   (entry {} bytes)\n", repeat,
             median(diskHits), KernelCache::serializeEntry(miss->key, *miss->kernel).size());
  fmt::print("memory cache hit        median of {} {:8.4f} ms   (of which the SHA-256 key "
             "{:.4f} ms)\n",
             100 * repeat, median(memoryHits), median(keys));

  // 3. The public API's warm path (KernelSpec to a Kernel handle).
  {
    RuntimeOptions ro;
    ro.cacheDirectory = std::string(dir);
    Runtime runtime(ro);
    KernelSpec spec;
    spec.kernel = bKernel;
    spec.arch = bArch;
    std::shared_ptr<const Kernel> kernel;
    std::vector<double> gets;
    for (int i = 0; i < 100 * repeat + 1; ++i) {
      t0 = Clock::now();
      Status s = runtime.getKernel(spec, kernel);
      if (i)
        gets.push_back(msSince(t0));
      if (!s.ok()) {
        fmt::print(stderr, "error: {}\n", s.message());
        return 1;
      }
    }
    fmt::print("Runtime::getKernel hit  median of {} {:8.4f} ms\n", 100 * repeat, median(gets));
  }
  (void)llvm::sys::fs::remove_directories(dir);

  // 4. With a GPU: the driver's load (its JIT assembles the PTX; the driver's own compute cache
  //    may serve repeats).
  std::string why;
  if (!cudaAvailable(&why)) {
    fmt::print("driver load             skipped: {}\n", why);
    return 0;
  }
  auto metadata = cuda::KernelMetadata::parse(first->metadataJson(), bufferName);
  if (!metadata)
    return fail(metadata.takeError());
  std::vector<double> loads;
  for (int i = 0; i < repeat; ++i) {
    t0 = Clock::now();
    auto loaded = cuda::CudaKernel::load(first->ptx, *metadata);
    loads.push_back(msSince(t0));
    if (!loaded)
      return fail(loaded.takeError());
  }
  fmt::print("driver load (PTX JIT)   first {:8.2f} ms   median of {} {:8.2f} ms\n", loads[0],
             repeat, median(loads));
  return 0;
}

/// Makes MLIR's pass-manager and timing options (registered at the top level) options of
/// `tilefuse compile`, so `tilefuse compile --mlir-timing ...` works and its --help lists them.
static void moveMlirOptionsTo(cl::SubCommand &sub) {
  static cl::OptionCategory mlirCategory("MLIR options (as in mlir-opt)");
  std::vector<cl::Option *> options;
  for (auto &entry : cl::getRegisteredOptions(cl::SubCommand::getTopLevel()))
    if (entry.first.starts_with("mlir-"))
      options.push_back(entry.second);
  for (cl::Option *option : options) {
    option->removeArgument();
    option->Subs.clear();
    option->addSubCommand(sub);
    option->addCategory(mlirCategory);
    option->addArgument();
  }
}

/// Hides the options that LLVM's libraries register at the top level (hundreds: targets, passes,
/// debugging aids) from --help, so it lists tilefuse's; --help-hidden still shows them.
static void hideLlvmOptions() {
  for (auto &entry : cl::getRegisteredOptions(cl::SubCommand::getTopLevel())) {
    cl::Option *option = entry.second;
    // --help, --version and the other generic options belong to every subcommand: keep them.
    if (!option->Subs.contains(&cl::SubCommand::getAll()) &&
        option->getOptionHiddenFlag() == cl::NotHidden)
      option->setHiddenFlag(cl::Hidden);
  }
}

int main(int argc, char **argv) {
  // The compile pipeline's passes by name, so that --mlir-print-ir-after=PASS (and the other
  // MLIR options `tilefuse compile --help` lists) can name them.
  tilefuse::registerTilePasses();
  tilefuse::tgpu::registerTGPUPasses();
  tilefuse::registerCodegenPasses();
  registerCompilerCLOptions();
  moveMlirOptionsTo(compileCmd);
  tools::addTunedOptionsTo(compileCmd);
  hideLlvmOptions();
  cl::ParseCommandLineOptions(argc, argv, "tilefuse: attention kernels from the tile DSL\n");
  if (listCmd) {
    for (const auto &k : kernels::all())
      fmt::print("{:16} {}\n", k.name, k.fileName);
    return 0;
  }
  if (runCmd)
    return runMain();
  if (compileCmd)
    return compileMain();
  if (benchCompileCmd)
    return benchCompileMain();
  if (tools::tuneCommand)
    return tools::tuneMain();
  fmt::print(stderr, "usage: tilefuse run|compile|tune|bench-compile|list [options]   (tilefuse --help, "
                     "tilefuse compile --help)\n");
  return 2;
}
