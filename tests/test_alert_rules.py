"""The Prometheus alert rules in deploy/prometheus: valid, tested, fed by real series.

``promtool`` (scripts/ensure-promtool installs it) checks the rules and runs their
unit tests (what fires at 80% of a budget and when a failure rate doubles, and what
does not). Then a server on a SQLite store with a price table and budgets is scraped,
and what it exposes is the input of a promtool test of the same rules: the tenant
past 80% of its budget fires, the one below does not. Every series the rules read is
one ``/metrics`` exposes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from bridge_store.pricing.book import PriceBook
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from testkit.inprocess import running

from .test_activity_metrics import tokens
from .test_spend_metrics import runs_of, series
from .test_viewer_tenants import WRITE_A, WRITE_B, store

RULES = Path(__file__).resolve().parent.parent / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is missing: scripts/ensure-promtool installs it"
)


def promtool(*args: str, cwd: Path = RULES) -> str:
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@needs_promtool
def test_the_rules_are_valid_and_their_unit_tests_pass() -> None:
    assert "SUCCESS: 2 rules found" in promtool("check", "rules", "bridge-store-alerts.yml")
    assert "SUCCESS" in promtool("test", "rules", "bridge-store-alerts.test.yml")


def rule_series() -> set[str]:
    document = yaml.safe_load((RULES / "bridge-store-alerts.yml").read_text())
    expressions = [rule["expr"] for group in document["groups"] for rule in group["rules"]]
    assert len(expressions) == 2
    return {name for expr in expressions for name in re.findall(r"bridge_store_\w+", expr)}


@needs_promtool
def test_a_real_servers_series_fire_the_budget_alert(tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text(
        '[models."composer-2"]\ninput = 2\noutput = 10\n[budgets]\nteam-a = 10\nteam-b = 100\n'
    )
    config = ServerConfig(
        routes=Routes.single(f"sqlite:///{tmp_path / 'store.db'}"),
        tokens=tokens(),
        prices=PriceBook.read(prices),
    )
    with running(create_app(config)) as base:
        # 3 runs today at 3 EUR each: team-a 9 of 10 (90%), team-b 9 of 100.
        store(base, WRITE_A, runs_of("a", [0, 0, 0], "finished", "composer-2"))
        store(base, WRITE_B, runs_of("b", [0, 0, 0], "finished", "composer-2"))
        found = series(base)
    names = {name for name, _ in found}
    # Every series the rules read is one the server exposes.
    assert rule_series() <= names
    lines = []
    for (name, labels), value in sorted(found.items()):
        selector = ",".join(f'{key}="{label}"' for key, label in labels)
        lines.append(f"      - series: '{name}{{{selector}}}'\n        values: '{value}x10'\n")
    test = (
        f"rule_files:\n  - {RULES / 'bridge-store-alerts.yml'}\n"
        "evaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n"
        + "".join(lines)
        + "    alert_rule_test:\n      - eval_time: 2m\n"
        "        alertname: BridgeStoreBudget80Percent\n        exp_alerts:\n"
        "          - exp_labels: {severity: warning, tenant: team-a, currency: USD}\n"
        "            exp_annotations:\n"
        "              summary: Tenant team-a has spent 80% of its monthly budget\n"
        "              description: team-a has spent 9.00 USD this month, at least 80% of its"
        " budget (bridge-store overview shows who spent it).\n"
        "      - eval_time: 2m\n        alertname: BridgeStoreFailureRateDoubled\n"
        "        exp_alerts: []\n"
    )
    (tmp_path / "live.test.yml").write_text(test)
    assert "SUCCESS" in promtool("test", "rules", "live.test.yml", cwd=tmp_path)
