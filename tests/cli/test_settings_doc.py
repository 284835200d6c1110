"""``docs/configuration.md`` lists every setting as ``keymanager/config.py`` has it today."""

from __future__ import annotations

from pathlib import Path

from keymanager.cli.settings_doc import END, START, table, updated
from keymanager.config import Settings
from tests.cli.test_configuration import keymanager

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_page_holds_the_current_table() -> None:
    page = PAGE.read_text()
    assert updated(page) == page, "stale: run .venv/bin/keymanager settings --update docs/configuration.md"


def test_the_table_has_every_setting_with_its_default_and_meaning() -> None:
    rows = table().splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == [f"KM_{name.upper()}" for name in Settings.model_fields]
    port = next(row for row in rows if row.startswith("| `KM_PORT` |"))
    assert port == "| `KM_PORT` | int | `8443` |  |"
    database = next(row for row in rows if row.startswith("| `KM_DATABASE_URL` |"))
    assert "postgres://" in database  # its docstring in config.py
    assert "km-dev-so-pin" not in table()  # a secret's default is never printed


def test_the_command_prints_the_table_and_updates_a_page(tmp_path: Path) -> None:
    printed = keymanager("settings", KM_PORT="not-a-port")  # the defaults, whatever this environment says
    assert (printed.returncode, printed.stdout) == (0, table())
    page = tmp_path / "configuration.md"
    page.write_text(f"# Settings\n\n{START}\nold\n{END}\n\nNotes.\n")
    done = keymanager("settings", "--update", str(page))
    assert done.returncode == 0, done.stderr
    assert page.read_text() == f"# Settings\n\n{START}\n{table()}{END}\n\nNotes.\n"
    page.write_text("no markers")
    assert keymanager("settings", "--update", str(page)).returncode == 2
