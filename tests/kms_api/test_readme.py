"""The README's boto3 example runs, unchanged, against a real server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import Server
from tests.kms_api.conftest import Pair

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_boto3_example_runs(kms_server: Server, admin_pair: Pair, tmp_path: Path) -> None:
    found = re.search(
        r"<!-- kms-example:start -->\n```python\n(.*?)```\n<!-- kms-example:end -->", README.read_text(), re.S
    )
    assert found is not None
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        "KM": kms_server.url,
        "CA": str(kms_server.ca),
        "KM_ACCESS_KEY_ID": admin_pair.access_key_id,
        "KM_SECRET_ACCESS_KEY": admin_pair.secret_access_key,
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }
    done = subprocess.run(
        [sys.executable, "-c", found.group(1)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    arn, plaintext = done.stdout.split()
    assert re.fullmatch(r"arn:aws:kms:eu-west-1:111122223333:key/[0-9a-f]{32}", arn)
    assert plaintext == "4111111111111111"
