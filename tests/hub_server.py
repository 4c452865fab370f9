"""A stand-in for the Hugging Face Hub on loopback (the standard library's HTTP server), serving repositories from
local folders to the real ``huggingface_hub``, ``transformers`` and ``datasets`` (point ``HF_ENDPOINT`` at ``url``
before they are imported: they read it at import time).

It answers the endpoints those libraries call, as huggingface_hub reads them (``file_download.py``,
``hf_api.py``, ``utils/_http.py``):

- ``GET /api/{models,datasets}/{org}/{name}[/revision/{rev}]``: repo info (``sha`` and ``siblings`` required);
- ``GET /api/{type}s/{org}/{name}/tree/{rev}[/{path}]`` and ``POST .../paths-info/{rev}``: file listings;
- ``HEAD``/``GET /{org}/{name}/resolve/{rev}/{file}`` (``/datasets/...`` for data sets): the bytes, with ``ETag``
  (the git blob sha1), ``X-Repo-Commit`` and ``Content-Length``; ``Range: bytes=a-`` gives 206 (resumed downloads).
  A ``.gguf`` file is served as the Hub serves a file in Git LFS: ``X-Linked-Etag`` its sha256, which
  huggingface_hub names the cached blob by, and an ``lfs`` entry in listings.

Errors carry the ``X-Error-Code`` that huggingface_hub maps to its exceptions: ``RepoNotFound`` (404),
``RevisionNotFound`` (404), ``EntryNotFound`` (404: the libraries probe optional files and expect exactly this) and
``GatedRepo`` (401: a gated repository's files without ``Authorization: Bearer <token>``; its info and listing stay
public, as on the Hub). Faults for tests (``fault(...)``): answer 500, answer slowly, or send part of a file, close the
connection and go down (every later connection closed unanswered) until ``clear()``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

API = re.compile(r"^/api/(models|datasets)/([^/]+/[^/]+)(?:/(revision|tree|paths-info)/([^/]+)(?:/(.*))?)?$")
RESOLVE = re.compile(r"^/(datasets/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")


@dataclass
class Repo:
    folder: Path
    gated: bool = False
    files: dict = field(default_factory=dict)  # path in repo -> (size, git blob sha1)
    lfs: dict = field(default_factory=dict)  # path in repo -> sha256, for the files the Hub keeps in Git LFS (.gguf)
    sha: str = ""  # a fake commit: a hash of every (path, blob sha)

    def scan(self) -> None:
        self.files, self.lfs = {}, {}
        for path in sorted(p for p in self.folder.rglob("*") if p.is_file()):
            data = path.read_bytes()
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            self.files[path.relative_to(self.folder).as_posix()] = (len(data), blob)
            if path.suffix == ".gguf":
                self.lfs[path.relative_to(self.folder).as_posix()] = hashlib.sha256(data).hexdigest()
        self.sha = hashlib.sha1(json.dumps(sorted(self.files.items())).encode()).hexdigest()

    def entries(self, prefix: str = "", recursive: bool = True) -> list[dict]:
        """Tree entries under ``prefix`` (a folder; '' for the root): files and the folders on the way."""
        out, folders = [], set()
        base = prefix.strip("/") + "/" if prefix.strip("/") else ""
        for path, (size, blob) in self.files.items():
            if not path.startswith(base):
                continue
            rest = path[len(base):].split("/")
            if len(rest) > 1:  # a file in a subfolder: list the subfolder, and the file only when recursive
                for depth in range(1, len(rest) if recursive else 2):
                    folders.add(base + "/".join(rest[:depth]))
                if not recursive:
                    continue
            lfs = {"lfs": {"oid": self.lfs[path], "size": size, "pointerSize": 134}} if path in self.lfs else {}
            out.append({"type": "file", "oid": blob, "size": size, "path": path, **lfs})
        tree_ids = {f: hashlib.sha1(f.encode()).hexdigest() for f in folders}  # any stable id will do
        return [{"type": "directory", "oid": tree_ids[f], "size": 0, "path": f} for f in sorted(folders)] + out


class HubServer:
    """``add(repo_type, repo_id, folder, gated=False)`` serves a folder; ``url`` is the endpoint; ``requests`` lists
    every request as (method, path, status)."""

    def __init__(self, token: str = "hf_test_token"):
        self.token = token
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[tuple[str, str, int]] = []
        self.lock = threading.Lock()
        self.clear()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def add(self, repo_type: str, repo_id: str, folder: Path, gated: bool = False) -> Repo:
        repo = Repo(Path(folder), gated)
        repo.scan()
        self.repos[(repo_type, repo_id)] = repo
        return repo

    def fault(self, kind: str, match: str = "", method: str | None = None, delay: float = 0.0,
              after_bytes: int = 0) -> None:
        """From now on, requests whose path contains ``match`` (and whose method is ``method``, if given): ``"500"``
        answer 500; ``"slow"`` wait ``delay`` seconds first; ``"stop"`` (file downloads) send ``after_bytes`` bytes of
        the file, close the connection and take the whole server down, as a server that dies mid-download."""
        assert kind in ("500", "slow", "stop")
        self.fault_kind, self.fault_match, self.fault_method = kind, match, method
        self.fault_delay, self.fault_after = delay, after_bytes

    def clear(self) -> None:
        """Healthy again: no fault, up."""
        self.fault_kind, self.fault_match, self.fault_method = None, "", None
        self.fault_delay, self.fault_after, self.down = 0.0, 0, False

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the clients expect; every answer has a Content-Length
            disable_nagle_algorithm = True  # else headers and body in two writes cost ~40 ms (delayed ACK)

            def log_message(self, *args):  # quiet: the test's own output stays readable
                pass

            def reply(self, status: int, body: bytes = b"", headers: dict | None = None) -> None:
                with hub.lock:
                    hub.requests.append((self.command, self.path, status))
                self.send_response(status)
                headers = {"Content-Type": "application/json", "Content-Length": str(len(body)), **(headers or {})}
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def error(self, status: int, code: str | None, message: str) -> None:
                headers = {"X-Error-Message": message, **({"X-Error-Code": code} if code else {})}
                self.reply(status, json.dumps({"error": message}).encode(), headers)

            def handle_one(self) -> None:
                if hub.down:  # a stopped server: the connection is closed with no answer
                    self.close_connection = True
                    return
                path = unquote(urlsplit(self.path).path)
                faulty = (hub.fault_kind is not None and hub.fault_match in path
                          and hub.fault_method in (None, self.command))
                if faulty and hub.fault_kind == "slow":
                    time.sleep(hub.fault_delay)
                if faulty and hub.fault_kind == "500":
                    return self.error(500, None, "Internal Error - We're working hard to fix this as soon as possible!")
                if m := API.match(path):
                    return self.api(m.group(1)[:-1], m.group(2), m.group(3), m.group(4) or "main", m.group(5) or "")
                if m := RESOLVE.match(path):
                    stop = faulty and hub.fault_kind == "stop"
                    return self.resolve("dataset" if m.group(1) else "model", m.group(2), m.group(3), m.group(4), stop)
                self.error(404, None, f"no route for {path}")

            def find(self, repo_type: str, repo_id: str, revision: str) -> Repo | None:
                repo = hub.repos.get((repo_type, repo_id))
                if repo is None:
                    self.error(404, "RepoNotFound", "Repository not found")
                elif revision not in ("main", repo.sha):
                    self.error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                else:
                    return repo
                return None

            def api(self, repo_type: str, repo_id: str, kind: str | None, revision: str, rest: str) -> None:
                if not (repo := self.find(repo_type, repo_id, revision)):
                    return
                if kind in (None, "revision"):
                    info = {"id": repo_id, "sha": repo.sha, "private": False, "disabled": False,
                            "gated": "manual" if repo.gated else False, "lastModified": "2024-01-01T00:00:00.000Z",
                            "tags": [], "siblings": [{"rfilename": p} for p in repo.files]}
                    return self.reply(200, json.dumps(info).encode())
                if kind == "tree":
                    recursive = parse_qs(urlsplit(self.path).query).get("recursive", ["false"])[0].lower() == "true"
                    if rest and not any(p.startswith(rest.rstrip("/") + "/") for p in repo.files):
                        return self.error(404, "EntryNotFound", f"{rest} does not exist on {revision}")
                    return self.reply(200, json.dumps(repo.entries(rest, recursive)).encode())
                # paths-info: a form (paths=a&paths=b) or JSON body; only the paths that exist are answered
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                asked = (json.loads(body).get("paths", []) if body.startswith("{") else parse_qs(body).get("paths", []))
                everything = {e["path"]: e for e in repo.entries()}
                found = [everything[p.strip("/")] for p in asked if p.strip("/") in everything]
                self.reply(200, json.dumps(found).encode())

            def resolve(self, repo_type: str, repo_id: str, revision: str, name: str, stop: bool) -> None:
                if not (repo := self.find(repo_type, repo_id, revision)):
                    return
                if repo.gated and self.headers.get("Authorization") != f"Bearer {hub.token}":
                    return self.error(401, "GatedRepo", f"Access to model {repo_id} is restricted. You must have "
                                                        f"access to it and be authenticated to access it.")
                if name not in repo.files:
                    return self.error(404, "EntryNotFound", f"{name} does not exist on {revision}")
                size, blob = repo.files[name]
                data = (repo.folder / name).read_bytes()
                headers = {"ETag": f'"{blob}"', "X-Repo-Commit": repo.sha, "Accept-Ranges": "bytes",
                           "Content-Type": "application/octet-stream"}
                if name in repo.lfs:  # a file in Git LFS: the Hub names it by its sha256 (the cache's blob name)
                    headers.update({"X-Linked-Etag": f'"{repo.lfs[name]}"', "X-Linked-Size": str(size)})
                start = 0
                if self.command == "GET" and (r := re.match(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))):
                    start, end = int(r.group(1)), int(r.group(2) or size - 1)
                    headers["Content-Range"] = f"bytes {start}-{end}/{size}"
                    data = data[start:end + 1]
                if stop and self.command == "GET":  # promise the whole file, send part of it, die
                    with hub.lock:
                        hub.requests.append((self.command, self.path, 0))
                    self.send_response(206 if start else 200)
                    for key, value in {**headers, "Content-Length": str(len(data))}.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data[:max(hub.fault_after - start, 0)])
                    self.wfile.flush()
                    hub.down, self.close_connection = True, True
                    return
                self.reply(206 if start else 200, data, headers)

            def do_GET(self):
                self.handle_one()

            do_HEAD = do_GET

            def do_POST(self):
                self.handle_one()

        return Handler

