//===- TGPUToNVVMPatterns.h - conversion of tgpu kernels to NVVM -*- C++ -*-===//
//
// What the pattern files of convert-tgpu-to-nvvm share: the type converter (a block in a
// register layout becomes the values one thread holds; a shared buffer its address; a kernel
// view its base pointer, sizes and strides; a cp.async group token an i32), the thread
// coordinates every layout's index arithmetic starts from, and one populate function per op
// family. The pass (TGPUToNVVM.cpp) only assembles them.
//
//   KernelToNVVM.cpp        func.func -> gpu.func with the launch ABI; the scf.forall grid
//   LoadStoreToNVVM.cpp     tile.block_load into registers, tile.block_store, memref.dim
//   SharedMemoryToNVVM.cpp  tgpu.alloc, tgpu.stage
//   AsyncCopyToNVVM.cpp     tgpu.async_copy, nvgpu cp.async groups and waits
//   BarrierToNVVM.cpp       tgpu.named_barrier
//   MmaSyncToNVVM.cpp       tgpu.mma (ldmatrix + mma.sync)
//   WgmmaToNVVM.cpp         tgpu.wgmma, tgpu.wgmma_wait
//   ReductionToNVVM.cpp     tile.reduce, tile.broadcast
//   ElementwiseToNVVM.cpp   arith/math on blocks, block constants, tile.block_mask,
//                           tile.block_score_mod, tgpu.pack_operand_a, tgpu.leading_columns,
//                           tgpu.pad_columns; math to intrinsics
//   WarpRolesToNVVM.cpp     tgpu.warp_specialize
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_CODEGEN_NVVM_TGPUTONVVMPATTERNS_H
#define TILEFUSE_CODEGEN_NVVM_TGPUTONVVMPATTERNS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"
#include "tilefuse/dialect/GPULayouts.h"

namespace mlir {
class ConversionTarget;
class RewritePatternSet;
} // namespace mlir

namespace tilefuse::nvvm {

/// The kernel's dynamic shared memory (an external array<0 x i8> in address space 3, aligned to
/// 1024 bytes for the 128-byte swizzle), which every tgpu.alloc is an offset into.
constexpr llvm::StringLiteral kDynamicSharedMemorySymbol = "tilefuse_dynamic_smem";
/// A kernel's parameters passed by value as grid constants (the TMA tensor maps): an array of
/// positions, each a 128-byte, 64-byte aligned parameter (launch_abi::kTensorMapBytes).
constexpr llvm::StringLiteral kGridConstantsAttr = "tilefuse.grid_constants";

/// Types of tgpu kernels to the per-thread types of NVVM kernels:
///   tensor<R x C x T, #register layout>  vector<values per thread x T>; 16-bit A fragments as
///                                        vector<values / 2 x i32> (two values per register)
///   !tgpu.buffer, !tgpu.ring             !llvm.ptr<3> (the first byte in shared memory)
///   memref<d0 x ... x T> (a kernel view) !llvm.struct<(ptr<1>, array<rank x i32> sizes,
///                                        array<rank x i32> strides)>, in elements, 32-bit
///                                        like the kernel's index arithmetic
///   !nvgpu.device.async.token            i32 (cp.async groups are counted, not named)
class TGPUToNVVMTypeConverter : public mlir::TypeConverter {
public:
  explicit TGPUToNVVMTypeConverter(mlir::MLIRContext *ctx);
};

/// The register layout of a block type, or nullopt when it has none.
std::optional<tgpu::RegisterLayout> registerLayoutOf(mlir::Type type);

/// A thread's coordinates in the layouts (GPULayouts.h): created at the start of the kernel,
/// once per query (CSE merges repeats), so that loops do not recompute them.
struct ThreadCoordinates {
  mlir::Value tid;  ///< thread index in the CTA
  mlir::Value warp; ///< tid / 32
  mlir::Value lane; ///< tid % 32
  mlir::Value g;    ///< lane / 4: the row within an 8-row half of an m16 tile
  mlir::Value c;    ///< lane % 4: the pair of columns
  /// The thread's first row in an accumulator or A-fragment layout of `rowsPerWarp` rows per
  /// warp: warp * rowsPerWarp + g (its other rows are constant offsets, GPULayouts).
  mlir::Value firstRow(mlir::OpBuilder &b, mlir::Location loc, int64_t rowsPerWarp) const;
};
ThreadCoordinates threadCoordinates(mlir::OpBuilder &b, mlir::Operation *inKernel);

/// Small builders (index arithmetic folds as it is built).
mlir::Value indexConstant(mlir::OpBuilder &b, mlir::Location loc, int64_t v);
mlir::Value i32Constant(mlir::OpBuilder &b, mlir::Location loc, int64_t v);
mlir::Value addIndex(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x, mlir::Value y);
mlir::Value mulIndex(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x, mlir::Value y);
mlir::Value extractValue(mlir::OpBuilder &b, mlir::Location loc, mlir::Value vector, int64_t i);
mlir::Value fromValues(mlir::OpBuilder &b, mlir::Location loc, mlir::Type elementType,
                       mlir::ArrayRef<mlir::Value> values);
/// Two f32 values rounded to the 16-bit `elementType` and packed in one i32 (x in the low
/// half): a register of A fragments or of a 16-bit store.
mlir::Value packPair(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x, mlir::Value y,
                     mlir::Type elementType);

/// The row slot (m-tile, half) of value `value` of an accumulator with `cols` columns: the
/// index of its row among the thread's rows (#tgpu.acc_rows).
int64_t rowSlotOf(int64_t value, int64_t cols);

/// A converted kernel view (see TGPUToNVVMTypeConverter): its base pointer, sizes and strides.
struct KernelView {
  mlir::Value pointer;
  mlir::Type elementType;
  llvm::SmallVector<mlir::Value> sizes, strides; ///< index values
  /// `view` is the converted struct, `type` the memref type it stands for.
  static KernelView unpack(mlir::OpBuilder &b, mlir::Location loc, mlir::Value view,
                           mlir::MemRefType type);
  /// Address of element (indices...) in global memory.
  mlir::Value address(mlir::OpBuilder &b, mlir::Location loc, mlir::ValueRange indices) const;
  /// Element (indices...), loaded from global memory.
  mlir::Value load(mlir::OpBuilder &b, mlir::Location loc, mlir::ValueRange indices) const;
};

/// `pointer` recomputed in every iteration of the loop around `op` (an opaque move that takes
/// the induction variable). Without it LLVM hoists every ldmatrix / cp.async / descriptor
/// address of a fixed buffer (base + lane offset + constant) out of the loop, one register
/// each (dozens at D = 128), where in the loop the constant folds into the instruction.
mlir::Value rematerializedPerIteration(mlir::OpBuilder &b, mlir::Location loc,
                                       mlir::Value pointer, mlir::Operation *op);

/// A shared address `base` + `byteOffset` (index).
mlir::Value sharedAddress(mlir::OpBuilder &b, mlir::Location loc, mlir::Value base,
                          mlir::Value byteOffset);

/// Byte offset of 16-byte chunk `chunk` of row `row` of a shared tile: sharedByteOffset of
/// GPULayouts.h as IR, for a chunk's first byte (the swizzles move whole chunks).
mlir::Value sharedChunkOffset(mlir::OpBuilder &b, mlir::Location loc,
                              const tgpu::SharedTile &tile, mlir::Value row, mlir::Value chunk);

/// Inline PTX with side effects returning `types` (a struct when several), as values.
llvm::SmallVector<mlir::Value> inlinePtx(mlir::OpBuilder &b, mlir::Location loc,
                                         mlir::TypeRange types, mlir::ValueRange operands,
                                         llvm::StringRef text, llvm::StringRef constraints);

void populateKernelToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                  mlir::RewritePatternSet &patterns);
/// `pairedReductions`: the target has red.global.add.v2.f32 (sm_90 with PTX 8.1 or later), so
/// tile.block_atomic_add adds each thread's pairs of adjacent columns with one instruction.
void populateLoadStoreToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                     mlir::RewritePatternSet &patterns,
                                     bool pairedReductions = false);
void populateSharedMemoryToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                        mlir::RewritePatternSet &patterns);
void populateAsyncCopyToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                     mlir::RewritePatternSet &patterns);
void populateBarrierToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                   mlir::RewritePatternSet &patterns);
void populateMmaSyncToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                   mlir::RewritePatternSet &patterns);
void populateWgmmaToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                 mlir::RewritePatternSet &patterns);
void populateReductionToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                     mlir::RewritePatternSet &patterns);
void populateElementwiseToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                       mlir::RewritePatternSet &patterns,
                                       mlir::ConversionTarget &target);
void populateWarpRolesToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                     mlir::RewritePatternSet &patterns);
/// tgpu.tma_load and the nvgpu mbarrier ops (TMAToNVVM.cpp).
void populateTMAToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                               mlir::RewritePatternSet &patterns);
void populateSplitArriveToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                       mlir::RewritePatternSet &patterns);

/// After the conversion: math ops on f32 to the NVVM approximate intrinsics (ex2.approx.ftz,
/// lg2.approx.ftz), so the PTX never needs libdevice.
void populateMathToNVVMIntrinsicsPatterns(mlir::RewritePatternSet &patterns);

/// Creates, in `gpuModule`, the gpu.func of kernel `fn` with the launch ABI's parameters and
/// moves `fn`'s body into it: each view argument becomes its KernelView struct (built from the
/// ABI's pointers, sizes and strides) behind an unrealized cast, so that the patterns see the
/// converted type. `threads` is the CTA size (tilefuse.threads).
mlir::FailureOr<mlir::gpu::GPUFuncOp> createKernelFunction(mlir::func::FuncOp fn,
                                                           mlir::gpu::GPUModuleOp gpuModule,
                                                           int64_t threads);

} // namespace tilefuse::nvvm

#endif
