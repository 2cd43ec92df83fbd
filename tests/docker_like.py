"""Run a command the way a grading container runs it: as root under Docker's defaults (Gradescope, Kubernetes pods,
otter's docker mode), which this machine has no engine to start.

    python tests/docker_like.py -- COMMAND [ARGS...]     (as root with CAP_SYS_ADMIN, which it then gives up)

What a container started with `docker run` and no extra options gets, and what matters to the grader:
- Docker's default capability set (no CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_SYS_RESOURCE...), bounding set included;
- Docker's default seccomp profile, for a container without CAP_SYS_ADMIN: unshare and setns, clone with any
  namespace flag (clone3 answers ENOSYS so that libc falls back to clone), mount and the new mount API, pivot_root,
  keyctl, add_key, request_key, bpf, perf_event_open, userfaultfd, open_by_handle_at, kernel modules, kexec, swap,
  reboot, clock and quota calls are denied with EPERM; no_new_privs is not set;
- /sys/fs/cgroup mounted read-only (no job cgroups).
Only the denials are modelled (the profile is an allowlist of about 370 calls; everything a Python grader uses is on
it). Landlock's calls are on it since Docker 23.
"""
from __future__ import annotations

import errno
import os
import sys

import pyseccomp as sc

from autograder.sandbox import linux

DOCKER_CAPS = ("chown", "dac_override", "fowner", "fsetid", "kill", "setgid", "setuid", "setpcap", "net_bind_service",
               "net_raw", "sys_chroot", "mknod", "audit_write", "setfcap")
DENIED = ("unshare", "setns", "mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree",
          "move_mount", "mount_setattr", "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
          "open_by_handle_at", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
          "swapon", "swapoff", "reboot", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "quotactl",
          "quotactl_fd", "acct", "lookup_dcookie", "vhangup", "iopl", "ioperm", "syslog", "setdomainname",
          "sethostname")
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)


def read_only_cgroups() -> None:
    """A mount namespace of our own in which /sys/fs/cgroup and every hierarchy under it are read-only, as in a
    container (cgroup v1 mounts one file system per controller there, v2 one)."""
    linux.unshare(linux.CLONE_NEWNS)
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    for point in [p for p in points if p == "/sys/fs/cgroup" or p.startswith("/sys/fs/cgroup/")]:
        linux.mount(None, point, None, linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY)


def docker_seccomp() -> None:
    f = sc.SyscallFilter(sc.ALLOW)
    f.set_attr(sc.Attr.CTL_NNP, 0)  # Docker leaves no_new_privs off (we still hold CAP_SYS_ADMIN to load it so)
    deny = sc.ERRNO(errno.EPERM)
    for name in DENIED:
        number = sc.resolve_syscall(sc.Arch.NATIVE, name)
        if number >= 0:
            f.add_rule(deny, number)
    for flag in NAMESPACE_FLAGS:
        f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    f.load()


def main(argv: list[str]) -> None:
    if "--" not in argv or os.geteuid() != 0:
        sys.exit("usage (as root): python tests/docker_like.py -- COMMAND [ARGS...]")
    command = argv[argv.index("--") + 1:]
    read_only_cgroups()
    docker_seccomp()
    caps = "-all," + ",".join(f"+{c}" for c in DOCKER_CAPS)
    os.execvp("setpriv", ["setpriv", f"--bounding-set={caps}", "--inh-caps=-all", "--", *command])


if __name__ == "__main__":
    main(sys.argv)
