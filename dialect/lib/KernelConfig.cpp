//===- KernelConfig.cpp - a kernel module's configuration -----------------===//
#include "tilefuse/dialect/KernelConfig.h"

#include "tilefuse/dialect/TileOps.h"

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

FailureOr<TileConfig> tilefuse::tile::readModuleConfig(Operation *op) {
  auto module = dyn_cast<ModuleOp>(op);
  if (!module)
    module = op->getParentOfType<ModuleOp>();
  if (!module)
    return TileConfig();
  Attribute attr = module->getAttr(TileDialect::kConfigAttrName);
  if (!attr)
    return TileConfig();
  auto config = dyn_cast<ConfigAttr>(attr);
  if (!config)
    return module.emitError() << "'" << TileDialect::kConfigAttrName
                              << "' must be a #tile.config, not " << attr;
  return config.getConfig();
}

void tilefuse::tile::writeModuleConfig(ModuleOp module, const TileConfig &config) {
  module->setAttr(TileDialect::kConfigAttrName, ConfigAttr::get(module.getContext(), config));
}

FailureOr<TileConfig> tilefuse::tile::configForPass(Operation *op, const TileConfig &options) {
  FailureOr<TileConfig> moduleConfig = readModuleConfig(op);
  if (failed(moduleConfig))
    return failure();
  return options.overriddenBy(*moduleConfig);
}
