"""The shipped Prometheus rules with Debian's promtool: the file checks, and every alerting and recording rule
does what rules_test.yml says on made-up series (each alert fires on its case and not on its near miss)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.prometheus import binary

HERE = Path(__file__).parent
RULES = HERE.parents[2] / "common" / "metrics" / "prometheus" / "myolo-rules.yml"


def test_promtool_checks_the_rules() -> None:
    done = subprocess.run([binary("promtool"), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 13 rules found" in done.stdout


def test_promtool_proves_every_rule_on_made_up_series() -> None:
    done = subprocess.run(
        [binary("promtool"), "test", "rules", "rules_test.yml"], cwd=HERE, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
