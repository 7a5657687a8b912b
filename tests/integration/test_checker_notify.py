"""The `notify` section (operations.md D4): at most one (E202), `on` a non-empty list of the five
events (E207 with a did-you-mean), a `shell` or `script` target only (E207), `timeout`, `retry` and
`env` as on a step, and the plan's top-level `notify` it lowers to."""

from __future__ import annotations

from helpers import Checker, source


def test_a_notify_section_lowers_to_the_plan_and_names_the_feature(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          notify {
            on = [failed, blocked, failed]
            script "scripts/notify.sh"
            env { HOOK = secret("SLACK_WEBHOOK") }
            timeout = 30s
            retry = { max = 2, on = [exit, timeout], backoff = 5s }
          }
          step s { shell "x" }
        }
    """)
    result = codes.result(src, files={"scripts/notify.sh": "#!/bin/sh\ncat\n"})
    assert result.report.diagnostics == [] and result.plan is not None
    notify = result.plan["notify"]
    assert notify["on"] == ["blocked", "failed"] and notify["target"]["kind"] == "script"
    assert notify["env"] == [{"name": "HOOK", "kind": "secret", "secret": "SLACK_WEBHOOK"}]
    assert (notify["timeoutMs"], notify["retry"]) == (30_000, {"max": 2, "on": ["exit", "timeout"], "backoffMs": 5000})
    assert result.plan["features"] == ["notify"]
    assert {"path": "scripts/notify.sh", "sha256": notify["target"]["sha256"]} in result.plan["sourceReadSet"]


def test_notify_checks(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          notify {
            on = [blocked, faild]
            agent "page someone"
          }
          notify {
            on = [blocked]
            shell "x"
          }
          step s { shell "x" }
        }
    """)
    found = codes.diagnostics(src)
    assert [f"{d.code}@{d.span.line}" for d in found] == ["E207@3", "E207@4", "E202@6"]
    assert found[0].help == "did you mean `failed`?"


def test_notify_needs_on_and_a_target_and_takes_only_its_settings(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          notify {
            on = []
            concurrency = 2
          }
          step s { shell "x" }
        }
    """)
    assert codes(src) == ["E207@3", "E207@4", "E207@2"]
    assert codes('workflow "w" {\n  notify {\n    shell "x"\n  }\n  step s { shell "x" }\n}\n') == ["E207@2"]
