#!/usr/bin/env bash
# CI for embedding: installs the build (cmake --install) into a fresh prefix, checks what was
# installed, then configures and builds tools/embed-example as an external CMake project against
# it (find_package(tilefuse)) and runs it (it compiles a causal kernel; with a GPU it also runs
# and checks it, without one it says so and exits 0).
#
#   embed-example-test.sh BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR
set -uo pipefail
build=$1 source=$2 work=$3 generator=$4
prefix=$work/prefix

rm -rf "$work" && mkdir -p "$work" || exit 1
fail() {
  echo "FAIL: $*"
  exit 1
}
cmake --install "$build" --prefix "$prefix" > "$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "cmake --install"; }
echo "installed into $prefix:"
(cd "$prefix" && find . -type f -o -type l | sort | sed 's/^/  /')
for f in include/tilefuse/tilefuse.h include/tilefuse/tilefuse_status.h \
         include/tilefuse/tilefuse_cuda.h include/tilefuse/runtime/Tilefuse.h \
         lib/cmake/tilefuse/tilefuseConfig.cmake lib/cmake/tilefuse/tilefuseConfigVersion.cmake \
         lib/cmake/tilefuse/tilefuseTargets.cmake bin/tilefuse; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
ls "$prefix"/lib/libtilefuse.so* > /dev/null 2>&1 || fail "libtilefuse.so not installed"
ls "$prefix"/lib/libtilefuse_cuda.so* > /dev/null 2>&1 || fail "libtilefuse_cuda.so not installed"
# Lean: no static archives, no headers that need LLVM.
if find "$prefix" -name '*.a' | grep -q .; then fail "static libraries installed"; fi
if grep -rlE '#include "(llvm|mlir)/' "$prefix/include" | grep -q .; then
  fail "an installed header includes LLVM or MLIR"
fi

cmake -S "$source/tools/embed-example" -B "$work/build" -G "$generator" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; fail "configuring tools/embed-example against the package"; }
grep "embed-example:" "$work/configure.log"
cmake --build "$work/build" > "$work/build.log" 2>&1 ||
  { cat "$work/build.log"; fail "building tools/embed-example"; }
# It must use the installed library, not the build tree's.
ldd "$work/build/embed-example" | grep libtilefuse
# grep reads all of ldd's output (not -q): an early exit would SIGPIPE ldd, and pipefail would
# then fail the check at random.
ldd "$work/build/embed-example" | grep "$prefix/lib/libtilefuse.so" > /dev/null ||
  fail "embed-example does not load the installed libtilefuse.so"

TILEFUSE_CACHE_DIR="$work/cache" "$work/build/embed-example" 2 4 2 200 300
rc=$?
[ $rc = 0 ] || fail "embed-example exited with $rc"
ls "$work/cache"/*.kernel > /dev/null 2>&1 || fail "nothing in the kernel cache"
TILEFUSE_CACHE_DIR="$work/cache" "$work/build/embed-example" 2 4 2 200 300 | grep "(disk," ||
  fail "the second run did not find its kernel in the disk cache"
echo PASS
