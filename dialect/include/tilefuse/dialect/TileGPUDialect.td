//===- TileGPUDialect.td - the GPU-level dialect -----------*- tablegen -*-===//
//
// The `tgpu` dialect is level 5 of shared/DESIGN.md: a tiled kernel with its GPU schedule made
// explicit. Where a block lives (which thread holds which element, how a shared tile is
// swizzled) is an attribute of its type; shared buffers and multi-stage rings are values;
// asynchronous work (cp.async, TMA, wgmma) completes on tokens, mbarriers or an explicit wait.
// Upstream `nvgpu` provides the async token and its groups, mbarriers and the tensor-map
// descriptor; this dialect adds only what upstream lacks.
//
//===----------------------------------------------------------------------===//

#ifndef TILEFUSE_DIALECT_TILEGPUDIALECT_TD
#define TILEFUSE_DIALECT_TILEGPUDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/TensorEncoding.td"
include "tilefuse/dialect/TileGPUInterfaces.td"

def TGPU_Dialect : Dialect {
  let name = "tgpu";
  let summary = "GPU-level tile kernels: layouts, shared buffers, async copies, warp roles";
  let description = [{
    The `tgpu` dialect carries the decisions a GPU kernel makes that the `tile` dialect leaves
    open:

    * **register layouts**, as encodings of block tensor types: the m16n8 `mma.sync`
      accumulator (`#tgpu.mma_acc`), the m64nN `wgmma` accumulator (`#tgpu.wgmma_acc`), the
      m16k16 A-operand fragments (`#tgpu.operand_a`) and the row vectors of an accumulator
      (`#tgpu.acc_rows`);
    * **shared tiles** (`!tgpu.buffer`) with their swizzle (`#tgpu.shared`), and multi-stage
      rings of them (`!tgpu.ring`), as SSA values;
    * **asynchronous work**: `cp.async` copies completing on `!nvgpu.device.async.token`
      groups, TMA loads completing on an `nvgpu` mbarrier, and `wgmma` issued asynchronously
      with a wait that takes and returns the registers it guards;
    * **synchronisation and warp roles**: named barriers and `tgpu.warp_specialize`, whose
      regions are the partitions of a CTA's warps, each with its register budget.

    The index arithmetic of every layout lives in one place (dialect/lib/GPULayouts.cpp,
    declared in tilefuse/dialect/GPULayouts.h); the attributes and the lowerings call it.
  }];
  let cppNamespace = "::tilefuse::tgpu";
  let dependentDialects = ["::mlir::nvgpu::NVGPUDialect"];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
}

class TGPU_Op<string mnemonic, list<Trait> traits = []> : Op<TGPU_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def TGPU_SharedSwizzle : I32EnumAttr<"SharedSwizzle",
    "how a shared tile's 16-byte chunks are placed", [
    // Rows one after the other, unpermuted.
    I32EnumAttrCase<"None", 0, "none">,
    // Rows one after the other; 16-byte chunk c of row r is stored at chunk c ^ (r % 8) of the
    // row (the mma.sync path: ldmatrix's eight row addresses hit eight different bank groups).
    I32EnumAttrCase<"ChunkXor", 1, "chunk_xor">,
    // wgmma's canonical 128-byte swizzle (and TMA's SWIZZLE_128B): the columns split into
    // panels of 128 bytes, each panel rows x 128 bytes; within a panel, chunk c of row r is at
    // chunk c ^ (r % 8). The pattern repeats every 8 rows (1024 bytes).
    I32EnumAttrCase<"Canonical128B", 2, "canonical_128b">
  ]> {
  let cppNamespace = "::tilefuse::tgpu";
  let genSpecializedAttr = 0;
}

def TGPU_BarrierKind : I32EnumAttr<"BarrierKind", "what a thread does at a named barrier", [
    // bar.sync: arrive and wait for the barrier's thread count.
    I32EnumAttrCase<"Sync", 0, "sync">,
    // bar.arrive: arrive without waiting (a producer signalling consumers).
    I32EnumAttrCase<"Arrive", 1, "arrive">
  ]> {
  let cppNamespace = "::tilefuse::tgpu";
}

def TGPU_WarpgroupBarrier : I32EnumAttr<"WarpgroupBarrier",
    "which of its partition's per-warpgroup barriers a warpgroup uses", [
    // Barrier `id + w` for warpgroup w of the partition.
    I32EnumAttrCase<"Own", 0, "own">,
    // Barrier `id + (w + 1) % N`, the next warpgroup's (N warpgroups in the partition).
    I32EnumAttrCase<"Next", 1, "next">
  ]> {
  let cppNamespace = "::tilefuse::tgpu";
}

//===----------------------------------------------------------------------===//
// Register layouts (encodings of block tensor types)
//===----------------------------------------------------------------------===//

class TGPU_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<TGPU_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

class TGPU_RegisterLayoutAttr<string name, string attrMnemonic>
    : TGPU_Attr<name, attrMnemonic, [TGPU_RegisterLayoutInterface,
                                     DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let extraClassDeclaration = [{
    ::tilefuse::tgpu::RegisterLayout getRegisterLayout(::llvm::ArrayRef<int64_t> shape) const;
  }];
}

def TGPU_MmaAccumulatorLayoutAttr : TGPU_RegisterLayoutAttr<"MmaAccumulatorLayout", "mma_acc"> {
  let summary = "the mma.sync m16n8 accumulator layout, warps along rows";
  let description = [{
    A `rows x cols` block with `rows = warps * rows_per_warp`. Warp `w` owns rows
    `[w * rows_per_warp, (w + 1) * rows_per_warp)`, as `rows_per_warp / 16` m16 tiles (16 or
    32 rows per warp). Lane `l` with `g = l / 4`, `c = l % 4` holds
    `rows_per_warp / 16 * cols / 8 * 4` values; value `v` is in m-tile `t = v / (cols/8*4)`,
    n-tile `j = v % (cols/8*4) / 4`, register `r = v % 4` of the m16n8 fragment:
    row `w * rows_per_warp + 16t + g + 8 * (r / 2)`, column `8j + 2c + r % 2`.
    The element type is whatever the block holds (f32 scores, i1 predicates).

    ```mlir
    tensor<64x128xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
    ```
  }];
  let parameters = (ins "int64_t":$warps, "int64_t":$rows_per_warp);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def TGPU_WgmmaAccumulatorLayoutAttr
    : TGPU_RegisterLayoutAttr<"WgmmaAccumulatorLayout", "wgmma_acc"> {
  let summary = "the wgmma m64nN accumulator layout, warpgroups along rows";
  let description = [{
    A `rows x cols` block with `rows = 64 * warpgroups` and `cols` the instruction's N (a
    multiple of 8 up to 256). Warpgroup `k` owns rows `[64k, 64k + 64)`; within it, warp
    `w` (of 4) owns 16 rows, and each thread holds `cols / 2` values placed as in the m16n8
    accumulator of one m-tile: value `v`, `j = v / 4`, `r = v % 4` is at row
    `64k + 16w + g + 8 * (r / 2)`, column `8j + 2c + r % 2`. (So this layout equals
    `#tgpu.mma_acc<warps = 4 * warpgroups, rows_per_warp = 16>`; it is a separate attribute
    because a wgmma writes it a warpgroup at a time, and a pass must know which.)
  }];
  let parameters = (ins "int64_t":$warpgroups);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def TGPU_OperandALayoutAttr : TGPU_RegisterLayoutAttr<"OperandALayout", "operand_a"> {
  let summary = "m16k16 A-operand fragments of mma.sync and register-A wgmma";
  let description = [{
    A `rows x cols` block of 16-bit values (`cols` the contraction, a multiple of 16) with
    `rows = warps * rows_per_warp`. Each thread holds values in pairs, one 32-bit register per
    pair (the lower column in the low half). Value `v` is in fragment `f = v / 8` (m-tile
    `t = f / (cols/16)`, k-tile `kt = f % (cols/16)`), register `q = v % 8 / 2`, half `v % 2`:
    row `w * rows_per_warp + 16t + g + 8 * (q % 2)`, column `16kt + 8 * (q / 2) + 2c + v % 2`.
    A warpgroup's register-A wgmma uses the same fragments (rows_per_warp = 16).

    The value order equals the accumulator layout's for the same rows and columns, so a
    probability block P in `#tgpu.mma_acc` (or `#tgpu.wgmma_acc`) becomes the A operand of
    P x V by converting each value in place: no data moves between threads.
  }];
  let parameters = (ins "int64_t":$warps, "int64_t":$rows_per_warp);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def TGPU_AccumulatorRowsLayoutAttr : TGPU_RegisterLayoutAttr<"AccumulatorRowsLayout", "acc_rows"> {
  let summary = "a vector with one value per row of an accumulator layout";
  let description = [{
    The layout of a row reduction of a block in `parent` (an `#tgpu.mma_acc` or
    `#tgpu.wgmma_acc`), or of a vector broadcast along a block's rows: each thread holds the
    rows it holds in `parent` (two per m-tile: `g` and `g + 8`); the four lanes of a quad hold
    the same rows.
  }];
  let parameters = (ins "::mlir::Attribute":$parent);
  let assemblyFormat = "`<` $parent `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Shared memory
//===----------------------------------------------------------------------===//

def TGPU_SharedLayoutAttr : TGPU_Attr<"SharedLayout", "shared"> {
  let summary = "the byte layout of a shared tile: row-major rows with a swizzle";
  let description = [{
    Where element (row, col) of a shared tile is stored, given by the swizzle (see the
    `SharedSwizzle` cases). The offset arithmetic is `sharedByteOffset` in GPULayouts.h.

    ```mlir
    !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>
    ```
  }];
  let parameters = (ins EnumParameter<TGPU_SharedSwizzle>:$swizzle);
  let assemblyFormat = "`<` $swizzle `>`";
}

class TGPU_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<TGPU_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def TGPU_BufferType : TGPU_Type<"Buffer", "buffer"> {
  let summary = "a 2-D tile in shared memory with its layout";
  let description = [{
    A `rows x cols` tile of a CTA's shared memory. The shape is static; the layout says where
    each element lies. A shared-memory allocation pass gives each buffer its offset.

    ```mlir
    !tgpu.buffer<64x128xbf16, #tgpu.shared<chunk_xor>>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$shape, "::mlir::Type":$element_type,
                        "::tilefuse::tgpu::SharedLayoutAttr":$layout);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getRows() const { return getShape()[0]; }
    int64_t getCols() const { return getShape()[1]; }
    /// The tile's geometry for the layout arithmetic of GPULayouts.h.
    ::tilefuse::tgpu::SharedTile getSharedTile() const;
    /// Bytes the tile occupies, and the alignment its swizzle needs.
    int64_t getSizeInBytes() const;
    int64_t getAlignment() const;
  }];
}

def TGPU_RingType : TGPU_Type<"Ring", "ring"> {
  let summary = "a ring of equal shared buffers, one per pipeline stage";
  let description = [{
    `stages` buffers of one type: a software pipeline fills stage `i % stages` while it reads
    an older one. `tgpu.stage` selects one.

    ```mlir
    !tgpu.ring<2 x 64x128xbf16, #tgpu.shared<canonical_128b>>
    ```
  }];
  let parameters = (ins "int64_t":$stages, "::tilefuse::tgpu::BufferType":$buffer);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Bytes from one stage's start to the next's: the buffer's size rounded up to its
    /// alignment, so that every stage starts aligned.
    int64_t getStageStrideInBytes() const;
    /// Bytes the whole ring occupies (stages x stride), and the alignment of its first stage.
    int64_t getSizeInBytes() const;
    int64_t getAlignment() const { return getBuffer().getAlignment(); }
  }];
}

#endif // TILEFUSE_DIALECT_TILEGPUDIALECT_TD
