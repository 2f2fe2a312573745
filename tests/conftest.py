import os
import shutil
import tempfile
from pathlib import Path

import pytest

from archsim.config.loader import load_system, load_workload

ROOT = Path(__file__).resolve().parents[1]

# The op-result cache of a test session lives apart from the user's (archsim/opcache.py).
if "ARCHSIM_CACHE_DIR" not in os.environ:
    _SESSION_CACHE = os.environ["ARCHSIM_CACHE_DIR"] = tempfile.mkdtemp(prefix="archsim-test-cache-")

    def pytest_sessionfinish(session, exitstatus):
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def h200():
    return load_system(str(ROOT / "hw_configs" / "h200.yaml"))[0]


@pytest.fixture(scope="session")
def llama8b():
    return load_workload(str(ROOT / "workloads" / "llama3_8b.yaml"))[0]
