"""A worker process ends with the serving process that started it.

uvicorn's supervisor stops its workers when it is asked to stop; a supervisor that is killed
(``SIGKILL``, the OOM killer, a test's teardown past its timeout) cannot ask, and its workers
went on serving with nobody to stop them: holding the port, their HSM sessions and the database,
unseen by the next start. So each worker asks Linux to send it ``SIGTERM`` — uvicorn's graceful
shutdown, deadlines and all — when its parent dies (``prctl(PR_SET_PDEATHSIG)``), and stops at
once if the parent is already gone. A process that is not a spawned worker (``--workers 1``
serves in the supervisor's own process) is left alone: its parent is the shell or the service
manager, whose end must not stop it.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
"""``prctl``'s option (``<linux/prctl.h>``): the signal a process gets when its parent dies."""


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
