# lit configuration for tilefuse's FileCheck tests (dialect/, passes/, codegen/, tools/).
import os
import lit.formats

config.name = "tilefuse"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tilefuse_obj_root, "test")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "unit", "CMakeLists.txt", "variants"]

# tilefuse's tools first, then LLVM's FileCheck / not / count.
config.environment["PATH"] = os.pathsep.join(
    [config.tilefuse_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(("%kernels", config.tilefuse_kernels_dir))

# The CLI by absolute path, for RUN lines that clear PATH.
config.substitutions.append(("%tilefuse", os.path.join(config.tilefuse_tools_dir, "tilefuse")))

# ptxas (the CUDA toolkit), for the cubin and header outputs; searched as tilefuse searches.
import shutil
_ptxas = [os.path.join(os.environ[v], "bin", "ptxas") for v in ("CUDA_HOME", "CUDA_PATH")
          if os.environ.get(v)] or [shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"]
if os.access(_ptxas[0], os.X_OK):
    config.available_features.add("ptxas")
for _v in ("CUDA_HOME", "CUDA_PATH", "TILEFUSE_PTXAS"):
    if _v in os.environ:
        config.environment[_v] = os.environ[_v]

# mlir-runner (mlir-22-tools) and its C runner utilities, for tests that execute lowered IR on
# the CPU (the tile schedulers' deals: every tile exactly once).
_mlir_runner = os.path.join(config.llvm_tools_dir, "mlir-runner")
_c_runner_utils = os.path.join(os.path.dirname(config.llvm_tools_dir), "lib",
                               "libmlir_c_runner_utils.so")
if os.access(_mlir_runner, os.X_OK) and os.path.exists(_c_runner_utils):
    config.available_features.add("mlir-runner")
    config.substitutions.append(("%mlir_c_runner_utils", _c_runner_utils))
