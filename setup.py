"""Builds the extension iclprobe._core with the project's CMake build and packages it with the
pure-Python face in python/iclprobe. The version is CMakeLists.txt's project(VERSION), the one
`iclprobe --version` prints, so that `pip show iclprobe` and the program agree.

ICLPROBE_BUILD_DIR: a build folder to configure and build in (an existing one is reused, so an
install after scripts/build compiles nothing new); default build-pip/cmake. ICLPROBE_JOBS: the
number of compile jobs (default: the cores). CMAKE_ARGS: more -D options (e.g. -DTorch_DIR=...).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
# setuptools' own scratch (build/ by default) would land inside CMake's build folder.
SCRATCH = os.path.join(ROOT, "build-pip")


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(\s*iclprobe\s+VERSION\s+([0-9][0-9.]*)", f.read())
    if not m:
        sys.exit("setup.py: CMakeLists.txt has no project(iclprobe VERSION x.y.z)")
    return m.group(1)


class CMakeBuild(build_ext):
    """Configures (when the folder has no CMakeCache.txt) and builds the target iclprobe_core,
    then copies the shared object to where setuptools packages it."""

    def build_extension(self, ext):
        if shutil.which("cmake") is None:
            sys.exit("setup.py: cmake not found; run scripts/setup (Debian 12) first")
        build = os.path.abspath(os.environ.get("ICLPROBE_BUILD_DIR") or
                                os.path.join(SCRATCH, "cmake"))
        if not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
            args = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                    "-DICLPROBE_PYTHON=ON", "-DBUILD_TESTING=OFF"]
            args += shlex.split(os.environ.get("CMAKE_ARGS", ""))
            subprocess.run(args, check=True)
        jobs = os.environ.get("ICLPROBE_JOBS") or str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", build, "--target", "iclprobe_core", "-j", jobs],
                       check=True)
        built = os.path.join(build, "python", "iclprobe")
        cores = [f for f in os.listdir(built) if f.startswith("_core") and f.endswith(".so")]
        if len(cores) != 1:
            sys.exit("setup.py: expected one _core*.so in %s, found %s" % (built, cores))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(built, cores[0]), target)


os.makedirs(SCRATCH, exist_ok=True)
setup(
    version=project_version(),
    packages=["iclprobe"],
    package_dir={"iclprobe": "python/iclprobe"},
    package_data={"iclprobe": ["__init__.pyi", "py.typed"]},
    ext_modules=[Extension("iclprobe._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": SCRATCH}, "egg_info": {"egg_base": SCRATCH}},
    zip_safe=False,
)
