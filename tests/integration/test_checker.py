"""Checker tests state a source and the codes it must produce, nothing more."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from akm_run.plan import render_file, verify_file
from akm_run.schemas import schema_errors
from akmc import ast
from akmc.compiler import Session
from helpers import REPO, Checker, source


def test_clean_workflow(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          step a {
            shell "x"
          }
        }
    """)
    assert codes(src) == []


def test_unknown_step_with_did_you_mean(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          step review { shell "r" }
          step b {
            shell "x"
            inputs = [steps.reviw.output]
          }
        }
    """)
    [diagnostic] = codes.diagnostics(src)
    assert (diagnostic.code, diagnostic.span.line, diagnostic.help) == ("E203", 5, "did you mean `review`?")


def test_independent_problems_all_reported(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { p: integer }
          step a { shell "x" inputs = [steps.nope.output, params.p, params.q] }
          step a { shell "y" }
          step c { concurrency = 3 shell "z" }
        }
    """)
    assert sorted(codes(src)) == sorted(["E306@2", "E203@3", "E205@3", "E200@4", "E207@5"])


def test_self_and_forward_references(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          step a {
            shell "x"
            inputs = [steps.a.output, steps.b.output]
          }
          step b { shell "y" }
        }
    """)
    assert codes(src) == ["E204@4", "E204@4"]


def test_field_paths(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          step a { shell "x" output: { files: list[string], meta: map[int] } }
          step b { shell "y" inputs = [steps.a.output.files[0], steps.a.output.meta.any, steps.a.output.count] }
          step c { shell "z" inputs = [steps.a.output.files.x, steps.a.output.files[0][1]] }
        }
    """)
    assert codes(src) == ["E301@3", "E302@4", "E302@4"]


def test_e301_lists_the_fields(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          step a { shell "x" output: { files: list[string], total: int } }
          step b { shell "y" inputs = [steps.a.output.count] }
        }
    """)
    [d] = codes.diagnostics(src)
    assert d.code == "E301" and d.help == "fields that exist: `files`, `total`"


def test_any_and_union_paths_resolve_at_run_time(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          step a { shell "x" }
          step b { shell "y" output: { x: int } | null }
          step c { shell "z" inputs = [steps.a.output.deep[3].er, steps.b.output.x] }
        }
    """)
    assert codes(src) == []


def test_map_over_non_list(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { n: string }
          step m { map params.n { shell "x" } }
        }
    """)
    assert codes(src) == ["E303@3"]


def test_map_needs_exactly_one_target(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { n: list[int] }
          step m { map params.n { concurrency = 2 } }
          step k { map params.n { shell "a" agent "b" } }
        }
    """)
    assert codes(src) == ["E206@3", "E206@4"]


def test_route_checks(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { mode: "a" | "b" }
          step r { route params.mode { "a" -> x  "a" -> y  "c" -> x  true -> r } }
          step x { shell "x" }
          step y { shell "y" }
        }
    """)
    assert sorted(codes(src)) == sorted(["E201@3", "E304@3", "E304@3", "E208@3", "W701@3"])


def test_default_must_match_type(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params {
            a: int = "x"
            b: string(pattern: "^v") = "v1"
            c: list[int](min_items: 2) = [1]
          }
          step s { shell "x" inputs = [params.a, params.b, params.c] }
        }
    """)
    assert codes(src) == ["E300@3", "E300@5"]


def test_output_type_must_be_satisfied(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          outputs {
            a: int = steps.s.output.n
            b: number = steps.s.output.n
            c: string = steps.s.output.n
          }
          step s { shell "x" output: { n: int } }
        }
    """)
    assert codes(src) == ["E305@5"]


@pytest.mark.parametrize(
    ("declared", "accepted"),
    [
        ("int", False),
        ("{ n: int }", False),
        ("string | null", False),
        ("list[int]", True),
        ("list[int] | null", True),
        ("list[int] | string", True),
        ("any", True),
    ],
)
def test_a_map_output_declares_a_list_as_the_runtime_checks_it(codes: Checker, declared: str, accepted: bool) -> None:
    """A map's output is the list of its items' outputs, which the runtime checks against the
    declared type (akm_run.core.map_end): a type that admits no list is E305, one that does compiles."""
    mapped = (
        'workflow "w" {\n  params { l: list[string] }\n  step m { map params.l { shell "echo 1" }  output: T }\n}\n'
    )
    assert codes(mapped.replace("T", declared)) == ([] if accepted else ["E305@3"])
    single = codes.result(f'workflow "w" {{\n  step s {{ shell "echo 1"  output: {declared} }}\n}}\n').plan
    assert single is not None  # the same type on a step that is no map: what a run checks a map's list against
    schema = single["steps"][0].get("outputSchema", {})
    assert (schema_errors([1], schema) == []) == accepted  # one item printing `1`: the map's output is [1]


def test_settings_bounds_and_clamps(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          limits { concurrency = 100 max_units = 0 }
          step s { shell "x" timeout = 25h retry = { max = 11, on = [exit, never] } on_error = maybe }
        }
    """)
    assert sorted(codes(src)) == sorted(["W703@2", "E601@2", "E601@3", "E601@3", "E207@3", "E207@3"])


def test_duplicates_and_conflicts(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { a: int = 1 a: int = 2 }
          params { }
          step s { shell "x" script "y.sh" output: int output: int env { A = "1" A = "2" } inputs = [params.a] }
        }
    """)
    assert sorted(codes(src)) == sorted(["E201@2", "E202@3", "E202@4", "E202@4", "E201@4"])


def test_files_are_frozen_inside_the_workspace(codes: Checker) -> None:
    files = {"scripts/ok.sh": "#!/bin/sh\necho ok\n", "scripts/bad.sh": "echo\n", "p.md": "Prompt"}
    src = source("""
        workflow "w" {
          step a { script "scripts/ok.sh" }
          step b { script "scripts/bad.sh" }
          step c { script "/etc/passwd" }
          step d { agent file("../p.md") }
          step e { agent file("p.md") }
          step f { script "nope.sh" }
        }
    """)
    assert codes(src, files=files) == ["E502@3", "E501@4", "E501@5", "E500@7"]


def test_symlink_out_of_the_workspace(codes: Checker, tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("outside") / "x.sh"
    outside.write_text("#!/bin/sh\n")
    (codes.root / "link.sh").symlink_to(outside)
    src = source("""
        workflow "w" {
          step a { script "link.sh" }
        }
    """)
    assert codes(src) == ["E501@2"]


def test_credentials_in_env_literals(codes: Checker) -> None:
    tokens = [
        "ghp_" + "a1B2" * 9,
        "github_pat_" + "x" * 30,
        "AKIAIOSFODNN7EXAMPLE",
        "xoxb-1234567890-abc",
        "sk-" + "Ab3" * 10,
        "-----BEGIN RSA PRIVATE KEY-----",
        "Zx8Kq2Lm9Pw4Rt7Yv1Bn6Hc3Jd5Gf0Sa2Qe8",
    ]
    harmless = ["true", "C.UTF-8", "https://example.com/a/b", "0123456789abcdef0123456789abcdef01234567", "x" * 64]
    env = " ".join(f'V{i} = "{v}"' for i, v in enumerate(tokens + harmless))
    src = source(f"""
        workflow "w" {{
          step a {{ shell "x" env {{ {env} }} }}
        }}
    """)
    assert codes(src) == ["E600@2"] * len(tokens)


def test_skippable_read_warns(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { m: "a" | "b" }
          step r { route params.m { "a" -> x  "b" -> y } }
          step x { shell "x" }
          step y { shell "y" }
          step z { shell "z" inputs = [steps.x.output] }
        }
    """)
    assert codes(src) == ["W702@6"]


# -- every reference is checked, wherever it stands ----------------------------------------------------

CHILD = source("""
    workflow "child" {
      params { environment: string }
      step a { shell "x" inputs = [params.environment] }
    }
""")


def test_map_and_route_subjects_are_checked(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { mm: string }
          step c { map params.nope { shell "echo" } }
          step d { route params.mmm { "x" -> e } }
          step e { map steps.f.output { shell "y" } }
          step f { shell "z" inputs = [params.mm] }
        }
    """)
    assert codes(src) == ["E205@3", "E205@4", "E204@5"]


def test_uses_bindings_are_checked(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          step a { shell "x" output: { n: string } }
          step b { uses "child" { environment = steps.zzz.output } }
          step c { uses "child" { environment = steps.a.output.m } }
        }
    """)
    assert codes(src, files={"child.akm": CHILD}) == ["E203@3", "E301@4"]


def test_item_names_the_element_in_the_bindings_of_a_mapped_uses(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { targets: list[{ name: string, port: int }] }
          step a { map params.targets { uses "child" { environment = item.name } } }
          step b { map params.targets { uses "child" { environment = item.port } } }
          step c { map params.targets { uses "child" { environment = item.host } } }
        }
    """)
    assert codes(src, files={"child.akm": CHILD}) == ["E307@4", "E301@5"]


def test_item_outside_a_map_block_is_e209(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { xs: list[string] }
          step a { map params.xs { shell "x" } inputs = [item] }
          step b { uses "child" { environment = item } }
          step c { route item { "a" -> d } }
          step d { map item { shell "y" } }
          outputs { o = item.x }
        }
    """)
    assert sorted(codes(src, files={"child.akm": CHILD})) == ["E209@3", "E209@4", "E209@5", "E209@6", "E209@7"]


# -- settings belong to the step kinds that honour them -----------------------------------------------


def test_settings_a_step_kind_ignores_are_e207(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          step a { uses "child" { environment = "x" } timeout = 1s retry = 1 env { A = "b" } }
          step b { approval "ok?" timeout = 1s retry = 2 gate { check shell "t" } env { A = "b" } }
          step c { route params.p { "x" -> d } timeout = 1s retry = 1 env { A = "b" } gate { check shell "t" } }
          step d { shell "x" }
          params { p: string }
        }
    """)
    assert codes(src, files={"child.akm": CHILD}) == ["E207@2"] * 3 + ["E207@3"] * 4 + ["E207@4"] * 4


def test_what_a_step_honours_is_accepted(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { xs: list[string] }
          step a { shell "x" timeout = 1s retry = 1 env { A = "b" } on_error = continue gate { check shell "t" } }
          step b { map params.xs { shell "y" timeout = 2s retry = 2 concurrency = 2 } on_error = continue }
          step c { uses "child" { environment = "x" } on_error = continue gate { check shell "t" } }
          step d { approval "ok?" on_error = continue }
        }
    """)
    assert codes(src, files={"child.akm": CHILD}) == []


def test_defaults_apply_only_where_honoured(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          defaults { timeout = 5s retry = 2 env { A = "b" } on_error = continue }
          step a { shell "x" }
          step b { approval "ok?" }
          step c { uses "child" { environment = "x" } }
        }
    """)
    result = codes.result(src, files={"child.akm": CHILD})
    assert result.report.diagnostics == []
    assert result.plan is not None
    shell, approval, child = result.plan["steps"]
    assert {"timeoutMs", "retry", "env"} <= shell.keys()
    for step in (approval, child):
        assert not {"timeoutMs", "retry", "env"} & step.keys() and step["onError"] == "continue"


def test_retry_zero_switches_a_default_off(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          defaults { retry = 3 }
          step a { shell "x" retry = 0 }
          step b { shell "y" }
        }
    """)
    result = codes.result(src)
    assert result.report.diagnostics == []
    assert result.plan is not None
    assert "retry" not in result.plan["steps"][0] and result.plan["steps"][1]["retry"]["max"] == 3


def test_a_setting_both_in_the_map_block_and_on_the_step_is_e201(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { xs: list[string] }
          step a {
            map params.xs { shell "y" timeout = 2s }
            timeout = 3s
          }
        }
    """)
    assert codes(src) == ["E201@5"]


# -- a skipped step's output is null -------------------------------------------------------------------


def routed(last: str) -> str:
    """Step `s` runs only on one route; `last` is the line after it, before the closing brace."""
    return source(f"""
        workflow "w" {{
          params {{ mode: "a" | "b" }}
          step r {{ route params.mode {{ "a" -> s  "b" -> t }} }}
          step s {{ shell "x" output: string }}
          step t {{ shell "y" }}
          {last}
        }}
    """)


def test_an_output_reading_a_skippable_step_must_admit_null(codes: Checker) -> None:
    assert codes(routed("outputs { o: string = steps.s.output }")) == ["E305@6"]
    assert codes(routed("outputs { o: string | null = steps.s.output }")) == []
    assert codes(routed("outputs { o = steps.s.output }")) == []


def test_a_binding_reading_a_skippable_step_must_fit_a_nullable_param(codes: Checker) -> None:
    src = routed('step u { uses "child" { environment = steps.s.output } }')
    [d] = codes.diagnostics(src, files={"child.akm": CHILD})
    assert d.code == "E307" and d.help is not None and "route step `r` may skip step `s`" in d.help


# -- diagnostics for every bad input -------------------------------------------------------------------


def test_bad_literals_are_diagnostics(codes: Checker) -> None:
    lone_high = source(r"""
        workflow "w" {
          step a { shell "\ud800x" }
        }
    """)
    assert codes(lone_high) == ["E101@2"]
    pair = source(r"""
        workflow "w" {
          step a { shell "\ud83d\ude00" }
        }
    """)
    assert codes(pair) == []
    pair_and_lone_low = source(r"""
        workflow "w" {
          step a { shell "\ud83d\ude00\ude01" }
        }
    """)
    [lone] = codes.diagnostics(pair_and_lone_low)
    assert lone.message == "lone surrogate escape `\\ude01` in string" and lone.span.column == 31
    huge = "9" * 5000
    huge_int = source(f"""
        workflow "w" {{
          params {{ n: int = {huge} }}
          step a {{ shell "x" inputs = [params.n] }}
        }}
    """)
    assert codes(huge_int) == ["E102@2"]
    huge_duration = source(f"""
        workflow "w" {{
          step a {{ shell "x" timeout = {huge}s }}
        }}
    """)
    assert codes(huge_duration) == ["E102@2"]


def test_secret_names_must_be_environment_variable_names(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          step a { shell "x" env { A = secret("A(B") B = secret("") C = secret("OK_1") } }
        }
    """)
    assert codes(src) == ["E207@2", "E207@2"]


def test_catastrophic_patterns_are_e306(codes: Checker) -> None:
    almost = "a" * 40 + "b"
    src = source(f"""
        workflow "w" {{
          params {{ p: string(pattern: "^(a+)+$") = "{almost}" }}
          step a {{ shell "x" inputs = [params.p] }}
        }}
    """)
    assert codes(src) == ["E306@2"]


def test_checking_work_is_linear_in_reference_length(codes: Checker, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reference's text is built a bounded number of times, however many segments it has (building it
    once per segment made 8,000 segments take 6 s)."""
    built = []
    original: Callable[[ast.Reference], str] = ast.Reference.__dict__["text"].fget  # the property's getter

    def counted(self: ast.Reference) -> str:
        built.append(len(self.segments))
        return original(self)

    monkeypatch.setattr(ast.Reference, "text", property(counted))
    for length in (10, 2000):
        built.clear()
        fields = ".f" * length
        src = source(f"""
            workflow "w" {{
              step a {{ shell "x" }}
              step b {{ shell "y" inputs = [steps.a.output{fields}] }}
            }}
        """)
        assert codes(src) == []
        assert built.count(length) <= 3


def test_an_any_output_type_compiles_to_no_schema(codes: Checker) -> None:
    """Found by the property test: `output: any` lowered to an empty schema, which verification refuses."""
    src = source("""
        workflow "w" {
          step a { shell "x" output: any }
          outputs { o: any = steps.a.output }
        }
    """)
    result = codes.result(src)
    assert result.report.diagnostics == [] and result.plan is not None and "outputSchema" not in result.plan["steps"][0]
    verify_file(render_file(result.plan).encode())


# -- whatever check accepts compiles: paths a plan can name ------------------------------------------


def test_file_paths_a_plan_cannot_name_are_reported_with_a_position(codes: Checker) -> None:
    """A plan names files by portable names (ASCII letters, digits, `_`, `.`, `-`, `/`): a path with a
    space or a non-ASCII character would check clean and then fail to compile."""
    files = {"scripts dir/run me.sh": "#!/bin/sh\necho hi\n", "prömpt.md": "Say hi\n", "ok/p-1.md": "Hi\n"}
    src = source("""
        workflow "w" {
          step a { script "scripts dir/run me.sh" }
          step b { agent file("prömpt.md") }
          step c { agent file("ok/p-1.md") }
        }
    """)
    found = codes.diagnostics(src, files=files)
    assert [(d.code, d.span.line, d.span.column) for d in found] == [("E501", 2, 19), ("E501", 3, 18)]
    assert "portable" in found[0].message


def test_a_workflow_file_name_a_plan_cannot_name_is_reported(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          step a { shell "x" }
        }
    """)
    assert codes(src, name="my flow.akm") == ["E501@1"]
    assert codes(src, name="flöw.akm") == ["E501@1"]
    assert codes(src, name="flow-1.akm") == []
    [d] = codes.diagnostics(src, name="my flow.akm")
    assert d.help is not None and "`my-flow.akm`" in d.help


# -- E600: credentials in commands, prompts and approval texts ------------------------------------------

TOKENS = [
    "ghp_" + "a1B2" * 9,
    "github_pat_" + "x" * 30,
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-1234567890-abc",
    "sk-" + "Ab3" * 10,
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "Zx8Kq2Lm9Pw4Rt7Yv1Bn6Hc3Jd5Gf0Sa2Qe8",
]


def test_credentials_in_commands_prompts_and_approvals(codes: Checker) -> None:
    for token in TOKENS:
        src = source(f"""
            workflow "w" {{
              step a {{ shell "curl -H 'Authorization: token {token}' https://api.example.com" }}
              step b {{ agent "Use the key {token} to log in" }}
              step c {{ approval "Publish with {token}?" }}
              step d {{ shell "x" gate {{ check shell "test {token}" }} }}
              params {{ xs: list[string] }}
              step e {{ map params.xs {{ shell "echo {token}" }} }}
              step f {{ shell \"\"\"
                deploy \\
                  --token {token}
                \"\"\" }}
              step g {{ agent file("p.md") }}
            }}
        """)
        found = codes(src, files={"p.md": f"Log in with\n{token}\n"})
        assert found == ["E600@2", "E600@3", "E600@4", "E600@5", "E600@7", "E600@8", "E600@12"], token


def test_a_credential_in_the_description_is_reported(codes: Checker) -> None:
    src = source(f"""
        workflow "w" {{
          description = "Deploys with {TOKENS[2]}"
          step a {{ shell "x" }}
        }}
    """)
    assert codes(src) == ["E600@2"]


def test_credentials_in_param_defaults_and_binding_literals(codes: Checker) -> None:
    """Both are copied into the plan; a reference binding holds no literal."""
    child = source("""
        workflow "child" {
          params { token: string  opts: any }
          step a { shell "x" inputs = [params.token, params.opts] }
        }
    """)
    src = source(f"""
        workflow "w" {{
          params {{
            key: string = "{TOKENS[4]}"
            keys: list[{{ v: string }}] = [{{ v = "ok" }}, {{ v = "{TOKENS[0]}" }}]
            fine: string = "x"
          }}
          step a {{ uses "child" {{ token = "{TOKENS[2]}"  opts = {{ deep = ["{TOKENS[5]}"] }} }} }}
          step b {{ uses "child" {{ token = params.fine  opts = "harmless" }} }}
        }}
    """)
    found = [d for d in codes.diagnostics(src, files={"child.akm": child}) if d.code != "W700"]
    assert [f"{d.code}@{d.span.line}" for d in found] == ["E600@3", "E600@4", "E600@7", "E600@7"]
    assert "the default of param `key`" in found[0].message and "binding `token`" in found[2].message


def test_credential_in_a_text_says_where_and_what(codes: Checker) -> None:
    [d] = codes.diagnostics(
        source(f"""
        workflow "w" {{
          step a {{ approval "ok {TOKENS[0]}?" }}
        }}
    """)
    )
    assert d.code == "E600" and "approval" in d.message and "a GitHub token" in d.message
    assert d.help is not None and "secret(" in d.help


def test_harmless_commands_are_not_credentials(codes: Checker) -> None:
    harmless = [
        "git checkout 0123456789abcdef0123456789abcdef01234567",
        "curl https://example.com/a/b?page=2",
        "sha256sum -c e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "ask the team about sk-ills and ghp",
        "echo $GITHUB_TOKEN",
    ]
    steps = "".join(f'  step s{i} {{ shell "{c}" }}\n' for i, c in enumerate(harmless))
    assert codes('workflow "w" {\n' + steps + "}\n") == []


def test_a_credential_in_a_text_can_be_suppressed_on_its_line(codes: Checker) -> None:
    src = source(f"""
        workflow "w" {{
          step a {{ shell "echo {TOKENS[2]}" }}  # akmc: ignore[E600]
        }}
    """)
    assert codes(src) == []


def test_no_credential_in_the_shipped_sources() -> None:
    """The examples and the golden corpus hold no false positive (golden/errors/E600* are the cases)."""
    for folder in ("examples", "golden/corpus", "golden/compose", "golden/language-example"):
        for path in sorted((REPO / folder).rglob("*.akm")):
            root = next(p for p in path.parents if (p / "akm.toml").exists() or p == REPO)
            result = Session(root).check(path)
            assert [d for d in result.report.diagnostics if d.code == "E600"] == [], path


def test_route_cases_are_numbers_by_value(codes: Checker) -> None:
    """1.0 is 1: a case written either way covers the member, matches an `int`, and twice is a duplicate."""
    src = source("""
        workflow "w" {
          params { n: 1 | 2  m: int  f: 1.0 | 2.5 }
          step r { route params.n { 1.0 -> x  2 -> y } }
          step s { route params.m { 1.0 -> x  _ -> y } }
          step t { route params.f { 1 -> x  2.5 -> y } }
          step u { route params.n { 1 -> x  1.0 -> y  2 -> y } }
          step x { shell "x" }
          step y { shell "y" }
        }
    """)
    assert codes(src) == ["E201@6"]
