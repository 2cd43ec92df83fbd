"""Confine a freshly forked worker (runs as root in the child, before any student code).

The zygote forks every worker into a pid namespace of its own (`PidNamespaces`), so the worker is pid 1 there:
when it dies the kernel kills every process left in it, `setsid` daemons included. In the child, order matters:
new mount, network, IPC and UTS namespaces → fresh /proc and a private, size-capped temporary directory →
resource limits → no new privileges → drop to the job's unprivileged uid.
"""
from __future__ import annotations

import os
import resource
import tempfile
import signal

from . import linux


class PidNamespaces:
    """Used by the zygote: `before_fork()` makes the next forked child pid 1 of a brand-new pid namespace.
    One fork per worker (a fork of the torch-sized zygote costs milliseconds: no second fork inside the child)."""

    def __init__(self):
        self.own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)  # open before /proc leaves the root

    def before_fork(self) -> None:
        linux.setns(self.own, linux.CLONE_NEWPID)  # children back in our own namespace: unshare refuses otherwise
        linux.unshare(linux.CLONE_NEWPID)


def enter_namespaces() -> None:
    """In the forked child (already pid 1 of its pid namespace): its own mounts, network, IPC and host name."""
    linux.unshare(linux.CLONE_NEWNS | linux.CLONE_NEWNET | linux.CLONE_NEWIPC | linux.CLONE_NEWUTS)


def private_mounts(uid: int, tmp_bytes: int, tmp_dir: str) -> None:
    """A fresh /proc for the new pid namespace, and a private tmpfs at `tmp_dir`."""
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    linux.mount("proc", "/proc", "proc", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC)
    linux.mount("tmpfs", tmp_dir, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV,
                f"size={tmp_bytes},mode=0700,uid={uid},gid={uid}")


def use_private_tmp(tmp_dir: str) -> None:
    """TMPDIR, HOME, matplotlib's config folder and the working directory: the worker's private directory."""
    for name in ("TMPDIR", "HOME", "MPLCONFIGDIR"):
        os.environ[name] = tmp_dir
    tempfile.tempdir = tmp_dir
    os.chdir(tmp_dir)


def apply_rlimits(limits: dict, keep_address_space: bool) -> None:
    def cap(which, value):
        resource.setrlimit(which, (value, value))

    cap(resource.RLIMIT_CPU, limits["cpu_seconds"])
    cap(resource.RLIMIT_NPROC, limits["processes"])
    cap(resource.RLIMIT_FSIZE, limits["file_bytes"])
    cap(resource.RLIMIT_NOFILE, limits["open_files"])
    cap(resource.RLIMIT_CORE, 0)
    if not keep_address_space:  # no memory cgroup: fall back to an address-space cap above what torch already maps
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * resource.getpagesize()
        cap(resource.RLIMIT_AS, mapped + limits["memory_bytes"])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # oversize writes fail with EFBIG instead of killing


def enter_user_namespace(ctl, grader_maps_ids: bool) -> None:
    """Tier userns, in the zygote: a user namespace of its own, with mount and pid namespaces. Its ids are mapped
    by the grader when the grader is root (uid 0 and the worker uid block, as they are), else by ourselves (uid 0
    inside = the grader's uid outside). Then fork once, so that the zygote proper is pid 1 of that pid namespace and
    may `setns` back to it before each worker (`PidNamespaces`); the original process waits and leaves with it."""
    uid, gid = os.getuid(), os.getgid()
    linux.unshare(linux.CLONE_NEWUSER | linux.CLONE_NEWNS | linux.CLONE_NEWPID)
    if grader_maps_ids:
        ctl.sendall(b"maps?")
        if ctl.recv(16) != b"ok":
            raise OSError("the grader did not map our ids")
    else:
        linux.write_id_maps(0, uid, gid)
    pid = os.fork()
    if pid:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the zygote proper dies with us anyway (PDEATHSIG)
        _, status = os.waitpid(pid, 0)
        os._exit(max(0, os.waitstatus_to_exitcode(status)))
    linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)


def own_user_namespace() -> None:
    """Tier userns, in a worker with no other uid to become, before its rlimits are set: a user namespace of its
    own, so that its process count (RLIMIT_NPROC) is its own. The kernel checks the count at every level up, each
    against the limit in force when the level below was made: made before the worker's own limit, the zygote's
    level is unlimited, and a fork storm in one worker cannot use up its neighbours' count."""
    linux.unshare(linux.CLONE_NEWUSER)
    linux.write_id_maps(0, 0, 0)


def drop_privileges(uid: int) -> None:
    """Become `uid` with no new privileges. uid 0 (tier userns for an ordinary user) has no other uid to become:
    every capability is dropped instead; the grader's uid outside is unchanged, and the namespaces and seccomp keep
    the worker from everything else."""
    linux.prctl(linux.PR_SET_NO_NEW_PRIVS, 1)
    if uid:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    else:
        linux.drop_capabilities()
    linux.prctl(linux.PR_SET_DUMPABLE, 0)  # no ptrace from other processes of this uid
    os.umask(0o077)


def apply_seccomp() -> None:
    """The last step before student code: a seccomp filter denying the system calls no submission needs and that
    would open a channel or a way out (keyrings, namespaces, mounts, ptrace, bpf, exec...): see seccomp_filter."""
    from . import seccomp_filter

    seccomp_filter.apply()
