"""Grader side of the sandbox: start the zygote, spawn confined workers, talk to them, kill them.

    with Sandbox(limits, isolate=True, secrets=[...], forbidden=[...]) as sandbox:
        worker = sandbox.spawn()        # a fresh fork, confined, in its own cgroup
        reply, blobs = worker.request({"op": "load", ...}, timeout=limits.load_seconds)
        worker.kill()                   # the worker and every process it started
"""
from __future__ import annotations

import itertools
import json
import os
import queue
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import cgroups, frames, tiers
from .limits import Limits
from .uids import PER_BLOCK, UidBlock

_SANDBOXES = itertools.count()
STOP = object()  # ends the spawner's and the cleaner's queues (a slot's cgroup may itself be None)


class SandboxUnavailable(RuntimeError):
    """Isolation was asked for but cannot be set up here; the message says why and what to do."""


# The grader's own sentences about a worker, English -> Chinese (the exception's message is the English; `.zh` is
# its Chinese, so that a Chinese sentence never embeds an English one). Raisers elsewhere (engine/student.py,
# student/check.py) may pass `zh=` themselves; a message not listed gets its class's general Chinese sentence.
WORKER_ZH = (
    (re.compile(r"no answer within (\S+) s"), "{0} 秒内没有回答"),
    (re.compile(r"no answer after (\S+) s"), "{0} 秒后仍没有回答"),
    (re.compile(r"the submission used its whole (\S+) s budget"), "这份提交已用完全部 {0} 秒的时间"),
    (re.compile(r"the worker was restarted (\d+) times; giving up on this submission"),
     "运行你代码的进程已重启 {0} 次，不再继续运行这份提交"),
    (re.compile(r"the worker is no longer running"), "运行你代码的进程已经不在了"),
    (re.compile(r"memory limit of (\d+) MiB exceeded"), "超出了 {0} MiB 的内存上限"),
    (re.compile(r"the process ended \(exit, os\._exit, a crash, or a resource limit\)"),
     "进程结束了（exit、os._exit、崩溃或超出资源限制）"),
    (re.compile(r"invalid reply(: .*)?"), "返回的数据无效"),
)


def worker_zh(message: str, general: str) -> str:
    """The Chinese of one of the grader's sentences about a worker (`WORKER_ZH`), else `general`. A leading
    "while loading the file: " and a trailing " (an infinite loop?)" are translated around it."""
    head, tail = "", ""
    if message.startswith("while loading the file: "):
        message, head = message[len("while loading the file: "):], "加载文件时"
    if message.endswith(" (an infinite loop?)"):
        message, tail = message[: -len(" (an infinite loop?)")], "（是否有死循环？）"
    said = next((zh.format(*m.groups()) for pattern, zh in WORKER_ZH if (m := pattern.fullmatch(message))), general)
    return f"{head}{'，' if head else ''}{said}{tail}"


class _WorkerProblem(Exception):
    GENERAL_ZH = ""

    def __init__(self, message: str = "", *, zh: str | None = None):
        super().__init__(message)
        self.zh = zh if zh is not None else worker_zh(message, self.GENERAL_ZH)


class WorkerTimeout(_WorkerProblem):
    """The worker did not answer in time. `str(e)` is the English, `e.zh` the Chinese."""
    GENERAL_ZH = "没有按时回答"


class WorkerCrashed(_WorkerProblem):
    """The worker died or answered nonsense. `str(e)` is the English, `e.zh` the Chinese."""
    GENERAL_ZH = "运行你代码的进程意外终止"


def choose_tier(isolate: bool) -> tiers.Tier:
    """The tier to grade in: the strongest available; SandboxUnavailable (saying why) when isolation is asked for and
    no tier can be had. Without isolation: tier "none" (trusted code only)."""
    if not isolate:
        return tiers.Tier("none", False)
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable("cannot isolate student code: isolation needs Linux namespaces. "
                                 "Use --no-sandbox only for trusted code on your own machine.")
    tier = tiers.detect()
    if tier.name == "none":
        raise SandboxUnavailable("cannot isolate student code: " + "; ".join(tier.why_not) +
                                 ". Use --no-sandbox only for trusted code on your own machine.")
    return tier


def code_copy() -> tempfile.TemporaryDirectory:
    """A private copy of this package (the sandbox side only), from which the zygote runs: its modules, code objects
    and tracebacks then name a throw-away folder, never the grader's installation."""
    folder = tempfile.TemporaryDirectory(prefix="autograder-zygote-")
    target = Path(folder.name) / "sandbox"
    target.mkdir()
    for source in Path(__file__).resolve().parent.glob("*.py"):
        (target / source.name).write_bytes(source.read_bytes())
    os.chmod(folder.name, 0o755)
    return folder


def peer_pid(sock: socket.socket, timeout: float = 30) -> int:
    """The pid of the process at the other end, as this process sees it: read from the SCM_CREDENTIALS the kernel
    attaches to the worker's first byte (a pid namespace's own numbers are translated; nothing the worker says)."""
    sock.settimeout(timeout)
    try:
        data, ancillary, _, _ = sock.recvmsg(1, socket.CMSG_SPACE(struct.calcsize("3i")))
    except OSError as e:
        raise SandboxUnavailable(f"a worker did not start: {e}") from None
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and data:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 0)
            return struct.unpack("3i", payload[:12])[0]
    raise SandboxUnavailable("a worker did not say hello")


def grader_folders() -> list[str]:
    """This package's folder and, in a checkout, the repository around it (solutions, assignment sources). An
    installed package's parent is site-packages, which workers must read: only the package itself is hidden then."""
    package = Path(__file__).resolve().parent.parent
    if package.parent.name in ("site-packages", "dist-packages"):
        return [str(package)]
    return [str(package), str(package.parent)]


class Sandbox:
    def __init__(self, limits: Limits = Limits(), isolate: bool = True, secrets: list[str] = (), slots: int = 8, *,
                 forbidden: list[str]):
        self.limits, self.isolate, self.forbidden = limits, isolate, sorted(forbidden)
        self.tier = choose_tier(isolate)
        if self.tier.cgroups:
            cgroups.remove_stale()
        self._ctl, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._log = tempfile.TemporaryFile()
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp", "MPLBACKEND": "Agg", "AUTOGRADER_GRADING": "1",
               "MPLCONFIGDIR": "/tmp", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1",
               **{k: v for k, v in os.environ.items() if k.startswith("OPENBLAS_")}}
        self._code = code_copy()
        self._proc = subprocess.Popen(
            [sys.executable, "-s", "-m", "sandbox.zygote", str(child_end.fileno())],
            pass_fds=[child_end.fileno()], env=env, cwd=self._code.name, stdin=subprocess.DEVNULL,
            stdout=self._log, stderr=self._log, start_new_session=True,
        )
        child_end.close()
        self._uids = UidBlock.claim() if self.tier.own_uids else None
        self._tmp_base = None  # tier landlock: the folder holding each worker's private directory (w-<pid>)
        if self.tier.name == "landlock":
            self._tmp_base = tempfile.mkdtemp(prefix="autograder-tmp-")
            os.chmod(self._tmp_base, 0o711)  # workers may pass through to their own folder, not list the others
        config = {"isolate": isolate, "tier": self.tier.name, "limits": limits.to_json(), "tmp_base": self._tmp_base,
                  "forbidden": self.forbidden,
                  "grader_maps_ids": self.tier.name == "userns" and self.tier.own_uids,
                  "secrets": sorted({*grader_folders(), self._code.name,
                                     *map(str, secrets)})}
        self._ctl.sendall(json.dumps(config).encode())
        self._ready = False
        self._lock = threading.Lock()
        self._slots: queue.Queue[cgroups.JobGroup | None] = queue.Queue()  # a cgroup per concurrent worker
        run = next(_SANDBOXES)  # group names are unique per sandbox, also within one process
        self._groups = [cgroups.JobGroup(f"{os.getpid()}-{run}-{n}", limits.memory_bytes, limits.processes,
                                          limits.cpus)
                        if self.tier.cgroups else None for n in range(slots)]
        for group in self._groups:
            self._slots.put(group)
        self._cleanup: queue.Queue = queue.Queue()
        self._cleaner = threading.Thread(target=self._clean_up_killed, name="sandbox-cleanup", daemon=True)
        self._cleaner.start()
        self._ready_workers: queue.Queue = queue.Queue()
        self._failure: BaseException | None = None
        self._spawner = threading.Thread(target=self._keep_workers_ready, name="sandbox-spawner", daemon=True)
        self._spawner.start()

    def wait_ready(self, timeout: float = 180.0) -> None:
        """Block until the zygote has imported torch and hidden the secrets (safe from any thread)."""
        with self._lock:
            if self._ready:
                return
            self._ctl.settimeout(timeout)
            try:
                reply = self._ctl.recv(4096)
            except socket.timeout:
                reply = b""
            if reply == b"maps?":  # tier userns as root: map uid 0 and our uid block into the zygote's namespace
                self._write_id_maps()
                reply = self._ctl.recv(4096)
            if not reply:
                raise SandboxUnavailable(f"the sandbox template process did not start: {self._zygote_log()}")
            available = json.loads(reply).get("available")
            if available != []:
                raise SandboxUnavailable(f"forbidden APIs are still available in the sandbox: {available}")
            self._ready = True

    def _write_id_maps(self) -> None:
        """Like newuidmap(1): 0 stays 0 (the zygote builds its root with the files root can read) and the uid block
        keeps its numbers, so each worker can still become a uid of its own."""
        first = self._uids.blocks[0] * PER_BLOCK
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{self._proc.pid}/{name}", "w") as f:
                f.write(f"0 0 1\n{first} {first} {PER_BLOCK}\n")
        self._ctl.sendall(b"ok")

    def _zygote_log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-2000:] or "(no output)"

    def spawn(self) -> "Worker":
        """A confined worker waiting for its first request (forked ahead of time by the spawner thread)."""
        while True:
            try:
                item = self._ready_workers.get(timeout=0.2 if self._failure is None else 0)
            except queue.Empty:
                if self._failure is not None:
                    raise self._failure
                continue
            if isinstance(item, BaseException):
                raise item
            return item

    def _keep_workers_ready(self) -> None:
        """Background: fork the next worker as soon as a slot is free, so no submission waits for a fork."""
        try:
            self.wait_ready()
            while (group := self._slots.get()) is not STOP:
                self._ready_workers.put(self._fork_worker(self._uids.next() if self._uids else 0, group))
        except BaseException as e:  # handed to whoever asks for a worker next
            self._failure = e
            self._ready_workers.put(e)

    def _fork_worker(self, uid: int, group) -> "Worker":
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        parent_end.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # before the worker can send (peer_pid)
        try:
            try:
                with self._lock:
                    self._ctl.settimeout(30)
                    socket.send_fds(self._ctl, [json.dumps({"uid": uid}).encode()], [child_end.fileno()])
                    reply = self._ctl.recv(4096)
            except OSError:
                reply = b""
            if not reply:
                raise SandboxUnavailable(f"the sandbox template process died: {self._zygote_log()}")
            pid = peer_pid(parent_end)
            if group is not None:
                try:
                    group.add(pid)
                except OSError as e:  # gone before any student code ran: the template process died, or its namespace
                    raise SandboxUnavailable(f"a worker died before it started ({e}): {self._zygote_log()}") from None
        except BaseException:
            parent_end.close()
            self._cleanup.put((group, None))
            raise
        finally:
            child_end.close()
        worker = Worker(self, parent_end, pid, uid, group)
        try:
            worker.start()
        except (WorkerCrashed, WorkerTimeout, OSError) as e:  # no student code ran yet: the sandbox is broken
            worker.kill()
            raise SandboxUnavailable(f"a worker could not start ({e}): {self._zygote_log()}") from None
        return worker

    def _clean_up_killed(self) -> None:
        """Background: wait until a killed worker's group is empty and remove its private folder (tier landlock),
        then give its slot to the next worker."""
        while (item := self._cleanup.get()) is not STOP:
            group, private_tmp = item
            if group is not None:
                group.drain()
            if private_tmp is not None:
                shutil.rmtree(private_tmp, ignore_errors=True)
            self._slots.put(group)

    def private_tmp(self, pid: int) -> str | None:
        """Tier landlock: the private folder of the worker with this pid (made by the worker itself)."""
        return None if self._tmp_base is None else os.path.join(self._tmp_base, f"w-{pid}")

    def peak_worker_memory(self) -> int | None:
        """The most memory one worker has used so far, in bytes, from the per-slot cgroups (None without them).
        COW pages shared with the zygote (torch itself) are not counted: only what a submission made its own."""
        peaks = [p for g in self._groups if g is not None and (p := g.peak_memory()) is not None]
        return max(peaks, default=None)

    def close(self) -> None:
        self._slots.put(STOP)
        self._spawner.join()
        while not self._ready_workers.empty():
            item = self._ready_workers.get()
            if isinstance(item, Worker):
                item.kill()
        self._cleanup.put(STOP)
        self._cleaner.join()
        for group in self._groups:
            if group is not None:
                group.remove()
        self._ctl.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        self._log.close()
        self._code.cleanup()
        if self._tmp_base is not None:
            shutil.rmtree(self._tmp_base, ignore_errors=True)
        if self._uids is not None:
            self._uids.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Worker:
    """One confined process running one submission."""

    def __init__(self, sandbox: Sandbox, sock: socket.socket, pid: int, uid: int, group):
        self.sandbox, self.sock, self.pid, self.uid, self.group = sandbox, sock, pid, uid, group
        self.dead = False

    def start(self) -> None:
        frames.send(self.sock, {"op": "go", "memory_cgroup": self.group is not None})
        header, _ = self.request(None, timeout=30)
        if not header.get("ok"):
            self.kill()
            raise SandboxUnavailable(f"worker could not confine itself: {str(header.get('error'))[:500]}")
        if header.get("available") != []:  # the canary, checked before any student code runs in this worker
            self.kill()
            raise SandboxUnavailable(f"forbidden APIs are available in a worker: {str(header.get('available'))[:500]}")

    def request(self, header: dict | None, blobs: list[bytes] = (), timeout: float = 10.0):
        """Send a request (None: only read) and return the reply frame, all within `timeout` seconds of wall clock
        for the whole exchange (a worker that trickles bytes is killed at the deadline like one that hangs)."""
        if self.dead:
            raise WorkerCrashed("the worker is no longer running", zh="运行你代码的进程已经不在了")
        deadline = time.monotonic() + timeout
        try:
            if header is not None:
                frames.send(self.sock, header, blobs, deadline=deadline)
            return frames.recv(self.sock, self.sandbox.limits.reply_bytes, deadline=deadline)
        except socket.timeout:
            self.kill()
            raise WorkerTimeout(f"no answer within {timeout:g} s", zh=f"{timeout:g} 秒内没有回答") from None
        except (frames.WireError, OSError) as e:
            reason = self.death_reason(e)
            self.kill()
            raise WorkerCrashed(reason) from None

    def death_reason(self, error: Exception) -> str:
        if self.group is not None and self.group.hit_memory_limit():
            return f"memory limit of {self.sandbox.limits.memory_bytes >> 20} MiB exceeded"
        if isinstance(error, frames.WireError) and "closed" in str(error):
            return "the process ended (exit, os._exit, a crash, or a resource limit)"
        return f"invalid reply: {error}"

    def kill(self) -> None:
        """SIGKILL the worker and everything it started, now; removing its cgroup finishes in the background."""
        if self.dead:
            return
        self.dead = True
        self.sock.close()
        if self.group is not None:
            self.group.signal_all()
        else:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.sandbox._cleanup.put((self.group, self.sandbox.private_tmp(self.pid)))
