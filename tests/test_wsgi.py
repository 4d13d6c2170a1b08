"""The WSGI entry point: views imported at start-up and kept out of the collector's walks."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = ("import gc, sys; import hindsight.project.wsgi; "
         "print('hindsight.project.urls' in sys.modules, gc.get_freeze_count())")


def test_start_up_imports_the_views_and_freezes_them_out_of_the_collectors_walks() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "hindsight.project.settings"}
    result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    loaded, frozen = result.stdout.split()[-2:]
    assert loaded == "True"
    assert int(frozen) > 100_000  # the start-up's objects, not a handful
