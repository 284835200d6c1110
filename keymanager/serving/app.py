"""The app of one worker process, made by uvicorn's factory hook in that process."""

from __future__ import annotations

import logging

from keymanager.api import logs
from keymanager.api.app import create_app, kmip_door
from keymanager.api.gateway import Gateway
from keymanager.config import Settings
from keymanager.orphans import end_with_parent
from keymanager.serving.affinity import pin_worker
from keymanager.serving.kmip import KmipListener, KmipOptions, WithKmip
from keymanager.serving.listeners import kmip_socket
from keymanager.serving.memory import keep_large_buffers
from keymanager.serving.refusals import connection_refusals

log = logging.getLogger(__name__)


def worker_app() -> Gateway | WithKmip:
    """uvicorn's app factory (``--factory``), run in each worker process: settings from the
    environment, the service's logs, the CPU of its own when ``KM_CPU_AFFINITY`` is true; refused
    connections counted in the app's metrics; large buffers kept for reuse (``serving/memory.py``);
    the KMIP listener beside it unless ``KM_KMIP_PORT`` is 0 (``serving/kmip.py``), on the socket the
    serving process handed over (``serving/listeners.py``); the worker ends with the serving process
    (``keymanager/orphans.py``)."""
    end_with_parent()
    keep_large_buffers()
    settings = Settings()
    logs.configure(settings.log_level, settings.resolved_log_format(), settings.access_log)
    if settings.cpu_affinity:
        cpu = pin_worker(settings.run_dir)
        log.info("worker pinned to CPU %s", cpu)
    app = create_app(settings)
    connection_refusals().observer = app.metrics.observe_connection_refused
    options = KmipOptions.of(settings)
    if options is None:
        return app
    return WithKmip(app, KmipListener(kmip_door(app), options, kmip_socket()))
