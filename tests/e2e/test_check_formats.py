"""`akmc check`: the github and sarif formats, akm.toml [check], command-line options, suppressions."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from akmc.ast import Span
from akmc.diagnostics import CATALOG, Diagnostic
from akmc.render import github
from helpers import DATA, REPO, Checker, run_cli, source

SARIF_SCHEMA = json.loads((DATA / "sarif-2.1.0-subset.schema.json").read_text())
BROKEN = source("""
    workflow "w" {
      params {
        unused: bool = false
      }
      step a {
        shell "x"
        inputs = [steps.b.output]
      }
    }
""")


@pytest.fixture
def broken(workspace: Path) -> Path:
    (workspace / "workflows").mkdir()
    (workspace / "workflows" / "w.akm").write_text(BROKEN)
    return workspace


# -- formats ---------------------------------------------------------------------------------------


def test_github_workflow_commands(broken: Path) -> None:
    result = run_cli("check", "--format", "github", cwd=broken)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("::warning file=workflows/w.akm,line=3,col=5,endLine=3,endColumn=11,title=W700::W700: ")
    assert lines[1].startswith("::error file=workflows/w.akm,line=7,col=21,endLine=7,endColumn=22,title=E203::E203: ")
    assert len(lines) == 2  # a message with a help line stays one workflow command


def test_github_escapes_properties_and_data() -> None:
    line = github.render([Diagnostic("E203", "50% off,\nnow", "a,b:c.akm", Span(1, 2, 1, 3, 0, 1))])
    assert line == "::error file=a%2Cb%3Ac.akm,line=1,col=2,endLine=1,endColumn=3,title=E203::E203: 50%25 off,%0Anow\n"


def test_sarif_log_validates_and_carries_every_rule(broken: Path) -> None:
    result = run_cli("check", "--format", "sarif", cwd=broken)
    assert result.returncode == 1
    log = json.loads(result.stdout)
    jsonschema.Draft7Validator(SARIF_SCHEMA, format_checker=jsonschema.FormatChecker()).validate(log)
    driver = log["runs"][0]["tool"]["driver"]
    assert [rule["id"] for rule in driver["rules"]] == sorted(CATALOG)
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] == CATALOG[rule["id"]].summary
        assert rule["fullDescription"]["text"] and rule["help"]["markdown"].startswith(f"# {rule['id']}: ")
        assert "helpUri" not in rule  # no placeholder URL: only a configured docs_url gives one
    assert "informationUri" not in driver and "example.invalid" not in result.stdout
    [warning, error] = log["runs"][0]["results"]
    assert error["ruleId"] == "E203" and error["level"] == "error"
    assert driver["rules"][error["ruleIndex"]]["id"] == "E203"
    location = error["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "workflows/w.akm"
    assert location["region"] == {"startLine": 7, "startColumn": 21, "endLine": 7, "endColumn": 22}
    assert warning["level"] == "warning"


def test_sarif_links_rules_to_the_configured_docs_url(broken: Path) -> None:
    (broken / "akm.toml").write_text('[check]\ndocs_url = "https://docs.example.com/akm/diagnostics/{code}.html"\n')
    result = run_cli("check", "--format", "sarif", cwd=broken)
    log = json.loads(result.stdout)
    jsonschema.Draft7Validator(SARIF_SCHEMA, format_checker=jsonschema.FormatChecker()).validate(log)
    driver = log["runs"][0]["tool"]["driver"]
    assert driver["informationUri"] == "https://docs.example.com/akm/diagnostics/"
    assert [r["helpUri"] for r in driver["rules"]] == [
        f"https://docs.example.com/akm/diagnostics/{code}.html" for code in sorted(CATALOG)
    ]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ('"docs.example.com/{code}"', "must be an http or https URL"),
        ('"ftp://docs.example.com/{code}"', "must be an http or https URL"),
        ('"https:///{code}"', "must be an http or https URL"),
        ('"https://docs.example.com/E203.md"', "must contain `{code}`"),
        ('"https://docs.example.com/{code}/{code}"', "must contain `{code}` once"),
        ('"https://docs.example.com/a b/{code}"', "must be an http or https URL"),
        ('"https://docs.example.com/{name}/{code}"', "`{code}` is its only placeholder"),
        ("3", "must be a URL string"),
    ],
)
def test_an_invalid_docs_url_is_a_config_error(broken: Path, value: str, problem: str) -> None:
    (broken / "akm.toml").write_text(f"[check]\nstrict = false\ndocs_url = {value}\n")
    result = run_cli("check", "--format", "sarif", cwd=broken)
    assert result.returncode == 2 and result.stdout == ""
    assert "akm.toml:3:1: error: [check] docs_url " in result.stderr and problem in result.stderr, result.stderr


def test_sarif_with_related_locations_validates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO / "golden" / "compose" / "E408")
    result = run_cli("check", "--format", "sarif", "--no-cache", "workflows", cwd=REPO / "golden" / "compose" / "E408")
    log = json.loads(result.stdout)
    jsonschema.Draft7Validator(SARIF_SCHEMA, format_checker=jsonschema.FormatChecker()).validate(log)
    [e408] = [r for r in log["runs"][0]["results"] if r["ruleId"] == "E408"]
    assert (
        e408["relatedLocations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "workflows/release-checklist.akm"
    )


def test_sarif_schema_refuses_what_it_should() -> None:
    """The test data is a real check: a result without a message or with a bad level is refused."""
    validator = jsonschema.Draft7Validator(SARIF_SCHEMA)
    base = {
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "akmc"}}, "results": [{"message": {"text": "x"}}]}],
    }
    assert validator.is_valid(base)
    assert not validator.is_valid({**base, "version": "2.0.0"})
    assert not validator.is_valid({"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "a"}}, "results": [{}]}]})
    bad_level = json.loads(json.dumps(base))
    bad_level["runs"][0]["results"][0]["level"] = "fatal"
    assert not validator.is_valid(bad_level)


# -- akm.toml and the command line ------------------------------------------------------------------


def test_config_ignore_and_strict(broken: Path) -> None:
    (broken / "akm.toml").write_text('[check]\nignore = ["E203"]\n')
    assert run_cli("check", cwd=broken).returncode == 0  # W700 only: a warning
    (broken / "akm.toml").write_text(
        source("""
            [check]
            ignore = ["E203"]
            strict = true
        """)
    )
    assert run_cli("check", cwd=broken).returncode == 1
    assert run_cli("check", "--no-strict", cwd=broken).returncode == 0  # the command line wins
    result = run_cli("check", "--ignore", "W", "--format", "json", cwd=broken)
    assert [d["code"] for d in json.loads(result.stdout)] == ["E203"]  # --ignore replaces the file's list


def test_select_by_prefix(broken: Path) -> None:
    result = run_cli("check", "--select", "W7", "--format", "json", cwd=broken)
    assert result.returncode == 0 and [d["code"] for d in json.loads(result.stdout)] == ["W700"]


def test_include_and_exclude(broken: Path) -> None:
    (broken / "workflows" / "experimental").mkdir()
    (broken / "workflows" / "experimental" / "x.akm").write_text("workflow {")
    assert "experimental/x.akm" in run_cli("check", cwd=broken).stdout
    (broken / "akm.toml").write_text('[check]\nexclude = ["workflows/experimental/**"]\n')
    result = run_cli("check", "--format", "json", cwd=broken)
    assert {d["file"] for d in json.loads(result.stdout)} == {"workflows/w.akm"}
    named = run_cli("check", "workflows/experimental/x.akm", cwd=broken)
    assert "excluded by the [check] configuration" in named.stderr and named.returncode == 0
    only = run_cli("check", "--include", "workflows/experimental/*.akm", "--exclude", "none", cwd=broken)
    assert "experimental/x.akm" in only.stdout and "w.akm" not in only.stdout


@pytest.mark.parametrize(
    ("toml", "where", "message"),
    [
        ("[check]\nstric = true\n", "akm.toml:2:1", "unknown key `stric` in [check]; did you mean `strict`?"),
        ('[check]\n\nstrict = "yes"\n', "akm.toml:3:1", "[check] strict must be a boolean"),
        ('[check]\nignore = ["E999"]\n', "akm.toml:2:1", "names `E999`"),
        ('[check]\n  exclude = "x"\n', "akm.toml:2:3", "[check] exclude must be a list of glob patterns"),
        ("[checks]\n", "akm.toml:1:1", "unknown table or key `checks`"),
        ("[check\n", "akm.toml:1:", "not valid TOML"),
    ],
)
def test_config_problems_are_reported_with_their_line(broken: Path, toml: str, where: str, message: str) -> None:
    (broken / "akm.toml").write_text(toml)
    result = run_cli("check", cwd=broken)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert where in result.stderr and message in result.stderr, result.stderr


def test_a_bad_code_on_the_command_line_is_a_usage_error(broken: Path) -> None:
    result = run_cli("check", "--select", "Q1", cwd=broken)
    assert result.returncode == 2 and "Q1" in result.stderr


# -- suppressions ----------------------------------------------------------------------------------------


def test_line_and_file_suppressions(codes: Checker) -> None:
    source = BROKEN.replace("inputs = [steps.b.output]", "inputs = [steps.b.output] # akmc: ignore[E203]")
    assert codes(source) == ["W700@3"]
    assert codes("# akmc: ignore-file[W700]\n" + source) == []


def test_a_suppression_is_precise_by_code_and_line(codes: Checker) -> None:
    wrong_code = BROKEN.replace("inputs = [steps.b.output]", "inputs = [steps.b.output] # akmc: ignore[E204]")
    assert sorted(codes(wrong_code)) == ["E203@7", "W700@3", "W704@7"]
    wrong_line = BROKEN.replace('shell "x"', 'shell "x" # akmc: ignore[E203]')
    assert sorted(codes(wrong_line)) == ["E203@7", "W700@3", "W704@6"]
    text = 'workflow "w" {\n  step a {\n    agent """\n      # akmc: ignore[E203]\n      """\n    inputs = [steps.b.output]\n  }\n}\n'
    assert codes(text) == ["E203@6"]  # text inside a prompt is not a comment


def test_unknown_codes_and_w704_of_a_file(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          step a {
            shell "x" # akmc: ignore[E2O3]
          }
        }
    """)
    messages = [d.message for d in codes.diagnostics(src)]
    assert messages == ["`# akmc: ignore[…]` names `E2O3`, which is not a diagnostic code"]
    assert (
        codes(
            source("""
                # akmc: ignore-file[W704]
                workflow "w" {
                  step a {
                    shell "x" # akmc: ignore[E203]
                  }
                }
            """)
        )
        == []
    )


def test_no_ignore_shows_everything(broken: Path) -> None:
    path = broken / "workflows" / "w.akm"
    path.write_text("# akmc: ignore-file[W700, E203]\n" + BROKEN)
    assert run_cli("check", cwd=broken).returncode == 0
    result = run_cli("check", "--no-ignore", "--format", "json", cwd=broken)
    assert [d["code"] for d in json.loads(result.stdout)] == ["W700", "E203"]


def test_a_silenced_error_still_has_no_plan(broken: Path) -> None:
    path = broken / "workflows" / "w.akm"
    path.write_text("# akmc: ignore-file[W700, E203]\n" + BROKEN)
    result = run_cli("compile", "workflows/w.akm", cwd=broken)
    assert result.returncode == 1 and result.stdout == ""
    assert "silenced by `# akmc: ignore`" in result.stderr
