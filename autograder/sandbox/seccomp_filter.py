"""A seccomp filter for a worker, loaded right before student code runs (after the uid drop and no_new_privs).

Policy: allow by default, and make the calls below fail with an errno. This is a short deny list on top of the
namespaces, the uid and the rlimits. It is not an allowlist, because torch, glibc and OpenMP use too many calls
to list them all safely.
- errno, not kill: a denied call raises a plain OSError (PermissionError) in Python, so the submission gets an
  ordinary, explainable failure. The worker does not die in the middle of a request.
- exec (execve, execveat) is denied: the worker never starts a program. A fresh interpreter would not have the
  worker's forbidden-API hooks, so a new `python -c "import torch; ..."` would evade them. `subprocess.run` and
  `os.exec*` raise PermissionError. fork and threads still work.
- clone with any namespace flag is denied: one MASKED_EQ rule per flag, `(flags & F) == F` for F in NS_FLAGS
  (libseccomp has no "masked != 0" comparison, and it refuses two comparisons on one argument in one rule). fork
  and pthread_create pass no such flag, so they still work. On x86_64 and aarch64 the flags are argument 0 of
  clone; on s390 they are argument 1. clone3 returns ENOSYS, because its flags sit in a struct that seccomp
  cannot read. glibc then falls back to clone, which we can filter (Docker's default profile does the same).
  CLONE_NEWTIME exists only for clone3 and unshare, and unshare is denied outright.
- Channels between workers that tier ``landlock`` (no namespaces) would otherwise leave open, denied in every tier
  so the tiers behave alike: socket (network, abstract Unix sockets; socketpair still works), SysV IPC and POSIX
  message queues (host-wide without an IPC namespace), flock, fcntl record locks and inotify (a lock or a watch on a
  file every uid may read, /usr/lib/python3.11/os.py, is a signal from one worker to another).
- setsid and setpgid are denied: the worker calls setsid once, before the filter, and then neither it nor anything
  it forks can leave that process group, so killing the group kills every descendant even without a pid namespace.
- personality is denied except the read-only query 0xffffffff. libseccomp cannot also allow 0 in the same rule.
- Syscalls from another ABI (i386 int 0x80, x32 numbers >= 0x40000000) kill the process (libseccomp's bad-arch
  check plus ACT_BADARCH = KILL_PROCESS). Nothing legitimate in a worker makes them.
- Names that libseccomp does not know on this architecture are skipped (resolve returns a negative number).
  One example is umount on x86_64, which only has umount2.

pyseccomp finds libseccomp at import time with ctypes.util.find_library, which runs ldconfig. So this module
must be imported before the zygote leaves the real root, and in any case before exec is denied. The import is
eager, and a failure shows up in available().

Measured on this host (kernel 6.18, libseccomp 2.5.4, glibc 2.36, torch 2.13 CPU), in a child forked from a
process that had imported torch: apply() costs about 1 ms. The median over 30 forks was 0.9-1.3 ms and the
maximum 3 ms. That covers 64 rules (55 of the names resolve here). Building the rules is ~0.2 ms when warm; the
rest is seccomp_load and first-touch page faults.
After apply() these still work: os.fork, threading.Thread (clone3 gets ENOSYS and glibc retries with clone),
torch matmul/softmax/backward with 1 or 2 threads, a multiprocessing "fork" Pool, and file I/O in /tmp.
These fail with EPERM: os.execv, subprocess.run (PermissionError), keyctl and add_key through syscall(),
libc.unshare(CLONE_NEWUSER), a raw clone(CLONE_NEWUSER), mount and ptrace. An x32 execve is killed with SIGSYS
(tests/test_seccomp_and_uids.py). Also expected: ctypes.util.find_library returns None, because it cannot run
ldconfig. A "spawn" multiprocessing Pool fails with BrokenPipeError. torch.compile fails with PermissionError on
g++.
"""
from __future__ import annotations

import ctypes
import errno

try:
    import pyseccomp as _sc
    _IMPORT_ERROR: str | None = None
except Exception as e:  # RuntimeError("Unable to find libseccomp"), OSError from dlopen
    _sc, _IMPORT_ERROR = None, f"pyseccomp unusable: {e}"

DENIED: tuple[str, ...] = (
    "keyctl", "add_key", "request_key",                                    # per-uid kernel keyrings
    "unshare", "setns",                                                     # namespaces (clone: see NS_FLAGS)
    "mount", "umount", "umount2", "pivot_root", "chroot",                   # mounts, old and new API
    "fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "move_mount", "mount_setattr",
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp",
    "bpf", "perf_event_open", "userfaultfd", "fanotify_init", "lookup_dcookie", "syslog",
    "io_uring_setup", "io_uring_enter", "io_uring_register",                 # io_uring ops bypass seccomp
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "create_module", "uselib",
    "open_by_handle_at", "name_to_handle_at", "iopl", "ioperm", "swapon", "swapoff", "reboot", "vhangup",
    "settimeofday", "clock_settime", "adjtimex", "clock_adjtime", "acct", "quotactl", "quotactl_fd",
    "execve", "execveat",                                                    # no new programs (see above)
    "socket",                                               # no network, no abstract Unix socket (see above)
    "setsid", "setpgid",                                    # no leaving the worker's process group (see above)
    # SysV IPC and POSIX message queues (host-wide where there is no IPC namespace)
    "shmget", "shmat", "shmdt", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop",
    "semctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    "flock", "inotify_init", "inotify_init1", "inotify_add_watch",  # locks and watches on files every uid can read
)
F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW = 6, 7, 37, 38  # fcntl record locks: the same channel as flock
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
NS_FLAGS = (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET)
PERSONALITY_QUERY = 0xFFFFFFFF


def _build():
    f = _sc.SyscallFilter(_sc.ALLOW)
    f.set_attr(_sc.Attr.ACT_BADARCH, _sc.KILL_PROCESS)
    try:
        f.set_attr(_sc.Attr.CTL_TSYNC, 1)  # every thread of the process gets the filter (kernel >= 3.17)
    except OSError:
        pass  # old libseccomp or kernel: the calling thread only (a freshly forked worker has no other thread)
    deny = _sc.ERRNO(errno.EPERM)

    def rule(action, name, *args):
        number = _sc.resolve_syscall(_sc.Arch.NATIVE, name)
        if number >= 0:  # -1: unknown name; other negatives: libseccomp's pseudo-numbers for other architectures
            f.add_rule(action, number, *args)

    for name in DENIED:
        rule(deny, name)
    for flag in NS_FLAGS:
        rule(deny, "clone", _sc.Arg(0, _sc.MASKED_EQ, flag, flag))
    for command in (F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW):
        rule(deny, "fcntl", _sc.Arg(1, _sc.EQ, command))
    rule(_sc.ERRNO(errno.ENOSYS), "clone3")
    rule(deny, "personality", _sc.Arg(0, _sc.NE, PERSONALITY_QUERY))
    return f


def available() -> str | None:
    """Why the filter cannot be used here, or None when it can."""
    if _IMPORT_ERROR:
        return _IMPORT_ERROR
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(21, 0, 0, 0, 0) < 0:  # PR_GET_SECCOMP: EINVAL when the kernel lacks CONFIG_SECCOMP
        return f"kernel without seccomp ({errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())})"
    try:
        _build()
    except OSError as e:
        return f"libseccomp refused the filter: {e}"
    return None


def apply() -> None:
    """Load the filter into the calling process (all threads, where TSYNC is available). It cannot be undone."""
    if _IMPORT_ERROR:
        raise OSError(errno.ENOSYS, _IMPORT_ERROR)
    _build().load()  # libseccomp sets no_new_privs itself if it is not set yet (CTL_NNP defaults to on)
