//===- TileConfig.h - the kernel configuration, for the runtime -*- C++ -*-===//
//
// The typed kernel configuration is defined once, in tilefuse/dialect/TileConfig.h (target
// TilefuseConfig, LLVMSupport only); the runtime's code and tests name it tilefuse::runtime::.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_TILECONFIG_H
#define TILEFUSE_RUNTIME_TILECONFIG_H

#include "tilefuse/dialect/TileConfig.h"

namespace tilefuse::runtime {
using tilefuse::CopyIssue;
using tilefuse::copyIssueName;
using tilefuse::defaultTileConfig;
using tilefuse::isShortSequence;
using tilefuse::kShortSequenceKeys;
using tilefuse::KeyLayout;
using tilefuse::MmaKind;
using tilefuse::mmaKindName;
using tilefuse::QOperand;
using tilefuse::qOperandName;
using tilefuse::resolveTileConfig;
using tilefuse::RowOrder;
using tilefuse::rowOrderName;
using tilefuse::TileConfig;
} // namespace tilefuse::runtime

#endif
