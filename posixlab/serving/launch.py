"""Start a local vLLM server for one run and stop it afterwards (``model.backend=vllm model.server.launch=true``).

The server runs from a Python that has vLLM (``model.server.launch_python``, else ``$POSIXLAB_VLLM_PYTHON``, else the venv
``python -m posixlab.serving.install`` builds in the cache folder): vLLM pins its own ``torch`` and ``transformers``,
which conflict with this project's pins, so it lives in an environment of its own and is started as a module
(``python -m vllm.entrypoints.openai.api_server``). It listens on a free loopback port; its log goes to a file whose
tail is shown if it dies before it answers. On CPU (no CUDA here) it runs with ``--enforce-eager`` and a key/value
cache of 2 GiB (``--kv-cache-memory-bytes``): vLLM's CPU build otherwise sizes it as a share of the NUMA node's memory
minus its own resident size, which fails on a small or shared machine (``--gpu-memory-utilization`` 0.1 left it
negative here). ``model.server.launch_args`` go last, so they override any of these.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from posixlab.errors import ConfigError, ModelUnavailableError
from posixlab.models.allocator import server_environment
from posixlab.paths import default_cache_dir

STARTUP_TIMEOUT_S = 600  # a 1.5B model on 2 CPU cores starts in about a minute; a 70B one on GPUs takes minutes
VENV_NAME = "vllm-venv"
CPU_KV_CACHE_BYTES = 2 * 2**30


def vllm_python(spec_python: str | None, cache_dir=None) -> str:
    """The Python that runs the server: the setting, the environment variable, or the cache's venv."""
    candidates = [spec_python, os.environ.get("POSIXLAB_VLLM_PYTHON"),
                  str(Path(cache_dir or default_cache_dir()) / VENV_NAME / "bin" / "python")]
    for candidate in candidates:
        if candidate:
            if Path(candidate).exists():
                return candidate
            if candidate is not candidates[-1]:
                raise ConfigError(f"the Python for the vLLM server, {candidate}, does not exist")
    raise ConfigError(f"model.server.launch=true needs a Python with vLLM and none is set up: run "
                      f"`python -m posixlab.serving.install` (builds {candidates[-1]}, about 5 minutes), or set "
                      f"model.server.launch_python=/path/to/python (or $POSIXLAB_VLLM_PYTHON)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _on_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


class LocalServer:
    def __init__(self, python: str, folder: str, served_name: str, dtype: str, max_model_len: int | None,
                 extra_args: tuple[str, ...] = (), port: int | None = None):
        self.python, self.folder, self.served_name = python, folder, served_name
        self.dtype, self.max_model_len, self.extra_args = dtype, max_model_len, tuple(extra_args)
        self.port = port or free_port()
        self.process: subprocess.Popen | None = None
        self.log_path: Path | None = None

    @classmethod
    def for_spec(cls, spec, folder: str, cache_dir=None) -> LocalServer:
        gpu = _on_gpu()
        # the dtype the server computes in; auto follows the in-process rule (bfloat16 on a GPU, float32 on CPU)
        dtype = spec.dtype if spec.dtype != "auto" else ("bfloat16" if gpu else "float32")
        max_len = spec.server.max_model_len or (None if gpu else 2048)
        return cls(vllm_python(spec.server.launch_python, cache_dir), folder, spec.server.served_name or spec.name, dtype, max_len,
                   spec.server.launch_args)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        cmd = [self.python, "-m", "vllm.entrypoints.openai.api_server", "--model", self.folder,
               "--served-model-name", self.served_name, "--host", "127.0.0.1", "--port", str(self.port),
               "--dtype", self.dtype]
        if self.max_model_len:
            cmd += ["--max-model-len", str(self.max_model_len)]
        if not _on_gpu():  # CPU: no graph capture, and a key/value cache of a fixed size (see the module's docstring)
            cmd += ["--enforce-eager", "--kv-cache-memory-bytes", str(CPU_KV_CACHE_BYTES)]
        return cmd + list(self.extra_args)

    def start(self, timeout: float = STARTUP_TIMEOUT_S) -> str:
        """Start the server and wait until it lists its model; returns its base URL."""
        handle, log = tempfile.mkstemp(prefix="posixlab-vllm-", suffix=".log")
        self.log_path = Path(log)
        print(f"posixlab: starting a vLLM server for {self.served_name} on port {self.port} (log: {log})",
              file=sys.stderr)
        self.process = subprocess.Popen(self.command(), stdout=handle, stderr=subprocess.STDOUT,
                                        start_new_session=True, env=server_environment())  # its own process group: stop() ends its workers too
        os.close(handle)
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.process.poll() is not None:
                raise ModelUnavailableError(f"the vLLM server exited with status {self.process.returncode} before "
                                            f"answering. The end of its log ({log}):\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=5).status_code == 200:
                    print(f"posixlab: vLLM server ready in {time.monotonic() - started:.0f} s", file=sys.stderr)
                    return self.base_url
            except httpx.HTTPError:
                pass
            time.sleep(1)
        self.stop()
        raise ModelUnavailableError(f"the vLLM server did not answer within {timeout:.0f} s. The end of its log "
                                    f"({log}):\n{self.log_tail()}")

    def log_tail(self, lines: int = 25) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])

    def stop(self, grace: float = 20) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``grace`` seconds."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except ProcessLookupError:
            pass

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
