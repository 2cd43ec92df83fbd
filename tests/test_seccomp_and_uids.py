"""The worker's seccomp filter (sandbox/seccomp_filter.py) and per-worker uid blocks (sandbox/uids.py).

Filter tests fork a child of this process (torch imported), apply() there, run probes, and send the results back
as JSON. The same probes also run in a child without the filter. Where that control succeeds (as root), a
filter that did nothing would fail the test.
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import select
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import pytest
import torch

from autograder.sandbox import seccomp_filter, uids
from autograder.sandbox.uids import UidBlock

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="the unfiltered controls need root")
NEEDS_SECCOMP = pytest.mark.skipif(seccomp_filter.available() is not None, reason=str(seccomp_filter.available()))
libc = ctypes.CDLL(None, use_errno=True)
SIGCHLD = 17
KEY_SPEC_PROCESS_KEYRING, KEYCTL_GET_KEYRING_ID, PTRACE_ATTACH, ADDR_NO_RANDOMIZE = -2, 0, 16, 0x0040000


def _syscall(name: str, *args) -> list:
    """[return value, errno] of the raw system call `name` (numbered for this architecture by libseccomp)."""
    import pyseccomp
    return _syscall_raw(pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name), *args)


def _syscall_raw(number: int, *args) -> list:
    conv = [ctypes.c_char_p(a) if isinstance(a, bytes) else ctypes.c_long(a) for a in args]
    ret = libc.syscall(ctypes.c_long(number), *conv)
    return [ret, ctypes.get_errno() if ret == -1 else 0]


def _errno_of(fn) -> int:
    """0 when fn() succeeds, else the OSError's errno."""
    try:
        fn()
        return 0
    except OSError as e:
        return e.errno


def _run_forked(fn, timeout: float = 60.0) -> dict:
    """fn() in a forked child; its JSON result plus how the child ended ({"exit": n} or {"signal": n})."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(r)
            result = fn()
        except BaseException:
            result, code = {"error": traceback.format_exc()}, 70
        try:
            os.write(w, json.dumps(result).encode())
        finally:
            os._exit(code)
    os.close(w)
    data, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline and select.select([r], [], [], max(0.0, deadline - time.monotonic()))[0]:
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.close(r)
    if time.monotonic() >= deadline:
        os.kill(pid, signal.SIGKILL)
    status = os.waitpid(pid, 0)[1]
    end = {"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status) else {"exit": os.WEXITSTATUS(status)}
    return {**end, "result": json.loads(data) if data else None}


def _probes() -> dict:
    out = {}
    out["exec"] = _run_forked(lambda: _errno_of(lambda: os.execv("/bin/true", ["/bin/true"])))
    out["subprocess"] = _errno_of(lambda: subprocess.run(["/bin/true"], check=True))
    out["keyctl"] = _syscall("keyctl", KEYCTL_GET_KEYRING_ID, KEY_SPEC_PROCESS_KEYRING, 1)
    out["add_key"] = _syscall("add_key", b"user", b"autograder-test", b"x", 1, KEY_SPEC_PROCESS_KEYRING)
    out["unshare_user"] = _run_forked(lambda: [libc.unshare(seccomp_filter.CLONE_NEWUSER), ctypes.get_errno()])

    def clone_newuser():  # a raw clone with no stack behaves like fork: the child just exits
        ret, err = _syscall("clone", seccomp_filter.CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)
        if ret == 0:
            os._exit(0)
        if ret > 0:
            os.waitpid(ret, 0)
        return [ret, err]
    out["clone_newuser"] = _run_forked(clone_newuser)
    out["clone3"] = _syscall("clone3", 0, 0)
    # No side effects even where allowed: root gets ENOENT for a missing target, ESRCH for a missing pid
    out["mount"] = _syscall("mount", b"none", b"/nonexistent-autograder-target", b"tmpfs", 0, 0)
    out["ptrace"] = _syscall("ptrace", PTRACE_ATTACH, 0x7FFFFFFF, 0, 0)
    out["personality_query"] = _syscall("personality", 0xFFFFFFFF)
    out["personality_set"] = _run_forked(lambda: _syscall("personality", ADDR_NO_RANDOMIZE))
    out["x32_execve"] = _run_forked(lambda: _syscall_raw(0x40000000 | 520, b"/bin/true", 0, 0))  # x32 execve
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    out["fork"] = os.WEXITSTATUS(os.waitpid(pid, 0)[1])
    box = []
    t = threading.Thread(target=lambda: box.append(threading.get_native_id()))
    t.start()
    t.join()
    out["thread"] = len(box) == 1 and box[0] != threading.get_native_id()
    torch.manual_seed(0)
    x, w = torch.randn(8, 16, requires_grad=True), torch.randn(16, 4, requires_grad=True)
    (torch.softmax(x @ w, dim=-1) ** 2).sum().backward()
    out["torch"] = [round(float(x.grad.sum()), 6), round(float(w.grad.abs().sum()), 6), list(x.grad.shape)]
    with tempfile.NamedTemporaryFile(dir="/tmp") as f:
        f.write(b"hello")
        f.flush()
        with open(f.name, "rb") as g:
            out["tmp_file"] = g.read().decode()
    return out


def _child(apply: bool) -> dict:
    torch.set_num_threads(1)
    started = time.perf_counter()
    if apply:
        seccomp_filter.apply()
    applied_ms = (time.perf_counter() - started) * 1e3
    return {**_probes(), "apply_ms": applied_ms}


@pytest.fixture(scope="module")
def filtered():
    run = _run_forked(lambda: _child(True))
    assert run == {**run, "exit": 0}, run
    return run["result"]


@pytest.fixture(scope="module")
def unfiltered():
    run = _run_forked(lambda: _child(False))
    assert run == {**run, "exit": 0}, run
    return run["result"]


@NEEDS_SECCOMP
def test_filter_apply_is_cheap(filtered):
    assert filtered["apply_ms"] < 50, filtered["apply_ms"]


@NEEDS_SECCOMP
@ROOT_ONLY
def test_exec_denied_with_filter_and_works_without(filtered, unfiltered):
    assert filtered["exec"]["result"] == errno.EPERM
    assert unfiltered["exec"] == {"exit": 0, "result": None}  # /bin/true replaced the child and exited 0
    assert filtered["subprocess"] == errno.EPERM and unfiltered["subprocess"] == 0


@NEEDS_SECCOMP
@ROOT_ONLY
def test_keyctl_and_add_key_denied_with_filter_and_work_without(filtered, unfiltered):
    assert filtered["keyctl"] == [-1, errno.EPERM] and filtered["add_key"] == [-1, errno.EPERM]
    assert unfiltered["keyctl"][0] > 0 and unfiltered["add_key"][0] > 0


@NEEDS_SECCOMP
@ROOT_ONLY
def test_unshare_newuser_denied_with_filter_and_works_without(filtered, unfiltered):
    assert filtered["unshare_user"]["result"] == [-1, errno.EPERM]
    assert unfiltered["unshare_user"]["result"] == [0, 0]


@NEEDS_SECCOMP
@ROOT_ONLY
def test_clone_newuser_denied_with_filter_and_works_without(filtered, unfiltered):
    assert filtered["clone_newuser"]["result"] == [-1, errno.EPERM]
    assert unfiltered["clone_newuser"]["result"][0] > 0


@NEEDS_SECCOMP
def test_clone3_reports_enosys_so_libc_falls_back_to_clone(filtered, unfiltered):
    assert filtered["clone3"] == [-1, errno.ENOSYS]
    assert unfiltered["clone3"][1] != errno.ENOSYS  # EINVAL for the empty struct: the kernel has clone3


@NEEDS_SECCOMP
@ROOT_ONLY
def test_mount_and_ptrace_denied_with_filter_and_reach_the_kernel_without(filtered, unfiltered):
    assert filtered["mount"] == [-1, errno.EPERM] and unfiltered["mount"] == [-1, errno.ENOENT]
    assert filtered["ptrace"] == [-1, errno.EPERM] and unfiltered["ptrace"] == [-1, errno.ESRCH]


@NEEDS_SECCOMP
def test_personality_change_denied_but_query_allowed(filtered, unfiltered):
    assert filtered["personality_set"]["result"] == [-1, errno.EPERM]
    assert unfiltered["personality_set"]["result"][0] >= 0
    assert filtered["personality_query"][0] >= 0


@NEEDS_SECCOMP
def test_x32_syscall_numbers_kill_the_process(filtered):
    assert filtered["x32_execve"].get("signal") == signal.SIGSYS, filtered["x32_execve"]


@NEEDS_SECCOMP
def test_fork_thread_torch_and_tmp_files_still_work(filtered, unfiltered):
    assert filtered["fork"] == 7 and filtered["thread"] is True
    assert filtered["tmp_file"] == "hello"
    assert filtered["torch"] == unfiltered["torch"] and filtered["torch"][2] == [8, 16]


@NEEDS_SECCOMP
@ROOT_ONLY
def test_filter_loads_as_an_unprivileged_uid_from_a_uid_block(tmp_path):
    with UidBlock.claim(directory=str(tmp_path)) as block:
        uid = block.next()

    def child():
        libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, as confine.drop_privileges does
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        seccomp_filter.apply()
        return [os.getuid(), _errno_of(lambda: os.execv("/bin/true", ["/bin/true"]))]
    assert _run_forked(child) == {"exit": 0, "result": [uid, errno.EPERM]}


@NEEDS_SECCOMP
def test_denied_names_unknown_here_are_skipped_not_fatal(monkeypatch):
    monkeypatch.setattr(seccomp_filter, "DENIED", seccomp_filter.DENIED + ("no_such_syscall", "vm86"))
    assert seccomp_filter.available() is None


# ---- uids ----

def test_two_blocks_in_one_process_are_disjoint_and_locked(tmp_path):
    with UidBlock.claim(directory=str(tmp_path)) as a, UidBlock.claim(directory=str(tmp_path)) as b:
        assert set(a.blocks).isdisjoint(b.blocks)
        assert {a.next() >> 16, b.next() >> 16} == {a.blocks[0], b.blocks[0]}
        with pytest.raises(BlockingIOError):
            UidBlock.claim(block=a.blocks[0], directory=str(tmp_path))


def test_block_held_by_another_process_is_never_claimed(tmp_path, monkeypatch):
    first = UidBlock.FIRST_BLOCK
    code = (f"import sys; from autograder.sandbox.uids import UidBlock as U; U.FIRST_BLOCK, U.END_BLOCK = {first}, "
            f"{first + 2}; b = U.claim(directory={str(tmp_path)!r}); print(b.blocks[0], flush=True); sys.stdin.read()")
    other = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        theirs = int(other.stdout.readline())
        monkeypatch.setattr(UidBlock, "END_BLOCK", first + 2)
        with UidBlock.claim(directory=str(tmp_path)) as mine:  # one of two blocks is free: it must be that one
            assert mine.blocks == [({first, first + 1} - {theirs}).pop()]
            with pytest.raises(BlockingIOError):
                UidBlock.claim(directory=str(tmp_path))  # both held now
    finally:
        other.stdin.close()
        other.wait(timeout=30)
    UidBlock.claim(block=theirs, directory=str(tmp_path)).release()  # their exit dropped the lock


def test_next_never_repeats_across_threads_and_moves_to_a_new_block(tmp_path):
    with UidBlock.claim(directory=str(tmp_path)) as block:
        got: list[list[int]] = [[] for _ in range(8)]

        def take(out):
            for _ in range(12_500):
                out.append(block.next())
        threads = [threading.Thread(target=take, args=(out,)) for out in got]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        every = [u for out in got for u in out]
        assert len(every) == 100_000 and len(set(every)) == 100_000
        assert len(block.blocks) == 2 and {u >> 16 for u in every} == set(block.blocks)
        assert all(u & 0xFFFF for u in every) and all(u < 2**31 for u in every)  # never a block's base


def test_release_frees_the_lock_and_the_block_can_be_claimed_again(tmp_path):
    n = UidBlock.FIRST_BLOCK + 5
    block = UidBlock.claim(block=n, directory=str(tmp_path))
    assert block.next() == n * 65536 + 1
    with pytest.raises(BlockingIOError):
        UidBlock.claim(block=n, directory=str(tmp_path))
    block.release()
    assert not (tmp_path / f"block-{n}").exists()
    with pytest.raises(ValueError):
        block.next()
    UidBlock.claim(block=n, directory=str(tmp_path)).release()


def test_blocks_overlapping_subuid_ranges_are_skipped(tmp_path, monkeypatch):
    first = UidBlock.FIRST_BLOCK
    subuid = tmp_path / "subuid"
    subuid.write_text(f"alice:{first * 65536}:{3 * 65536 - 1}\nbob:{(first + 4) * 65536 + 7}:1\n")
    monkeypatch.setattr(UidBlock, "SUBID_FILES", (str(subuid),))
    monkeypatch.setattr(UidBlock, "END_BLOCK", first + 5)
    locks = tmp_path / "locks"
    locks.mkdir(mode=0o700)
    for _ in range(5):
        with UidBlock.claim(directory=str(locks)) as block:
            assert block.blocks == [first + 3]


def test_lock_dir_is_private_to_its_owner(tmp_path, monkeypatch):
    monkeypatch.delenv("AUTOGRADER_UID_LOCK_DIR", raising=False)
    path = uids.lock_dir()
    if os.geteuid() == 0 and os.path.isdir("/run"):
        assert path == "/run/autograder-uids"
    st = os.lstat(path)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022
    with UidBlock.claim() as block:  # the real host-wide directory
        assert os.path.exists(os.path.join(path, f"block-{block.blocks[0]}"))
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    monkeypatch.setenv("AUTOGRADER_UID_LOCK_DIR", str(shared))
    with pytest.raises(PermissionError):
        uids.lock_dir()
