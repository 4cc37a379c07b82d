//===- Tilefuse.cpp - the embeddable runtime: C++ API ---------------------===//
#include "tilefuse/runtime/Tilefuse.h"

#include "tilefuse/kernels/Registry.h"
#include "tilefuse/runtime/Compiler.h"
#include "tilefuse/runtime/CpuBackwardKernel.h"
#include "tilefuse/runtime/Float64Reference.h"
#include "tilefuse/runtime/KernelCache.h"
#include "tilefuse/runtime/cuda/CudaBackwardKernel.h"
#include "tilefuse/runtime/cuda/CudaKernel.h"
#include "tilefuse/runtime/cuda/Driver.h"
#include "tilefuse/runtime/jit/Autotuner.h"
#include "tilefuse/runtime/jit/TuningDatabase.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <mutex>

using namespace tilefuse;
namespace rt = tilefuse::runtime;
namespace cu = tilefuse::runtime::cuda;
namespace jit = tilefuse::runtime::jit;

Status::Status(StatusCode code, std::string message) : statusCode(code), text(std::move(message)) {}

static StatusCode codeOf(cu::ErrorKind kind) {
  switch (kind) {
  case cu::ErrorKind::NoDriver:
  case cu::ErrorKind::NoDevice:
    return StatusCode::Unavailable;
  case cu::ErrorKind::InvalidArgument:
    return StatusCode::InvalidArgument;
  case cu::ErrorKind::DriverCall:
    return StatusCode::Cuda;
  }
  return StatusCode::Cuda;
}

/// A runtime error as a Status (success: OK).
static Status statusOf(llvm::Error error) {
  if (!error)
    return Status();
  cu::ErrorReport report = cu::takeReport(std::move(error));
  return Status(codeOf(report.kind), std::move(report.message));
}

//===----------------------------------------------------------------------===//
// Kernel
//===----------------------------------------------------------------------===//

namespace {
/// The CUDA module of one cache key, loaded on the first launch and shared by every Kernel
/// object of that key.
struct Module {
  std::mutex mutex; ///< held while loading
  std::atomic<const cu::CudaKernel *> loaded{nullptr};
  std::unique_ptr<cu::CudaKernel> owner;
};
} // namespace

struct Kernel::Impl {
  std::shared_ptr<const rt::CompiledKernel> compiled;
  /// What launches are checked against, parsed from the compiled kernel's sidecar, so a launch
  /// is refused before the driver is needed.
  cu::KernelMetadata metadata;
  std::shared_ptr<Module> module;
  std::string key, origin, arch, configSource;
  /// A split-KV kernel's tuned split count, for launches that leave it to the launcher.
  std::optional<jit::TunedKeySplits> tunedKeySplits;

  llvm::Expected<const cu::CudaKernel *> load() const {
    if (const cu::CudaKernel *k = module->loaded.load(std::memory_order_acquire))
      return k;
    std::lock_guard<std::mutex> lock(module->mutex);
    if (!module->owner) {
      auto kernel = cu::CudaKernel::load(compiled->ptx, metadata);
      if (!kernel)
        return kernel.takeError();
      module->owner = std::move(*kernel);
      module->loaded.store(module->owner.get(), std::memory_order_release);
    }
    return module->owner.get();
  }
};

Kernel::Kernel(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Kernel::~Kernel() = default;

Status Kernel::launch(void *stream, const void *q, const void *k, const void *v, void *o,
                      float *lse, const AttentionShape &shape, const int64_t *strides,
                      int64_t kvSplits, const PagedKV *paged, const Varlen *varlen) const {
  auto address = [](const void *p) {
    return static_cast<cu::DevicePtr>(reinterpret_cast<uintptr_t>(p));
  };
  cu::AttentionShape s{shape.B, shape.H, shape.Hkv, shape.M, shape.N, shape.D};
  cu::AttentionBuffers buffers{address(q), address(k), address(v), address(o), address(lse)};
  // Contiguous strides describe B x Hkv x N x D views, not a paged cache: on every launch, not
  // only the first, a paged one must say its caches' strides.
  if (paged && !strides)
    return Status(StatusCode::InvalidArgument,
                  "launch of '" + impl->compiled->name + "': a paged launch needs the "
                  "strides (the caches' page, head and row strides)");
  if (varlen && !strides)
    return Status(StatusCode::InvalidArgument,
                  "launch of '" + impl->compiled->name + "': a varlen launch needs the "
                  "strides (the packed tensors' head and row strides)");
  cu::AttentionStrides layout =
      strides ? cu::AttentionStrides::fromArray(strides) : cu::AttentionStrides::contiguous(s);
  // Before the module is loaded, the arguments are checked here, so a bad launch is
  // InvalidArgument with or without a GPU; once it is, CudaKernel::launch checks them (once per
  // launch).
  if (!impl->module->loaded.load(std::memory_order_acquire)) {
    if (kvSplits < 0 || (kvSplits > 1 && !impl->compiled->splitKv))
      return Status(StatusCode::InvalidArgument,
                    "launch of '" + impl->compiled->name + "': kvSplits " +
                        std::to_string(kvSplits) +
                        (kvSplits < 0 ? " must be 0 (the launcher chooses) or more"
                                      : " for a kernel compiled without split-KV (KernelSpec::"
                                        "splitKv)"));
    if (llvm::Error error =
            cu::validateLaunch(impl->metadata, buffers, s, layout, paged, varlen))
      return statusOf(std::move(error));
  }
  auto loaded = impl->load();
  if (!loaded)
    return statusOf(loaded.takeError());
  if (impl->tunedKeySplits) {
    jit::KeySplitGrid grid = jit::keySplitGrid(impl->metadata, s);
    kvSplits =
        jit::keySplitsForLaunch(kvSplits, impl->tunedKeySplits, grid.programs, grid.keyBlocks);
  }
  return statusOf((*loaded)->launch(static_cast<CUstream_st *>(stream), buffers, s, layout,
                                    kvSplits, paged, varlen));
}

const std::string &Kernel::name() const { return impl->compiled->name; }
const std::string &Kernel::dtype() const { return impl->compiled->dtype; }
const std::string &Kernel::arch() const { return impl->arch; }
int64_t Kernel::headDim() const { return impl->compiled->headDim; }
int64_t Kernel::blockM() const { return impl->compiled->blockM; }
int64_t Kernel::blockN() const { return impl->compiled->blockN; }
int64_t Kernel::threads() const { return impl->compiled->threads; }
const std::string &Kernel::ptx() const { return impl->compiled->ptx; }
std::string Kernel::metadataJson() const { return impl->compiled->metadataJson(); }
const std::string &Kernel::cacheKey() const { return impl->key; }
const std::string &Kernel::origin() const { return impl->origin; }
std::string Kernel::config() const { return impl->compiled->tiles.print(); }
const std::string &Kernel::configSource() const { return impl->configSource; }

//===----------------------------------------------------------------------===//
// Runtime
//===----------------------------------------------------------------------===//

RuntimeOptions RuntimeOptions::fromEnvironment() {
  rt::CacheConfig config = rt::CacheConfig::fromEnvironment();
  RuntimeOptions options;
  options.cacheDirectory = config.directory;
  options.alwaysCompile = config.alwaysCompile;
  options.dumpIRDirectory = config.dumpIRDirectory;
  if (std::optional<std::string> mode = llvm::sys::Process::GetEnv("TILEFUSE_AUTOTUNE")) {
    if (*mode == "on")
      options.autotune = AutotuneMode::On;
    else if (*mode == "cached")
      options.autotune = AutotuneMode::Cached;
    else if (!mode->empty() && *mode != "off")
      llvm::errs() << "tilefuse: TILEFUSE_AUTOTUNE must be off, cached or on, not '" << *mode
                   << "'; autotuning is off\n";
  }
  return options;
}

struct Runtime::Impl {
  RuntimeOptions options;
  rt::KernelCache cache;
  std::mutex mutex; ///< guards modules and the detected chip
  llvm::StringMap<std::shared_ptr<Module>> modules;
  std::once_flag detectOnce;
  std::string detectedChip;
  Status detectStatus;
  jit::TuningDatabase tuningDatabase;
  /// Held while tuning: a tuning uses the whole GPU, and concurrent calls for one key wait for
  /// one tuning.
  std::mutex tuningMutex;
  /// A tuning's outcome as getKernel uses it: the configuration (empty: none, the default
  /// serves) and a split-KV kernel's split count.
  struct Tuned {
    rt::TileConfig config;
    std::optional<jit::TunedKeySplits> keySplits;
  };
  /// Tuned configurations by tuning key, so each is read from disk (or tuned) once.
  llvm::StringMap<Tuned> tunedConfigs;
  /// Host pairs (forward and derived backward) by spec; held while one compiles.
  std::mutex hostMutex;
  llvm::StringMap<std::shared_ptr<const HostAttention>> hostPairs;
  /// GPU backwards by key (the forward's options, marked), under hostMutex.
  llvm::StringMap<std::shared_ptr<const Backward>> backwards;
  uint64_t tuningHits = 0, tunings = 0;

  static rt::CacheConfig cacheConfig(const RuntimeOptions &options) {
    rt::CacheConfig config;
    config.directory = options.cacheDirectory;
    config.alwaysCompile = options.alwaysCompile || !options.dumpIRDirectory.empty();
    config.dumpIRDirectory = options.dumpIRDirectory;
    return config;
  }
  explicit Impl(const RuntimeOptions &options)
      : options(options), cache(cacheConfig(options)), tuningDatabase(options.cacheDirectory) {}

  /// The tuned configuration (and split count) for the kernel whose default configuration
  /// compiled to `defaultKernel`, or none (no GPU, no entry in Cached mode, or a tuning that
  /// failed: the default serves, and the reason goes to stderr once per key). `source` says
  /// where it came from ("database" or "tuned").
  std::optional<Tuned> tunedConfig(AutotuneMode mode, llvm::StringRef text,
                                   llvm::StringRef bufferName, const rt::PtxCompileOptions &options,
                                   const rt::CompiledKernel &defaultKernel, int64_t seqLen,
                                   std::string &source) {
    auto gpu = jit::GpuIdentity::current();
    if (!gpu) { // nothing to tune for
      llvm::consumeError(gpu.takeError());
      return std::nullopt;
    }
    jit::TuningKey key = jit::tuningKeyFor(text, options, defaultKernel, seqLen, *gpu);
    std::string digest = key.digest();
    std::lock_guard<std::mutex> lock(tuningMutex);
    if (auto known = tunedConfigs.find(digest); known != tunedConfigs.end()) {
      source = "database";
      return known->second.config.empty() ? std::nullopt : std::optional(known->second);
    }
    if (std::optional<jit::TuningRecord> record = tuningDatabase.lookup(key)) {
      ++tuningHits;
      Tuned tuned{record->config, record->keySplits};
      tunedConfigs[digest] = tuned;
      source = "database";
      return tuned;
    }
    if (mode != AutotuneMode::On)
      return std::nullopt;
    jit::TuningProblem problem;
    problem.source = text.str();
    problem.bufferName = bufferName.str();
    problem.options = options;
    problem.seqLength = seqLen;
    auto report = jit::tune(problem, jit::TuningOptions());
    ++tunings;
    if (!report) {
      // Remembered as "none", so a kernel that cannot be tuned is not retried on every call.
      llvm::errs() << "tilefuse: autotuning " << bufferName << " failed, using the default "
                   << "configuration: " << cu::takeReport(report.takeError()).message << "\n";
      tunedConfigs[digest] = Tuned();
      return std::nullopt;
    }
    if (llvm::Error error = tuningDatabase.store(report->key, report->record))
      llvm::errs() << "tilefuse: " << llvm::toString(std::move(error)) << "\n";
    Tuned tuned{report->record.config, report->record.keySplits};
    tunedConfigs[digest] = tuned;
    source = "tuned";
    return tuned;
  }

  /// The chip of the current GPU, or sm_90a without one.
  /// The compile options every GPU kernel of `spec` shares: specialization, PTX features and
  /// the chip (the spec's, else the current GPU's).
  Status gpuOptions(const KernelSpec &spec, rt::PtxCompileOptions &options) {
    options.headDim = spec.headDim;
    options.elementType = spec.dtype;
    options.params = spec.params;
    if (!spec.ptxFeatures.empty())
      options.features = spec.ptxFeatures;
    if (!spec.arch.empty()) {
      options.chip = spec.arch;
      return Status();
    }
    return chip(options.chip);
  }

  Status chip(std::string &out) {
    std::call_once(detectOnce, [&] {
      auto driver = cu::Driver::get();
      if (!driver) {
        llvm::consumeError(driver.takeError());
        detectedChip = "sm_90a";
        return;
      }
      auto device = driver->currentDevice();
      if (!device) {
        detectStatus = statusOf(device.takeError());
        return;
      }
      auto chip = rt::chipForComputeCapability(device->computeMajor, device->computeMinor,
                                               device->name);
      if (chip)
        detectedChip = *chip;
      else
        detectStatus =
            Status(StatusCode::InvalidArgument, llvm::toString(chip.takeError()));
    });
    out = detectedChip;
    return detectStatus;
  }
};

Runtime::Runtime(const RuntimeOptions &options) : impl(std::make_unique<Impl>(options)) {}
Runtime::~Runtime() = default;

Runtime &Runtime::global() {
  // Never destroyed: kernels handed out may be used until the process ends, and unloading
  // modules during exit races the driver's own teardown.
  static Runtime *runtime = new Runtime(RuntimeOptions::fromEnvironment());
  return *runtime;
}

const RuntimeOptions &Runtime::options() const { return impl->options; }

RuntimeStats Runtime::stats() const {
  rt::CacheStats s = impl->cache.stats();
  RuntimeStats out;
  out.memoryHits = s.memoryHits;
  out.diskHits = s.diskHits;
  out.compiles = s.compiles;
  out.badEntries = s.badEntries;
  out.writeFailures = s.writeFailures;
  jit::TuningDatabaseStats t = impl->tuningDatabase.stats();
  out.tuningBadEntries = t.badEntries;
  std::lock_guard<std::mutex> lock(impl->tuningMutex);
  out.tuningHits = impl->tuningHits;
  out.tunings = impl->tunings;
  return out;
}

/// The DSL text `spec` names (a bundled kernel or its own source) and its file name.
static Status resolveSource(const KernelSpec &spec, std::string &source,
                            std::string &bufferName) {
  auto invalid = [](std::string message) {
    return Status(StatusCode::InvalidArgument, std::move(message));
  };
  if (!spec.kernel.empty()) {
    const kernels::KernelSource *k = kernels::find(spec.kernel);
    if (!k) {
      std::string names;
      for (const kernels::KernelSource &s : kernels::all())
        names += std::string(names.empty() ? "" : ", ") + s.name;
      return invalid("no bundled kernel named '" + spec.kernel + "' (there are " + names + ")");
    }
    source = k->text;
    bufferName = k->fileName;
  } else if (!spec.source.empty()) {
    source = spec.source;
    bufferName = spec.sourceName.empty() ? "<source>" : spec.sourceName;
  } else {
    return invalid("the kernel spec names no bundled kernel and has no DSL source");
  }
  return Status();
}

Status Runtime::getKernel(const KernelSpec &spec, std::shared_ptr<const Kernel> &out) {
  out.reset();
  auto invalid = [](std::string message) {
    return Status(StatusCode::InvalidArgument, std::move(message));
  };
  std::string source, bufferName;
  if (Status s = resolveSource(spec, source, bufferName); !s.ok())
    return s;
  if (!spec.dtype.empty() && spec.dtype != "bf16" && spec.dtype != "f16")
    return invalid("dtype must be bf16 or f16 (or empty: as written), not '" + spec.dtype + "'");
  if (spec.headDim < 0)
    return invalid("head dim must be positive (or 0: as written)");
  if (spec.blockM < 0 || spec.blockM % 16 || spec.blockM > 256)
    return invalid("block_m must be a multiple of 16 up to 256 (or 0: tuned), not " +
                   std::to_string(spec.blockM));
  if (spec.blockN < 0 || spec.blockN % 16)
    return invalid("block_n must be a positive multiple of 16, not " +
                   std::to_string(spec.blockN));
  auto tiles = rt::TileConfig::parse(spec.config);
  if (!tiles)
    return invalid("config: " + llvm::toString(tiles.takeError()));
  if (spec.blockM)
    tiles->blockM = spec.blockM;
  if (spec.blockN)
    tiles->blockN = spec.blockN;
  if (spec.seqLen < 0)
    return invalid("seq_len must be positive (or 0: 4096), not " + std::to_string(spec.seqLen));

  rt::PtxCompileOptions options;
  options.tiles = *tiles;
  options.splitKv = spec.splitKv;
  options.pagedKv = spec.pagedKv;
  options.pageSize = spec.pageSize;
  options.varlen = spec.varlen;
  options.shortSequences = rt::isShortSequence(spec.seqLen);
  if (Status s = impl->gpuOptions(spec, options); !s.ok())
    return s;

  // The tuned configuration replaces the default only: an explicit one is the caller's choice.
  std::string configSource = tiles->empty() ? "default" : "explicit";
  // Goes with the tuned configuration only: it was timed with it.
  std::optional<jit::TunedKeySplits> tunedKeySplits;
  AutotuneMode mode = spec.autotune.value_or(impl->options.autotune);
  // The tuner times contiguous and packed (varlen) launches: a paged kernel keeps its default
  // configuration.
  if (tiles->empty() && mode != AutotuneMode::Off && !spec.pagedKv) {
    // The default configuration first: it resolves the dtype and head dim the key needs (and
    // is what runs when there is no tuned one); a cache hit after the first call.
    auto byDefault = impl->cache.getOrCompile(source, bufferName, options);
    if (!byDefault)
      return Status(StatusCode::Compile, llvm::toString(byDefault.takeError()));
    std::string tunedSource;
    if (auto tuned = impl->tunedConfig(mode, source, bufferName, options, *byDefault->kernel,
                                       spec.seqLen ? spec.seqLen : 4096, tunedSource)) {
      options.tiles = tuned->config;
      tunedKeySplits = tuned->keySplits;
      configSource = tunedSource;
    }
  }

  auto found = impl->cache.getOrCompile(source, bufferName, options);
  if (!found)
    return Status(StatusCode::Compile, llvm::toString(found.takeError()));

  auto metadata = cu::KernelMetadata::parse(found->kernel->metadataJson(), bufferName);
  if (!metadata)
    return statusOf(metadata.takeError());
  auto kernelImpl = std::make_unique<Kernel::Impl>();
  kernelImpl->compiled = found->kernel;
  kernelImpl->metadata = std::move(*metadata);
  kernelImpl->key = found->key;
  kernelImpl->origin = rt::cacheSourceName(found->source).str();
  kernelImpl->arch = options.chip;
  kernelImpl->configSource = configSource;
  if (kernelImpl->compiled->splitKv)
    kernelImpl->tunedKeySplits = tunedKeySplits;
  {
    std::lock_guard<std::mutex> lock(impl->mutex);
    std::shared_ptr<Module> &module = impl->modules[found->key];
    if (!module)
      module = std::make_shared<Module>();
    kernelImpl->module = module;
  }
  out = std::make_shared<const Kernel>(std::move(kernelImpl));
  return Status();
}

//===----------------------------------------------------------------------===//
// The host pair: a kernel and its derived backward on the CPU
//===----------------------------------------------------------------------===//

struct HostAttention::Impl {
  std::unique_ptr<rt::CpuBackwardKernel> kernel;
  std::string name, dtype;
};

HostAttention::HostAttention(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
HostAttention::~HostAttention() = default;
const std::string &HostAttention::name() const { return impl->name; }
const std::string &HostAttention::dtype() const { return impl->dtype; }
int64_t HostAttention::headDim() const { return impl->kernel->headDim(); }
bool HostAttention::deterministic() const { return impl->kernel->deterministic(); }

namespace {
/// A host view of `data` with `sizes` and the strides (b, h, row) given, innermost contiguous.
rt::HostView hostView(const void *data, std::array<int64_t, 4> sizes, const int64_t *strides,
                      int rank = 4) {
  rt::HostView view;
  view.data = const_cast<void *>(data);
  view.rank = rank;
  view.sizes = sizes;
  for (int d = 0; d < rank - 1; ++d)
    view.strides[d] = strides[d];
  view.strides[rank - 1] = 1;
  return view;
}

/// Contiguous strides (b, h, row) of B x heads x rows x D arrays, and of B x H x M rows.
std::array<int64_t, 3> contiguousStrides(int64_t heads, int64_t rows, int64_t d) {
  return {heads * rows * d, rows * d, d};
}

Status hostStatus(llvm::Error error) {
  if (!error)
    return Status();
  return Status(StatusCode::InvalidArgument, llvm::toString(std::move(error)));
}

/// The 14 element strides of contiguous q, k, v, o and lse, in Kernel::launch's order.
std::array<int64_t, 14> contiguousForwardStrides(const AttentionShape &s) {
  auto qs = contiguousStrides(s.H, s.M, s.D), ks = contiguousStrides(s.Hkv, s.N, s.D);
  auto ls = contiguousStrides(s.H, s.M, 1);
  return {qs[0], qs[1], qs[2], ks[0], ks[1], ks[2], ks[0], ks[1], ks[2],
          qs[0], qs[1], qs[2], ls[0], ls[1]};
}

Status checkHostShape(const AttentionShape &s) {
  if (s.B <= 0 || s.H <= 0 || s.Hkv <= 0 || s.M <= 0 || s.N <= 0 || s.D <= 0)
    return Status(StatusCode::InvalidArgument, "B, H, Hkv, M, N and D must be positive");
  return Status();
}
} // namespace

Status HostAttention::forward(const void *q, const void *k, const void *v, void *o, float *lse,
                              const AttentionShape &s, const int64_t *strides) const {
  if (Status st = checkHostShape(s); !st.ok())
    return st;
  std::array<int64_t, 14> st{};
  if (strides)
    std::copy(strides, strides + 14, st.begin());
  else
    st = contiguousForwardStrides(s);
  return hostStatus(impl->kernel->forward(
      hostView(q, {s.B, s.H, s.M, s.D}, &st[0]), hostView(k, {s.B, s.Hkv, s.N, s.D}, &st[3]),
      hostView(v, {s.B, s.Hkv, s.N, s.D}, &st[6]), hostView(o, {s.B, s.H, s.M, s.D}, &st[9]),
      hostView(lse, {s.B, s.H, s.M, 0}, &st[12], 3)));
}

Status HostAttention::backward(const void *q, const void *k, const void *v, const void *o,
                               const void *dO, const float *lse, void *dq, void *dk, void *dv,
                               const AttentionShape &s, const int64_t *strides) const {
  if (Status st = checkHostShape(s); !st.ok())
    return st;
  std::array<int64_t, 26> st{};
  if (strides) {
    std::copy(strides, strides + 26, st.begin());
  } else {
    // The forward's 14 (q, k, v, o, lse), then dO and dQ like q, dK and dV like k.
    std::array<int64_t, 14> forward = contiguousForwardStrides(s);
    std::copy(forward.begin(), forward.end(), st.begin());
    for (int i = 0; i < 3; ++i) {
      st[14 + i] = st[17 + i] = forward[i];
      st[20 + i] = st[23 + i] = forward[3 + i];
    }
  }
  std::array<int64_t, 4> qShape{s.B, s.H, s.M, s.D}, kShape{s.B, s.Hkv, s.N, s.D};
  return hostStatus(impl->kernel->backward(
      hostView(q, qShape, &st[0]), hostView(k, kShape, &st[3]), hostView(v, kShape, &st[6]),
      hostView(o, qShape, &st[9]), hostView(dO, qShape, &st[14]),
      hostView(lse, {s.B, s.H, s.M, 0}, &st[12], 3), hostView(dq, qShape, &st[17]),
      hostView(dk, kShape, &st[20]), hostView(dv, kShape, &st[23])));
}

Status Runtime::getHostAttention(const KernelSpec &spec,
                                 std::shared_ptr<const HostAttention> &out) {
  out.reset();
  auto invalid = [](std::string message) {
    return Status(StatusCode::InvalidArgument, std::move(message));
  };
  std::string source, bufferName;
  if (Status s = resolveSource(spec, source, bufferName); !s.ok())
    return s;
  if (!spec.dtype.empty() && spec.dtype != "bf16" && spec.dtype != "f16" && spec.dtype != "f32")
    return invalid("dtype must be bf16, f16 or f32 (or empty: as written), not '" + spec.dtype +
                   "'");
  if (spec.headDim < 0)
    return invalid("head dim must be positive (or 0: as written)");
  if (spec.blockM < 0 || spec.blockN < 0)
    return invalid("block sizes must be positive (or 0: 64)");
  rt::CpuBackwardOptions options;
  options.elementType = spec.dtype;
  options.headDim = spec.headDim;
  options.params = spec.params;
  options.blockM = spec.blockM ? spec.blockM : 64;
  options.blockN = spec.blockN ? spec.blockN : 64;
  options.deterministic = spec.deterministic;
  std::string key = bufferName + '\0' + source + '\0' + spec.dtype + '\0' +
                    std::to_string(spec.headDim) + '\0' + std::to_string(options.blockM) + '\0' +
                    std::to_string(options.blockN) + '\0' + (spec.deterministic ? "1" : "0");
  for (const std::string &param : spec.params)
    key += '\0' + param;
  std::lock_guard<std::mutex> lock(impl->hostMutex);
  std::shared_ptr<const HostAttention> &entry = impl->hostPairs[key];
  if (!entry) {
    auto compiled = rt::CpuBackwardKernel::compile(source, bufferName, options);
    if (!compiled)
      return Status(StatusCode::Compile, llvm::toString(compiled.takeError()));
    auto pair = std::make_unique<HostAttention::Impl>();
    pair->name = (*compiled)->name().str();
    rt::ElementType et = (*compiled)->elementType();
    pair->dtype = et == rt::ElementType::BF16 ? "bf16" : et == rt::ElementType::F16 ? "f16" : "f32";
    pair->kernel = std::move(*compiled);
    entry = std::make_shared<const HostAttention>(std::move(pair));
  }
  out = entry;
  return Status();
}

//===----------------------------------------------------------------------===//
// The GPU backward
//===----------------------------------------------------------------------===//

struct Backward::Impl {
  std::vector<rt::CompiledKernel> phases;
  std::vector<cu::KernelMetadata> metadata;
  std::string name, arch;
  /// Loaded on the first launch (as Kernel's module): launches after it take no lock.
  mutable std::mutex mutex;
  mutable std::unique_ptr<cu::CudaBackwardKernel> owner;
  mutable std::atomic<const cu::CudaBackwardKernel *> loaded{nullptr};

  llvm::Expected<const cu::CudaBackwardKernel *> load() const {
    if (const cu::CudaBackwardKernel *k = loaded.load(std::memory_order_acquire))
      return k;
    std::lock_guard<std::mutex> lock(mutex);
    if (!owner) {
      auto kernel = cu::CudaBackwardKernel::load(phases.front().ptx, metadata);
      if (!kernel)
        return kernel.takeError();
      owner = std::move(*kernel);
      loaded.store(owner.get(), std::memory_order_release);
    }
    return owner.get();
  }
};

Backward::Backward(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Backward::~Backward() = default;
const std::string &Backward::name() const { return impl->name; }
const std::string &Backward::dtype() const { return impl->phases.front().dtype; }
const std::string &Backward::arch() const { return impl->arch; }
int64_t Backward::headDim() const { return impl->phases.front().headDim; }
bool Backward::deterministic() const { return impl->phases.front().deterministic; }
const std::string &Backward::ptx() const { return impl->phases.front().ptx; }

Status Backward::launch(void *stream, const void *q, const void *k, const void *v, const void *o,
                        const void *dO, const float *lse, void *dq, void *dk, void *dv,
                        const AttentionShape &shape, const int64_t *strides) const {
  auto address = [](const void *p) {
    return static_cast<cu::DevicePtr>(reinterpret_cast<uintptr_t>(p));
  };
  cu::AttentionShape s{shape.B, shape.H, shape.Hkv, shape.M, shape.N, shape.D};
  auto loaded = impl->load();
  if (!loaded)
    return statusOf(loaded.takeError());
  cu::BackwardBuffers buffers{address(q),  address(k),  address(v),
                              address(o),  address(dO), address(lse),
                              address(dq), address(dk), address(dv)};
  cu::BackwardStrides layout = strides ? cu::BackwardStrides::fromPublicOrder(strides)
                                       : cu::BackwardStrides::contiguous(s);
  return statusOf((*loaded)->launch(static_cast<CUstream_st *>(stream), buffers, s, layout));
}

Status Runtime::getBackward(const KernelSpec &spec, std::shared_ptr<const Backward> &out) {
  out.reset();
  auto invalid = [](std::string message) {
    return Status(StatusCode::InvalidArgument, std::move(message));
  };
  std::string source, bufferName;
  if (Status s = resolveSource(spec, source, bufferName); !s.ok())
    return s;
  if (!spec.dtype.empty() && spec.dtype != "bf16" && spec.dtype != "f16")
    return invalid("dtype must be bf16 or f16 (or empty: as written), not '" + spec.dtype + "'");
  if (spec.headDim < 0 || spec.blockM < 0 || spec.blockN < 0)
    return invalid("head dim and block sizes must be positive (or 0: as written, the defaults)");
  if (spec.splitKv || spec.pagedKv || spec.varlen)
    return invalid("the backward runs on contiguous tensors (no split-KV, paged or varlen)");
  rt::PtxCompileOptions options;
  options.deterministic = spec.deterministic;
  // Its configuration takes Br, Bc, rows_per_warp, mma and row_order (the compiler names any
  // other field).
  auto tiles = rt::TileConfig::parse(spec.config);
  if (!tiles)
    return invalid("config: " + llvm::toString(tiles.takeError()));
  options.tiles = *tiles;
  if (spec.blockM)
    options.tiles.blockM = spec.blockM;
  if (spec.blockN)
    options.tiles.blockN = spec.blockN;
  if (Status s = impl->gpuOptions(spec, options); !s.ok())
    return s;
  // The kernel cache's (memory, then disk); one Backward (one loaded module) per key.
  auto found = impl->cache.getOrCompileBackward(source, bufferName, options);
  if (!found)
    return Status(StatusCode::Compile, llvm::toString(found.takeError()));
  std::lock_guard<std::mutex> lock(impl->hostMutex);
  std::shared_ptr<const Backward> &entry = impl->backwards[found->key];
  if (!entry) {
    const std::vector<rt::CompiledKernel> *phases = found->kernels.get();
    auto backward = std::make_unique<Backward::Impl>();
    for (const rt::CompiledKernel &phase : *phases) {
      auto metadata = cu::KernelMetadata::parse(phase.metadataJson(), bufferName);
      if (!metadata)
        return statusOf(metadata.takeError());
      backward->metadata.push_back(std::move(*metadata));
    }
    std::string phaseName = phases->front().name;
    backward->name = phaseName.substr(0, phaseName.find("_backward_"));
    backward->arch = options.chip;
    backward->phases = *phases;
    entry = std::make_shared<const Backward>(std::move(backward));
  }
  out = entry;
  return Status();
}

bool tilefuse::cudaAvailable(std::string *why) {
  auto driver = cu::Driver::get();
  if (driver)
    return true;
  Status s = statusOf(driver.takeError());
  if (why)
    *why = s.message();
  return false;
}

std::string tilefuse::version() { return rt::compilerVersion().str(); }

//===----------------------------------------------------------------------===//
// The float64 reference
//===----------------------------------------------------------------------===//

Status tilefuse::referenceAttention(const KernelSpec &spec, const double *q, const double *k,
                                    const double *v, double *o, double *lse,
                                    const AttentionShape &shape, const int64_t *strides) {
  std::string source, bufferName;
  if (Status s = resolveSource(spec, source, bufferName); !s.ok())
    return s;
  if (!q || !k || !v || !o || !lse)
    return Status(StatusCode::InvalidArgument, "referenceAttention: null tensor");
  // One reference per (text, specialization) for the life of the process: the JIT takes ~0.1 s.
  // Never destroyed (as Runtime::global()): a JIT torn down by exit handlers would run after
  // LLVM's own statics are gone.
  static std::mutex &mutex = *new std::mutex;
  static auto &compiled = *new llvm::StringMap<std::shared_ptr<const rt::ReferenceKernel>>;
  std::string key = bufferName + '\0' + source + '\0' + std::to_string(spec.headDim);
  for (const std::string &param : spec.params)
    key += '\0' + param;
  std::shared_ptr<const rt::ReferenceKernel> reference;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto &entry = compiled[key];
    if (!entry) {
      rt::ReferenceOptions options;
      options.headDim = spec.headDim;
      options.params = spec.params;
      auto made = rt::ReferenceKernel::compile(source, bufferName, options);
      if (!made)
        return Status(StatusCode::Compile, llvm::toString(made.takeError()));
      entry = std::move(*made);
    }
    reference = entry;
  }
  cu::AttentionShape s{shape.B, shape.H, shape.Hkv, shape.M, shape.N, shape.D};
  cu::AttentionStrides st =
      strides ? cu::AttentionStrides::fromArray(strides) : cu::AttentionStrides::contiguous(s);
  auto view = [](const double *data, std::array<int64_t, 4> sizes, std::array<int64_t, 4> step,
                 int rank) {
    rt::HostView h;
    h.data = const_cast<double *>(data);
    h.rank = rank;
    h.sizes = sizes;
    h.strides = step;
    return h;
  };
  llvm::Error error = reference->run(
      view(q, {s.B, s.H, s.M, s.D}, {st.qB, st.qH, st.qM, 1}, 4),
      view(k, {s.B, s.Hkv, s.N, s.D}, {st.kB, st.kH, st.kN, 1}, 4),
      view(v, {s.B, s.Hkv, s.N, s.D}, {st.vB, st.vH, st.vN, 1}, 4),
      view(o, {s.B, s.H, s.M, s.D}, {st.oB, st.oH, st.oM, 1}, 4),
      view(lse, {s.B, s.H, s.M, 0}, {st.lseB, st.lseH, 1, 0}, 3));
  if (error)
    return Status(StatusCode::InvalidArgument, llvm::toString(std::move(error)));
  return Status();
}
