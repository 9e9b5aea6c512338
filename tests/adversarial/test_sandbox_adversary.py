"""Adversarial review of the two-process code check (namespaces mode only: these programs write to every fd and
plant modules). Plain tests: each forgery below must fail; they confirm a defence."""

from __future__ import annotations

import os

import pytest

from suite.stages.evaluate import sandbox

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the namespaces sandbox needs root")

PROMPT = 'def f(x):\n    """Return x doubled."""\n'
# the tests import a stdlib module only after the program ran (so a module planted by it would be found first if
# the tests' process looked in a folder the program can write)
TESTS = PROMPT + ("\n\ndef check(candidate):\n    import string, textwrap, colorsys, this_is_not_a_module_x\n"
                  "    assert candidate(2) == 4\n\ncheck(f)\n")
TESTS_PLAIN = PROMPT + "\n\ndef check(candidate):\n    assert candidate(2) == 4\n\ncheck(f)\n"

# a module that, run in the tests' process, walks to run_tests' frame and writes the verdict itself
HIJACK = r'''
import sys, os
fr = sys._getframe()
while fr is not None:
    loc = fr.f_locals
    if "token" in loc and "res_fd" in loc:
        os.write(loc["res_fd"], b"OK " + loc["token"] + b"\n")
        os._exit(0)
    fr = fr.f_back
'''

PLANT = ("    return 0\n"
         "import os\n"
         "for d in ['/tmp', '/dev/shm', os.getcwd(), os.path.expanduser('~')]:\n"
         "    for name in ['string', 'textwrap', 'colorsys', 'this_is_not_a_module_x', '_calls', 'sitecustomize']:\n"
         "        try:\n"
         "            open(os.path.join(d, name + '.py'), 'w').write(" + repr(HIJACK) + ")\n"
         "        except OSError:\n"
         "            pass\n")

EVERY_FD = ("    return 0\n"
            "import os\n"
            "for fd in range(0, 1 << 16):\n"
            "    for line in (b'OK ' + b'0' * 32 + b'\\n', b'OK\\n'):\n"
            "        try:\n"
            "            os.write(fd, line)\n"
            "        except OSError:\n"
            "            break\n")

@pytest.fixture(autouse=True)
def allow(monkeypatch):
    monkeypatch.setenv(sandbox.ALLOW_ENV, "1")
    monkeypatch.delenv(sandbox.MODE_ENV, raising=False)


def test_control_right_program_passes():
    outs = sandbox.run_programs([(PROMPT + "    return 2 * x\n", TESTS_PLAIN)], sandbox.Limits(timeout_s=8),
                                mode="namespaces")
    assert outs[0].passed, outs


def test_modules_planted_by_the_program_do_not_run_in_the_tests_process():
    """The tests' process runs with -P -S, cwd /, stdlib-only sys.path: a module planted in /tmp, /dev/shm or the
    program's cwd is not imported by the tests (the missing module stays missing: ImportError, a fail)."""
    out = sandbox.run_programs([(PROMPT + PLANT, TESTS)], sandbox.Limits(timeout_s=8), mode="namespaces")[0]
    assert not out.passed and "ModuleNotFoundError" in out.reason, out


def test_writing_a_verdict_to_every_fd_up_to_65535_fails():
    """The existing forgery tests write to fds 3..255; the call pipes live near 1023: every fd is tried here."""
    out = sandbox.run_programs([(PROMPT + EVERY_FD, TESTS_PLAIN)], sandbox.Limits(timeout_s=8), mode="namespaces")[0]
    assert not out.passed, out

