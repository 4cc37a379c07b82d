//===- CudaBackwardKernel.cpp - the derived backward's launches -----------===//
#include "tilefuse/runtime/cuda/CudaBackwardKernel.h"

#include "DriverApi.h"
#include "ModuleLoading.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <mutex>

using namespace tilefuse::runtime;
using namespace tilefuse::runtime::cuda;
using namespace tilefuse::runtime::cuda::detail;
namespace abi = tilefuse::launch_abi;

BackwardStrides BackwardStrides::contiguous(const AttentionShape &s) {
  BackwardStrides strides;
  for (int t = 0; t < abi::kBackwardDeltaTensor; ++t) {
    const abi::Tensor &tensor = abi::kBackwardTensors[t];
    int64_t stride = 1;
    for (int d = tensor.rank - 1; d > 0; --d) {
      stride *= s.size(tensor.dimensions[d]);
      strides.values[abi::backwardFirstStride(t) + d - 1] = stride;
    }
  }
  return strides;
}

BackwardStrides BackwardStrides::fromPublicOrder(const int64_t *strides) {
  static_assert(abi::kBackwardPublicStrideCount == count);
  BackwardStrides s;
  int next = 0;
  for (int t : abi::kBackwardPublicOrder)
    for (int d = 0; d + 1 < abi::kBackwardTensors[t].rank; ++d)
      s.values[abi::backwardFirstStride(t) + d] = strides[next++];
  return s;
}

struct CudaBackwardKernel::Impl {
  std::vector<KernelMetadata> phases;
  /// The first phase's sidecar as a forward kernel's, to check a launch's tensors with
  /// validateLaunch (the forward's, and the gradients in their places).
  KernelMetadata asForward;
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  std::vector<CUfunction> functions;
  std::vector<int> registers, localBytes;
  /// The f32 workspaces (abi::backwardWorkspace), grown on demand, used in stream order: a
  /// launch on another stream than the last one's waits for it on the device (an event this
  /// object owns), a regrowth for every earlier launch.
  mutable std::mutex workspaceMutex;
  mutable CUdeviceptr workspace = 0;
  mutable size_t workspaceBytes = 0;
  mutable CUevent lastLaunch = nullptr;
  mutable CUstream lastStream = nullptr;

  ~Impl() {
    releaseLoaded(context, module, workspace, lastLaunch);
  }
};

CudaBackwardKernel::CudaBackwardKernel(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
CudaBackwardKernel::~CudaBackwardKernel() = default;
const std::vector<KernelMetadata> &CudaBackwardKernel::phases() const { return impl->phases; }
int CudaBackwardKernel::registersPerThread(size_t phase) const {
  return impl->registers.at(phase);
}
int CudaBackwardKernel::localBytesPerThread(size_t phase) const {
  return impl->localBytes.at(phase);
}

llvm::Expected<std::unique_ptr<CudaBackwardKernel>>
CudaBackwardKernel::load(llvm::StringRef ptx, std::vector<KernelMetadata> phases) {
  if (phases.size() != std::size(abi::kBackwardPhases))
    return makeError(ErrorKind::InvalidArgument,
                     "a derived backward has three phases, not " + llvm::Twine(phases.size()));
  for (auto [metadata, phase] : llvm::zip_equal(phases, abi::kBackwardPhases))
    if (metadata.backwardPhase != abi::backwardPhaseName(phase))
      return makeError(ErrorKind::InvalidArgument,
                       "backward kernel '" + metadata.name + "' is phase '" +
                           metadata.backwardPhase + "' where '" + abi::backwardPhaseName(phase) +
                           "' is launched");
  auto target = currentLoadTarget();
  if (!target)
    return target.takeError();
  const DeviceInfo *device = &target->device;
  auto impl = std::make_unique<Impl>();
  impl->context = target->context;
  std::string jitLog;
  auto module = loadPtxModule(ptx, phases.front().name, jitLog);
  if (!module)
    return module.takeError();
  impl->module = *module;
  for (const KernelMetadata &metadata : phases) {
    auto function = loadFunction(impl->module, metadata, *device);
    if (!function)
      return function.takeError();
    impl->functions.push_back(function->function);
    impl->registers.push_back(function->registers);
    impl->localBytes.push_back(function->localBytes);
  }
  impl->asForward = phases.front();
  impl->asForward.backwardPhase.clear();
  impl->phases = std::move(phases);
  return std::unique_ptr<CudaBackwardKernel>(new CudaBackwardKernel(std::move(impl)));
}

llvm::Expected<std::unique_ptr<CudaBackwardKernel>>
CudaBackwardKernel::loadData(llvm::StringRef ptx, llvm::StringRef json, llvm::StringRef origin) {
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(json);
  if (!value)
    return makeError(ErrorKind::InvalidArgument,
                     origin + ": " + llvm::toString(value.takeError()));
  const llvm::json::Array *array = value->getAsArray();
  if (!array)
    return makeError(ErrorKind::InvalidArgument,
                     origin + ": a backward's sidecar is a JSON array of its phases' metadata "
                              "(tilefuse compile --backward)");
  std::vector<KernelMetadata> phases;
  for (const llvm::json::Value &phase : *array) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << phase;
    auto metadata = KernelMetadata::parse(text, origin);
    if (!metadata)
      return metadata.takeError();
    phases.push_back(std::move(*metadata));
  }
  return load(ptx, std::move(phases));
}

llvm::Expected<std::unique_ptr<CudaBackwardKernel>>
CudaBackwardKernel::loadFiles(llvm::StringRef ptxPath, llvm::StringRef jsonPath) {
  llvm::SmallString<256> sidecar(jsonPath);
  if (sidecar.empty()) {
    sidecar = ptxPath;
    llvm::sys::path::replace_extension(sidecar, "json");
  }
  auto json = readTextFile(sidecar);
  if (!json)
    return json.takeError();
  auto ptx = readTextFile(ptxPath);
  if (!ptx)
    return ptx.takeError();
  return loadData((*ptx)->getBuffer(), (*json)->getBuffer(), sidecar);
}

llvm::Error CudaBackwardKernel::launch(CUstream_st *stream, const BackwardBuffers &buffers,
                                       const AttentionShape &shape,
                                       const BackwardStrides &strides) const {
  const KernelMetadata &first = impl->phases.front();
  // The forward's checks, on the forward's tensors and on the gradients in their places (dQ
  // like Q, dK and dV like K and V, dO like O): sizes, declared sizes, pointers, strides.
  const KernelMetadata &forward = impl->asForward;
  auto forwardStrides = [&](std::array<int, abi::kTensorCount> tensors) {
    std::array<int64_t, AttentionStrides::count> values{};
    for (int t = 0; t < abi::kTensorCount; ++t)
      for (int d = 0; d + 1 < abi::kTensors[t].rank; ++d)
        values[abi::firstStride(t) + d] =
            strides.values[abi::backwardFirstStride(tensors[t]) + d];
    return AttentionStrides::fromArray(values.data());
  };
  if (llvm::Error error = validateLaunch(forward, {buffers.q, buffers.k, buffers.v, buffers.o,
                                                   buffers.lse},
                                         shape, forwardStrides({0, 1, 2, 3, 5})))
    return error;
  if (llvm::Error error = validateLaunch(forward, {buffers.dq, buffers.dk, buffers.dv,
                                                   buffers.dO, buffers.lse},
                                         shape, forwardStrides({6, 7, 8, 4, 5}))) {
    ErrorReport report = takeReport(std::move(error));
    return makeError(report.kind, report.message + " (the gradients dQ, dK, dV and dO in the "
                                                   "places of Q, K, V and O)");
  }

  if (llvm::Error error = useLoadedContext(impl->context, first.name))
    return error;
  const DriverApi &cu = api();

  // The workspaces, in stream order: a regrowth waits for every earlier launch.
  abi::BackwardWorkspace layout = abi::backwardWorkspace(shape.B, shape.H, shape.M,
                                                         first.headDim, first.deterministic);
  std::lock_guard<std::mutex> lock(impl->workspaceMutex);
  if (!impl->lastLaunch)
    if (llvm::Error error = check(cu.cuEventCreate(&impl->lastLaunch, 0x2 /*disable timing*/),
                                  "cuEventCreate (backward workspace)"))
      return error;
  if (impl->lastStream && impl->lastStream != stream)
    if (llvm::Error error =
            cu.cuStreamWaitEvent
                ? check(cu.cuStreamWaitEvent(stream, impl->lastLaunch, 0),
                        "cuStreamWaitEvent (backward workspace)")
                : check(cu.cuEventSynchronize(impl->lastLaunch),
                        "cuEventSynchronize (backward workspace)"))
      return error;
  if (size_t(layout.bytes) > impl->workspaceBytes) {
    if (impl->workspace) {
      if (llvm::Error error = check(cu.cuCtxSynchronize(), "cuCtxSynchronize (backward "
                                                           "workspace)"))
        return error;
      (void)cu.cuMemFree_v2(impl->workspace);
      impl->workspace = 0;
      impl->workspaceBytes = 0;
    }
    size_t bytes = std::max<size_t>(layout.bytes, 1 << 20);
    if (llvm::Error error =
            check(cu.cuMemAlloc_v2(&impl->workspace, bytes), "cuMemAlloc (backward workspace)"))
      return error;
    impl->workspaceBytes = bytes;
  }

  CUdeviceptr pointers[abi::kBackwardTensorCount] = {
      buffers.q,  buffers.k,  buffers.v,  buffers.o,
      buffers.dO, buffers.lse, buffers.dq, buffers.dk,
      buffers.dv, impl->workspace + layout.deltaOffset,
      first.deterministic ? 0 : impl->workspace + layout.accumulatorOffset};
  std::array<int64_t, abi::kSizeCount> sizes;
  for (int i = 0; i < abi::kSizeCount; ++i)
    sizes[i] = shape.size(abi::kSizes[i]);
  std::array<int64_t, abi::kBackwardStrideCount> strideValues{};
  std::copy(strides.values.begin(), strides.values.end(), strideValues.begin());
  // The workspaces are contiguous.
  int64_t D = first.headDim;
  int delta = abi::backwardFirstStride(abi::kBackwardDeltaTensor);
  strideValues[delta] = shape.H * shape.M;
  strideValues[delta + 1] = shape.M;
  int accumulator = abi::backwardFirstStride(abi::kBackwardAccumulatorTensor);
  strideValues[accumulator] = shape.H * shape.M * D;
  strideValues[accumulator + 1] = shape.M * D;
  strideValues[accumulator + 2] = D;
  void *parameters[abi::kBackwardParameterCount];
  for (int i = 0; i < abi::kBackwardTensorCount; ++i)
    parameters[i] = &pointers[i];
  for (int i = 0; i < abi::kSizeCount; ++i)
    parameters[abi::kBackwardFirstSize + i] = &sizes[i];
  for (int i = 0; i < abi::kBackwardStrideCount; ++i)
    parameters[abi::kBackwardFirstStride + i] = &strideValues[i];

  for (auto [metadata, function, phase] :
       llvm::zip_equal(impl->phases, impl->functions, abi::kBackwardPhases)) {
    abi::Grid grid = abi::backwardGrid(phase, shape.B, shape.H, shape.Hkv, shape.M, shape.N,
                                       metadata.blockM, metadata.blockN);
    auto gridX = static_cast<unsigned>(grid.rowBlocks), gridY = static_cast<unsigned>(grid.heads),
         gridZ = static_cast<unsigned>(grid.batch);
    auto threads = static_cast<unsigned>(metadata.threads);
    auto sharedBytes = static_cast<unsigned>(metadata.sharedBytes);
    if (llvm::Error error = check(
            cu.cuLaunchKernel(function, gridX, gridY, gridZ, threads, 1, 1, sharedBytes, stream,
                              parameters, nullptr),
            "cuLaunchKernel(" + metadata.name + ", grid " + llvm::Twine(gridX) + "x" +
                llvm::Twine(gridY) + "x" + llvm::Twine(gridZ) + ", block " +
                llvm::Twine(threads) + ", " + llvm::Twine(sharedBytes) + " shared bytes)"))
      return error;
  }
  impl->lastStream = stream;
  return check(cu.cuEventRecord(impl->lastLaunch, stream), "cuEventRecord (backward workspace)");
}
