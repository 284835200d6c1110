"""A spawned child process ends with the process that started it.

uvicorn's supervisor stops its workers when it is asked to stop, and a worker stops its key-pair
lane's child (``hsm/lane.py``); a parent that is killed (``SIGKILL``, the OOM killer, a test's
teardown past its timeout) cannot ask, and its children went on with nobody to stop them: a
worker holding the port, its HSM sessions and the database; a lane child waiting forever on a
queue whose writing end it holds itself. Two ways, by who started the child:

- :func:`end_with_parent`, for a child started by its parent's main thread (uvicorn's workers):
  Linux sends it ``SIGTERM`` — uvicorn's graceful shutdown, deadlines and all — when that thread
  ends (``prctl(PR_SET_PDEATHSIG)``), and it stops at once if the parent is already gone;
- :func:`watch_parent`, for a child started by any thread (the lane's pool spawns from the thread
  that submits, which may end long before the parent): a daemon thread that looks every
  :data:`WATCH_SECONDS` and sends the process ``SIGTERM`` once its parent is gone.

A process that is not a spawned child (``--workers 1`` serves in the supervisor's own process) is
left alone: its parent is the shell or the service manager, whose end must not stop it.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
"""``prctl``'s option (``<linux/prctl.h>``): the signal a process gets when its parent dies."""
WATCH_SECONDS = 1.0
"""How often :func:`watch_parent` looks for its parent."""


def end_with_parent() -> bool:
    """In a spawned worker on Linux: ``SIGTERM`` when the parent dies (sent now if it already has);
    True when set. Elsewhere nothing, and False."""
    parent = multiprocessing.parent_process()
    if parent is None or not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        log.warning("a worker could not ask to end with its serving process (errno %d)", ctypes.get_errno())
        return False
    if os.getppid() != parent.pid:  # the parent died before the request: nobody will send it
        os.kill(os.getpid(), signal.SIGTERM)
    return True


def watch_parent() -> bool:
    """In a spawned child: a daemon thread sending this process ``SIGTERM`` once its parent is gone
    (looked for every :data:`WATCH_SECONDS`); True when started. Elsewhere nothing, and False."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return False
    expected = parent.pid

    def watch() -> None:
        while os.getppid() == expected:
            time.sleep(WATCH_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
    return True
