//===- CudaKernel.cpp - compiled attention kernels on the GPU -------------===//
#include "tilefuse/runtime/cuda/CudaKernel.h"
#include "tilefuse/runtime/cuda/TensorMaps.h"

#include "DriverApi.h"
#include "ModuleLoading.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <limits>
#include <mutex>
#include <tuple>

using namespace tilefuse::runtime;
using namespace tilefuse::runtime::cuda;
using namespace tilefuse::runtime::cuda::detail;
namespace launch_abi = tilefuse::launch_abi;

//===----------------------------------------------------------------------===//
// The ABI's tensors and the sizes a kernel declares
//===----------------------------------------------------------------------===//

llvm::StringRef tilefuse::runtime::cuda::sizeParameterName(SizeParameter parameter) {
  return launch_abi::sizeName(parameter);
}

int64_t AttentionShape::size(SizeParameter parameter) const {
  switch (parameter) {
  case SizeParameter::B:
    return B;
  case SizeParameter::H:
    return H;
  case SizeParameter::Hkv:
    return Hkv;
  case SizeParameter::M:
    return M;
  case SizeParameter::N:
    return N;
  case SizeParameter::D:
    return D;
  }
  return 0;
}

llvm::ArrayRef<AbiTensor> tilefuse::runtime::cuda::abiTensors() {
  // Views of launch_abi::kTensors, which stays the one definition.
  static const std::array<AbiTensor, abiTensorCount> tensors = [] {
    std::array<AbiTensor, abiTensorCount> out{};
    for (int t = 0; t < abiTensorCount; ++t) {
      const launch_abi::Tensor &tensor = launch_abi::kTensors[t];
      out[t] = {llvm::StringRef(tensor.name), llvm::ArrayRef(tensor.dimensions, tensor.rank)};
    }
    return out;
  }();
  return tensors;
}

DeclaredSizes::DeclaredSizes() {
  for (auto &tensor : sizes)
    tensor.fill(dynamic);
}

llvm::json::Value DeclaredSizes::toJson() const {
  llvm::json::Object object;
  for (auto [index, tensor] : llvm::enumerate(abiTensors())) {
    llvm::json::Array dimensions;
    for (size_t dim = 0; dim < tensor.dimensions.size(); ++dim) {
      int64_t size = sizes[index][dim];
      dimensions.push_back(size == dynamic ? llvm::json::Value(nullptr) : llvm::json::Value(size));
    }
    object[tensor.name] = std::move(dimensions);
  }
  return object;
}

llvm::Expected<DeclaredSizes> DeclaredSizes::fromJson(const llvm::json::Value &value,
                                                      const llvm::Twine &origin) {
  auto fail = [&](const llvm::Twine &why) {
    return makeError(ErrorKind::InvalidArgument, origin + ": \"" + jsonKey + "\" " + why);
  };
  const llvm::json::Object *object = value.getAsObject();
  if (!object)
    return fail("must be an object with one array per tensor (Q, K, V, O, LSE)");
  DeclaredSizes declared;
  for (auto [index, tensor] : llvm::enumerate(abiTensors())) {
    size_t rank = tensor.dimensions.size();
    const llvm::json::Array *dimensions = object->getArray(tensor.name);
    if (!dimensions || dimensions->size() != rank)
      return fail(llvm::Twine("needs \"") + tensor.name + "\": an array of " + llvm::Twine(rank) +
                  " sizes (null where any size is accepted)");
    for (size_t dim = 0; dim < rank; ++dim) {
      const llvm::json::Value &entry = (*dimensions)[dim];
      if (entry.getAsNull())
        continue;
      std::optional<int64_t> size = entry.getAsInteger();
      if (!size || *size < 1)
        return fail(llvm::Twine(tensor.name) + "[" + llvm::Twine(dim) + "] must be null or " +
                    "a positive integer");
      declared.sizes[index][dim] = *size;
    }
  }
  for (const auto &member : *object)
    if (!llvm::any_of(abiTensors(),
                      [&](const AbiTensor &t) { return member.first.str() == t.name; }))
      return fail("has an unknown tensor \"" + member.first.str() + "\"");
  return declared;
}

//===----------------------------------------------------------------------===//
// Metadata
//===----------------------------------------------------------------------===//

llvm::StringRef tilefuse::runtime::cuda::dtypeName(ElementType type) {
  switch (type) {
  case ElementType::BF16:
    return "bf16";
  case ElementType::F16:
    return "f16";
  case ElementType::F32:
    return "f32";
  }
  return "?";
}

/// A PTX identifier, so the name can be looked up as the module's `.entry`.
static bool isPtxIdentifier(llvm::StringRef name) {
  auto isStart = [](char c) { return llvm::isAlpha(c) || c == '_' || c == '$'; };
  if (name.empty() || !isStart(name.front()))
    return false;
  return llvm::all_of(name, [&](char c) { return isStart(c) || llvm::isDigit(c); });
}

llvm::Expected<KernelMetadata> KernelMetadata::parse(llvm::StringRef json,
                                                     llvm::StringRef origin) {
  auto fail = [&](const llvm::Twine &why) {
    return makeError(ErrorKind::InvalidArgument, origin + ": " + why);
  };
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(json);
  if (!value)
    return fail("not JSON: " + llvm::toString(value.takeError()));
  const llvm::json::Object *object = value->getAsObject();
  if (!object)
    return fail("not a JSON object");

  KernelMetadata metadata;
  std::optional<llvm::StringRef> name = object->getString("name");
  if (!name)
    return fail("missing string \"name\"");
  if (!isPtxIdentifier(*name))
    return fail("\"name\" '" + *name + "' is not a PTX entry name");
  metadata.name = name->str();

  std::optional<llvm::StringRef> dtype = object->getString("dtype");
  if (!dtype)
    return fail("missing string \"dtype\"");
  if (*dtype == "bf16")
    metadata.dtype = ElementType::BF16;
  else if (*dtype == "f16")
    metadata.dtype = ElementType::F16;
  else
    return fail("\"dtype\" must be bf16 or f16, not '" + *dtype + "'");

  constexpr int64_t maxUnsigned = std::numeric_limits<unsigned>::max();
  struct {
    const char *key;
    int64_t *field;
    int64_t min, max;
  } integers[] = {
      {"block_m", &metadata.blockM, 1, maxUnsigned},
      {"block_n", &metadata.blockN, 1, maxUnsigned},
      {"threads", &metadata.threads, 1, 1024}, // the CUDA limit per block
      {"head_dim", &metadata.headDim, 1, maxUnsigned},
      {"shared_bytes", &metadata.sharedBytes, 0, maxUnsigned},
  };
  for (const auto &integer : integers) {
    std::optional<int64_t> v = object->getInteger(integer.key);
    if (!v)
      return fail(llvm::Twine("missing integer \"") + integer.key + "\"");
    if (*v < integer.min || *v > integer.max)
      return fail(llvm::Twine("\"") + integer.key + "\" is " + llvm::Twine(*v) +
                  ", outside [" + llvm::Twine(integer.min) + ", " + llvm::Twine(integer.max) +
                  "]");
    *integer.field = *v;
  }

  for (auto [key, field] : {std::pair{"split_kv", &metadata.splitKv},
                             std::pair{"pack_gqa", &metadata.packGqa},
                             std::pair{"paged_kv", &metadata.pagedKv},
                             std::pair{"varlen", &metadata.varlen},
                             std::pair{"kv_tma", &metadata.kvTma},
                             std::pair{"q_tma", &metadata.qTma},
                             std::pair{"o_tma", &metadata.oTma},
                             std::pair{"persistent", &metadata.persistent},
                             std::pair{"deterministic", &metadata.deterministic}})
    if (const llvm::json::Value *flag = object->get(key)) {
      std::optional<bool> v = flag->getAsBoolean();
      if (!v)
        return fail(llvm::Twine("\"") + key + "\" must be true or false");
      *field = *v;
    }
  // The tensor maps cover B x Hkv x N x D tensors, or packed rows, at the K and V pointers: no
  // paged cache (LaunchAbi.h).
  if (metadata.kvTma && metadata.pagedKv)
    return fail("a TMA kernel (\"kv_tma\") is not paged (\"paged_kv\")");
  // Q's map covers a B x H x M x D tensor, or packed rows, as K's and V's do (LaunchAbi.h).
  if (metadata.qTma && !metadata.kvTma)
    return fail("a kernel that loads Q with TMA (\"q_tma\") reads K and V with TMA "
                "(\"kv_tma\")");
  // O's map covers a padded B x H x M x D tensor, and a split kernel stores partial outputs to
  // its workspace, not O (LaunchAbi.h).
  if (metadata.oTma && (!metadata.qTma || metadata.splitKv || metadata.varlen))
    return fail("a kernel that stores O with TMA (\"o_tma\") loads Q with TMA (\"q_tma\") and "
                "is neither split (\"split_kv\") nor varlen (\"varlen\")");
  // The persistent grid covers the program grid, plain or varlen (LaunchAbi.h).
  if (metadata.persistent && (metadata.splitKv || metadata.pagedKv))
    return fail("a persistent kernel (\"persistent\") is neither split (\"split_kv\") nor "
                "paged (\"paged_kv\")");

  if (const llvm::json::Value *phase = object->get("backward_phase")) {
    std::optional<llvm::StringRef> v = phase->getAsString();
    if (!v || llvm::none_of(launch_abi::kBackwardPhases, [&](launch_abi::BackwardPhase p) {
          return *v == launch_abi::backwardPhaseName(p);
        }))
      return fail("\"backward_phase\" must be preprocess, key_gradients or query_gradients");
    if (metadata.splitKv || metadata.pagedKv || metadata.varlen || metadata.kvTma ||
        metadata.persistent)
      return fail("a backward kernel (\"backward_phase\") has the plain launch form");
    metadata.backwardPhase = v->str();
  }

  if (const llvm::json::Value *pageSize = object->get("page_size")) {
    std::optional<int64_t> v = pageSize->getAsInteger();
    if (!v || *v < 1 || !metadata.pagedKv)
      return fail("\"page_size\" must be a positive integer of a paged kernel (\"paged_kv\")");
    metadata.pageSize = *v;
  }

  if (const llvm::json::Value *scale = object->get("scale")) {
    std::optional<double> v = scale->getAsNumber();
    if (!v || !(*v > 0))
      return fail("\"scale\" must be a positive number");
    metadata.scale = *v;
  }

  const llvm::json::Value *declared = object->get(DeclaredSizes::jsonKey);
  if (!declared)
    return fail(llvm::Twine("missing \"") + DeclaredSizes::jsonKey +
                "\", the sizes the kernel's signature fixes, which every launch checks (a "
                "sidecar written before tilefuse recorded them): compile the kernel again");
  auto declaredSizes = DeclaredSizes::fromJson(*declared, origin);
  if (!declaredSizes)
    return declaredSizes.takeError();
  metadata.declaredSizes = *declaredSizes;
  // Q's last dimension is D; a sidecar that says otherwise describes no kernel.
  int64_t declaredHeadDim = metadata.declaredSizes.sizes[0][3];
  if (declaredHeadDim != DeclaredSizes::dynamic && declaredHeadDim != metadata.headDim)
    return fail("\"head_dim\" is " + llvm::Twine(metadata.headDim) + " but \"" +
                DeclaredSizes::jsonKey + "\" gives Q a head dim of " +
                llvm::Twine(declaredHeadDim));
  return metadata;
}

//===----------------------------------------------------------------------===//
// Strides and launch checks
//===----------------------------------------------------------------------===//

AttentionStrides AttentionStrides::contiguous(const AttentionShape &s) {
  AttentionStrides r;
  r.qM = r.oM = s.D;
  r.qH = r.oH = s.M * s.D;
  r.qB = r.oB = s.H * s.M * s.D;
  r.kN = r.vN = s.D;
  r.kH = r.vH = s.N * s.D;
  r.kB = r.vB = s.Hkv * s.N * s.D;
  r.lseH = s.M;
  r.lseB = s.H * s.M;
  return r;
}

std::array<int64_t, AttentionStrides::count> AttentionStrides::toArray() const {
  return {qB, qH, qM, kB, kH, kN, vB, vH, vN, oB, oH, oM, lseB, lseH};
}

AttentionStrides AttentionStrides::fromArray(const int64_t *v) {
  AttentionStrides r;
  int64_t *fields[count] = {&r.qB, &r.qH, &r.qM, &r.kB, &r.kH, &r.kN, &r.vB,
                            &r.vH, &r.vN, &r.oB, &r.oH, &r.oM, &r.lseB, &r.lseH};
  for (int i = 0; i < count; ++i)
    *fields[i] = v[i];
  return r;
}

llvm::Error tilefuse::runtime::cuda::checkDeclaredSizes(const DeclaredSizes &declared,
                                                        const AttentionShape &shape,
                                                        const llvm::Twine &prefix) {
  for (auto [index, tensor] : llvm::enumerate(abiTensors()))
    for (auto [dim, parameter] : llvm::enumerate(tensor.dimensions)) {
      int64_t size = declared.sizes[index][dim];
      int64_t given = shape.size(parameter);
      if (size != DeclaredSizes::dynamic && given != size)
        return makeError(ErrorKind::InvalidArgument,
                         prefix + tensor.name + " dimension " + llvm::Twine(dim) + " (" +
                             sizeParameterName(parameter) + ") is " + llvm::Twine(given) +
                             " but the kernel declares " + llvm::Twine(size));
    }
  return llvm::Error::success();
}

/// A TMA kernel's tensor maps of K and V, then Q's where it loads Q with TMA, then O's where it
/// also stores O with TMA (kvTensorMap), in launch_abi::kTensorMapNames order; errors name the
/// launch.
/// Packed (varlen), a row of K, V or Q is addressed through two dimensions of its row stride,
/// over a base N (Q's: M) rows before the tensor's (LaunchAbi.h), so that each sequence's rows
/// end in zeros.
static llvm::Expected<llvm::SmallVector<TensorMapArguments, launch_abi::kTensorMapCount>>
tensorMaps(const KernelMetadata &metadata, const AttentionBuffers &buffers,
             const AttentionShape &shape, const AttentionStrides &strides,
             const Varlen *varlen) {
  std::array<int64_t, 4> extents = {shape.B, shape.Hkv, shape.N, shape.D};
  std::array<int64_t, 4> queryExtents = {shape.B, shape.H, shape.M, shape.D};
  std::array<int64_t, 3> kStrides = {strides.kB, strides.kH, strides.kN},
                         vStrides = {strides.vB, strides.vH, strides.vN},
                         qStrides = {strides.qB, strides.qH, strides.qM};
  DevicePtr kBase = buffers.k, vBase = buffers.v, qBase = buffers.q;
  if (varlen) {
    extents = {std::max<int64_t>(varlen->totalK, 0) + 1, shape.Hkv, shape.N, shape.D};
    queryExtents = {std::max<int64_t>(varlen->totalQ, 0) + 1, shape.H, shape.M, shape.D};
    kStrides[0] = strides.kN;
    vStrides[0] = strides.vN;
    qStrides[0] = strides.qM;
    uint64_t elementBytes = metadata.dtype == ElementType::F32 ? 4 : 2;
    uint64_t kBack = uint64_t(shape.N) * uint64_t(strides.kN) * elementBytes;
    uint64_t vBack = uint64_t(shape.N) * uint64_t(strides.vN) * elementBytes;
    uint64_t qBack = metadata.qTma ? uint64_t(shape.M) * uint64_t(strides.qM) * elementBytes : 0;
    for (auto [tensor, base, back, rows] :
         {std::tuple{"K", kBase, kBack, "N"}, {"V", vBase, vBack, "N"}, {"Q", qBase, qBack, "M"}})
      if (base < back)
        return makeError(ErrorKind::InvalidArgument,
                         "launch of '" + metadata.name + "': a packed " + tensor +
                             " below address " + llvm::Twine(back) + " (" + rows +
                             " rows), where its tensor map's base (" + rows +
                             " rows before the tensor) would wrap");
    kBase -= kBack;
    vBase -= vBack;
    qBase -= qBack;
  }
  struct {
    const char *name;
    DevicePtr base;
    std::array<int64_t, 4> extents;
    std::array<int64_t, 3> strides;
    int64_t boxRows;
  } tensors[] = {
      {launch_abi::kTensors[1].name, kBase, extents, kStrides, metadata.blockN},
      {launch_abi::kTensors[2].name, vBase, extents, vStrides, metadata.blockN},
      {launch_abi::kTensors[0].name, qBase, queryExtents, qStrides, metadata.blockM},
      {launch_abi::kTensors[3].name, buffers.o, {shape.B, shape.H, shape.M, shape.D},
       {strides.oB, strides.oH, strides.oM}, launch_abi::kOutputBoxRows}};
  static_assert(std::size(tensors) == launch_abi::kTensorMapCount);
  llvm::SmallVector<TensorMapArguments, launch_abi::kTensorMapCount> maps;
  for (int index = 0; index < launch_abi::tensorMapCount(metadata.qTma, metadata.oTma);
       ++index) {
    const auto &tensor = tensors[index];
    auto map = kvTensorMap(tensor.name, tensor.base, tensor.extents, tensor.strides,
                           metadata.dtype, tensor.boxRows);
    if (!map)
      return makeError(ErrorKind::InvalidArgument,
                       "launch of '" + metadata.name + "': " +
                           takeReport(map.takeError()).message);
    maps.push_back(*map);
  }
  return maps;
}

llvm::Error tilefuse::runtime::cuda::validateLaunch(const KernelMetadata &metadata,
                                                    const AttentionBuffers &buffers,
                                                    const AttentionShape &shape,
                                                    const AttentionStrides &strides,
                                                    const PagedKV *paged,
                                                    const Varlen *varlen) {
  auto fail = [&](const llvm::Twine &why) {
    return makeError(ErrorKind::InvalidArgument, "launch of '" + metadata.name + "': " + why);
  };
  if (!metadata.backwardPhase.empty())
    return fail("the kernel is the " + metadata.backwardPhase + " phase of a derived backward: "
                "launch the three phases with CudaBackwardKernel");
  // Before the paged checks, whose advice (compile it paged) would not do.
  if (metadata.kvTma && paged)
    return fail("the kernel reads K and V with TMA (warp_specialize), whose tensor maps take no "
                "paged cache: compile it without warp_specialize for paged KV");
  if (metadata.varlen != (varlen != nullptr))
    return fail(metadata.varlen ? "the kernel runs on a packed batch: pass its sequence offsets"
                                : "the kernel runs on a padded batch: compile it with varlen to "
                                  "pass sequence offsets");
  if (varlen) {
    auto address = [](const int32_t *p) { return reinterpret_cast<uintptr_t>(p); };
    // A paged varlen kernel's keys are the caches': its key offsets are not read (may be null).
    for (auto [name, pointer, required] :
         {std::tuple{"query offsets", address(varlen->cuSeqlensQ), true},
          std::tuple{"key offsets", address(varlen->cuSeqlensK), !metadata.pagedKv}})
      if ((!pointer && required) || pointer % 4)
        return fail(llvm::Twine("the ") + name + " pointer must be non-null and 4-byte aligned");
    if (varlen->totalQ < 0 || varlen->totalK < 0)
      return fail("the packed tensors' rows (totalQ, totalK) must not be negative");
  }
  if (metadata.pagedKv != (paged != nullptr))
    return fail(metadata.pagedKv ? "the kernel reads a paged K/V cache: pass its page table and "
                                   "lengths"
                                 : "the kernel reads contiguous K and V: compile it with paged "
                                   "KV to pass a page table");
  if (paged) {
    if (paged->pageSize < 1 || paged->pages < 1 || paged->pagesPerSequence < 1)
      return fail("a paged launch needs page size, pages and pages per sequence of at least 1, "
                  "not " + llvm::Twine(paged->pageSize) + ", " + llvm::Twine(paged->pages) +
                  " and " + llvm::Twine(paged->pagesPerSequence));
    if (metadata.pageSize && paged->pageSize != metadata.pageSize)
      return fail("the kernel was compiled for pages of " + llvm::Twine(metadata.pageSize) +
                  " rows, not " + llvm::Twine(paged->pageSize));
    if (shape.B > 1 && paged->tableStride < paged->pagesPerSequence)
      return fail("the page table's row stride (" + llvm::Twine(paged->tableStride) +
                  ") is less than its pages per sequence (" +
                  llvm::Twine(paged->pagesPerSequence) + ")");
    if (shape.N > paged->pagesPerSequence * paged->pageSize)
      return fail("N (" + llvm::Twine(shape.N) + ", the longest sequence) is more than a table "
                  "row's " + llvm::Twine(paged->pagesPerSequence) + " pages of " +
                  llvm::Twine(paged->pageSize) + " rows");
    auto address = [](const int32_t *p) { return reinterpret_cast<uintptr_t>(p); };
    for (auto [name, pointer] : {std::pair{"page table", address(paged->pageTable)},
                                 std::pair{"lengths", address(paged->kvLengths)}})
      if (!pointer || pointer % 4)
        return fail(llvm::Twine("the ") + name + " pointer must be non-null and 4-byte aligned");
    if ((shape.B - 1) * paged->tableStride + paged->pagesPerSequence >
        std::numeric_limits<int32_t>::max())
      return fail("the page table spans more than 2^31 entries; the kernels index in 32 bits");
  }
  using P = SizeParameter;
  for (P parameter : {P::B, P::H, P::Hkv, P::M, P::N, P::D})
    if (shape.size(parameter) <= 0)
      return fail(sizeParameterName(parameter) + " must be positive, not " +
                  llvm::Twine(shape.size(parameter)));
  // Before the checks of the ABI's own rules: a kernel written for 8 heads, launched with 6,
  // is refused for that, not for whatever rule 6 heads happen to break.
  if (llvm::Error e = checkDeclaredSizes(metadata.declaredSizes, shape,
                                         "launch of '" + metadata.name + "': "))
    return e;
  if (shape.H % shape.Hkv != 0)
    return fail("H (" + llvm::Twine(shape.H) + ") is not a multiple of Hkv (" +
                llvm::Twine(shape.Hkv) + ")");
  if (shape.D != metadata.headDim)
    return fail("D is " + llvm::Twine(shape.D) + " but the kernel was compiled for head dim " +
                llvm::Twine(metadata.headDim));
  // CUDA's grid limits: x < 2^31, y and z <= 65535.
  launch_abi::Grid grid = launch_abi::programGrid(shape.B, shape.H, shape.Hkv, shape.M,
                                                  metadata.blockM, metadata.packGqa);
  if (grid.rowBlocks > std::numeric_limits<int32_t>::max())
    return fail("M (" + llvm::Twine(shape.M) + ") needs more than 2^31-1 row blocks");
  if (shape.H > 65535 || shape.B > 65535)
    return fail("H and B must be at most 65535 (grid y and z), not " + llvm::Twine(shape.H) +
                " and " + llvm::Twine(shape.B));

  std::array<int64_t, AttentionStrides::count> strideValues = strides.toArray();
  for (int i = 0; i < AttentionStrides::count; ++i)
    if (strideValues[i] < 0)
      return fail("stride " + launch_abi::strideName(i) + " is negative (" +
                  llvm::Twine(strideValues[i]) + ")");

  // The kernels compute element offsets in 32 bits: the largest offset of each tensor must fit.
  auto lastOffset = [](std::initializer_list<std::pair<int64_t, int64_t>> dims) {
    int64_t off = 0;
    for (auto [size, stride] : dims)
      off += (size - 1) * stride;
    return off;
  };
  const auto &sv = strideValues;
  // K and V: B x Hkv x N x D, or paged, pages x Hkv x page size x D; packed (varlen), every
  // tensor is one batch of the packed rows.
  std::pair<int64_t, int64_t> cacheRows =
      paged ? std::pair{paged->pages, paged->pageSize} : std::pair{shape.B, shape.N};
  std::pair<int64_t, int64_t> queryRows = {shape.B, shape.M};
  if (varlen) {
    queryRows = {1, std::max<int64_t>(varlen->totalQ, 1)};
    if (!paged)
      cacheRows = {1, std::max<int64_t>(varlen->totalK, 1)};
  }
  struct {
    const char *name;
    int64_t last;
  } extents[] = {
      {"q", lastOffset({{queryRows.first, sv[0]}, {shape.H, sv[1]}, {queryRows.second, sv[2]},
                        {shape.D, 1}})},
      {"k", lastOffset({{cacheRows.first, sv[3]}, {shape.Hkv, sv[4]}, {cacheRows.second, sv[5]},
                        {shape.D, 1}})},
      {"v", lastOffset({{cacheRows.first, sv[6]}, {shape.Hkv, sv[7]}, {cacheRows.second, sv[8]},
                        {shape.D, 1}})},
      {"o", lastOffset({{queryRows.first, sv[9]}, {shape.H, sv[10]}, {queryRows.second, sv[11]},
                        {shape.D, 1}})},
      {"lse", lastOffset({{queryRows.first, sv[12]}, {shape.H, sv[13]}, {queryRows.second, 1}})}};
  for (const auto &extent : extents)
    if (extent.last > std::numeric_limits<int32_t>::max())
      return fail(llvm::Twine(extent.name) + " spans more than 2^31 elements; the kernels "
                  "index in 32 bits");
  // Vector accesses: Q and O move element pairs (4 bytes), K and V 16-byte chunks (cp.async).
  for (int i : {0, 1, 2, 9, 10, 11})
    if (sv[i] % 2 != 0)
      return fail("stride " + launch_abi::strideName(i) + " must be even, not " +
                  llvm::Twine(sv[i]));
  for (int i : {3, 4, 5, 6, 7, 8})
    if (sv[i] % 8 != 0)
      return fail("stride " + launch_abi::strideName(i) + " must be a multiple of 8 (16-byte " +
                  "rows for the asynchronous copies), not " + llvm::Twine(sv[i]));

  uint64_t elementBytes = metadata.dtype == ElementType::F32 ? 4 : 2;
  struct {
    const char *name;
    DevicePtr address;
    uint64_t alignment;
  } pointers[] = {{"q", buffers.q, 2 * elementBytes},
                  {"k", buffers.k, 16},
                  {"v", buffers.v, 16},
                  {"o", buffers.o, 2 * elementBytes},
                  {"lse", buffers.lse, 4}};
  for (const auto &pointer : pointers) {
    if (pointer.address == 0)
      return fail(llvm::Twine(pointer.name) + " is a null pointer");
    if (pointer.address % pointer.alignment != 0)
      return fail(llvm::Twine(pointer.name) + " is not aligned as the kernel needs (" +
                  llvm::Twine(pointer.alignment) + " bytes)");
  }
  // What the driver would refuse to encode, refused here with the tensor's name.
  if (metadata.kvTma)
    if (auto maps = tensorMaps(metadata, buffers, shape, strides, varlen); !maps)
      return maps.takeError();
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// CudaKernel
//===----------------------------------------------------------------------===//

struct CudaKernel::Impl {
  KernelMetadata metadata;
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  std::string jitLog;
  int registers = 0;
  int localBytes = 0;
  int multiprocessors = 0;
  /// CTAs of this kernel one SM holds at once (cuOccupancyMaxActiveBlocksPerMultiprocessor);
  /// with the SM count, the slots a split-KV launch fills.
  int blocksPerSM = 0;

  /// A split-KV kernel's workspace (LaunchAbi.h): grown on demand; its first `zeroedCounters`
  /// bytes are zero between launches (every launch leaves its counters zero).
  mutable std::mutex workspaceMutex;
  mutable CUdeviceptr workspace = 0;
  mutable size_t workspaceBytes = 0, zeroedCounters = 0;
  mutable CUstream lastStream = nullptr;
  /// Recorded after each split launch: a launch on another stream, or a regrowth, waits for it.
  mutable CUevent lastLaunch = nullptr;

  ~Impl() {
    releaseLoaded(context, module, workspace, lastLaunch);
  }
};

CudaKernel::CudaKernel(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
CudaKernel::~CudaKernel() = default;
const KernelMetadata &CudaKernel::metadata() const { return impl->metadata; }
llvm::StringRef CudaKernel::jitLog() const { return impl->jitLog; }
int CudaKernel::registersPerThread() const { return impl->registers; }
int CudaKernel::localBytesPerThread() const { return impl->localBytes; }

llvm::Expected<std::unique_ptr<CudaKernel>> CudaKernel::load(llvm::StringRef ptx,
                                                             KernelMetadata metadata) {
  auto target = currentLoadTarget();
  if (!target)
    return target.takeError();
  const DeviceInfo *device = &target->device;

  const DriverApi &cu = api();
  auto impl = std::make_unique<Impl>();
  impl->context = target->context;
  const std::string &name = metadata.name;
  impl->multiprocessors = device->multiprocessorCount; // sizes split-KV launches

  auto module = loadPtxModule(ptx, name, impl->jitLog);
  if (!module)
    return module.takeError();
  impl->module = *module;
  auto function = loadFunction(impl->module, metadata, *device);
  if (!function)
    return function.takeError();
  impl->function = function->function;
  impl->registers = function->registers;
  impl->localBytes = function->localBytes;

  // The occupancy sizes split-KV launches; a driver that cannot say leaves the two per SM
  // these kernels are built for (registers and shared memory allow two at D <= 128).
  if (cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&impl->blocksPerSM, impl->function,
                                                     static_cast<int>(metadata.threads),
                                                     size_t(metadata.sharedBytes)) != CUDA_SUCCESS ||
      impl->blocksPerSM < 1)
    impl->blocksPerSM = 2;
  impl->metadata = std::move(metadata);
  return std::unique_ptr<CudaKernel>(new CudaKernel(std::move(impl)));
}

llvm::Expected<std::unique_ptr<CudaKernel>> CudaKernel::loadFiles(llvm::StringRef ptxPath,
                                                                  llvm::StringRef jsonPath) {
  llvm::SmallString<256> sidecar(jsonPath);
  if (sidecar.empty()) {
    sidecar = ptxPath;
    llvm::sys::path::replace_extension(sidecar, "json");
  }
  auto json = readTextFile(sidecar);
  if (!json)
    return json.takeError();
  auto metadata = KernelMetadata::parse((*json)->getBuffer(), sidecar);
  if (!metadata)
    return metadata.takeError();
  auto ptx = readTextFile(ptxPath);
  if (!ptx)
    return ptx.takeError();
  return load((*ptx)->getBuffer(), std::move(*metadata));
}

int64_t CudaKernel::splitCountFor(const AttentionShape &shape) const {
  const KernelMetadata &metadata = impl->metadata;
  if (!metadata.splitKv)
    return 1;
  launch_abi::Grid grid = launch_abi::programGrid(shape.B, shape.H, shape.Hkv, shape.M,
                                                  metadata.blockM, metadata.packGqa);
  int64_t programs = grid.batch * grid.heads * grid.rowBlocks;
  int64_t keyBlocks = (shape.N + metadata.blockN - 1) / metadata.blockN;
  int64_t slots = int64_t(std::max(impl->multiprocessors, 1)) * std::max(impl->blocksPerSM, 1);
  return chooseKeySplits(programs, slots, keyBlocks);
}

int64_t CudaKernel::chooseKeySplits(int64_t programs, int64_t slots, int64_t keyBlocks) {
  programs = std::max<int64_t>(programs, 1);
  slots = std::max<int64_t>(slots, 1);
  // A grid that fills every slot already gains only a tail from splitting, and pays the merge.
  if (programs >= slots)
    return 1;
  // Each split at least one key block, at most 128 splits; the model below weighs the fixed
  // costs (a sweep on the H200: at 512 keys, B = 8, two splits of two blocks beat one by 8%).
  int64_t most = std::clamp<int64_t>(keyBlocks, 1, 128);
  // The time of S splits, in half key blocks of one CTA: its waves, ceil(S·programs / slots),
  // each as long as a split's share of the keys plus what a CTA costs besides its key loop (the
  // Q load and the partial store: about two key blocks); then the merge, which the last CTA of
  // a row block runs alone, reading one partial per split: about half a key block each (fit to
  // the H200's B = 1 decode: at 32k S = 16 ran 9% faster than S = 32, both one wave; at 4k
  // S = 8 ran 20% faster than S = 4). The fewest splits among equals.
  constexpr int64_t ctaOverhead = 2;
  int64_t best = 1, bestTime = std::numeric_limits<int64_t>::max();
  for (int64_t s = 1; s <= most; ++s) {
    int64_t waves = (s * programs + slots - 1) / slots;
    int64_t time = 2 * waves * ((keyBlocks + s - 1) / s + ctaOverhead) + s;
    if (time < bestTime) {
      best = s;
      bestTime = time;
    }
  }
  return best;
}

/// "{1, 2, 3}".
template <typename T, size_t N> static std::string braced(const std::array<T, N> &values) {
  std::string text;
  for (T value : values)
    text += (text.empty() ? "" : ", ") + std::to_string(value);
  return "{" + text + "}";
}

/// Encodes a TMA kernel's maps of K and V (then Q, then O) into `maps`
/// (launch_abi::kTensorMapNames order).
/// Errors are ErrorKind::InvalidArgument naming the tensor, or NoDriver for a driver without
/// cuTensorMapEncodeTiled.
static llvm::Error encodeTensorMaps(const KernelMetadata &metadata,
                                    const AttentionBuffers &buffers, const AttentionShape &shape,
                                    const AttentionStrides &strides, const Varlen *varlen,
                                    CUtensorMap (&maps)[launch_abi::kTensorMapCount]) {
  const DriverApi &cu = api();
  if (!cu.cuTensorMapEncodeTiled)
    return makeError(ErrorKind::NoDriver,
                     "launch of '" + metadata.name + "': the driver has no "
                     "cuTensorMapEncodeTiled (CUDA 12.0), which kernels that read K and V with "
                     "TMA need: update the driver, or compile without warp_specialize");
  auto arguments = tensorMaps(metadata, buffers, shape, strides, varlen);
  if (!arguments)
    return arguments.takeError();
  for (int i = 0; i < int(arguments->size()); ++i) {
    const TensorMapArguments &a = (*arguments)[i];
    CUresult result = cu.cuTensorMapEncodeTiled(
        &maps[i], a.dataType, a.rank, reinterpret_cast<void *>(uintptr_t(a.globalAddress)),
        a.globalDim.data(), a.globalStrides.data(), a.boxDim.data(), a.elementStrides.data(),
        a.interleave, a.swizzle, a.l2Promotion, a.oobFill);
    // The arguments passed kvTensorMap's checks, so what the driver still refuses is most
    // likely the tensor's: say which and what was asked.
    if (llvm::Error error = check(result, "cuTensorMapEncodeTiled"))
      return makeError(ErrorKind::InvalidArgument,
                       "launch of '" + metadata.name + "': the TMA map of " +
                           launch_abi::kTensors[launch_abi::kTensorMapTensors[i]].name +
                           " (dimensions " +
                           braced(a.globalDim) + ", byte strides " +
                           braced(a.globalStrides) + ", box " + braced(a.boxDim) +
                           ") was refused: " +
                           takeReport(std::move(error)).message);
  }
  return llvm::Error::success();
}

llvm::Error CudaKernel::launch(CUstream_st *stream, const AttentionBuffers &buffers,
                               const AttentionShape &shape, const AttentionStrides &strides,
                               int64_t kvSplits, const PagedKV *paged,
                               const Varlen *varlen) const {
  const KernelMetadata &metadata = impl->metadata;
  if (llvm::Error error = validateLaunch(metadata, buffers, shape, strides, paged, varlen))
    return error;

  if (llvm::Error error = useLoadedContext(impl->context, metadata.name))
    return error;
  const DriverApi &cu = api();

  // cuLaunchKernel takes the address of each parameter, in the ABI's order (LaunchAbi.h).
  CUdeviceptr pointers[] = {buffers.q, buffers.k, buffers.v, buffers.o, buffers.lse};
  static_assert(std::size(pointers) == launch_abi::kTensorCount);
  std::array<int64_t, launch_abi::kSizeCount> sizes;
  for (int i = 0; i < launch_abi::kSizeCount; ++i)
    sizes[i] = shape.size(launch_abi::kSizes[i]);
  std::array<int64_t, AttentionStrides::count> strideValues = strides.toArray();
  void *parameters[launch_abi::kParameterCount + launch_abi::kPagedParameterCount +
                   launch_abi::kVarlenPointerCount + launch_abi::kSplitParameterCount +
                   launch_abi::kTensorMapCount];
  for (int i = 0; i < launch_abi::kTensorCount; ++i)
    parameters[i] = &pointers[i];
  for (int i = 0; i < launch_abi::kSizeCount; ++i)
    parameters[launch_abi::kFirstSize + i] = &sizes[i];
  for (int i = 0; i < launch_abi::kStrideCount; ++i)
    parameters[launch_abi::kFirstStride + i] = &strideValues[i];
  // The paged or varlen parameters, then the split ones (LaunchAbi.h).
  int firstSplit = launch_abi::kParameterCount;
  CUdeviceptr pagedPointers[launch_abi::kPagedPointerCount] = {};
  int64_t pagedSizes[launch_abi::kPagedSizeCount] = {};
  if (paged) {
    pagedPointers[0] = reinterpret_cast<CUdeviceptr>(paged->pageTable);
    pagedPointers[1] = reinterpret_cast<CUdeviceptr>(paged->kvLengths);
    pagedSizes[0] = paged->tableStride;
    pagedSizes[1] = paged->pageSize;
    for (int i = 0; i < launch_abi::kPagedPointerCount; ++i)
      parameters[firstSplit++] = &pagedPointers[i];
    for (int i = 0; i < launch_abi::kPagedSizeCount; ++i)
      parameters[firstSplit++] = &pagedSizes[i];
  }
  CUdeviceptr varlenPointers[launch_abi::kVarlenPointerCount] = {};
  if (varlen) {
    varlenPointers[0] = reinterpret_cast<CUdeviceptr>(varlen->cuSeqlensQ);
    varlenPointers[1] = reinterpret_cast<CUdeviceptr>(varlen->cuSeqlensK);
    for (int i = 0; i < launch_abi::kVarlenPointerCount; ++i)
      parameters[firstSplit++] = &varlenPointers[i];
  }

  // A TMA kernel's tensor maps, encoded before the split workspace is touched so that a map
  // the driver refuses leaves no trace. cuLaunchKernel copies the parameters: the maps need to
  // live only until it returns.
  CUtensorMap maps[launch_abi::kTensorMapCount];
  if (metadata.kvTma)
    if (llvm::Error error = encodeTensorMaps(metadata, buffers, shape, strides, varlen, maps))
      return error;

  int64_t splits = 1;
  CUdeviceptr splitPointers[launch_abi::kSplitPointerCount] = {};
  std::unique_lock<std::mutex> workspaceLock(impl->workspaceMutex, std::defer_lock);
  if (metadata.splitKv) {
    splits = kvSplits > 0 ? kvSplits : splitCountFor(shape);
    if (kvSplits < 0)
      return makeError(ErrorKind::InvalidArgument,
                       "launch of '" + metadata.name + "': kvSplits must be 0 (choose) or more, "
                       "not " + llvm::Twine(kvSplits));
    launch_abi::SplitWorkspace layout =
        launch_abi::splitWorkspace(splits, shape.B, shape.H, shape.Hkv, shape.M,
                                   metadata.headDim, metadata.blockM, metadata.packGqa);
    if (splits * shape.B * shape.H * shape.M * metadata.headDim > INT32_MAX)
      return makeError(ErrorKind::InvalidArgument,
                       "launch of '" + metadata.name + "': the split workspace (" +
                           llvm::Twine(splits) + " splits) has more elements than 32-bit "
                           "offsets reach: launch with fewer kvSplits");
    workspaceLock.lock();
    // The workspace is used in stream order: a launch on another stream, or a regrowth, waits
    // for the last launch (an event this object owns, so no stream of the caller's is touched).
    if (!impl->lastLaunch)
      if (llvm::Error error = check(cu.cuEventCreate(&impl->lastLaunch, 0x2 /*disable timing*/),
                                    "cuEventCreate (split-KV workspace)"))
        return error;
    bool regrow = size_t(layout.bytes) > impl->workspaceBytes;
    if (impl->workspace && (impl->lastStream != stream || regrow))
      if (llvm::Error error = check(cu.cuEventSynchronize(impl->lastLaunch),
                                    "cuEventSynchronize (split-KV workspace)"))
        return error;
    if (regrow) {
      if (impl->workspace) {
        (void)cu.cuMemFree_v2(impl->workspace);
        impl->workspace = 0;
        impl->workspaceBytes = impl->zeroedCounters = 0;
      }
      size_t bytes = std::max<size_t>(layout.bytes, 1 << 20);
      if (llvm::Error error = check(cu.cuMemAlloc_v2(&impl->workspace, bytes),
                                    "cuMemAlloc (split-KV workspace)"))
        return error;
      impl->workspaceBytes = bytes;
    }
    if (size_t(layout.counterBytes) > impl->zeroedCounters) {
      if (llvm::Error error = check(cu.cuMemsetD8Async(impl->workspace, 0, layout.counterBytes,
                                                       stream),
                                    "cuMemsetD8Async (split-KV counters)"))
        return error;
      impl->zeroedCounters = layout.counterBytes;
    }
    impl->lastStream = stream;
    splitPointers[0] = impl->workspace + layout.outputPartOffset;
    splitPointers[1] = impl->workspace + layout.lsePartOffset;
    splitPointers[2] = impl->workspace + layout.countersOffset;
    for (int i = 0; i < launch_abi::kSplitPointerCount; ++i)
      parameters[firstSplit + i] = &splitPointers[i];
    parameters[firstSplit + launch_abi::kSplitPointerCount] = &splits;
  } else if (kvSplits > 1) {
    return makeError(ErrorKind::InvalidArgument,
                     "launch of '" + metadata.name + "': kvSplits " + llvm::Twine(kvSplits) +
                         " for a kernel compiled without split-KV");
  }
  // The maps come last, after the split parameters (LaunchAbi.h).
  if (metadata.kvTma) {
    int firstMap = firstSplit + (metadata.splitKv ? launch_abi::kSplitParameterCount : 0);
    for (int i = 0; i < launch_abi::tensorMapCount(metadata.qTma, metadata.oTma); ++i)
      parameters[firstMap + i] = &maps[i];
  }

  launch_abi::Grid grid = launch_abi::programGrid(shape.B, shape.H, shape.Hkv, shape.M,
                                                  metadata.blockM, metadata.packGqa);
  auto gridX = static_cast<unsigned>(grid.rowBlocks * splits);
  auto gridY = static_cast<unsigned>(grid.heads), gridZ = static_cast<unsigned>(grid.batch);
  if (metadata.persistent) {
    gridX = static_cast<unsigned>(
        launch_abi::persistentPrograms(grid, impl->multiprocessors, impl->blocksPerSM));
    gridY = gridZ = 1;
  }
  auto threads = static_cast<unsigned>(metadata.threads);
  auto sharedBytes = static_cast<unsigned>(metadata.sharedBytes);
  if (llvm::Error error = check(
          cu.cuLaunchKernel(impl->function, gridX, gridY, gridZ, threads, 1, 1, sharedBytes,
                            stream, parameters, nullptr),
          "cuLaunchKernel(" + metadata.name + ", grid " + llvm::Twine(gridX) + "x" +
              llvm::Twine(gridY) + "x" + llvm::Twine(gridZ) + ", block " + llvm::Twine(threads) +
              ", " + llvm::Twine(sharedBytes) + " shared bytes)"))
    return error;
  if (metadata.splitKv)
    return check(cu.cuEventRecord(impl->lastLaunch, stream), "cuEventRecord (split-KV workspace)");
  return llvm::Error::success();
}
