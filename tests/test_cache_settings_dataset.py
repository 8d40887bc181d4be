"""The cache's settings in the environment, said once and plainly in every mode: over a dataset a cache folder that
is a file read "2 of 2 batches failed, no result, each for the same reason: ONNXPROBE_CACHE_DIR ..." (every batch
blamed); and ONNXPROBE_NO_CACHE=false turned the cache off (any value but "" and "0" did)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import sample_path
from onnxprobe import api
from onnxprobe.errors import UsageError
from onnxprobe.runtime import plan_cache


@pytest.fixture()
def dataset(tmp_path):
    d = tmp_path / "ds"
    d.mkdir()
    for k in range(2):
        np.savez(d / f"b{k}.npz", x=np.full((4, 16), k, np.float32))
    return d


@pytest.mark.parametrize("run", [
    lambda d: api.layers_dataset(sample_path("mlp"), d),
    lambda d: api.diff_dataset(sample_path("mlp"), sample_path("mlp"), d),
    lambda d: api.grad_dataset(sample_path("mlp"), d),
])
def test_a_cache_folder_that_is_a_file_is_said_once_not_as_every_batchs_failure(run, dataset, tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "afile"))
    with pytest.raises(UsageError) as e:
        run(dataset)
    assert str(e.value).startswith("ONNXPROBE_CACHE_DIR") and "is a file, not a folder" in str(e.value), str(e.value)
    monkeypatch.setenv("ONNXPROBE_CACHE_SIZE", "1x")
    monkeypatch.delenv("ONNXPROBE_CACHE_DIR")
    with pytest.raises(UsageError, match="^ONNXPROBE_CACHE_SIZE '1x'"):
        run(dataset)


@pytest.mark.parametrize("value, on", [("", True), ("0", True), ("false", True), ("No", True), ("off", True),
                                       ("1", False), ("true", False), ("yes", False)])
def test_no_cache_reads_false_words_as_off(value, on, monkeypatch):
    monkeypatch.setenv("ONNXPROBE_NO_CACHE", value)
    assert plan_cache.enabled() is on
