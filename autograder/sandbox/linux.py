"""The few Linux system calls Python 3.11's standard library lacks (unshare, setns, mount, pivot_root, prctl, capset)."""
from __future__ import annotations

import ctypes
import ctypes.util
import os

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 4, 36, 38
SYS_PIVOT_ROOT_BY_ARCH = {"x86_64": 155, "aarch64": 41}
SYS_CAPSET_BY_ARCH = {"x86_64": 126, "aarch64": 91}
LINUX_CAPABILITY_VERSION_3 = 0x20080522


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(ctypes.c_int(fd), ctypes.c_int(nstype)), "setns")


def mount(source: str | None, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def umount(target: str, flags: int = MNT_DETACH) -> None:
    _check(_libc.umount2(target.encode(), ctypes.c_int(flags)), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    number = SYS_PIVOT_ROOT_BY_ARCH.get(os.uname().machine)
    if number is None:
        raise OSError(f"pivot_root: unknown syscall number on {os.uname().machine}")
    _check(_libc.syscall(ctypes.c_long(number), new_root.encode(), put_old.encode()), "pivot_root")


def prctl(option: int, arg: int) -> None:
    _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), 0, 0, 0), f"prctl {option}")


def drop_capabilities() -> None:
    """Empty the effective, permitted and inheritable capability sets of the calling thread (capset(2)): for a
    process that stays uid 0 inside a user namespace, where changing uid is not an option."""
    number = SYS_CAPSET_BY_ARCH.get(os.uname().machine)
    if number is None:
        raise OSError(f"capset: unknown syscall number on {os.uname().machine}")
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two __user_cap_data_struct, all zero
    _check(_libc.syscall(ctypes.c_long(number), header, data), "capset")


def write_id_maps(inside: int, outside_uid: int, outside_gid: int) -> None:
    """After unshare(CLONE_NEWUSER): map `inside` to the caller's own uid and gid outside (the one mapping an
    unprivileged process may write for itself; setgroups must be denied first for the gid map)."""
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{inside} {outside_uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{inside} {outside_gid} 1")
