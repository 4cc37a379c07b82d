//===- Compiler.cpp - DSL text to PTX, in process -------------------------===//
#include "tilefuse/runtime/Compiler.h"

#include "DiagnosedSource.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "tilefuse/dialect/TileOps.h"
#include "tilefuse/passes/Passes.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

// From the generated BuildId.cpp (runtime/cmake/BuildId.cmake).
extern const char *const tilefuseBuildId;

using namespace mlir;
using namespace tilefuse::runtime;

std::string CompiledKernel::metadataJson() const {
  llvm::json::Object o{{"name", name},         {"block_m", blockM},   {"block_n", blockN},
                       {"threads", threads},   {"head_dim", headDim}, {"dtype", dtype},
                       {"shared_bytes", sharedBytes},
                       {cuda::DeclaredSizes::jsonKey, declaredSizes.toJson()}};
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(o)));
  return out;
}

llvm::Expected<CompiledKernel> CompiledKernel::fromMetadataJson(llvm::StringRef json,
                                                               std::string ptx) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "kernel metadata: " + msg);
  };
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(json);
  if (!value)
    return fail(llvm::toString(value.takeError()));
  const llvm::json::Object *o = value->getAsObject();
  if (!o)
    return fail("not a JSON object");
  CompiledKernel k;
  for (auto [key, field] : {std::pair{"name", &k.name}, std::pair{"dtype", &k.dtype}}) {
    std::optional<llvm::StringRef> v = o->getString(key);
    if (!v)
      return fail(llvm::Twine("missing string \"") + key + "\"");
    *field = v->str();
  }
  for (auto [key, field] : {std::pair{"block_m", &k.blockM}, std::pair{"block_n", &k.blockN},
                            std::pair{"threads", &k.threads}, std::pair{"head_dim", &k.headDim},
                            std::pair{"shared_bytes", &k.sharedBytes}}) {
    std::optional<int64_t> v = o->getInteger(key);
    if (!v)
      return fail(llvm::Twine("missing integer \"") + key + "\"");
    *field = *v;
  }
  const llvm::json::Value *declared = o->get(cuda::DeclaredSizes::jsonKey);
  if (!declared)
    return fail(llvm::Twine("missing \"") + cuda::DeclaredSizes::jsonKey + "\"");
  auto declaredSizes = cuda::DeclaredSizes::fromJson(*declared, "kernel metadata");
  if (!declaredSizes)
    return fail(cuda::takeReport(declaredSizes.takeError()).message);
  k.declaredSizes = *declaredSizes;
  k.ptx = std::move(ptx);
  return k;
}

void tilefuse::runtime::registerCompilerCLOptions() {
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
}

llvm::StringRef tilefuse::runtime::compilerVersion() {
  static const std::string version = std::string("tilefuse " TILEFUSE_VERSION " build ") +
                                     tilefuseBuildId + " LLVM " LLVM_VERSION_STRING;
  return version;
}

/// Writes `text` to `dir`/`name`; a dump is a debugging aid, so failures only warn.
static void dumpFile(llvm::StringRef dir, llvm::StringRef name, llvm::StringRef text) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    llvm::errs() << "tilefuse: cannot write IR dump " << path << ": " << ec.message() << "\n";
    return;
  }
  os << text;
}

TileConfig tilefuse::runtime::defaultTileConfig(int64_t headDim, llvm::StringRef chip) {
  // Measured on the H200 (docs/perf.md, 2026-11-29). sm_90a: one warpgroup (Br = 64) with
  // wgmma; Bc = 128 at D <= 64, 64 at D = 128 (the best of 64/128 x 64/128 over N = 4k, 16k).
  if (chip == "sm_90a") {
    TileConfig c;
    c.blockM = 64;
    c.blockN = headDim <= 64 ? 128 : 64;
    c.rowsPerWarp = 16;
    c.mma = "wgmma";
    return c;
  }
  // mma.sync: at D <= 64 two m16 tiles per warp (Br = 128 on 4 warps) reach FA2; at D = 128
  // they spill (Q lives in registers), so one.
  if (headDim <= 64)
    return {/*blockM=*/128, /*blockN=*/64, /*rowsPerWarp=*/32};
  return {/*blockM=*/64, /*blockN=*/64, /*rowsPerWarp=*/16};
}

llvm::Expected<CompiledKernel> tilefuse::runtime::compileToPTX(StringRef source,
                                                               StringRef bufferName,
                                                               const PtxCompileOptions &options) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  // 0 means "the tuned default for the kernel's head dimension" (defaultTileConfig).
  if (options.rowsPerWarp != 0 && options.rowsPerWarp != 16 && options.rowsPerWarp != 32)
    return fail("rows-per-warp must be 16 or 32 (or 0: tuned), got " +
                llvm::Twine(options.rowsPerWarp));
  if (!options.mma.empty() && options.mma != "sync" && options.mma != "wgmma")
    return fail("mma must be sync or wgmma (or empty: tuned), got '" + options.mma + "'");
  if (!options.qOperand.empty() && options.qOperand != "registers" &&
      options.qOperand != "shared")
    return fail("q-operand must be registers or shared (or empty: tuned), got '" +
                options.qOperand + "'");
  if (options.blockM < 0 || options.blockM % 16 || options.blockM > 256)
    return fail("block-m must be a multiple of 16 up to 256 (16 rows per warp), got " +
                llvm::Twine(options.blockM));
  if (options.blockN < 0 || options.blockN % 16)
    return fail("block-n must be a positive multiple of 16, got " + llvm::Twine(options.blockN));
  DialectRegistry registry;
  registerCompilerDialects(registry);
  // One kernel function per module: the context's thread pool would only cost its startup.
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ctx.loadDialect<tile::TileDialect, func::FuncDialect>();

  // --mlir-timing and friends, when the program registered them (registerCompilerCLOptions).
  DefaultTimingManager timing;
  applyDefaultTimingManagerCLOptions(timing);
  TimingScope rootTimer = timing.getRootScope();
  // Every pass manager gets the command-line options, and the IR dump when one is asked for.
  const std::string &dumpDir = options.dumpIRDirectory;
  if (!dumpDir.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(dumpDir))
      return fail("cannot create the IR dump directory " + dumpDir + ": " + ec.message());
  auto instrument = [&](PassManager &pm, llvm::StringRef stage) {
    (void)applyPassManagerCLOptions(pm); // fails only when the options are not registered
    if (!dumpDir.empty()) {
      llvm::SmallString<256> tree(dumpDir);
      llvm::sys::path::append(tree, stage);
      pm.enableIRPrintingToFileTree([](Pass *, Operation *) { return false; },
                                    [](Pass *, Operation *) { return true; },
                                    /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
                                    /*printAfterOnlyOnFailure=*/false, tree);
    }
    pm.enableTiming(rootTimer);
  };

  DiagnosedSource diagnosed(ctx, source, bufferName);
  const std::string &diagnostics = diagnosed.diagnostics();
  TimingScope parseTimer = rootTimer.nest("Parser");
  OwningOpRef<ModuleOp> module = diagnosed.parse();
  parseTimer.stop();
  if (!dumpDir.empty())
    dumpFile(dumpDir, "0-source.mlir", source);
  if (!module)
    return fail("cannot parse " + bufferName + ":\n" + diagnostics);

  if (options.headDim || !options.elementType.empty() || !options.params.empty()) {
    PassManager spm(&ctx, ModuleOp::getOperationName());
    tilefuse::TileSpecializeOptions so;
    so.headDim = options.headDim;
    so.elementType = options.elementType;
    so.params = llvm::to_vector(options.params);
    spm.addPass(tilefuse::createTileSpecialize(so));
    instrument(spm, "1-specialize");
    if (failed(spm.run(*module)))
      return fail("specializing " + bufferName + " failed:\n" + diagnostics);
  }

  CompiledKernel k;
  func::FuncOp kernel;
  for (auto fn : module->getOps<func::FuncOp>())
    if (!fn.isExternal()) {
      if (kernel)
        return fail(bufferName + ": expected one kernel function");
      kernel = fn;
    }
  if (!kernel || kernel.getNumArguments() != cuda::abiTensorCount)
    return fail(bufferName + ": expected one kernel function taking (Q, K, V, O, LSE)");
  // Every static size of the signature goes into the launch metadata: a launch with other sizes
  // would compute wrong results, so every launch path checks them.
  for (auto [index, tensor] : llvm::enumerate(cuda::abiTensors())) {
    auto type = dyn_cast<MemRefType>(kernel.getArgumentTypes()[index]);
    if (!type || type.getRank() != int64_t(tensor.dimensions.size()))
      return fail(bufferName + ": " + tensor.name + " must be a rank-" +
                  llvm::Twine(tensor.dimensions.size()) + " memref");
    for (auto [dim, size] : llvm::enumerate(type.getShape())) {
      if (ShapedType::isDynamic(size))
        continue;
      if (size < 1)
        return fail(bufferName + ": " + tensor.name + " declares dimension " + llvm::Twine(dim) +
                    " (" + cuda::sizeParameterName(tensor.dimensions[dim]) + ") as " +
                    llvm::Twine(size) + "; sizes must be positive");
      k.declaredSizes.sizes[index][dim] = size;
    }
  }
  auto qTy = cast<MemRefType>(kernel.getArgumentTypes()[0]);
  if (qTy.isDynamicDim(3))
    return fail(bufferName + ": Q must be a rank-4 memref with a static head dimension");
  Type elt = qTy.getElementType();
  if (!elt.isBF16() && !elt.isF16())
    return fail(bufferName + ": the GPU path takes bf16 or f16 kernels");
  k.name = kernel.getSymName().str();
  k.dtype = elt.isBF16() ? "bf16" : "f16";
  k.headDim = qTy.getDimSize(3);
  // wgmma's constraints (warpgroups of 16-row warps, Q in registers) rule it out as the tuned
  // choice when an explicit option contradicts them; an explicit --mma wgmma is checked as is.
  bool syncOnly = options.mma == "sync" || options.rowsPerWarp == 32 ||
                  options.qOperand == "shared" || (options.blockM && options.blockM % 64);
  TileConfig tiles = defaultTileConfig(k.headDim, syncOnly ? llvm::StringRef("sm_80")
                                                           : llvm::StringRef(options.chip));
  if (options.blockM)
    tiles.blockM = options.blockM;
  if (options.blockN)
    tiles.blockN = options.blockN;
  if (!options.qOperand.empty())
    tiles.qOperand = options.qOperand;
  if (!options.mma.empty())
    tiles.mma = options.mma;
  if (options.rowsPerWarp)
    tiles.rowsPerWarp = options.rowsPerWarp;
  else if (tiles.blockM % tiles.rowsPerWarp)
    tiles.rowsPerWarp = 16; // an explicit Br the tuned rows-per-warp does not divide
  if (tiles.blockM % tiles.rowsPerWarp)
    return fail("block-m (" + llvm::Twine(tiles.blockM) + ") must be a multiple of rows-per-warp (" +
                llvm::Twine(tiles.rowsPerWarp) + ")");
  k.blockM = tiles.blockM;
  k.blockN = tiles.blockN;
  k.threads = 32 * (tiles.blockM / tiles.rowsPerWarp); // one warp per rows-per-warp rows

  PassManager pm(&ctx, ModuleOp::getOperationName());
  tilefuse::GpuPipelineOptions gpo;
  gpo.blockM = tiles.blockM;
  gpo.blockN = tiles.blockN;
  gpo.chip = options.chip;
  gpo.features = options.features;
  gpo.copyIssue = options.copyIssue;
  gpo.rowsPerWarp = tiles.rowsPerWarp;
  gpo.qOperand = tiles.qOperand;
  gpo.mma = tiles.mma;
  tilefuse::buildTileToPTXPipeline(pm, gpo);
  instrument(pm, "2-tile-to-ptx");
  if (failed(pm.run(*module)))
    return fail("compiling " + bufferName + " for " + options.chip + " failed:\n" + diagnostics);
  // tile-to-nvvm records each kernel's dynamic shared memory on the module.
  auto sharedBytes = (*module)->getAttrOfType<DictionaryAttr>("tilefuse.shared_bytes");
  auto kernelBytes = sharedBytes ? sharedBytes.getAs<IntegerAttr>(k.name) : IntegerAttr();
  if (!kernelBytes)
    return fail("compiling " + bufferName + ": tile-to-nvvm recorded no shared memory size for " +
                k.name);
  k.sharedBytes = kernelBytes.getInt();
  for (auto binary : module->getOps<gpu::BinaryOp>())
    for (Attribute a : binary.getObjects())
      if (auto obj = dyn_cast<gpu::ObjectAttr>(a)) {
        k.ptx = obj.getObject().getValue().str();
        if (!dumpDir.empty()) {
          dumpFile(dumpDir, k.name + ".ptx", k.ptx);
          dumpFile(dumpDir, k.name + ".json", k.metadataJson() + "\n");
        }
        return k;
      }
  return fail("compiling " + bufferName + ": the pipeline produced no PTX");
}
