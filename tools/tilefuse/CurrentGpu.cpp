//===- CurrentGpu.cpp - the GPU the CLI's GPU commands run on -------------===//
#include "CurrentGpu.h"

#include "tilefuse/runtime/Compiler.h"

using namespace tilefuse;
using namespace tilefuse::runtime;

llvm::Expected<tools::CurrentGpu> tools::currentGpu() {
  auto driver = cuda::Driver::get();
  if (!driver)
    return driver.takeError();
  auto device = driver->currentDevice();
  if (!device)
    return device.takeError();
  auto chip = chipForComputeCapability(device->computeMajor, device->computeMinor, device->name);
  if (!chip)
    return chip.takeError();
  return CurrentGpu{*device, *chip};
}
