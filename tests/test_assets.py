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
