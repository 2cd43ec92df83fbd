"""The worker's confinement, probed from inside by code written like a hostile submission."""
from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest
import torch

from autograder.sandbox import wire
from autograder.sandbox.client import Sandbox, SandboxUnavailable, WorkerCrashed, WorkerTimeout
from conftest import FORBIDDEN, ROOT, TEST_LIMITS


def load(worker, source: str, timeout: float = 5.0) -> dict:
    header, _ = worker.request({"op": "load", "filename": "attention.py"}, [source.encode()], timeout=timeout)
    return header


def run(sandbox, source: str, fn: str = "probe", *args, timeout: float = 5.0):
    """Load `source` in a fresh worker and return what `fn(*args)` gives back (or raise the worker's fate)."""
    worker = sandbox.spawn()
    try:
        header = load(worker, source, timeout)
        assert header["ok"], header
        tree, blobs = wire.encode(list(args))
        reply, out = worker.request({"op": "call", "target": fn, "args": tree}, blobs, timeout=timeout)
        assert reply["ok"], reply
        return wire.decode(reply["value"], out)["result"]
    finally:
        worker.kill()


WHO = ("import os\ndef probe():\n    caps = [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')]\n"
       "    return [os.getuid(), os.getpid(), caps[0]]")


def test_worker_runs_unprivileged_as_pid_1_with_a_fresh_uid_each_time(sandbox):
    uid, pid, caps = run(sandbox, WHO)
    second, _, _ = run(sandbox, WHO)
    assert int(caps, 16) == 0
    assert (pid == 1) == (sandbox.tier.name != "landlock")  # landlock: no pid namespace (its own /proc/<pid> only)
    if sandbox.tier.own_uids:  # full, or userns set up by root
        assert uid >= 1 << 20 and second != uid
    else:  # userns for an ordinary user: uid 0 of a user namespace of its own, with no capability left
        assert uid == second == 0


@pytest.mark.parametrize("path", [
    str(ROOT / "autograder" / "assignments" / "attention" / "reference_solution.py"),
    str(ROOT / "autograder" / "assignments" / "attention" / "checks.py"),
    str(ROOT / "solutions" / "attention" / "attention.py"),
    str(ROOT / "assignments" / "attention" / "attention.py"),
    "/etc/shadow",
])
def test_secrets_are_not_readable(sandbox, path):
    source = f"def probe():\n    try:\n        return open({path!r}, 'rb').read(20).hex()\n    except OSError as e:\n        return type(e).__name__"
    assert run(sandbox, source) in ("FileNotFoundError", "PermissionError")


LISTING = "import os\ndef probe(path):\n    try: return sorted(os.listdir(path))\n    except OSError as e: return type(e).__name__"


def test_filesystem_shows_only_system_and_python(sandbox):
    top = run(sandbox, LISTING, "probe", "/")
    if sandbox.tier.name == "landlock":  # nothing is hidden by a mount: Landlock refuses to list what it does not grant
        assert top == run(sandbox, LISTING, "probe", str(ROOT)) == run(sandbox, LISTING, "probe", "/tmp") == \
            run(sandbox, LISTING, "probe", "/proc") == "PermissionError"
        return
    system = {"usr", "etc", "lib", "lib32", "lib64", "libx32", "bin", "sbin", "dev", "proc", "tmp", "var"}
    # plus the top folders of the Python install and the virtualenv (e.g. /root/.pyenv, /check/.../.venv)
    python = {Path(p).parts[1] for p in (sys.base_prefix, sys.prefix, *[q for q in sys.path if q.endswith("-packages")])}
    assert set(top) <= system | python
    # the repository root exists at most as a skeleton holding the virtualenv
    listed = run(sandbox, LISTING, "probe", str(ROOT))
    assert listed == "FileNotFoundError" or set(listed) <= {".venv"}


def test_no_network_not_even_the_hosts_loopback(sandbox):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        source = ("import socket\ndef probe():\n"
                  f"    try:\n        s = socket.socket(); s.settimeout(1); s.connect(('127.0.0.1', {port}))\n"
                  "        return 'connected'\n"
                  "    except OSError as e:\n        return type(e).__name__")
        assert run(sandbox, source) == "PermissionError"  # no socket at all (seccomp), and no network namespace


def test_writes_outside_the_private_tmp_fail_and_it_is_private(sandbox, tmp_path):
    target = tmp_path / "pwned"
    source = (f"def probe():\n    out = []\n    for p in [{str(target)!r}, '/pwned', '/usr/pwned']:\n"
              "        try:\n            open(p, 'w').write('x'); out.append('wrote')\n"
              "        except OSError as e:\n            out.append(type(e).__name__)\n"
              "    import tempfile\n    open(tempfile.gettempdir() + '/mine', 'w').write('ok')\n    return out")
    assert "wrote" not in run(sandbox, source)
    assert not target.exists()
    # a second worker does not see the first one's private tmp (/tmp, or /var/tmp when the checkout is in /tmp)
    assert run(sandbox, "import os, tempfile\ndef probe(): return os.path.exists(tempfile.gettempdir() + '/mine')") is False


def test_file_size_is_capped(sandbox):
    source = ("import tempfile\ndef probe():\n    try:\n"
              "        open(tempfile.gettempdir() + '/big', 'wb').write(b'x' * (8 << 20)); return 'wrote'\n"
              "    except OSError as e:\n        return type(e).__name__")
    assert run(sandbox, source) == "OSError"


def test_infinite_loop_ignoring_signals_is_killed(sandbox):
    source = ("import signal\nfor s in (signal.SIGINT, signal.SIGTERM): signal.signal(s, signal.SIG_IGN)\n"
              "def probe():\n    while True: pass")
    started = time.monotonic()
    with pytest.raises(WorkerTimeout):
        run(sandbox, source, timeout=1.0)
    assert time.monotonic() - started < 5


def test_memory_cap_kills_the_worker(sandbox):
    source = "import torch\ndef probe(): return float(torch.ones(3 << 30, dtype=torch.uint8).sum())"
    if sandbox.tier.cgroups:
        with pytest.raises(WorkerCrashed, match="memory limit"):
            run(sandbox, source, timeout=20)
    else:  # no cgroup here: the address-space limit makes the allocation itself fail
        with pytest.raises(AssertionError, match="Cannot allocate memory"):
            run(sandbox, source, timeout=20)


def test_peak_worker_memory_counts_what_a_worker_allocates():
    with Sandbox(TEST_LIMITS, isolate=True, secrets=[str(ROOT)], slots=1, forbidden=FORBIDDEN) as box:
        if not box.tier.cgroups:
            pytest.skip("the peak is read from the slot's cgroup, and this tier has none")
        small = run(box, "def probe(): return 1")
        assert small == 1 and box.peak_worker_memory() < 200 << 20
        assert run(box, "def probe(): return len(bytearray(300 << 20))", timeout=20) == 300 << 20
        assert box.peak_worker_memory() >= 300 << 20


def test_a_setsid_daemon_holding_the_socket_dies_with_its_worker(sandbox):
    """In every tier: a daemon that tried to leave the worker's session keeps the grader's socket open; killing the
    worker (pid 1 of its pid namespace; in tier landlock, its process group) must end it too, so the grader's end
    reads end-of-file."""
    import os
    import signal

    source = ("import os, time\n"
              "def probe():\n"
              "    if os.fork() == 0:\n"
              "        try: os.setsid()\n"
              "        except OSError: pass\n"
              "        time.sleep(60); os._exit(0)\n"
              "    return 1\n")
    worker = sandbox.spawn()
    load(worker, source)
    reply, _ = worker.request({"op": "call", "target": "probe", "args": {"list": []}}, timeout=10)
    assert reply["ok"], reply
    os.kill(worker.pid, signal.SIGKILL)
    worker.sock.settimeout(5)
    assert worker.sock.recv(1) == b""  # no process is left holding the socket
    worker.kill()


def test_setsid_daemon_and_fork_storm_die_with_the_worker(sandbox, tmp_path):
    source = ("import os, time\n"
              "def probe():\n"
              "    pids = []\n"
              "    for _ in range(100):\n"
              "        try:\n"
              "            pid = os.fork()\n"
              "        except OSError:\n"
              "            break\n"
              "        if pid == 0:\n"
              "            try: os.setsid()\n"
              "            except OSError: pass\n"
              "            time.sleep(60); os._exit(0)\n"
              "        pids.append(pid)\n"
              "    return len(pids)\n")
    worker = sandbox.spawn()
    load(worker, source)
    reply, blobs = worker.request({"op": "call", "target": "probe", "args": {"list": []}}, timeout=10)
    forked = wire.decode(reply["value"], blobs)["result"]
    assert 0 < forked < TEST_LIMITS.processes  # the storm hit the process cap (pids cgroup, or RLIMIT_NPROC)
    if worker.group is None:
        worker.kill()
        pytest.skip("without cgroups the storm's pids are not listed (the daemon test above covers their death)")
    group = worker.group
    storm = set(group.pids())
    assert len(storm) > 1
    worker.kill()
    # the slot's group is refilled with the next pre-forked worker soon after: look only at the storm's pids
    deadline = time.monotonic() + 5
    while storm & set(group.pids()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not storm & set(group.pids())  # every descendant, setsid or not, is gone


def test_refuses_when_no_tier_is_available_and_says_why(monkeypatch):
    from autograder.sandbox import tiers

    monkeypatch.setattr(tiers, "_can_unshare", lambda flags: False)  # as under Docker's default seccomp profile
    monkeypatch.setattr(tiers.landlocked, "available", lambda: "the kernel has no Landlock")  # and an old kernel
    with pytest.raises(SandboxUnavailable, match="(?s)userns: cannot create a user namespace.*"
                                                 "landlock: (the kernel has no Landlock|not running as root).*"
                                                 "--no-sandbox"):
        Sandbox(TEST_LIMITS, isolate=True, forbidden=FORBIDDEN)


FORBIDDEN_ROUTES = """
import torch, gc
import torch.nn.functional as F
def probe(q):
    routes = {
        "F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(q, q, q),
        "aten math via getattr": lambda: getattr(torch.ops.aten, "_scaled_dot_product_attention_" + "math")(q, q, q),
        "with DisableTorchFunction": lambda: _disabled(q),
        "under vmap": lambda: torch.vmap(lambda a: torch.ops.aten._scaled_dot_product_attention_math(a, a, a))(q),
        "nn.MultiheadAttention": lambda: torch.nn.MultiheadAttention(4, 1),
        "multi_head_attention_forward via gc": lambda: _every("multi_head_attention_forward", q),
    }
    out = {}
    for name, route in routes.items():
        try:
            route()
            out[name] = "ran"
        except Exception as e:
            out[name] = "refused" if "is disabled in this assignment" in str(e) else type(e).__name__
    return out
def _every(name, q):
    for f in [f for f in gc.get_objects() if type(f).__name__ == "function" and f.__name__ == name]:
        f(q, q, q, 4, 1, None, None, None, None, False, 0.0, q, None)
def _disabled(q):
    with torch._C.DisableTorchFunction():
        return torch.ops.aten.scaled_dot_product_attention(q, q, q)
"""


def test_forbidden_apis_are_unavailable_by_every_route(sandbox):
    routes = run(sandbox, FORBIDDEN_ROUTES, "probe", torch.ones(1, 2, 4))
    assert routes and set(routes.values()) == {"refused"}, routes


def test_forbidden_apis_work_in_a_sandbox_that_does_not_forbid_them():
    """The routes above are real ways to the ready-made attention: without the block they run (so the test above
    can fail)."""
    with Sandbox(TEST_LIMITS, isolate=True, secrets=[str(ROOT)], slots=1, forbidden=[]) as box:
        routes = run(box, FORBIDDEN_ROUTES, "probe", torch.ones(1, 2, 4))
    assert routes["F.scaled_dot_product_attention"] == routes["aten math via getattr"] == "ran"


def test_a_worker_that_trickles_its_reply_is_killed_at_the_deadline(sandbox):
    """One byte every 0.3 s keeps every single read short; the deadline covers the whole reply."""
    source = ("import os, socket, struct, time\n"
              "def _is_socket(f):\n"
              "    try: return os.readlink(f'/proc/self/fd/{f}').startswith('socket:')\n"
              "    except OSError: return False\n"
              "def probe():\n"
              "    fd = [int(f) for f in os.listdir('/proc/self/fd') if _is_socket(f)][0]\n"
              "    os.write(fd, struct.pack('>I', 1000))\n"
              "    while True:\n"
              "        os.write(fd, b' '); time.sleep(0.3)\n")
    started = time.monotonic()
    with pytest.raises(WorkerTimeout):
        run(sandbox, source, timeout=2.0)
    assert time.monotonic() - started < 6


def test_a_submission_larger_than_a_frame_header_loads(sandbox):
    source = "# " + "x" * (3 << 20) + "\ndef probe(): return 7\n"
    assert run(sandbox, source, timeout=20) == 7


def test_worker_memory_holds_no_grader_path(sandbox):
    """Strings reachable from the worker's Python objects, its argv, path and environment: none names the
    repository's package folder (the hidden checks live there) or the grader's config."""
    source = ("import gc, os, sys\n"
              "def probe(reversed_mark):\n"
              "    mark = reversed_mark[::-1]\n"
              "    seen = set(sys.path) | set(sys.argv) | set(os.environ.values())\n"
              "    for m in list(sys.modules.values()):\n"
              "        seen.add(str(getattr(m, '__file__', '')))\n"
              "    for o in gc.get_objects():\n"
              "        if isinstance(o, dict):\n"
              "            seen.update(v for v in o.values() if isinstance(v, str))\n"
              "        elif isinstance(o, (list, tuple)):\n"
              "            seen.update(v for v in o if isinstance(v, str))\n"
              "        if type(o).__name__ == 'function': seen.add(o.__code__.co_filename)\n"
              "    return sorted(s for s in seen if mark in s)\n")
    mark = str(ROOT / "autograder")
    assert run(sandbox, source, "probe", mark[::-1]) == []


def test_seccomp_denies_exec_keyrings_and_namespaces_in_the_worker(sandbox):
    source = ("import ctypes, fcntl, os, socket, subprocess\n"
              "libc = ctypes.CDLL(None, use_errno=True)\n"
              "def errno_of(call):\n"
              "    try: call(); return 'ran'\n"
              "    except OSError as e: return e.errno\n"
              "def probe():\n"
              "    out = {'exec': errno_of(lambda: subprocess.run(['/bin/true']))}\n"
              "    out['add_key'] = libc.syscall(248, b'user', b'k', b'v', 1, -4) == -1 and ctypes.get_errno()\n"
              "    out['unshare'] = libc.unshare(0x10000000) == -1 and ctypes.get_errno()\n"
              "    out['socket'] = errno_of(lambda: socket.socket(socket.AF_UNIX))\n"
              "    out['shmget'] = libc.shmget(0x4174, 4096, 0o1666) == -1 and ctypes.get_errno()\n"
              "    shared = open(os.__file__, 'rb')  # a file every worker may read\n"
              "    out['flock'] = errno_of(lambda: fcntl.flock(shared, fcntl.LOCK_SH))\n"
              "    out['lockf'] = errno_of(lambda: fcntl.lockf(shared, fcntl.LOCK_SH))\n"
              "    out['inotify'] = libc.inotify_init() == -1 and ctypes.get_errno()\n"
              "    pid = os.fork()\n"
              "    if pid == 0:  # not a group leader: without the filter both calls would succeed\n"
              "        left = 0\n"
              "        for bit, call in ((1, os.setsid), (2, lambda: os.setpgid(0, 0))):\n"
              "            if errno_of(call) == 'ran': left |= bit\n"
              "        os._exit(left)\n"
              "    out['leave group'] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])\n"
              "    return out\n")
    import errno
    denied = errno.EPERM
    assert run(sandbox, source) == {"exec": denied, "add_key": denied, "unshare": denied, "socket": denied,
                                    "shmget": denied, "flock": denied, "lockf": denied, "inotify": denied,
                                    "leave group": 0}


def test_a_dead_template_process_stops_grading_with_its_reason(suite, refs, tmp_path):
    """If the zygote dies, grading must stop at once with SandboxUnavailable, never blame (or crawl through) students."""
    from autograder.engine.runner import grade_file
    from conftest import SOLUTION

    box = Sandbox(TEST_LIMITS, isolate=True, secrets=[str(ROOT)], slots=2, forbidden=FORBIDDEN)
    try:
        box.wait_ready()
        box._proc.kill()
        box._proc.wait()
        started = time.monotonic()
        with pytest.raises(SandboxUnavailable, match="died|did not start|could not start"):
            for _ in range(10):  # workers forked ahead of time are served (dead) first; then it must stop
                grade_file(SOLUTION, "s", suite, box, TEST_LIMITS, refs)
        assert time.monotonic() - started < 10
    finally:
        box.close()


def test_probe_finds_every_forbidden_api_before_disable_and_none_after():
    """Run in a fresh interpreter: `disable` lasts for the life of the process it runs in."""
    import json
    import subprocess

    code = ("import json, torch\nfrom autograder.sandbox import forbid\n"
            "from autograder.assignments import get\nnames = list(get('attention').forbidden)\n"
            "before = forbid.probe(names)\nforbid.disable(names)\n"
            "print(json.dumps([before, forbid.probe(names), forbid.canary(names)]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    before, after, canary = json.loads(result.stdout.splitlines()[-1])
    assert "aten::_scaled_dot_product_attention_math" in before and "torch.nn.MultiheadAttention" in before
    assert after == [] and canary == []


@pytest.mark.parametrize("header", [
    b'{"ok": true, "value": {"tensor": 0, "dtype": "float32", "shape": [9223372036854775807, 0]}, "blobs": [0]}',
    b'{"ok": true, "value": ' + b"9" * 5000 + b', "blobs": []}',
    b'{"ok": true, "value": ' + b"[" * 100_000 + b"]" * 100_000 + b', "blobs": []}',
    b'{"ok": true, "value": {"tensor": 0, "dtype": "float32", "shape": [4]}, "blobs": [1, 2, 3]}',
    b'\xff\xfe not json',
])
def test_a_forged_reply_is_a_crash_of_that_worker_not_a_grader_error(grade, header):
    """Student code writes its own reply frame on the grader's socket: whatever it holds, the grader calls it an
    invalid reply (that function's checks are lost, the worker replaced), never an internal error."""
    from conftest import SOLUTION

    source = SOLUTION.read_text(encoding="utf-8") + (
        "\nimport os, struct, time\n"
        "def _is_socket(f):\n"
        "    try: return os.readlink(f'/proc/self/fd/{f}').startswith('socket:')\n"
        "    except OSError: return False\n"
        f"HEADER = {header!r}\n"
        "def scaled_dot_product_attention(Q, K, V, causal=True):\n"
        "    fd = [int(f) for f in os.listdir('/proc/self/fd') if _is_socket(f)][0]\n"
        "    os.write(fd, struct.pack('>I', len(HEADER)) + HEADER + b'x' * 6)\n"
        "    time.sleep(30)\n")
    result = grade(source)
    sdpa = [c for c in result.checks if c.function == "scaled_dot_product_attention"]
    assert {c.status for c in sdpa} == {"crashed"}, [(c.name, c.status, c.detail_en) for c in sdpa]
    assert result.score == 7  # causal_mask and split_heads still count
    assert not any("internal grader error" in c.detail_en for c in result.checks)
