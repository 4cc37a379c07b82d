#!/usr/bin/env bash
# Builds, on the development machine, the self-contained compiler-bearing pieces for the GPU
# machine (glibc and the CUDA driver only: no LLVM/MLIR, no network), and packs them for the trip
# as build-gpu/tilefuse-full.tar.xz (build-gpu/ is carried; what travels is capped at 64 MiB, so
# only the compressed form goes there). scripts/gpu-run.sh's `runtime` step unpacks it into
# build-gpu-unpacked/:
#
#   prefix/                      `cmake --install --strip` of the build: the package an
#     bin/tilefuse               application finds with find_package(tilefuse) (the embed
#     lib/libtilefuse.so*        example builds against it there); the CLI, libtilefuse.so with
#     lib/libtilefuse_cuda.so*   the whole compiler inside, libtilefuse_cuda.so, headers, CMake
#     include/, lib/cmake/       package files
#   tilefuse-runtime-gpu-tests   the runtime API's GPU tests (LD_LIBRARY_PATH=.../prefix/lib)
#
# The CMake tree is build-gpu-full-cmake/, configured with TILEFUSE_STATIC_LLVM=ON: static
# MLIR/LLVM, libstdc++ and libgcc, -ffunction-sections with --gc-sections. A first build compiles
# the whole project again (a quarter of an hour on two cores); later ones rebuild what changed.
# Every binary is checked with ldd: nothing but glibc may be dynamic.
#
#   scripts/build-gpu-full.sh
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# = 0 ] || { echo "usage: $0" >&2; exit 2; }

out=build-gpu
tree=build-gpu-full-cmake # outside build-gpu/ so that only the package travels
stage=$tree/package       # what goes into the tarball
mkdir -p "$out"

if [ ! -f "$tree/build.ninja" ]; then
  cmake -S . -B "$tree" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTILEFUSE_STATIC_LLVM=ON >/dev/null
fi
cmake --build "$tree" --target tilefuse tilefuse_runtime tilefuse_cuda tilefuse-runtime-gpu-tests

rm -rf "$stage"
mkdir -p "$stage"
# `cmake --install` of the whole tree would want every target built (tilefuse-opt, the unit
# tests); the install scripts of runtime/ and tools/ need only the targets built above.
cmake -DCMAKE_INSTALL_PREFIX="$stage/prefix" -DCMAKE_INSTALL_DO_STRIP=1 \
  -P "$tree/runtime/cmake_install.cmake" >/dev/null
cmake -DCMAKE_INSTALL_PREFIX="$stage/prefix" -DCMAKE_INSTALL_DO_STRIP=1 \
  -P "$tree/tools/cmake_install.cmake" >/dev/null
strip -o "$stage/tilefuse-runtime-gpu-tests" "$tree/test/gpu/tilefuse-runtime-gpu-tests"

# Only glibc (libc, libm, the loader, the vDSO) may be dynamic: the GPU machine has nothing else.
status=0
for binary in "$stage/prefix/bin/tilefuse" "$stage"/prefix/lib/libtilefuse.so.*.* \
  "$stage"/prefix/lib/libtilefuse_cuda.so "$stage/tilefuse-runtime-gpu-tests"; do
  [ -L "$binary" ] && continue
  foreign=$(ldd "$binary" | grep -vE 'linux-vdso|libc\.so|libm\.so|ld-linux|libtilefuse\.so' ||
    true)
  if [ -n "$foreign" ]; then
    echo "build-gpu-full: $binary links libraries the GPU machine does not have:" >&2
    echo "$foreign" >&2
    status=1
  fi
done
((status == 0)) || exit 1

# The CLI and libtilefuse.so hold much the same compiler: with a dictionary larger than one of
# them, xz finds the second copy in the first (26 MB instead of 39 MB; ~3 min, 2 GB of memory
# here; unpacking takes 192 MiB).
tar -C "$stage" -cf - prefix tilefuse-runtime-gpu-tests |
  xz --lzma2=preset=9e,dict=192MiB > "$out/tilefuse-full.tar.xz"
echo "build-gpu-full: $(du -sh "$stage" | cut -f1) unpacked, $(du -h "$out/tilefuse-full.tar.xz" |
  cut -f1) in $out/tilefuse-full.tar.xz:"
(cd "$stage" && find . -type f -size +1M -exec du -h {} + | sort -k2 | sed 's/^/  /')
