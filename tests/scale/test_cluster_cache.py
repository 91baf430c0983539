"""The cluster's workers get the embedder's converted model from this process's cache and nothing
else: a cache holding environments with a symlink loop (as a SWE-bench run leaves: sqlfluff's
fixtures) does not break the seeding, and gigabytes of environments are not copied."""

import os
from pathlib import Path

import pytest

from tests.support.cluster import _seed_cache


def test_only_the_converted_model_is_seeded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ours = tmp_path / "ours"
    (ours / "openvino" / "model-key").mkdir(parents=True)
    (ours / "openvino" / "model-key" / "model.xml").write_text("<net/>")
    fixtures = ours / "environments" / "abc" / "project" / "fixtures"
    fixtures.mkdir(parents=True)
    (fixtures / "loop").symlink_to(fixtures, target_is_directory=True)
    (ours / "repos" / "mirror.git").mkdir(parents=True)
    monkeypatch.setenv("CODELOOP_CACHE_DIR", str(ours))
    workers = tmp_path / "workers"
    workers.mkdir()

    _seed_cache(workers)

    assert sorted(p.relative_to(workers).as_posix() for p in workers.rglob("*")) == [
        "openvino",
        "openvino/model-key",
        "openvino/model-key/model.xml",
    ]
    assert (workers / "openvino" / "model-key" / "model.xml").read_text() == "<net/>"


def test_a_cache_without_a_converted_model_seeds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODELOOP_CACHE_DIR", str(tmp_path / "empty"))
    workers = tmp_path / "workers"
    workers.mkdir()
    _seed_cache(workers)
    assert os.listdir(workers) == []
