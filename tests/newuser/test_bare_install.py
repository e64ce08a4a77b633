"""`pip install mailbus` as a robot or a service would: the engine alone, then each extra.

Builds the wheel and the sdist (`uv build`), installs the wheel in a clean virtual
environment (versions pinned to uv.lock; from uv's cache when it has everything, else
from the registry), runs the README's pub/sub example there with neither Textual nor
polars importable, checks that a command of a missing extra names it, then installs each
extra in an environment of its own and imports its entry points.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("uv") is None and not (Path.home() / ".local/bin/uv").exists(),
        reason="needs uv (scripts/bootstrap installs it)",
    ),
]

# What each extra must make importable (its entry points), besides the engine.
ENTRY_POINTS = {
    "sessions": [
        "mailbus.sessions.recorder",
        "mailbus.sessions.player",
        "mailbus.sessions.analysis",
    ],
    "workbench": ["mailbus_workbench.app", "mailbus_workbench.serve", "textual_serve.server"],
    "spark": ["mailbus.sessions.spark", "pyspark.sql.connect.session"],
    "notebook": ["mailbus.notebook", "anywidget", "altair", "vl_convert"],
    "test": ["pytest"],
}
ENTRY_POINTS["all"] = [module for modules in ENTRY_POINTS.values() for module in modules]


def _uv() -> str:
    return shutil.which("uv") or str(Path.home() / ".local/bin/uv")


def _env() -> dict[str, str]:
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    env.pop("VIRTUAL_ENV", None)
    return env


def _uv_run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_uv(), *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    built = _uv_run("build", "--quiet", "--out-dir", str(out))
    assert built.returncode == 0, built.stderr
    return out


@pytest.fixture(scope="module")
def constraints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """uv.lock's versions of every package an extra may bring."""
    path = tmp_path_factory.mktemp("lock") / "constraints.txt"
    exported = _uv_run(
        "export", "--frozen", "--all-extras", "--no-dev", "--no-emit-project", "--no-hashes",
        "--quiet", "--output-file", str(path),
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    return path


@pytest.fixture(scope="module")
def install(
    dist: Path, constraints: Path, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Path]:
    """A fresh virtual environment with the wheel (and `extra`, unless empty) installed;
    returns its bin directory."""
    wheel = next(dist.glob("mailbus-*.whl"))

    def make(extra: str) -> Path:
        venv = tmp_path_factory.mktemp(f"venv-{extra or 'bare'}")
        made = _uv_run("venv", "--quiet", "--python", sys.executable, str(venv))
        assert made.returncode == 0, made.stderr
        spec = f"mailbus[{extra}] @ {wheel.as_uri()}" if extra else str(wheel)
        args = ["pip", "install", "--quiet", "--python", str(venv / "bin/python")]
        args += ["--constraint", str(constraints), spec]
        # The cache has every wheel once scripts/bootstrap ran; the registry's index
        # pages may not be cached yet, and then the registry is asked once.
        done = _uv_run(*args, "--offline")
        if done.returncode != 0:
            done = _uv_run(*args)
        assert done.returncode == 0, done.stderr
        return venv / "bin"

    return make


@pytest.fixture(scope="module")
def bare(install: Callable[[str], Path]) -> Path:
    return install("")


def _readme_example(heading: str) -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index(heading) :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    return match.group(1)


def _python(bin_dir: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # From an empty directory, so that nothing of the checkout is importable.
    return subprocess.run(
        [str(bin_dir / "python"), "-c", code],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_wheel_holds_the_product_and_not_the_fixtures(dist: Path) -> None:
    assert list(dist.glob("mailbus-*.tar.gz"))
    names = zipfile.ZipFile(next(dist.glob("mailbus-*.whl"))).namelist()
    assert "mailbus/cli.py" in names and "mailbus_workbench/app.py" in names
    assert not [name for name in names if name.startswith("workbench_fixtures/")]


def test_the_readme_pub_sub_example_runs_on_the_engine_alone(bare: Path, tmp_path: Path) -> None:
    missing = _python(
        bare,
        "import importlib.util as u\n"
        "print([m for m in ('textual', 'polars', 'pyarrow', 'rich') if u.find_spec(m)])",
        tmp_path,
    )
    assert missing.stdout.strip() == "[]", missing.stderr
    ran = _python(bare, _readme_example("## A publisher and a subscriber"), tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith('{"celsius": 21.5} ')


def test_the_engine_commands_run_and_the_others_name_their_extra(
    bare: Path, tmp_path: Path
) -> None:
    def mailbus(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(bare / "mailbus"), *args],
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )

    demo = mailbus("demo", "--seconds", "0.5")
    assert demo.returncode == 0, demo.stderr
    assert "received" in demo.stdout
    for args, extra in [
        ((), "workbench"),
        (("serve",), "workbench"),
        (("record", str(tmp_path / "s"), "--demo", "--seconds", "0.2"), "sessions"),
    ]:
        refused = mailbus(*args)
        assert refused.returncode == 2, refused.stderr
        assert f"pip install 'mailbus[{extra}]'" in refused.stderr
        assert "Traceback" not in refused.stderr
    library = _python(bare, "import mailbus.sessions.recorder", tmp_path)
    assert "pip install 'mailbus[sessions]'" in library.stderr


@pytest.mark.parametrize("extra", list(ENTRY_POINTS))
def test_each_extra_brings_its_entry_points(
    extra: str, install: Callable[[str], Path], tmp_path: Path
) -> None:
    bin_dir = install(extra)
    code = "import importlib\n" + "".join(
        f"importlib.import_module({module!r})\n" for module in ENTRY_POINTS[extra]
    )
    # Every entry point the distribution declares (the command, a pytest plugin) loads
    # once its extras are there.
    code += (
        "from importlib.metadata import distribution\n"
        f"if {extra!r} == 'all':\n"
        "    for ep in distribution('mailbus').entry_points:\n"
        "        ep.load()\n"
    )
    if extra in ("spark", "all"):
        # PySpark 4.3 does not support pandas 3.
        code += (
            "import pandas\nassert int(pandas.__version__.split('.')[0]) < 3, pandas.__version__\n"
        )
    done = _python(bin_dir, code, tmp_path)
    assert done.returncode == 0, done.stderr
    helped = subprocess.run(
        [str(bin_dir / "mailbus"), "--help"], capture_output=True, text=True, timeout=120
    )
    assert helped.returncode == 0 and "serve" in helped.stdout, helped.stderr
