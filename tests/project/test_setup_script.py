"""scripts/setup.sh's choice of Python: a Python outside 3.10-3.12 (the versions TensorFlow 2.18's wheels and
gymnasium 1.4 both cover) is refused with one line that names what it found and how to point PYTHON= at another,
before anything is created. Runs setup.sh from a copy of the repository's set-up files, so this checkout's
.venv is never touched; Debian packages are already there (the suite runs after set-up), so none is installed."""
import pathlib
import shutil
import subprocess

import pytest

from conftest import REPO

UNSUPPORTED = [path for path in ("/root/.pyenv/versions/3.13.0/bin/python3.13", "/usr/bin/python3.13",
                                 "/root/.pyenv/versions/3.9.18/bin/python3.9") if pathlib.Path(path).exists()]


@pytest.mark.skipif(not UNSUPPORTED, reason="no Python outside 3.10-3.12 on this machine to try")
def test_an_unsupported_python_named_by_PYTHON_is_refused_with_one_line(tmp_path):
    python = UNSUPPORTED[0]
    version = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    copy = tmp_path / "repo"
    (copy / "scripts").mkdir(parents=True)
    for name in ("constraints.txt", "setup.py", "scripts/setup.sh"):
        shutil.copy(REPO / name, copy / name)
    result = subprocess.run(["bash", str(copy / "scripts" / "setup.sh")], capture_output=True, text=True,
                            timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHON": python})
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"[setup] ERROR: PYTHON={python} is {version}; need Python 3.10, 3.11 or 3.12 (TensorFlow 2.18's wheels "
        "cover 3.9-3.12; gymnasium 1.4 needs 3.10+). Point PYTHON= at one of those, or unset it (on PATH: "), lines
    assert not (copy / ".venv").exists()
