"""PEP 517 build backend of the `hqekv` Python package (pyproject.toml).

In-tree and dependency-free on purpose: `pip install .` and
`python3 -m build` must work offline, and a backend from PyPI (setuptools,
scikit-build) would have to be downloaded into pip's isolated build
environment. It drives the system CMake (Debian's cmake, pybind11-dev and the
project's other build dependencies: scripts/install-deps.sh) and writes the
wheel itself (a zip with a .dist-info, PEP 427).

The wheel holds the package (python/hqekv/*.py, the `_hqekv` extension built
for the interpreter running the build), the `hqekv` command line program as a
script, and the bundled models, texts and calibration profiles under
hqekv/data/ (found by hqekv.default_model()).

Build folder: $HQEKV_BUILD_DIR, else config setting `build-dir`
(`pip install . -C build-dir=PATH` / `python3 -m build -C build-dir=PATH`),
else build-pip/ in the source tree (reused by the next install). An
existing, configured build folder is built again, not re-configured, so a
test can package the tree it already built.
"""
from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = "hqekv"

# Files of the source tree the package carries as data (repository-relative).
DATA_FILES = [
    "models/refmodel-4l.gguf", "models/refmodel-4l.md", "models/stories260K.gguf",
    "models/SOURCES.md", "data/SOURCES.md",
]
DATA_DIRS = ["data/text", "profiles"]


def _version() -> str:
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(hqekv VERSION ([0-9.]+)", f.read())
    if not m:
        raise RuntimeError("hqekv_build: no `project(hqekv VERSION x.y.z)` in CMakeLists.txt")
    return m.group(1)


def _metadata(version: str) -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return "\n".join([
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {version}",
        "Summary: Long-context LLM inference with a compressed KV cache (HqeKV, KIVI, "
        "H2O, SnapKV, llama.cpp KV types) on CPUs",
        "Requires-Python: >=3.9",
        "Provides-Extra: numpy",
        "Requires-Dist: numpy; extra == \"numpy\"",
        "Provides-Extra: pandas",
        "Requires-Dist: pandas; extra == \"pandas\"",
        "Description-Content-Type: text/markdown",
        "",
        readme,
    ])


def _tag() -> str:
    """cpXY-cpXY-platform of the running interpreter (the extension is built for it)."""
    impl = f"cp{sys.version_info.major}{sys.version_info.minor}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{impl}-{plat}"


def _build_dir(config_settings) -> str:
    d = os.environ.get("HQEKV_BUILD_DIR") or (config_settings or {}).get("build-dir")
    return os.path.abspath(d) if d else os.path.join(ROOT, "build-pip")


def _run(cmd) -> None:
    print("hqekv_build:", " ".join(cmd), file=sys.stderr, flush=True)
    r = subprocess.run(cmd)
    if r.returncode != 0:
        raise RuntimeError(f"hqekv_build: command failed with exit code {r.returncode}: "
                           + " ".join(cmd))


def _cmake_build(bdir: str) -> None:
    if shutil.which("cmake") is None:
        raise RuntimeError("hqekv_build: cmake not found (Debian: apt-get install cmake, or "
                           "run scripts/install-deps.sh)")
    if not os.path.isfile(os.path.join(bdir, "CMakeCache.txt")):
        cmd = ["cmake", "-S", ROOT, "-B", bdir, "-DCMAKE_BUILD_TYPE=Release",
               "-DHQEKV_BUILD_TESTS=OFF", "-DHQEKV_BUILD_BENCH=OFF", "-DHQEKV_BUILD_PYTHON=ON",
               f"-DPYTHON_EXECUTABLE={sys.executable}"]
        if shutil.which("ninja"):
            cmd += ["-G", "Ninja"]
        if shutil.which("ccache"):  # a rebuild after `git pull` recompiles only what changed
            cmd += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
        _run(cmd)
    jobs = str(os.cpu_count() or 2)
    _run(["cmake", "--build", bdir, "-j", jobs, "--target", "hqekv_python", "hqekv"])


def _find_extension(bdir: str) -> str:
    pkg = os.path.join(bdir, "python", "hqekv")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    want = os.path.join(pkg, "_hqekv" + suffix)
    if os.path.isfile(want):
        return want
    found = [f for f in os.listdir(pkg) if f.startswith("_hqekv.")] if os.path.isdir(pkg) else []
    raise RuntimeError(
        f"hqekv_build: {want} was not built (found {found or 'nothing'}): the build folder {bdir} "
        f"was configured for another Python (its PYTHON_EXECUTABLE); use a fresh build-dir or "
        f"run this build with that interpreter")


class _Wheel:
    def __init__(self, path: str) -> None:
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.records = []

    def add_bytes(self, arcname: str, data: bytes, mode: int = 0o644) -> None:
        info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.records.append((arcname, f"sha256={digest}", str(len(data))))

    def add_file(self, arcname: str, path: str) -> None:
        with open(path, "rb") as f:
            data = f.read()
        mode = 0o755 if os.access(path, os.X_OK) else 0o644
        self.add_bytes(arcname, data, mode)

    def close(self, record_name: str) -> None:
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        for r in self.records:
            w.writerow(r)
        w.writerow((record_name, "", ""))
        info = zipfile.ZipInfo(record_name, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = 0o100644 << 16
        self.zip.writestr(info, out.getvalue())
        self.zip.close()


def _wheel_name(version: str) -> str:
    return f"{NAME}-{version}-{_tag()}.whl"


def _write_dist_info(w: _Wheel, version: str, dist_info: str) -> None:
    w.add_bytes(f"{dist_info}/METADATA", _metadata(version).encode())
    w.add_bytes(f"{dist_info}/WHEEL", "\n".join([
        "Wheel-Version: 1.0", "Generator: hqekv_build", "Root-Is-Purelib: false",
        f"Tag: {_tag()}", ""]).encode())
    w.add_bytes(f"{dist_info}/top_level.txt", b"hqekv\n")
    lic = os.path.join(ROOT, "LICENSE")
    if os.path.isfile(lic):
        w.add_file(f"{dist_info}/LICENSE", lic)


# ---- PEP 517 hooks ---------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    version = _version()
    dist_info = f"{NAME}-{version}.dist-info"
    d = os.path.join(metadata_directory, dist_info)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata(version))
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    bdir = _build_dir(config_settings)
    _cmake_build(bdir)
    ext = _find_extension(bdir)
    cli = os.path.join(bdir, "hqekv")
    if not os.path.isfile(cli):
        raise RuntimeError(f"hqekv_build: the command line program {cli} was not built")
    os.makedirs(wheel_directory, exist_ok=True)
    name = _wheel_name(version)
    dist_info = f"{NAME}-{version}.dist-info"
    tmp = os.path.join(wheel_directory, name + ".part")
    w = _Wheel(tmp)
    pkg_src = os.path.join(ROOT, "python", "hqekv")
    for f in sorted(os.listdir(pkg_src)):
        if f.endswith((".py", ".pyi")) or f == "py.typed":
            w.add_file(f"hqekv/{f}", os.path.join(pkg_src, f))
    w.add_file(f"hqekv/{os.path.basename(ext)}", ext)
    for rel in DATA_FILES:
        w.add_file(f"hqekv/data/{rel}", os.path.join(ROOT, rel))
    for rel in DATA_DIRS:
        top = os.path.join(ROOT, rel)
        for dirpath, _, files in sorted(os.walk(top)):
            for f in sorted(files):
                full = os.path.join(dirpath, f)
                w.add_file("hqekv/data/" + os.path.relpath(full, ROOT).replace(os.sep, "/"), full)
    w.add_file(f"{NAME}-{version}.data/scripts/hqekv", cli)
    _write_dist_info(w, version, dist_info)
    w.close(f"{dist_info}/RECORD")
    os.replace(tmp, os.path.join(wheel_directory, name))
    return name


def _sdist_files():
    """The files of the source tree: git's list when this is a clone, else
    every file outside build folders."""
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True,
                             check=True).stdout
        files = [f for f in out.decode().split("\0") if f]
        if files:
            return [f for f in files if os.path.isfile(os.path.join(ROOT, f))]
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for dirpath, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(("build", ".git", "__pycache__"))]
        for n in names:
            files.append(os.path.relpath(os.path.join(dirpath, n), ROOT))
    return sorted(files)


def build_sdist(sdist_directory, config_settings=None):
    version = _version()
    base = f"{NAME}-{version}"
    name = base + ".tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    tmp = os.path.join(sdist_directory, name + ".part")
    with tarfile.open(tmp, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in _sdist_files():
            tar.add(os.path.join(ROOT, rel), arcname=f"{base}/{rel}", recursive=False)
        pkg_info = _metadata(version).encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(pkg_info)
        tar.addfile(info, io.BytesIO(pkg_info))
    os.replace(tmp, os.path.join(sdist_directory, name))
    return name
