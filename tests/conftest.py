import os
import shutil
import tempfile
from pathlib import Path

import pytest

from archsim import opcache
from archsim.config.loader import load_system, load_workload

ROOT = Path(__file__).resolve().parents[1]

# The op-result cache of a test session lives apart from the user's (archsim/opcache.py).
if "ARCHSIM_CACHE_DIR" not in os.environ:
    _SESSION_CACHE = os.environ["ARCHSIM_CACHE_DIR"] = tempfile.mkdtemp(prefix="archsim-test-cache-")

    def pytest_sessionfinish(session, exitstatus):
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A test's own op cache (archsim/opcache.py), switched on for it and on again after it."""
    monkeypatch.setenv("ARCHSIM_CACHE_DIR", str(tmp_path / "cache"))
    opcache.set_enabled(True)
    yield tmp_path / "cache"
    opcache.set_enabled(True)


@pytest.fixture(scope="session")
def h200():
    return load_system(str(ROOT / "hw_configs" / "h200.yaml"))[0]


@pytest.fixture(scope="session")
def llama8b():
    return load_workload(str(ROOT / "workloads" / "llama3_8b.yaml"))[0]


# a two-layer model that keeps serving steps cheap
TINY_YAML = """\
name: tiny
model: {layers: 2, hidden: 512, heads: 8, kv_heads: 2, head_dim: 64, ffn: 1024, vocab: 1000}
dtypes: {weights: bf16, activations: bf16, kv_cache: bf16}
scenario: {batch: 1, prompt_tokens: 128, output_tokens: 16}
"""


@pytest.fixture
def tiny(tmp_path):
    """The tiny workload's file (TINY_YAML), as a path string."""
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY_YAML)
    return str(path)
