"""archsim installed as a user installs it: a built wheel, an sdist and `pip install .` each go
into a fresh virtual environment and run from a folder outside the repository, so the shipped
chips, models, sweep specs and data must travel inside the package."""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IGNORED = shutil.ignore_patterns(
    ".git", "__pycache__", "build", "dist", "*.egg-info", ".pytest_cache", ".hypothesis", "*.nbi", "*.nbc"
)

pytest.importorskip("setuptools.build_meta")


def copy_source(dest: Path) -> Path:
    """The project's files as git sees them (tracked, or new and not ignored); without git, the tree less build outputs."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        return Path(shutil.copytree(ROOT, dest, ignore=IGNORED))
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "NUMBA_", "ARCHSIM_"))}
    return {**env, "COLUMNS": "200"}


def sh(args, cwd, timeout=300) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{' '.join(map(str, args))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """An sdist and a wheel built from a copy of the tree, and a fresh venv that sees this test's
    packages (numpy, numba, ... and the build backend) but not its archsim."""
    tmp = tmp_path_factory.mktemp("install")
    src = copy_source(tmp / "src")
    dist = tmp / "dist"
    sh(
        [
            sys.executable,
            "-c",
            f"from setuptools import build_meta as b; b.build_sdist({str(dist)!r}); b.build_wheel({str(dist)!r})",
        ],
        cwd=src,
    )
    venv = tmp / "venv"
    sh([sys.executable, "-m", "venv", venv], cwd=tmp)
    site = Path(
        sh([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp).strip()
    )
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *sys.path[1:]}
    (site / "test_packages.pth").write_text(
        "\n".join(p for p in sorted(ours) if p and Path(p).is_dir() and "archsim" not in p) + "\n"
    )
    outside = tmp / "elsewhere"
    outside.mkdir()
    return {
        "src": src,
        "wheel": next(dist.glob("*.whl")),
        "sdist": next(dist.glob("*.tar.gz")),
        "venv": venv,
        "cwd": outside,
    }


def install(built, what) -> None:
    pip = [built["venv"] / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
    sh([*pip, "--no-build-isolation", "--force-reinstall", what], cwd=built["cwd"])


def archsim(built, *args) -> str:
    return sh([built["venv"] / "bin" / "archsim", *args], cwd=built["cwd"])


def check_installed_copy(built) -> None:
    """The archsim that runs is the installed one, and its shipped files are its own."""
    where = sh(
        [
            built["venv"] / "bin" / "python",
            "-c",
            "import archsim; from archsim.config.loader import shipped_dir; "
            "print(archsim.__file__); print(shipped_dir('hw_configs')); print(archsim.__version__)",
        ],
        built["cwd"],
    ).split()
    site = str(built["venv"])
    assert where[0].startswith(site) and where[1].startswith(site), where
    assert archsim(built, "--version").split() == ["archsim", where[2]]
    listing = archsim(built, "list")
    for name in ("h200", "h200x8", "tpu_v5e", "llama3_8b", "llama3_70b", "mixtral_8x7b"):
        assert f" {name} " in listing, name


def test_wheel_runs_outside_the_repo(built):
    install(built, built["wheel"])
    check_installed_copy(built)
    out = archsim(built, "run")
    assert "time to first token" in out and "Llama-3-8B on NVIDIA H200" in out
    out = archsim(built, "op", "allreduce", "--bytes", "1048576", "--hw", "h200x8")  # extends: h200, shipped too
    assert "over 8 chips of NVIDIA H200 SXM: 28.0 us" in out
    out = archsim(built, "validate", "h200_calibration")
    assert "model_step" in out and "summary" in out
    spec = sh(
        [
            built["venv"] / "bin" / "python",
            "-c",
            "from archsim.config.loader import shipped_dir; from archsim.sweep.spec import load_spec; "
            "print(len(load_spec(shipped_dir('hw_configs') / 'sweeps' / 'h200_variants.yaml').sample()))",
        ],
        built["cwd"],
    )
    assert int(spec) == 288  # the shipped sweep spec and the base files it names
    out = archsim(built, "serve", "--requests-from", "azure_llm_2023_code", "--requests", "20", "--quiet")
    assert "requests served / refused" in out and "20 / 0" in out


@pytest.mark.parametrize("what", ["sdist", "src"])
def test_sdist_and_directory_install_run_outside_the_repo(built, what):
    install(built, built[what])
    check_installed_copy(built)
    assert "time to first token" in archsim(built, "run", "--prompt", "64", "--generate", "2", "--quiet")
    assert "copy" in archsim(built, "validate", "h200_calibration", "--kind", "copy")
