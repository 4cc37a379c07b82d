//===- ParseKernel.cpp - DSL text to a module, safely ---------------------===//
#include "tilefuse/dialect/ParseKernel.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace {

bool isLabelChar(char c) { return llvm::isAlnum(c) || c == '_' || c == '$' || c == '.' || c == '-'; }

/// Skips white space from `i`; returns the first other position.
size_t skipSpace(llvm::StringRef text, size_t i) {
  while (i < text.size() && llvm::isSpace(text[i]))
    ++i;
  return i;
}

} // namespace

LogicalResult tilefuse::checkBlockLabels(llvm::SourceMgr &sourceMgr, MLIRContext *ctx) {
  const llvm::MemoryBuffer *buffer = sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  llvm::StringRef text = buffer->getBuffer();
  // One set of labels per brace level: a region's blocks are named in its own scope. Attribute
  // dictionaries open scopes too; they define no labels, so that is harmless.
  llvm::SmallVector<llvm::StringSet<>> scopes(1);
  bool ok = true;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') { // a comment, to the line's end
      i = text.find('\n', i);
      if (i == llvm::StringRef::npos)
        break;
      continue;
    }
    if (c == '"') { // a string: braces and carets inside mean nothing
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
      continue;
    }
    if (c == '{') {
      scopes.emplace_back();
      continue;
    }
    if (c == '}') {
      if (scopes.size() > 1)
        scopes.pop_back();
      continue;
    }
    if (c != '^')
      continue;
    size_t end = i + 1;
    while (end < text.size() && isLabelChar(text[end]))
      ++end;
    llvm::StringRef label = text.slice(i, end);
    // A definition is `^label:` or `^label(args):`; a use (a successor) is followed by
    // anything else.
    size_t after = skipSpace(text, end);
    if (after < text.size() && text[after] == '(') {
      int depth = 0;
      for (; after < text.size(); ++after) {
        depth += text[after] == '(' ? 1 : text[after] == ')' ? -1 : 0;
        if (depth == 0)
          break;
      }
      after = skipSpace(text, after + 1);
    }
    bool isDefinition = after < text.size() && text[after] == ':';
    if (isDefinition && label.size() > 1 && !scopes.back().insert(label).second) {
      auto [line, column] = sourceMgr.getLineAndColumn(llvm::SMLoc::getFromPointer(text.data() + i));
      emitError(FileLineColLoc::get(ctx, buffer->getBufferIdentifier(), line, column))
          << "redefinition of block '" << label << "'";
      ok = false;
    }
    i = end - 1;
  }
  return success(ok);
}

OwningOpRef<ModuleOp> tilefuse::parseKernel(llvm::SourceMgr &sourceMgr,
                                            const ParserConfig &config) {
  if (failed(checkBlockLabels(sourceMgr, config.getContext())))
    return nullptr;
  return parseSourceFile<ModuleOp>(sourceMgr, config);
}
