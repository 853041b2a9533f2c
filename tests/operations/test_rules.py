"""Scenarios: the shipped Prometheus rules load in a real Prometheus's promtool, and their
unit tests (each alert firing, and not firing) pass."""

from __future__ import annotations

import shutil

import pytest

from ..support.prometheus import MISSING_REASON, MONITORING, PROMTOOL, RULE_TESTS, RULES, promtool

pytestmark = pytest.mark.skipif(PROMTOOL is None, reason=MISSING_REASON)


def test_the_shipped_rules_are_valid():
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_each_alert_fires_and_stays_quiet_as_its_unit_tests_say():
    result = promtool("test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_unit_tests_would_catch_a_broken_alert(tmp_path):
    # Given the rules with the temperature threshold raised to 80 °C
    broken = tmp_path / "gpuspawner.rules.yml"
    broken.write_text(RULES.read_text().replace(">= 70", ">= 80"))
    tests = tmp_path / "gpuspawner.rules.test.yml"
    tests.write_text(RULE_TESTS.read_text())

    # Then the shipped unit tests fail on the hot GPU that no longer alerts
    result = promtool("test", "rules", str(tests))
    assert result.returncode != 0
    assert "GPUHot" in result.stdout + result.stderr


def test_the_example_prometheus_config_is_valid(tmp_path):
    # Given the example installed as its comments say: rules beside it, the token file
    shutil.copy(MONITORING / "prometheus.yml", tmp_path / "prometheus.yml")
    shutil.copytree(RULES.parent, tmp_path / "rules")
    (tmp_path / "jupyterhub-token").write_text("a-token-with-read-metrics\n")

    result = promtool("check", "config", str(tmp_path / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
