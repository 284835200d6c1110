"""The metadata store: principals, keys and key versions in SQLite or PostgreSQL.

The only package that imports SQLAlchemy. ``make_engine`` builds an engine for
a URL, ``migrate`` brings its schema up to date, and ``Store`` reads and
writes domain records in short transactions. ``Engine`` is the type of what
``make_engine`` returns, for the services to name when they hand it to the stores.
"""

from sqlalchemy import Engine

from keymanager.db.engine import make_engine
from keymanager.db.inventory import Inventory
from keymanager.db.migrate import migrate
from keymanager.db.store import Store

__all__ = ["Engine", "Inventory", "Store", "make_engine", "migrate"]
