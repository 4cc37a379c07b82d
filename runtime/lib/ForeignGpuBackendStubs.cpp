//===- ForeignGpuBackendStubs.cpp - no AMDGPU/SPIR-V backend, statically --===//
//
// Only in the static build (TILEFUSE_STATIC_LLVM). registerAllExtensions (DiagnosedSource.cpp)
// registers every GPU target attribute, so the ROCDL and XeVM serializers come along, and they
// initialize the AMDGPU and SPIR-V backends by name. tilefuse emits PTX only; linking those two
// backends would double the binaries for nothing. These initializers register nothing, so
// serializing a ROCDL or XeVM module fails with "target not found", as an error, never a crash.
//
//===----------------------------------------------------------------------===//

#define TILEFUSE_NO_BACKEND(name)                                                                  \
  extern "C" void LLVMInitialize##name##Target() {}                                                \
  extern "C" void LLVMInitialize##name##TargetInfo() {}                                            \
  extern "C" void LLVMInitialize##name##TargetMC() {}                                              \
  extern "C" void LLVMInitialize##name##AsmPrinter() {}                                            \
  extern "C" void LLVMInitialize##name##AsmParser() {}

TILEFUSE_NO_BACKEND(AMDGPU)
TILEFUSE_NO_BACKEND(SPIRV)
