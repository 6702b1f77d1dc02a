"""PEP 517 build backend of torch_gcx (pyproject.toml names it, backend-path
tools), so that `pip install --no-build-isolation ./plugin/torch` in the
environment that has torch is the whole install.

Idea: a wheel is what meson installs, zipped. build_wheel runs the meson
that builds the rest of gcx on this project alone (meson.build: libgcx is
its subproject subprojects/gcx, a link to the gcx tree), with
-Dtorch_python set to the interpreter pip runs this backend with, installs
the project's own files (not gcx's headers or pkg-config file:
--skip-subprojects) into a staging directory, and zips what landed in the
package's site directory with its dist-info. The wheel carries libgcx's
shared library next to the extension; meson's install sets the extension's
RUNPATH to $ORIGIN, so no meson-python and no patchelf are needed.

torch must be importable by that interpreter: the extension is compiled
against that torch's headers, C++ ABI and libraries. pip's build isolation
builds in an environment without it, so the first hook checks and fails at
once, naming the fix. The wheel requires the torch version it was built
against (dependencies are dynamic in pyproject.toml for that).

Cost: one meson setup + a full build (libgcx and the extension) in a fresh
temporary directory per wheel, unless -C builddir=DIR names one to reuse;
the rest (install, zip) takes about a second. build_sdist packs the tracked
files: the plugin's at the top, the gcx tree (without plugin/) as
subprojects/gcx.
"""
import base64
import hashlib
import importlib.metadata
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent  # plugin/torch
PREFIX = "/torch_gcx-wheel"  # meson's prefix; only its site dir is kept
SITE = PREFIX + "/site"


def _project():
    """name, version, summary, requires-python from pyproject.toml's
    [project] (static fields; dependencies are filled in here)."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        try:
            import tomli as tomllib
        except ImportError:
            raise SystemExit("torch_gcx: building needs Python >= 3.11 or "
                             "the package tomli (pip install tomli)")
    with open(SRC / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def _torch_version():
    """The torch this interpreter would build against, or a clear exit."""
    if importlib.util.find_spec("torch") is None:
        raise SystemExit(
            "torch_gcx: " + sys.executable + " cannot import torch here.\n"
            "torch_gcx is compiled against the torch of the environment it\n"
            "is installed into, and pip's build isolation (a fresh build\n"
            "environment) hides it. In the venv that has torch, run\n\n"
            "    pip install --no-build-isolation " + str(SRC) + "\n\n"
            "(a venv without torch: pip install torch first).")
    # the release only: 2.13.0+cpu -> 2.13.0, which '==' matches with any
    # local label
    return importlib.metadata.version("torch").split("+")[0]


def _tool(name, hint):
    """A build tool from this interpreter's bin directory or PATH."""
    for d in [os.path.dirname(sys.executable)] + os.get_exec_path():
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    raise SystemExit("torch_gcx: building needs " + name + " (" + hint +
                     "), found neither next to " + sys.executable +
                     " nor on PATH")


def _tools():
    meson = _tool("meson", "apt-get install meson, as scripts/install-deps.sh "
                  "does, or pip install meson")
    _tool("ninja", "apt-get install ninja-build or pip install ninja")
    return meson


def _tag():
    """cpXY-cpXY[t]-<platform> for the running CPython."""
    if sys.implementation.name != "cpython":
        raise SystemExit("torch_gcx: builds for CPython only, not " +
                         sys.implementation.name)
    py = "cp%d%d" % sys.version_info[:2]
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "%s-%s%s-%s" % (py, py, sys.abiflags, plat)


def _dist_name(project):
    return project["name"].replace("-", "_") + "-" + project["version"]


def _metadata(project, torch_version):
    lines = ["Metadata-Version: 2.1",
             "Name: " + project["name"],
             "Version: " + project["version"],
             "Summary: " + project.get("description", ""),
             "License: " + project.get("license", ""),
             "Requires-Python: " + project.get("requires-python", ""),
             "Requires-Dist: torch==" + torch_version]
    return "\n".join(lines) + "\n"


def _dist_info_files(project, torch_version):
    """{relative path: bytes} of the dist-info, RECORD excepted."""
    info = _dist_name(project) + ".dist-info"
    wheel = ("Wheel-Version: 1.0\nGenerator: torch_gcx wheel_backend\n"
             "Root-Is-Purelib: false\nTag: " + _tag() + "\n")
    return {info + "/METADATA": _metadata(project, torch_version).encode(),
            info + "/WHEEL": wheel.encode()}


# ---- PEP 517 hooks ----

def get_requires_for_build_wheel(config_settings=None):
    _torch_version()  # fail here, before anything is built
    _tools()
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    project = _project()
    files = _dist_info_files(project, _torch_version())
    for rel, data in files.items():
        p = Path(metadata_directory, rel)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return _dist_name(project) + ".dist-info"


def _run(cmd):
    # meson's output goes to stderr: pip shows it with -v or on failure. The
    # interpreter's bin directory leads PATH, as in _tool (a venv's own
    # meson and ninja, the venv not activated)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable),
                                   env.get("PATH", os.defpath)])
    subprocess.run(cmd, check=True, stdout=sys.stderr, env=env)


def _build(meson, builddir, staging):
    if not (builddir / "build.ninja").is_file():
        _run([meson, "setup", str(builddir), str(SRC),
              "--prefix=" + PREFIX, "-Dtorch_python=" + sys.executable,
              "-Dpython.platlibdir=" + SITE, "-Dpython.purelibdir=" + SITE])
    _run([meson, "compile", "-C", str(builddir)])
    _run([meson, "install", "-C", str(builddir), "--no-rebuild", "--quiet",
          "--skip-subprojects", "--destdir", str(staging)])
    site = Path(str(staging) + SITE)
    stray = [str(p) for p in staging.rglob("*")
             if p.is_file() and site not in p.parents]
    if stray:
        raise SystemExit("torch_gcx: meson installed files outside the "
                         "package, which a wheel cannot hold: " +
                         ", ".join(stray))
    return site


def _record_line(rel, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
    return "%s,sha256=%s,%d" % (rel, digest.rstrip(b"=").decode(), len(data))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    torch_version = _torch_version()
    meson = _tools()
    project = _project()
    name = _dist_name(project) + "-" + _tag() + ".whl"
    keep = (config_settings or {}).get("builddir")
    with tempfile.TemporaryDirectory(prefix="torch_gcx-") as tmp:
        builddir = Path(keep).resolve() if keep else Path(tmp, "build")
        site = _build(meson, builddir, Path(tmp, "staging"))
        files = {}
        for p in sorted(site.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                files[p.relative_to(site).as_posix()] = p
        record = []
        out = Path(wheel_directory, name)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as whl:
            for rel, p in files.items():
                whl.write(p, rel)  # keeps the mode bits
                record.append(_record_line(rel, p.read_bytes()))
            for rel, data in _dist_info_files(project, torch_version).items():
                whl.writestr(rel, data)
                record.append(_record_line(rel, data))
            rec = _dist_name(project) + ".dist-info/RECORD"
            record.append(rec + ",,")
            whl.writestr(rec, "\n".join(record) + "\n")
    return name


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_sdist(sdist_directory, config_settings=None):
    """The tracked files (git ls-files): plugin/torch's at the top, the rest
    of the gcx tree except plugin/ under subprojects/gcx."""
    project = _project()
    top = (SRC / "subprojects" / "gcx").resolve()
    plugin = SRC.relative_to(top).as_posix() + "/"
    try:
        listed = subprocess.run(["git", "-C", str(top), "ls-files", "-z"],
                                check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("torch_gcx: an sdist is made from a git checkout "
                         "of gcx (git ls-files failed: %s)" % e)
    base = _dist_name(project)
    name = base + ".tar.gz"
    pkg_info = _metadata(project, _torch_version()).encode()
    with tarfile.open(Path(sdist_directory, name), "w:gz") as tar:
        for rel in sorted(listed.decode().split("\0")):
            if not rel or rel == plugin + "subprojects/gcx":
                continue
            if rel.startswith(plugin):
                arc = base + "/" + rel[len(plugin):]
            elif rel.startswith("plugin/"):
                continue
            else:
                arc = base + "/subprojects/gcx/" + rel
            tar.add(str(top / rel), arc, recursive=False)
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size = len(pkg_info)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(pkg_info))
    return name
