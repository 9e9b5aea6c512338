"""The inside half of suite.stages.evaluate.sandbox: sets up one program's sandbox and runs it. Standard library only.

``process`` mode: started by ``suite.stages.evaluate.sandbox`` as ``python -s -S -B -P _boot.py process CONFIG``
(CONFIG: a dict literal) with four inherited pipe fds: ``prog`` (the program's source), ``test`` (the
benchmark's tests), ``tok`` (the run's random token; both read only by the trusted process) and ``res``
(where the verdict goes). ``namespaces`` mode: started once per harness as ``_boot.py zygote`` (see
_zygote); each check arrives as a message with the same fds and a fifth, ``status`` (the init's report).

``namespaces``: the check's init is pid 1 of fresh PID/net/mount/IPC/UTS namespaces that the zygote's
child made with unshare(2), still root. It joins the run's cgroups, builds a new root file system (a read-only
tmpfs with read-only binds of the system folders and the Python installation, a size-capped tmpfs
scratch at /tmp and a smaller one at /dev/shm, a few device nodes, its own /proc), pivots into it (_root.py),
forks the program's (untrusted) process, which drops to uid 65534, and the tests' (trusted) process,
which drops to uid 65533 and is not dumpable (so the program can neither signal, trace nor read it);
both have no capabilities, no_new_privs, a seccomp deny list and a three-variable environment. It
reaps every orphan, and when the tests' process ends (or the time limit passes) writes its exit
status to ``status`` and exits: the kernel then kills whatever is left in the PID namespace.

``process``: the weaker mode; this process runs the tests itself under rlimits and forks the program's.

The two sides are in _calls.py: the program runs as ``exec(source, {})`` like lm-eval's code_eval and
serves calls of its entry point as plain data; the tests run against a proxy of it. Only when they
return normally does the trusted process write ``OK <token>`` to ``res`` and end with status 0; an
exception writes ``ERR <type>: <message>`` instead. The token is read from its pipe by the trusted
process after the program's process was forked (it is in no memory the program can see), and is in
no file, argument or environment variable; the program's process holds none of these fds.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # before pivot_root: the suite is not bound
import _calls  # noqa: E402
from _root import _Libc, build_root  # noqa: E402

del sys.path[0]
_write = os.write
_exit = os._exit
TESTS_UID = 65533  # the trusted process: another uid than the program's, so it cannot be signalled or traced


def _read_all(fd):
    chunks = []
    while True:
        b = os.read(fd, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(fd)
    return b"".join(chunks)


def _describe(e):
    try:
        text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    except BaseException:  # noqa: BLE001 - a hostile __str__
        text = "an exception whose message could not be read"
    return text[:300]


def _untrusted(program, cfg, req_r, rep_w, _describe=_describe):
    """The program's side: run it, then serve calls of its entry point. Never returns."""
    _close_all_but((req_r, rep_w))
    req_r, rep_w = _out_of_reach(req_r), _out_of_reach(rep_w)
    sys.path.extend(cfg["paths"])
    import _sitebuiltins
    import builtins

    builtins.exit = _sitebuiltins.Quitter("exit", "Ctrl-D (i.e. EOF)")  # as `site` would (we run -S)
    builtins.quit = _sitebuiltins.Quitter("quit", "Ctrl-D (i.e. EOF)")
    _calls.serve(program, cfg["entry"], req_r, rep_w, _describe)


def _trusted(cfg, req_w, rep_r, _describe=_describe):
    """The tests' side: read the tests and the token (only now, in this process: neither is in the
    program's memory), run the tests. Never returns."""
    tests = _read_all(cfg["test_fd"]).decode("utf-8", "replace")
    token = _read_all(cfg["tok_fd"])
    res_fd = cfg["res_fd"]
    _close_all_but((req_w, rep_r, res_fd))
    _calls.run_tests(tests, cfg["entry"], token, req_w, rep_r, res_fd, _describe)


def _out_of_reach(fd):
    """Move a call pipe to the top of the fd table (below 1024), so that a program writing to the low
    fds (as programs that write to every fd do) does not garble its own answers; one that writes there
    on purpose only fails its own check."""
    import resource

    top = min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1024) - 1
    while top > fd:
        try:
            os.fstat(top)
        except OSError:
            os.dup2(fd, top, inheritable=False)
            os.close(fd)
            return top
        top -= 1
    return fd


def _close_all_but(keep):
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


def _not_dumpable():
    """No ptrace, /proc/PID/mem or core dump of this process by another one of the same uid."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE)")


def _rlimits(cfg, with_memory):
    import resource

    cpu = cfg["cpu_s"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["file_bytes"], cfg["file_bytes"]))
    if with_memory:  # process mode: no cgroup, so per-process limits are what there is
        resource.setrlimit(resource.RLIMIT_AS, (cfg["memory_bytes"], cfg["memory_bytes"]))
        resource.setrlimit(resource.RLIMIT_NPROC, (cfg["processes"], cfg["processes"]))


def _null_stdio():
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if null > 2:
        os.close(null)


# ------------------------------------------------------------------ namespaces mode (pid 1, root)


def _oom_score_adj(value):
    try:  # lowering it needs CAP_SYS_RESOURCE, which containers often lack: best effort
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write(value)
    except OSError:
        pass


def _drop(lc, cfg, uid, cwd):
    """What both processes of a check give up before any code of the check runs."""
    _oom_score_adj("0")
    lc.new_session_keyring()
    _rlimits(cfg, with_memory=False)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if uid == TESTS_UID:
        _not_dumpable()
    lc.no_new_privs()
    lc.seccomp()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(cfg["env"])
    _null_stdio()


def _fork_as(lc, cfg, uid, cwd, role, *args):
    """Fork a process that drops to uid and runs role(*args); returns its pid."""
    pid = os.fork()
    if pid:
        return pid
    try:
        _drop(lc, cfg, uid, cwd)
    except BaseException as e:  # noqa: BLE001 - told on the status pipe (still open: closed by role)
        try:
            _write(cfg["status_fd"], b"error sandbox setup failed: " + _describe(e).encode("utf-8", "replace") + b"\n")
        finally:
            _exit(126)
    role(*args)
    _exit(3)  # not reached: each role ends its process


def _namespaces(cfg, program):
    import _signal as signal  # not `signal`: its enums cost ~4 ms of imports a check

    status_fd = cfg["status_fd"]

    def report(**what):  # one line "key value" for the harness
        try:
            (key, value), = what.items()
            _write(status_fd, f"{key} {value}".replace("\n", " ").encode("utf-8", "replace") + b"\n")
        finally:
            _exit(0)

    try:
        if os.getpid() != 1:
            raise OSError("not pid 1 of a new PID namespace")
        for cg in cfg["cgroups"]:
            with open(os.path.join(cg, "cgroup.procs"), "w") as fh:
                fh.write("0")
        _oom_score_adj("-1000")  # the memory limit should kill the program, not us
        os.umask(0)
        lc = _Libc()
        build_root(lc, cfg)
        os.umask(0o022)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
    except BaseException as e:  # noqa: BLE001
        report(error=f"sandbox setup failed: {_describe(e)}")

    # the program first: it is forked before anyone has read the tests or the token
    _fork_as(lc, cfg, cfg["uid"], "/tmp", _untrusted, program, cfg, req_r, rep_w)
    pid = _fork_as(lc, cfg, TESTS_UID, "/", _trusted, cfg, req_w, rep_r)
    del program
    for fd in (req_r, req_w, rep_r, rep_w, cfg["res_fd"], cfg["tok_fd"], cfg["test_fd"]):
        os.close(fd)
    _null_stdio()

    class Expired(Exception):
        pass

    def expire(*_):
        raise Expired

    signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, cfg["timeout_s"])
    try:
        while True:
            done, status = os.waitpid(-1, 0)  # reap orphans too: we are their init
            if done == pid:
                break
    except Expired:
        report(timeout=True)
    except BaseException as e:  # noqa: BLE001
        report(error=f"sandbox init failed: {_describe(e)}")
    signal.setitimer(signal.ITIMER_REAL, 0)
    if os.WIFSIGNALED(status):
        report(signal=os.WTERMSIG(status))
    report(exit=os.WEXITSTATUS(status))  # returning from pid 1 kills every process left in the namespace


def _process(cfg, program):
    """The weaker mode: this process runs the tests; the program's process is its child (same uid)."""
    _rlimits(cfg, with_memory=True)
    _null_stdio()
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    if os.fork() == 0:
        _untrusted(program, cfg, req_r, rep_w)
        _exit(3)
    try:
        _not_dumpable()
    except OSError:
        pass  # best effort here: the mode is documented as not isolating the program
    _trusted(cfg, req_w, rep_r)


CLONE_NEW = 0x00020000 | 0x04000000 | 0x08000000 | 0x40000000 | 0x20000000  # NS, UTS, IPC, NET, PID


def _zygote():
    """``namespaces`` mode's starter: one pre-imported root process per harness (instead of util-linux
    ``unshare`` and a new interpreter per check). Per message on fd 0 (a SOCK_SEQPACKET unix socket:
    the config as a dict literal, the check's pipe fds attached) it forks a child that unshares PID,
    network, mount, IPC and UTS namespaces and forks the namespace's init (pid 1), which runs
    _namespaces exactly as a fresh interpreter did. The child and the init die with their parent
    (PR_SET_PDEATHSIG); the zygote ends when the harness closes the socket. It never reads a program,
    the tests or a token: those pipes are only passed on."""
    import _signal
    import ctypes
    import socket

    libc = ctypes.CDLL(None, use_errno=True)
    me = os.getpid()
    _signal.signal(_signal.SIGCHLD, _signal.SIG_IGN)  # the kernel reaps the check children
    sock = socket.socket(fileno=0)
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 8)
        except OSError:
            _exit(0)
        if not msg:
            _exit(0)  # the harness closed the socket (or died)
        if os.fork() == 0:
            _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
            _check_child(libc, me, msg, fds)
        for fd in fds:
            os.close(fd)


def _check_child(libc, zygote, msg, fds):
    """One check, outside its namespaces: unshare them, fork their init, wait for it. Never returns."""
    libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG SIGKILL: no check outlives the zygote
    if os.getppid() != zygote:
        _exit(1)
    keys, text = msg.decode("utf-8").split("\n", 1)  # the fds' names, the config: literals written by the harness
    cfg = eval(text, {"__builtins__": {}})  # noqa: S307
    cfg.update(zip(eval(keys, {"__builtins__": {}}), fds))  # noqa: S307
    _null_stdio()  # fd 0 was the zygote's socket
    _close_all_but(fds)
    if libc.unshare(CLONE_NEW) != 0:
        import ctypes

        _write(cfg["status_fd"], f"error sandbox setup failed: unshare: {os.strerror(ctypes.get_errno())}\n".encode())
        _exit(1)
    pid = os.fork()
    if pid == 0:
        libc.prctl(1, 9, 0, 0, 0)  # the init (and with it the namespace) dies with this child
        _namespaces(cfg, _read_all(cfg["prog_fd"]).decode("utf-8", "replace"))
        _exit(3)
    for fd in fds:
        os.close(fd)
    os.waitpid(pid, 0)
    _exit(0)


def main():
    mode = sys.argv[1]
    if mode == "zygote":
        _zygote()
    cfg = eval(sys.argv[2], {"__builtins__": {}})  # noqa: S307 - a dict literal written by the harness (repr)
    program = _read_all(cfg["prog_fd"]).decode("utf-8", "replace")
    (_namespaces if mode == "namespaces" else _process)(cfg, program)


if __name__ == "__main__":
    main()
