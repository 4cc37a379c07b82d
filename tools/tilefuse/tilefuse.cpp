//===- tilefuse.cpp - the tilefuse command line ---------------------------===//
//
//   tilefuse run  [--kernel NAME | --file F.mlir] [--dtype bf16|f16|f32] [--B --H --Hkv --M --N]
//                 [--block-m --block-n]
//       Compiles a kernel through the front-end pipeline, runs it on the CPU reference backend on
//       random inputs and compares it with the float64 reference; prints the error and the
//       key/value blocks visited. Exit code 1 when the error is over the bound.
//   tilefuse compile (--kernel NAME | FILE.mlir) --arch sm_90a|sm_80 [--dtype --head-dim]
//                    [--block-m --block-n]
//                    --emit ptx -o OUT.ptx
//       Compiles ahead of time to PTX, with the launch metadata in OUT.json beside it.
//   tilefuse list
//       The bundled kernels.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/kernels/Registry.h"
#include "tilefuse/runtime/Compiler.h"
#include "tilefuse/runtime/CpuKernel.h"
#include "tilefuse/runtime/Reference.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <fmt/core.h>

#include <chrono>
#include <cmath>
#include <random>

using namespace tilefuse;
using namespace tilefuse::runtime;
namespace cl = llvm::cl;

static cl::SubCommand runCmd("run", "Compile a kernel, run it on the CPU backend, check it");
static cl::SubCommand listCmd("list", "List the bundled kernels");
static cl::SubCommand compileCmd("compile", "Compile a kernel ahead of time to PTX");

static cl::opt<std::string> cInput(cl::Positional, cl::desc("[FILE.mlir]"), cl::init(""),
                                   cl::sub(compileCmd));
static cl::opt<std::string> cKernel("kernel", cl::desc("Bundled kernel instead of a file"),
                                    cl::init(""), cl::sub(compileCmd));
static cl::opt<std::string> cArch("arch", cl::desc("Target chip: sm_90a or sm_80"),
                                  cl::init("sm_90a"), cl::sub(compileCmd));
static cl::opt<std::string> cPtxVersion("ptx-features",
                                        cl::desc("NVPTX features (PTX version), e.g. +ptx80"),
                                        cl::init("+ptx80"), cl::sub(compileCmd));
static cl::opt<std::string> cDtype("dtype", cl::desc("Storage type: bf16 or f16 (default: the kernel's)"),
                                   cl::init(""), cl::sub(compileCmd));
static cl::opt<int64_t> cHeadDim("head-dim",
                                 cl::desc("Specialize to this head dimension (default: the kernel's)"),
                                 cl::init(0), cl::sub(compileCmd));
static cl::opt<int64_t> cBlockM("block-m", cl::desc("Br (16 rows per warp)"), cl::init(64),
                                cl::sub(compileCmd));
static cl::opt<int64_t> cBlockN("block-n", cl::desc("Bc"), cl::init(64), cl::sub(compileCmd));
static cl::opt<std::string> cEmit("emit", cl::desc("Output kind: ptx"), cl::init("ptx"),
                                  cl::sub(compileCmd));
static cl::opt<std::string> cOutput("o", cl::desc("Output file"), cl::init("-"),
                                    cl::sub(compileCmd));

static cl::opt<std::string> kernelName("kernel", cl::desc("Bundled kernel (see `tilefuse list`)"),
                                       cl::init("attention"), cl::sub(runCmd));
static cl::opt<std::string> kernelFile("file", cl::desc("A DSL file instead of a bundled kernel"),
                                       cl::sub(runCmd));
static cl::opt<std::string> dtype("dtype", cl::desc("Storage type: bf16, f16 or f32"),
                                  cl::init("bf16"), cl::sub(runCmd));
static cl::opt<int64_t> optB("B", cl::desc("batch"), cl::init(2), cl::sub(runCmd));
static cl::opt<int64_t> optH("H", cl::desc("query heads"), cl::init(8), cl::sub(runCmd));
static cl::opt<int64_t> optHkv("Hkv", cl::desc("key/value heads (0: same as H)"), cl::init(0),
                               cl::sub(runCmd));
static cl::opt<int64_t> optM("M", cl::desc("query length"), cl::init(300), cl::sub(runCmd));
static cl::opt<int64_t> optN("N", cl::desc("key length"), cl::init(300), cl::sub(runCmd));
static cl::opt<int64_t> blockM("block-m", cl::desc("Br"), cl::init(64), cl::sub(runCmd));
static cl::opt<int64_t> blockN("block-n", cl::desc("Bc"), cl::init(64), cl::sub(runCmd));
static cl::opt<unsigned> seed("seed", cl::desc("random seed"), cl::init(1), cl::sub(runCmd));

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
  if (std::string retyped = kernels::withElementType(text, dtype); !retyped.empty())
    text = retyped;

  CpuCompileOptions opts;
  opts.blockM = blockM;
  opts.blockN = blockN;
  opts.instrument = true;
  auto t0 = std::chrono::steady_clock::now();
  auto kernel = CpuKernel::compile(text, bufferName, opts);
  if (!kernel) {
    fmt::print(stderr, "{}\n", llvm::toString(kernel.takeError()));
    return 1;
  }
  double compileMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (kernelFile.empty() == false)
    name = (*kernel)->name().str();

  reference::Problem p;
  p.B = optB;
  p.H = optH;
  p.Hkv = optHkv ? optHkv : optH;
  p.M = optM;
  p.N = optN;
  p.D = (*kernel)->headDim();
  if (name == "gqa" || name == "mqa") { // their head counts are part of the kernel's types
    p.H = 8;
    p.Hkv = name == "gqa" ? 2 : 1;
  }
  auto variant = reference::variantFor(name, p.H);
  ElementType et = (*kernel)->elementType();
  size_t es = reference::elementSize(et);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto draw = [&](size_t n) {
    std::vector<float> x(n);
    for (float &f : x)
      f = normal(rng);
    return x;
  };
  size_t nq = p.B * p.H * p.M * p.D, nk = p.B * p.Hkv * p.N * p.D;
  std::vector<char> qb(nq * es), kb(nk * es), vb(nk * es), ob(nq * es, 0x7f);
  std::vector<float> lseb(p.B * p.H * p.M, NAN);
  auto q = reference::storeAs(et, draw(nq), qb.data());
  auto k = reference::storeAs(et, draw(nk), kb.data());
  auto v = reference::storeAs(et, draw(nk), vb.data());

  BlockCounts counts;
  auto qv = HostView::contiguous(qb.data(), {p.B, p.H, p.M, p.D});
  auto kv = HostView::contiguous(kb.data(), {p.B, p.Hkv, p.N, p.D});
  auto vv = HostView::contiguous(vb.data(), {p.B, p.Hkv, p.N, p.D});
  auto ov = HostView::contiguous(ob.data(), {p.B, p.H, p.M, p.D});
  auto lv = HostView::contiguous(lseb.data(), {p.B, p.H, p.M, 0}, 3);
  t0 = std::chrono::steady_clock::now();
  if (llvm::Error e = (*kernel)->run(qv, kv, vv, ov, lv, &counts)) {
    fmt::print(stderr, "error: {}\n", llvm::toString(std::move(e)));
    return 1;
  }
  double runMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  int64_t programs = p.B * p.H * ((p.M + blockM - 1) / blockM);
  int64_t allBlocks = programs * ((p.N + blockN - 1) / blockN);
  fmt::print("kernel       {} ({}), {} on the CPU reference backend\n", name, bufferName,
             dtype.getValue());
  fmt::print("shape        B={} H={} Hkv={} M={} N={} D={}  Br={} Bc={}\n", p.B, p.H, p.Hkv, p.M,
             p.N, p.D, blockM.getValue(), blockN.getValue());
  fmt::print("compile      {:.1f} ms   run {:.1f} ms\n", compileMs, runMs);
  fmt::print("blocks       {} visited of {} ({} full, {} partial)\n", counts.visited(), allBlocks,
             counts.full, counts.partial);
  if (!variant) {
    fmt::print("reference    none for '{}': output not checked\n", name);
    return 0;
  }
  std::vector<double> refO, refL;
  reference::attention(p, *variant, q, k, v, refO, refL);
  auto o = reference::loadAs(et, ob.data(), nq);
  std::vector<double> l(lseb.begin(), lseb.end());
  double eO = relError(o, refO), eL = relError(l, refL);
  // The output is rounded to the storage type once; everything before is f32.
  double bound = et == ElementType::F32 ? 1e-5 : et == ElementType::BF16 ? 8e-3 : 1e-3;
  bool ok = eO <= bound && eL <= 1e-5;
  fmt::print("error        O {:.2e} (bound {:.0e})   LSE {:.2e} (bound 1e-05)   vs float64\n", eO,
             bound, eL);
  fmt::print("result       {}\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

static int compileMain() {
  std::string text, bufferName;
  if (!cKernel.empty()) {
    const kernels::KernelSource *k = kernels::find(cKernel);
    if (!k) {
      fmt::print(stderr, "error: no bundled kernel named '{}' (see `tilefuse list`)\n",
                 cKernel.getValue());
      return 2;
    }
    text = k->text;
    bufferName = k->fileName;
  } else if (!cInput.empty()) {
    auto buf = llvm::MemoryBuffer::getFile(cInput);
    if (!buf) {
      fmt::print(stderr, "error: cannot read {}: {}\n", cInput.getValue(),
                 buf.getError().message());
      return 2;
    }
    text = (*buf)->getBuffer().str();
    bufferName = cInput;
  } else {
    fmt::print(stderr, "error: give a DSL file or --kernel NAME\n");
    return 2;
  }
  if (cEmit != "ptx") {
    fmt::print(stderr, "error: --emit {} is not supported yet (ptx only)\n", cEmit.getValue());
    return 2;
  }
  PtxCompileOptions opts;
  opts.headDim = cHeadDim;
  opts.elementType = cDtype;
  opts.blockM = cBlockM;
  opts.blockN = cBlockN;
  opts.chip = cArch;
  opts.features = cPtxVersion;
  auto compiled = compileToPTX(text, bufferName, opts);
  if (!compiled) {
    fmt::print(stderr, "{}\n", llvm::toString(compiled.takeError()));
    return 1;
  }
  std::error_code ec;
  llvm::ToolOutputFile out(cOutput, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    fmt::print(stderr, "error: cannot write {}: {}\n", cOutput.getValue(), ec.message());
    return 1;
  }
  out.os() << compiled->ptx;
  out.keep();
  if (cOutput != "-") {
    llvm::SmallString<256> json(cOutput.getValue());
    llvm::sys::path::replace_extension(json, "json");
    llvm::ToolOutputFile meta(json, ec, llvm::sys::fs::OF_Text);
    if (ec) {
      fmt::print(stderr, "error: cannot write {}: {}\n", json.str().str(), ec.message());
      return 1;
    }
    meta.os() << compiled->metadataJson() << "\n";
    meta.keep();
  }
  return 0;
}

int main(int argc, char **argv) {
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
  fmt::print(stderr, "usage: tilefuse run|compile|list [options]   (tilefuse --help)\n");
  return 2;
}
