from pathlib import Path

import pytest

from archsim.config.loader import load_system, load_workload

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def h200():
    return load_system(str(ROOT / "hw_configs" / "h200.yaml"))[0]


@pytest.fixture(scope="session")
def llama8b():
    return load_workload(str(ROOT / "workloads" / "llama3_8b.yaml"))[0]
