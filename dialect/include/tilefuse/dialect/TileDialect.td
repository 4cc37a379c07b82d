//===- TileDialect.td - the tile dialect -------------------*- tablegen -*-===//
//
// The `tile` dialect describes attention kernels at two levels:
//  * the written form: whole-tensor ops over logical B x H x M x D shapes (what a kernel author
//    writes in kernels/*.mlir), and
//  * the tiled form: block ops inside a grid of programs (scf.forall) and loops over key/value
//    blocks (scf.for), produced by tile-tiling and refined by the later passes.
// Score and mask modifications are scalar regions over the indices (b, h, q_idx, kv_idx); every
// attention variant is expressed through them, never through C++ special cases.
//
//===----------------------------------------------------------------------===//

#ifndef TILEFUSE_DIALECT_TILEDIALECT_TD
#define TILEFUSE_DIALECT_TILEDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/Traits.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Dialect/SCF/IR/DeviceMappingInterface.td"

def Tile_Dialect : Dialect {
  let name = "tile";
  let summary = "Tile-level attention kernels: written form and tiled form";
  let description = [{
    The `tile` dialect is tilefuse's single IR for attention kernels. Kernel authors write
    whole-tensor attention (`tile.load`, `tile.dot`, `tile.scale`, `tile.score_mod`, `tile.mask`,
    `tile.softmax`, `tile.store`); the passes rewrite it into block-level ops (`tile.block_load`,
    `tile.block_dot`, `tile.block_mask`, `tile.reduce`, ...) inside explicit loops.
  }];
  let cppNamespace = "::tilefuse::tile";
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::memref::MemRefDialect"
  ];
  let useDefaultAttributePrinterParser = 1;
  // `tile.config` on a module must be a #tile.config (TileDialect.cpp).
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// The module attribute that carries a kernel's configuration (#tile.config).
    static constexpr ::llvm::StringLiteral kConfigAttrName = "tile.config";
  }];
}

def Tile_ConfigAttr : AttrDef<Tile_Dialect, "Config"> {
  let mnemonic = "config";
  let summary = "The kernel configuration (block sizes and code generation choices)";
  let description = [{
    The typed kernel configuration (`tilefuse::TileConfig`, tilefuse/dialect/TileConfig.h) in
    its canonical text, e.g. `#tile.config<"Br=64,Bc=128,rows_per_warp=16,mma=wgmma">`. A field
    left out is unset: the pass that needs it takes its own option. `tile-specialize{config=...}`
    writes it on the module as `tile.config`; tile-tiling and the GPU-level passes read it from there.
    The text is parsed and its fields checked (TileConfig::verify without a chip) when the
    attribute is built, so a bad one is a located error, never a later pass's surprise.
  }];
  let parameters = (ins "::tilefuse::TileConfig":$config);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

class Tile_Op<string mnemonic, list<Trait> traits = []> :
    Op<Tile_Dialect, mnemonic, traits>;

def Tile_ReduceKind : I32EnumAttr<"ReduceKind", "row reduction kind", [
    I32EnumAttrCase<"Max", 0, "max">,
    I32EnumAttrCase<"Sum", 1, "sum">
  ]> {
  let cppNamespace = "::tilefuse::tile";
  let genSpecializedAttr = 0;
}
def Tile_ReduceKindAttr : EnumAttr<Tile_Dialect, Tile_ReduceKind, "reduce_kind">;

def Tile_BlockClass : I32EnumAttr<"BlockClass", "classification of a (row block, column block)", [
    I32EnumAttrCase<"Full", 0, "full">,
    I32EnumAttrCase<"Partial", 1, "partial">
  ]> {
  let cppNamespace = "::tilefuse::tile";
  let genSpecializedAttr = 0;
}
def Tile_BlockClassAttr : EnumAttr<Tile_Dialect, Tile_BlockClass, "block_class">;

def Tile_GridDim : I32EnumAttr<"GridDim", "a dimension of a kernel's program grid", [
    I32EnumAttrCase<"Batch", 0, "batch">,
    I32EnumAttrCase<"Head", 1, "head">,
    I32EnumAttrCase<"RowBlock", 2, "row_block">,
    I32EnumAttrCase<"Split", 3, "split">,
    I32EnumAttrCase<"Program", 4, "program">
  ]> {
  let cppNamespace = "::tilefuse::tile";
  let genSpecializedAttr = 0;
}
def Tile_GridDimAttr : EnumAttr<Tile_Dialect, Tile_GridDim, "grid",
    [DeclareAttrInterfaceMethods<DeviceMappingAttrInterface>]> {
  let description = [{
    The mapping of a kernel grid's scf.forall dimension: its programs per batch, per (query or,
    packed, key/value) head, per row block and per key split (tile-split-kv). The GPU lowering
    maps the grid by these names, and a mapped scf.forall keeps its unit dimensions (a grid
    with one key/value head or one batch is still the grid the launch ABI describes).
    `program` is the one dimension of a persistent kernel's grid (tgpu-persistent): as many
    programs as the launcher starts, each looping over the (batch, head, row block) tiles.
  }];
  let assemblyFormat = "`<` $value `>`";
}

#endif // TILEFUSE_DIALECT_TILEDIALECT_TD
