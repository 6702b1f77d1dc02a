"""The install route (README.md, "Build and install"): a plain
`pip install ./plugin/torch` fails before building anything and names the
fix; the extension loads the libgcx that was built with it (the one in the
package when installed from a wheel, the build tree's otherwise).

scripts/test.sh runs this file twice: in the tree (PYTHONPATH=build/...),
and copied out of it against a wheel installed into a fresh venv
(plugin/torch/tools/wheel_check.sh, which sets TORCH_GCX_SOURCE and runs
this file and test_torch_gcx.py there). Cost: one
pip run that stops at its first hook (a few seconds) and one import.
"""
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import torch_gcx


def _source():
    """plugin/torch: next to this folder, or TORCH_GCX_SOURCE for a copy."""
    env = os.environ.get("TORCH_GCX_SOURCE")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent.parent
    if (here / "pyproject.toml").is_file():
        return here
    pytest.skip("the plugin's source is not next to this copy of the tests "
                "(set TORCH_GCX_SOURCE=/path/to/gcx/plugin/torch)")


def test_plain_pip_install_fails_at_once_naming_the_fix(tmp_path):
    src = _source()
    # --dry-run: were the check gone, nothing would be installed anyway;
    # --no-index: the build needs nothing from an index
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
         "--no-index", str(src)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "cannot import torch" in out, out
    assert "pip install --no-build-isolation " + str(src) in out, out
    assert "The Meson build system" not in out, out  # failed before meson


def _loaded_libgcx():
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f
                 if "/libgcx.so" in line.split()[-1]}
    assert len(paths) == 1, paths
    return Path(paths.pop()).resolve()


def test_extension_loads_the_libgcx_built_with_it():
    pkg = Path(torch_gcx.__file__).resolve().parent
    loaded = _loaded_libgcx()
    sites = {Path(sysconfig.get_path(k)).resolve()
             for k in ("purelib", "platlib")}
    if pkg.parent in sites:  # installed (a wheel)
        assert loaded.parent == pkg, (loaded, pkg)
    else:  # a meson build tree: the library from the same tree
        tree = next((p for p in pkg.parents if (p / "build.ninja").is_file()),
                    None)
        assert tree is not None, pkg
        assert tree in loaded.parents, (loaded, tree)
