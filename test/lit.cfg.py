# lit configuration for tilefuse's FileCheck tests (dialect/, passes/, codegen/, tools/).
import os
import lit.formats

config.name = "tilefuse"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tilefuse_obj_root, "test")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "unit", "CMakeLists.txt"]

# tilefuse's tools first, then LLVM's FileCheck / not / count.
config.environment["PATH"] = os.pathsep.join(
    [config.tilefuse_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(("%kernels", config.tilefuse_kernels_dir))
