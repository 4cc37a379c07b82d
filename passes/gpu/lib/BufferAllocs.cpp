//===- BufferAllocs.cpp - which allocations a shared buffer value may be --===//
#include "tilefuse/passes/gpu/BufferAllocs.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

SmallVector<Value> tilefuse::tgpu::allocsOf(Value buffer) {
  llvm::SetVector<Value> found;
  llvm::DenseSet<Value> visited;
  SmallVector<Value> worklist = {buffer};
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (!visited.insert(v).second)
      continue;
    if (auto alloc = v.getDefiningOp<AllocOp>()) {
      found.insert(alloc);
    } else if (auto stage = v.getDefiningOp<StageOp>()) {
      worklist.push_back(stage.getRing());
    } else if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto loop = dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp());
      if (!loop || arg.getArgNumber() < loop.getNumInductionVars())
        return {};
      worklist.push_back(loop.getTiedLoopInit(arg)->get());
      worklist.push_back(loop.getTiedLoopYieldedValue(arg)->get());
    } else if (auto loop = v.getDefiningOp<scf::ForOp>()) {
      worklist.push_back(loop.getTiedLoopRegionIterArg(cast<OpResult>(v)));
    } else if (auto branch = v.getDefiningOp<scf::IfOp>()) {
      unsigned i = cast<OpResult>(v).getResultNumber();
      for (Region *region : {&branch.getThenRegion(), &branch.getElseRegion()})
        if (!region->empty())
          worklist.push_back(region->front().getTerminator()->getOperand(i));
    } else {
      return {};
    }
  }
  return found.takeVector();
}

bool tilefuse::tgpu::mayAlias(Value a, Value b) {
  SmallVector<Value> x = allocsOf(a), y = allocsOf(b);
  if (x.empty() || y.empty())
    return true;
  return llvm::any_of(x, [&](Value v) { return llvm::is_contained(y, v); });
}
