"""``python -m keymanager_sdk.cli`` runs kmctl."""

import sys

from keymanager_sdk.cli import main

sys.exit(main())
