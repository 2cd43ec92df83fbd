"""Isolation tiers: the strongest one this machine allows, detected before the sandbox starts, and what it lacks.

- ``full``: root with CAP_SYS_ADMIN (a VM, a privileged container). Namespaces, a secret-free root, a fresh uid per
  worker, seccomp, and cgroups for memory, processes and CPU.
- ``userns``: no CAP_SYS_ADMIN, but the kernel lets this user create user namespaces (an ordinary account on a
  shared server; root whose bounding set lacks CAP_SYS_ADMIN). The zygote makes a user namespace of its own and
  everything of ``full`` follows inside it (mount, pid, network, IPC namespaces, the secret-free root, seccomp).
  Root (CAP_SETUID) maps the worker uid block into it, so workers still get uids of their own; an ordinary user can
  map only itself, so its workers stay uid 0 of a user namespace of their own (the grader's uid outside) with every
  capability dropped. cgroups are used when writable, else rlimits stand in for them.
- ``landlock``: root that may not create namespaces at all: a container under Docker's default seccomp profile,
  which denies unshare and clone with namespace flags without CAP_SYS_ADMIN (Gradescope, Kubernetes, otter's docker
  mode). No namespace is made: each worker gets a uid of its own, restricts its filesystem view with Landlock
  (`landlocked`), and seccomp denies what a namespace would have hidden (sockets, SysV IPC, leaving its process
  group: `seccomp_filter`); killing the worker's process group kills every descendant. Needs Landlock in the
  kernel, the capabilities to change uid and signal other uids (Docker's default set has them), and a Python that
  other uids may read (not one under /root, mode 700).
- ``none``: none of these. The grader refuses, unless told (``--no-sandbox``) that the code is trusted.

``AUTOGRADER_TIER=userns`` or ``=landlock`` picks a weaker tier where a stronger one works (tests, benchmarks).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import cgroups, landlocked, linux, rootfs, seccomp_filter

# Every isolation guarantee the README makes, and which tiers give it. Tags: "cgroup" where job cgroups can be made,
# "cpu" where they also have a cpu controller, "uid" where workers get uids of their own.
ISOLATING = {"full", "userns", "landlock"}
GUARANTEES = {
    "student code runs outside the grader's process": ISOLATING,
    "hidden tests, references, solutions and other students' files are out of the worker's reach "
    "(a secret-free root, or Landlock)": ISOLATING,
    "no network (a network namespace, or seccomp and Landlock)": ISOLATING,
    "every process a submission starts dies with it (pid namespace, or a process group it cannot leave)": ISOLATING,
    "seccomp filter (no exec, sockets, keyrings, namespaces, mount, ptrace, bpf, SysV IPC, file locks)": ISOLATING,
    "a fresh uid per worker": {"full", "uid"},
    "a private temporary directory of capped size (tmpfs)": {"full", "userns"},
    "real memory cap (cgroup; otherwise an address-space limit)": {"cgroup"},
    "process cap shared by all of a submission's processes (cgroup; otherwise a per-worker RLIMIT_NPROC)":
        ISOLATING,
    "CPU cap per worker, so no submission starves its neighbour (cgroup)": {"cpu"},
}
ENV = "AUTOGRADER_TIER"


@dataclass(frozen=True)
class Tier:
    name: str                  # full | userns | landlock | none
    cgroups: bool              # per-worker cgroups can be created here
    own_uids: bool = False     # each worker gets a uid of its own (full; userns when the grader is root)
    cpu_cap: bool = False      # the job groups also cap CPU time (a cgroup cpu controller)
    why_not: tuple[str, ...] = field(default=())  # for none: why each tier is out of reach

    @property
    def provides(self) -> list[str]:
        return [g for g, tiers in GUARANTEES.items() if self.name in tiers or ("cgroup" in tiers and self.cgroups)
                or ("uid" in tiers and self.own_uids) or ("cpu" in tiers and self.cpu_cap)]

    @property
    def lacks(self) -> list[str]:
        return [g for g in GUARANTEES if g not in self.provides]

    def to_json(self) -> dict:
        return {"tier": self.name, "cgroups": self.cgroups, "own_uids": self.own_uids, "cpu_cap": self.cpu_cap,
                "lacks": self.lacks}


def detect() -> Tier:
    """The strongest tier available to this process (`AUTOGRADER_TIER` may ask for a weaker one)."""
    wanted = os.environ.get(ENV, "").strip().lower()
    if wanted not in ("", "full", "userns", "landlock"):
        raise ValueError(f"{ENV} must be full, userns or landlock, not {wanted!r}")
    namespaces = linux.CLONE_NEWNS | linux.CLONE_NEWPID | linux.CLONE_NEWNET
    if problem := seccomp_filter.available():  # every tier relies on it
        return Tier("none", False, why_not=(f"no seccomp filter: {problem}",))
    why = []
    can_cgroup = cgroups.available() is None
    cpu = can_cgroup and cgroups.cpu_controller()
    if wanted in ("", "full"):
        if os.geteuid() != 0:
            why.append("full: not running as root")
        elif not _can_unshare(namespaces):
            why.append("full: cannot create namespaces (no CAP_SYS_ADMIN, or a seccomp profile denies unshare)")
        elif not can_cgroup:
            why.append(f"full: {cgroups.available()}")
        else:
            return Tier("full", True, True, cpu)
    if wanted in ("", "userns"):
        if _can_unshare(linux.CLONE_NEWUSER | namespaces):
            return Tier("userns", can_cgroup, os.geteuid() == 0, cpu)
        why.append("userns: cannot create a user namespace (kernel.unprivileged_userns_clone, "
                   "user.max_user_namespaces, or a seccomp profile such as Docker's default forbids it)")
    if wanted in ("", "landlock"):
        if problem := _landlock_problem():
            why.append(f"landlock: {problem}")
        else:
            return Tier("landlock", can_cgroup, True, cpu)
    return Tier("none", False, why_not=tuple(why))


CAPABILITIES = {"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7}


def _landlock_problem() -> str | None:
    """Why tier landlock cannot be had here, or None."""
    if os.geteuid() != 0:
        return "not running as root (workers need uids of their own)"
    if problem := landlocked.available():
        return problem
    with open("/proc/self/status") as f:
        effective = next((int(line.split()[1], 16) for line in f if line.startswith("CapEff:")), 0)
    if missing := [name for name, bit in CAPABILITIES.items() if not effective >> bit & 1]:
        return "missing capabilities " + ", ".join(missing)
    if hidden := [p for p in rootfs.python_dirs([]) if not _others_may_read(p)]:
        return f"other uids cannot read the Python installation ({hidden[0]}): use a Python outside /root"
    return None


def _others_may_read(path: str) -> bool:
    """Every folder from / down to `path` traversable by any uid, and `path` itself readable."""
    folder = os.path.realpath(path)
    try:
        if os.stat(folder).st_mode & 0o005 != 0o005:
            return False
        while folder != "/":
            folder = os.path.dirname(folder)
            if not os.stat(folder).st_mode & 0o001:
                return False
    except OSError:
        return False
    return True


def _can_unshare(flags: int) -> bool:
    """Try unshare(flags) in a throw-away child (the caller's own namespaces are left alone)."""
    pid = os.fork()
    if pid == 0:
        try:
            linux.unshare(flags)
        except OSError:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0
