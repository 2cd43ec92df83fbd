"""Tier landlock's filesystem view (sandbox/landlocked.py), exercised with the real Landlock in a forked child.
The whole tier, with the sandbox and hostile suites, runs in tests/test_tiers.py under tests/docker_like.py."""
from __future__ import annotations

import json
import os

import pytest

from autograder.sandbox import landlocked

pytestmark = pytest.mark.skipif(landlocked.available() is not None, reason=f"no Landlock: {landlocked.available()}")


def tree(base):
    """base/pkgs/{shared.py, lib/mod.py, grader/{secret.py, more/x}}, base/outside.txt"""
    for rel in ("pkgs/shared.py", "pkgs/lib/mod.py", "pkgs/grader/secret.py", "pkgs/grader/more/x", "outside.txt"):
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rel)
    return base / "pkgs", base / "pkgs" / "grader"


def test_a_secret_inside_a_granted_folder_is_cut_out_entry_by_entry(tmp_path):
    pkgs, secret = tree(tmp_path)
    assert landlocked._without(str(pkgs), [str(secret)]) == [str(pkgs / "lib"), str(pkgs / "shared.py")]
    assert landlocked._without(str(pkgs), [str(tmp_path / "elsewhere")]) == [str(pkgs)]


def in_restricted_child(readable: list[str], private: str, paths: list[str]) -> dict:
    """Fork; the child restricts itself and tries to read each path (and write in `private`); returns what it saw."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        seen = {}
        try:
            landlocked.restrict(readable, private)
            for path in paths:
                try:
                    seen[path] = os.listdir(path) if os.path.isdir(path) else open(path).read()
                except OSError as e:
                    seen[path] = type(e).__name__
            with open(os.path.join(private, "mine"), "w") as f:
                seen["write"] = f.write("ok")
            seen["own proc"] = open("/proc/self/status").read().startswith("Name:")
        except BaseException as e:  # noqa: BLE001
            seen["error"] = repr(e)
        os.write(write_end, json.dumps(seen).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def test_the_restricted_worker_reads_what_is_granted_and_nothing_else(tmp_path):
    pkgs, secret = tree(tmp_path)
    private = tmp_path / "private"
    private.mkdir()
    readable = landlocked._without(str(pkgs), [str(secret)])
    targets = [str(pkgs / "shared.py"), str(pkgs / "lib" / "mod.py"), str(secret / "secret.py"), str(secret),
               str(tmp_path / "outside.txt"), str(pkgs), "/proc/1/status", "/tmp"]
    seen = in_restricted_child(readable, str(private), targets)
    assert "error" not in seen, seen
    assert seen[str(pkgs / "shared.py")] == "pkgs/shared.py" and seen[str(pkgs / "lib" / "mod.py")] == "pkgs/lib/mod.py"
    for denied in targets[2:]:
        assert seen[denied] == "PermissionError", (denied, seen)
    assert seen["write"] == 2 and seen["own proc"] is True
