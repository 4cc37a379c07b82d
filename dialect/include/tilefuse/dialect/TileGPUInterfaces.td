//===- TileGPUInterfaces.td - tgpu attribute interfaces ----*- tablegen -*-===//

#ifndef TILEFUSE_DIALECT_TILEGPUINTERFACES_TD
#define TILEFUSE_DIALECT_TILEGPUINTERFACES_TD

include "mlir/IR/OpBase.td"

def TGPU_RegisterLayoutInterface : AttrInterface<"RegisterLayoutInterface"> {
  let cppNamespace = "::tilefuse::tgpu";
  let description = [{
    A layout that spreads a block's elements over the registers of a CTA's threads. The
    arithmetic is `RegisterLayout` (GPULayouts.h); this interface builds it for a shape the
    encoding has verified.
  }];
  let methods = [
    InterfaceMethod<"the layout of a block of `shape` (verified by verifyEncoding)",
      "::tilefuse::tgpu::RegisterLayout", "getRegisterLayout",
      (ins "::llvm::ArrayRef<int64_t>":$shape)>,
  ];
}

#endif // TILEFUSE_DIALECT_TILEGPUINTERFACES_TD
