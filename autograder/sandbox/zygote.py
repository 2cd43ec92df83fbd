"""The zygote: a secret-free template process with torch imported, forking one worker per submission.

Started by `client.Sandbox` as ``python -m autograder.sandbox.zygote FD``; FD is its end of a Unix socket pair.
Protocol on that socket: the grader sends ``{"isolate", "tier", "secrets", "limits", "forbidden"}``, the zygote answers
``{"ready", "available"}`` once torch is imported, the forbidden APIs are disabled (``available``: those the probe
found still working, normally none) and (when isolating) it has moved into the secret-free root and forgotten the
grader's paths. Then, per worker, the grader sends ``{"uid"}`` with one file descriptor attached (the worker's end of
a fresh socket pair); the zygote forks and answers ``{"forked"}``. The forked child first sends one byte, whose
SCM_CREDENTIALS tell the grader its pid as the grader sees it (in tier ``userns`` the zygote lives in a pid
namespace of its own), then confines itself, checks the canary, and serves the grader on that descriptor. In tier
``landlock`` there are no namespaces: the zygote computes once what workers may read (`landlocked.view`), and each
worker restricts itself to that, a private directory and its own /proc/<pid>.
"""
from __future__ import annotations

import array
import json
import os
import signal
import socket
import sys

# Threads must stay at one: a fork of a process that has run a parallel op can deadlock in libgomp.
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402
import torch.nn  # noqa: E402,F401
import torch.nn.functional  # noqa: E402,F401

torch.set_num_threads(1)
torch.set_num_interop_threads(1)

from . import confine, forbid, frames, landlocked, linux, rootfs, seccomp_filter, worker  # noqa: E402,F401
# (seccomp_filter loads libseccomp here, before the root changes)

PRELOAD = ("math", "numpy", "typing", "warnings", "functools", "itertools", "collections", "dataclasses", "random",
           "time", "inspect", "gc", "copy", "einops", "matplotlib", "matplotlib.pyplot")


def preload() -> None:
    """Import what submissions commonly import, so no worker pays for it (and a dropped uid needs no disk)."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    warm_up()


def warm_up() -> None:
    """Run the ops submissions use once, single-threaded, so their lazy set-up happens here, once, instead of in
    every forked worker (where it would also copy the pages it writes)."""
    x = torch.randn(2, 3, 5, 4, requires_grad=True)
    scores = (x @ x.transpose(-2, -1) / 2.0).masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = torch.einsum("bhij,bhjd->bhid", weights, x).reshape(2, 5, 12).transpose(0, 1).contiguous().view(-1)
    layer = torch.nn.Linear(4, 4, bias=False)
    (layer(x).sum() + out.sum() + weights.exp().sum(-1, keepdim=True).sqrt().mean()).backward()
    with torch.no_grad():
        layer.weight.copy_(torch.zeros(4, 4))
    torch.allclose(weights, weights), torch.equal(x, x), torch.where(x > 0, x, 0.0).detach().double().numpy()
    torch.manual_seed(0)


def recv_request(ctl: socket.socket) -> tuple[dict, list[int]]:
    fds = array.array("i")
    data, ancdata, _, _ = ctl.recvmsg(65536, socket.CMSG_LEN(4 * fds.itemsize))
    if not data:
        raise EOFError
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return json.loads(data), list(fds)


WORKERS: set[int] = set()  # pids of the workers forked and not yet reaped


def reap(*_):
    """Reap every exited child. For a worker, first kill what is left of its process group (which nothing it started
    can leave: see seccomp_filter), while the zombie still holds its pid: a worker's death ends all it started, in
    tier landlock too, where no pid namespace does it."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None:
            return
        if info.si_pid in WORKERS:
            WORKERS.discard(info.si_pid)
            try:
                os.killpg(info.si_pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.waitpid(info.si_pid, 0)
        except ChildProcessError:
            pass


def child(job_fd: int, ctl: socket.socket, config: dict, uid: int) -> None:
    """Runs in the forked child: wait for the grader's go, confine, check the canary, then serve."""
    ctl.close()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)  # the zygote gone (grader killed): so are we
    os.setsid()
    sock = socket.socket(fileno=job_fd)
    sock.send(b"\0")  # the kernel attaches our pid, translated into the grader's pid namespace
    limits = config["limits"]
    go, _ = frames.recv(sock, max_bytes=0)  # the grader has put us in our cgroup
    landlock = config["tier"] == "landlock"
    try:
        if config["isolate"]:
            if landlock:  # no namespaces: a private directory on disk, Landlock for the view (below)
                private_tmp = landlocked.make_private_tmp(config["tmp_base"], uid)
            else:
                private_tmp = config["private_tmp"]
                confine.enter_namespaces()
                confine.private_mounts(uid, limits["tmp_bytes"], private_tmp)
            confine.use_private_tmp(private_tmp)
            if not uid:  # tier userns for an ordinary user
                confine.own_user_namespace()
            confine.apply_rlimits(limits, keep_address_space=go.get("memory_cgroup", False))
            if landlock:
                landlocked.restrict(config.pop("readable"), private_tmp)
            confine.drop_privileges(uid)
            linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)  # cleared by the credential change: set it again
            confine.apply_seccomp()
        else:
            os.chdir(os.environ.get("TMPDIR", "/tmp"))
    except OSError as e:
        frames.send(sock, {"ok": False, "error": {"type": "SandboxError", "message": str(e)}})
        raise
    os.closerange(3, job_fd)
    os.closerange(job_fd + 1, 1 << 16)
    w = worker.Worker(sock, limits["output_excerpt"])
    if config["isolate"]:
        w.output_path = worker.redirect_output(private_tmp, cap=limits["file_bytes"] // 2)
    frames.send(sock, {"ok": True, "ready": True, "available": forbid.canary(config["forbidden"])})
    del config, go
    w.serve()


def forget_grader_paths(config: dict) -> None:
    """After the secret-free root is in place: drop what names the grader's folders from this process (the
    config's secret list, import paths and finders that point into them), so no worker can read them from memory."""
    secrets = config.pop("secrets", [])
    inside = lambda p: any(str(p) == s or str(p).startswith(s.rstrip("/") + "/") for s in secrets)
    python = (sys.prefix, sys.base_prefix)  # the interpreter's own folders stay visible even inside a secret
    keep = lambda p: not inside(p) or any(p == q or p.startswith(q.rstrip("/") + "/") for q in python)
    sys.path[:] = [p for p in sys.path if p and os.path.isdir(p) and keep(p)]
    for key in [k for k in sys.path_importer_cache if inside(k) or "__editable__" in k]:
        del sys.path_importer_cache[key]
    editable = lambda f: "editable" in (getattr(f, "__module__", "") or "") + repr(f)  # setuptools' -e finders
    sys.meta_path[:] = [f for f in sys.meta_path if not editable(f)]
    sys.path_hooks[:] = [f for f in sys.path_hooks if not editable(f)]
    for name in [n for n in sys.modules if n.startswith("__editable__")]:
        for key, value in vars(sys.modules.pop(name)).items():  # its MAPPING / NAMESPACES name the checkout
            if key.isupper() and isinstance(value, (dict, list)):
                value.clear()
    sys.argv[:] = [sys.argv[0].rpartition("/")[2]]


def main() -> None:
    linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)  # die with the grader, even under kill -9
    ctl = socket.socket(fileno=int(sys.argv[1]))
    config = json.loads(ctl.recv(1 << 20))
    if config["isolate"] and config["tier"] == "userns":
        confine.enter_user_namespace(ctl, config["grader_maps_ids"])  # now pid 1 and uid 0 of namespaces of its own
    preload()
    forbid.disable(config["forbidden"])
    available = forbid.probe(config["forbidden"]) + forbid.canary(config["forbidden"])  # also warms the canary
    pid_namespaces = None
    if config["isolate"] and config["tier"] == "landlock":
        config["readable"] = landlocked.view(config["secrets"])  # what each worker may read (it restricts itself)
        linux.prctl(linux.PR_SET_CHILD_SUBREAPER, 1)  # orphans of a worker's processes are ours to reap
    elif config["isolate"]:
        pid_namespaces = confine.PidNamespaces()
        config["private_tmp"] = rootfs.enter_secret_free_root(config["secrets"], keep_proc=config["tier"] == "userns")
    if config["isolate"]:
        forget_grader_paths(config)
    signal.signal(signal.SIGCHLD, reap)
    ctl.sendall(json.dumps({"ready": True, "available": sorted(set(available))}).encode())
    while True:
        try:
            request, fds = recv_request(ctl)
        except (EOFError, ConnectionError):
            break
        except InterruptedError:
            continue
        if pid_namespaces is not None:
            pid_namespaces.before_fork()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # reap() must know the pid before it can exit
        pid = os.fork()
        if pid == 0:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            code = 0
            try:
                child(fds[0], ctl, config, request["uid"])
            except BaseException:
                code = 70
            finally:
                os._exit(code)
        WORKERS.add(pid)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        for fd in fds:
            os.close(fd)
        ctl.sendall(b'{"forked": true}')  # the grader takes the pid from the child's own credentials (peer_pid)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the grader has gone: skip torch's interpreter teardown (about a second)


if __name__ == "__main__":
    main()
