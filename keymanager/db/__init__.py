"""The metadata store: principals, keys and key versions in SQLite or PostgreSQL.

The only package that imports SQLAlchemy. ``make_engine`` builds an engine for
a URL, ``migrate`` brings its schema up to date, and ``Store`` reads and
writes domain records in short transactions.
"""

from keymanager.db.engine import make_engine
from keymanager.db.inventory import Inventory
from keymanager.db.migrate import migrate
from keymanager.db.store import Store

__all__ = ["Inventory", "Store", "make_engine", "migrate"]
