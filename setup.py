"""Build step: the chips, models and sweep specs kept at the top of the repository for
developers (`hw_configs/`, `workloads/`) are shipped inside the package as `archsim/data/`,
where `archsim.config.loader.shipped_dir` finds them once installed. Everything else about the
package is declared in pyproject.toml."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("hw_configs", "workloads")  # top-level folders -> archsim/data/<folder>/
PATTERNS = ("*.yaml", "*.md")


def shipped_files(root: Path) -> list[Path]:
    """The files of SHIPPED under `root`, relative to it, sorted."""
    return sorted(p.relative_to(root) for folder in SHIPPED for pat in PATTERNS for p in (root / folder).rglob(pat))


class BuildPyWithShipped(build_py):
    """build_py that also copies the shipped folders into the built package."""

    def run(self) -> None:
        super().run()
        for rel in shipped_files(Path(".")):
            target = Path(self.build_lib) / "archsim" / "data" / rel
            self.mkpath(str(target.parent))
            self.copy_file(str(rel), str(target))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        extra = [str(Path(self.build_lib) / "archsim" / "data" / rel) for rel in shipped_files(Path("."))]
        return super().get_outputs(include_bytecode) + extra


setup(cmdclass={"build_py": BuildPyWithShipped})
