"""The namespaces sandbox's file system and kernel calls, for _boot.py (its init, pid 1, root); standard library only.

``_Libc`` wraps the few libc calls the init needs (mount, pivot_root, mount_setattr, keyrings, no_new_privs,
the seccomp deny list); ``build_root`` makes the check's new root (a read-only tmpfs with read-only binds of
the system folders and the Python installation, a capped /tmp scratch and /dev/shm, a few device nodes,
its own /proc) and pivots into it.
"""

import os


MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
_SYSCALLS = {
    "x86_64": {"arch": 0xC000003E, "pivot_root": 155, "mount_setattr": 442, "socket": 41, "clone": 56,
               "unshare": 272, "setns": 308, "add_key": 248, "request_key": 249, "keyctl": 250,
               "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "clone3": 435},
    "aarch64": {"arch": 0xC00000B7, "pivot_root": 41, "mount_setattr": 442, "socket": 198, "clone": 220,
                "unshare": 97, "setns": 268, "add_key": 217, "request_key": 218, "keyctl": 219,
                "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "clone3": 435},
}


class _Libc:
    def __init__(self):
        import ctypes

        self.ctypes = ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.nr = _SYSCALLS.get(os.uname().machine)
        if self.nr is None:
            raise OSError(f"unsupported machine {os.uname().machine}")

    def _check(self, rc, what):
        if rc != 0:
            err = self.ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    def mount(self, src, target, fstype, flags, data=None):
        enc = lambda s: None if s is None else s.encode()  # noqa: E731
        self._check(self.libc.mount(enc(src), enc(target), enc(fstype), self.ctypes.c_ulong(flags), enc(data)),
                    f"mount {target}")

    def umount2(self, target, flags):
        self._check(self.libc.umount2(target.encode(), flags), f"umount {target}")

    def pivot_root(self, new, old):
        self._check(self.libc.syscall(self.nr["pivot_root"], new.encode(), old.encode()), "pivot_root")

    def read_only_tree(self, path):
        """Make the mount at path and every mount below it read-only, nosuid, nodev."""
        c = self.ctypes

        class MountAttr(c.Structure):
            _fields_ = [("attr_set", c.c_uint64), ("attr_clr", c.c_uint64), ("propagation", c.c_uint64),
                        ("userns_fd", c.c_uint64)]

        attr = MountAttr(1 | 2 | 4, 0, 0, 0)  # MOUNT_ATTR_RDONLY | NOSUID | NODEV
        rc = self.libc.syscall(self.nr["mount_setattr"], -100, path.encode(), 0x8000,  # AT_FDCWD, AT_RECURSIVE
                               c.byref(attr), c.sizeof(attr))
        if rc != 0:  # kernel < 5.12: the top mount only (the binds made here have no submounts of note)
            self.mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)

    def new_session_keyring(self):
        self.libc.syscall(self.nr["keyctl"], 1, None)  # KEYCTL_JOIN_SESSION_KEYRING, anonymous: drop root's

    def no_new_privs(self):
        self._check(self.libc.prctl(38, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")

    def seccomp(self):
        """A small deny list (after no_new_privs; inherited by every descendant): no AF_UNIX sockets
        (a host socket in a bound folder stays unreachable), no new namespaces or user namespaces,
        no io_uring (it would bypass this filter), no kernel keyrings; clone3 answers ENOSYS so that
        libc falls back to clone, whose flags can be checked. Other architectures' calls: ENOSYS."""
        c, nr = self.ctypes, self.nr
        ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
        allow, eacces, enosys = 0x7FFF0000, 0x00050000 | 13, 0x00050000 | 38
        deny = [nr[n] for n in ("unshare", "setns", "add_key", "request_key", "keyctl", "io_uring_setup",
                                "io_uring_enter", "io_uring_register")]
        prog = [(ld, 0, 0, 4), (jeq, 1, 0, nr["arch"]), (ret, 0, 0, enosys), (ld, 0, 0, 0),
                (jge, 0, 1, 0x40000000), (ret, 0, 0, enosys),  # x32 ABI
                (jeq, 0, 1, nr["clone3"]), (ret, 0, 0, enosys)]
        for n in deny:
            prog += [(jeq, 0, 1, n), (ret, 0, 0, eacces)]
        prog += [(jeq, 0, 3, nr["socket"]), (ld, 0, 0, 16), (jeq, 0, 1, 1), (ret, 0, 0, eacces),  # AF_UNIX
                 (ld, 0, 0, 0), (jeq, 0, 3, nr["clone"]), (ld, 0, 0, 16), (jset, 0, 1, 0x10000000),
                 (ret, 0, 0, eacces),  # CLONE_NEWUSER
                 (ret, 0, 0, allow)]

        class Insn(c.Structure):
            _fields_ = [("code", c.c_uint16), ("jt", c.c_uint8), ("jf", c.c_uint8), ("k", c.c_uint32)]

        class Prog(c.Structure):
            _fields_ = [("len", c.c_ushort), ("filter", c.POINTER(Insn))]

        insns = (Insn * len(prog))(*[Insn(*i) for i in prog])
        fprog = Prog(len(prog), c.cast(insns, c.POINTER(Insn)))
        self._check(self.libc.prctl(22, 2, c.byref(fprog), 0, 0), "prctl(PR_SET_SECCOMP)")


_DEVICES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9)}


def build_root(lc, cfg):
    """A new root at /tmp of this mount namespace (the host's /tmp is untouched: the namespace is
    private), then pivot_root into it and drop the old root."""
    import stat

    new = "/tmp"
    lc.mount(None, "/", None, MS_REC | MS_PRIVATE)
    lc.mount("suite-sandbox-root", new, "tmpfs", MS_NOSUID, "size=1m,nr_inodes=4096,mode=0755")
    for path in cfg["binds"]:
        target = new + path
        if os.path.islink(path):  # /bin -> usr/bin on merged-/usr systems
            os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
            os.symlink(os.readlink(path), target)
            continue
        if not os.path.isdir(path):
            continue
        os.makedirs(target, mode=0o755, exist_ok=True)
        lc.mount(path, target, None, MS_BIND | MS_REC)
        lc.read_only_tree(target)
    os.makedirs(new + "/dev/shm", mode=0o755)
    for name, (major, minor) in _DEVICES.items():
        os.mknod(f"{new}/dev/{name}", 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{new}/dev/{name}")
    os.mkdir(new + "/proc", 0o555)
    lc.mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.mkdir(new + "/tmp", 0o700)
    lc.mount("suite-sandbox-scratch", new + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
             f"size={cfg['scratch_bytes']},nr_inodes=16384,mode=0700,uid={cfg['uid']},gid={cfg['gid']}")
    lc.mount("suite-sandbox-shm", new + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
             f"size={max(1 << 20, cfg['scratch_bytes'] // 4)},nr_inodes=1024,mode=1777")
    os.chdir(new)
    lc.pivot_root(".", ".")
    lc.umount2(".", MNT_DETACH)  # the old root, stacked on "/" by pivot_root(".", ".")
    os.chdir("/")
    lc.mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
