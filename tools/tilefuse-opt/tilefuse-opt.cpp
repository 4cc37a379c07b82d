//===- tilefuse-opt.cpp - mlir-opt with the tile and tgpu dialects and passes ===//
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "tilefuse/codegen/Passes.h"
#include "tilefuse/dialect/TileGPUDialect.h"
#include "tilefuse/passes/Passes.h"
#include "tilefuse/passes/Pipelines.h"
#include "tilefuse/passes/gpu/Passes.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  tilefuse::registerTilePasses();
  tilefuse::tgpu::registerTGPUPasses();
  tilefuse::registerCodegenPasses();
  tilefuse::registerTilePipelines();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<tilefuse::tile::TileDialect, tilefuse::tgpu::TGPUDialect>();
  mlir::registerAllToLLVMIRTranslations(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tilefuse optimizer driver\n", registry));
}
