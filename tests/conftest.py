"""Fixtures only: each wraps a helper from `helpers.py` around a fresh temp directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import Checker, Keys, Runtime


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace root (it holds akm.toml)."""
    (tmp_path / "akm.toml").write_text("")
    return tmp_path


@pytest.fixture
def codes(tmp_path: Path) -> Checker:
    return Checker(tmp_path)


@pytest.fixture
def runtime(tmp_path: Path) -> Runtime:
    return Runtime(tmp_path)


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return Keys(tmp_path / "keys")
