"""`voicedesk serve`'s options belong to one of its two protocols: one given to the other (--seed or
--check-budget-ms without --wyoming, --api-key with it) is refused in one line, exit 2, before anything starts,
instead of doing nothing while the user believes it does. $VOICEDESK_API_KEY, the API's, does not stop Wyoming."""
import pytest

import launcher
from app import server
from app.wyoming import server as wyoming_server
from engine.checks.budget import DEFAULT_BUDGET_MS


@pytest.fixture
def started(monkeypatch):
    """What each server was started with (neither starts)."""
    calls = []
    monkeypatch.setattr(server, "serve", lambda **options: calls.append(("api", options)) or 0)
    monkeypatch.setattr(wyoming_server, "serve_wyoming", lambda **options: calls.append(("wyoming", options)) or 0)
    monkeypatch.delenv("VOICEDESK_API_KEY", raising=False)
    return calls


@pytest.mark.parametrize("args, named", [
    (["--seed", "5"], "--seed and --check-budget-ms are for --wyoming"),
    (["--check-budget-ms", "0"], "--seed and --check-budget-ms are for --wyoming"),
    (["--wyoming", "--api-key", "secret"], "--api-key: Wyoming has no keys"),
])
def test_an_option_of_the_other_protocol_is_refused(started, capsys, args, named):
    assert launcher.main(["serve", "--demo", *args]) == 2
    assert capsys.readouterr().err.startswith(f"error: {named}") and started == []


def test_each_protocol_gets_its_own_options(started, monkeypatch):
    assert launcher.main(["serve", "--wyoming", "--seed", "5"]) == 0
    assert launcher.main(["serve", "--wyoming", "--check-budget-ms", "0"]) == 0
    assert launcher.main(["serve", "--api-key", "secret"]) == 0
    monkeypatch.setenv("VOICEDESK_API_KEY", "from-env")
    assert launcher.main(["serve", "--wyoming"]) == 0
    assert launcher.main(["serve"]) == 0
    assert [(kind, {k: options[k] for k in ("seed", "check_budget_ms", "api_key") if k in options})
            for kind, options in started] == [
        ("wyoming", {"seed": 5, "check_budget_ms": DEFAULT_BUDGET_MS}),
        ("wyoming", {"seed": None, "check_budget_ms": 0}),
        ("api", {"api_key": "secret"}),
        ("wyoming", {"seed": None, "check_budget_ms": DEFAULT_BUDGET_MS}),
        ("api", {"api_key": "from-env"})]
