"""The old names of dpaudit.deprecations still work for one release, and warn.

Each test reads the old names from the table itself, so every entry is exercised and no old name is
written anywhere else.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from dpaudit import deprecations
from dpaudit.cli import main
from dpaudit.deprecations import DPAuditDeprecationWarning

ROOT = Path(__file__).resolve().parents[1]
[(OLD_SPEC, NEW_SPEC)] = deprecations.SPECS.items()


def test_the_table_names_the_renames():
    assert NEW_SPEC == "table-vs-view-counterexample"
    assert set(deprecations.CALIBRATIONS.values()) == {"zheng-2020", "gaussian-channel"}
    assert set(deprecations.ATTRIBUTES.values()) == {"lint_gaussian_channel"}
    assert set(deprecations.METHODS) == {"TwoPointChannel", "GaussianChannel", "LinearStatsChannel", "GLOCChannel"}
    assert {new for names in deprecations.METHODS.values() for new in names.values()} == {"zheng_2020",
                                                                                           "gaussian_channel"}
    assert issubclass(DPAuditDeprecationWarning, DeprecationWarning)


def test_an_old_spec_name_still_loads_and_warns():
    from dpaudit.policies.finite import BUNDLED, bundled_spec, load_spec
    from dpaudit.policies.finite_contextual import load_contextual

    assert NEW_SPEC in BUNDLED and OLD_SPEC not in BUNDLED  # `dpaudit list` shows the new name only
    for load in (bundled_spec, load_spec, load_contextual):
        with pytest.warns(DPAuditDeprecationWarning, match=f"{OLD_SPEC!r} is deprecated and will be removed in the "
                                                           f"next release; use {NEW_SPEC!r}"):
            old = load(OLD_SPEC)
        new = load(NEW_SPEC)
        assert old.to_spec() == new.to_spec() and old.label == new.label == NEW_SPEC


def test_an_old_spec_name_in_the_python_api_warns_and_is_read_as_the_new():
    import dpaudit
    from dpaudit.api import finite_notion, resolve_protocol

    with pytest.warns(DPAuditDeprecationWarning, match=NEW_SPEC):
        d = dpaudit.describe(OLD_SPEC)
    assert d == dpaudit.describe(NEW_SPEC) and d["policy"] == NEW_SPEC
    with pytest.warns(DPAuditDeprecationWarning):
        assert finite_notion(OLD_SPEC) == "table"
    with pytest.warns(DPAuditDeprecationWarning):
        assert resolve_protocol(OLD_SPEC) == resolve_protocol(NEW_SPEC)


def test_an_old_spec_name_on_the_command_line_is_one_note_on_stderr(capsys):
    assert main(["check", "policy", NEW_SPEC, "--protocol", "table", "--json"]) == 0
    new = capsys.readouterr()
    assert new.err == ""
    assert main(["check", "policy", OLD_SPEC, "--protocol", "table", "--json"]) == 0
    old = capsys.readouterr()
    note = (f"dpaudit: note: the bundled spec name {OLD_SPEC!r} is deprecated and will be removed in the next "
            f"release; use {NEW_SPEC!r}.\n")
    assert old.err == note  # one line, once, though the name is looked up several times
    old_obj, new_obj = json.loads(old.out), json.loads(new.out)
    assert {**old_obj, "seconds": 0} == {**new_obj, "seconds": 0}  # the audit uses the new name
    assert main(["describe", OLD_SPEC]) == 0
    assert capsys.readouterr().err == note


def test_the_command_line_notes_only_deprecations_and_restores_the_warning_filters(capsys):
    before = list(warnings.filters)
    with deprecations.notes_on_stderr():
        deprecations.warn("x", "y")
        deprecations.warn("x", "y")
        with pytest.warns(UserWarning, match="other"):
            warnings.warn("other", UserWarning, stacklevel=1)
    assert capsys.readouterr().err == "dpaudit: note: x is deprecated and will be removed in the next release; use y.\n"
    assert warnings.filters == before


def test_old_calibration_values_still_work_and_warn(capsys):
    from dpaudit.policies import make_policy

    for old, new in deprecations.CALIBRATIONS.items():
        with pytest.warns(DPAuditDeprecationWarning, match=f"calibration={old!r} is deprecated"):
            a = make_policy("ldp-ucb", {"calibration": old})
        b = make_policy("ldp-ucb", {"calibration": new})
        assert a.local_channel.sigma == b.local_channel.sigma and a.calibration == new
        assert main(["describe", "ldp-ucb"]) == 0 and capsys.readouterr().err == ""
        assert main(["account", "policy", "ldp-ucb", "--param", f"calibration={old}", "--param", "epsilon=0.5",
                     "--delta", "1e-5", "--json"]) == 0
        got = capsys.readouterr()
        assert got.err == (f"dpaudit: note: calibration={old!r} is deprecated and will be removed in the next "
                           f"release; use calibration={new!r}.\n")


def test_the_old_lint_name_still_works_and_warns():
    import dpaudit.accountants as acc
    import dpaudit.accountants.gaussian as gauss

    for (module, old), new in deprecations.ATTRIBUTES.items():
        mod = {"dpaudit.accountants": acc, "dpaudit.accountants.gaussian": gauss}[module]
        with pytest.warns(DPAuditDeprecationWarning, match=f"{module}.{old} is deprecated .* use {module}.{new}"):
            fn = getattr(mod, old)
        assert fn is getattr(mod, new) is acc.lint_gaussian_channel
        assert old not in mod.__all__ and new in mod.__all__
        with pytest.warns(DPAuditDeprecationWarning):
            exec(f"from {module} import {old}", {})  # the import form too
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        acc.no_such_name  # noqa: B018


#: each renamed constructor's class and the arguments it is called with here
CONSTRUCTED = {"TwoPointChannel": ("dpaudit.policies.bco", (4, 0.05, 1.0, 1.0, 1e-5)),
               "GaussianChannel": ("dpaudit.mechanisms", (1.0, 1e-5)),
               "LinearStatsChannel": ("dpaudit.mechanisms", (3, 1.0, 1e-5)),
               "GLOCChannel": ("dpaudit.mechanisms", (3, 1.0, 1e-5))}


@pytest.mark.parametrize("cls_name,old,new", [(c, o, n) for c, names in deprecations.METHODS.items()
                                              for o, n in names.items()])
def test_the_old_constructor_names_still_work_and_warn(cls_name, old, new):
    import importlib

    module, args = CONSTRUCTED[cls_name]
    cls = getattr(importlib.import_module(module), cls_name)
    with pytest.warns(DPAuditDeprecationWarning, match=f"{cls_name}.{old} is deprecated .* use {cls_name}.{new}"):
        a = getattr(cls, old)(*args)
    b = getattr(cls, new)(*args)
    assert type(a) is cls and (getattr(a, "sigma", None), a.calibration) == (getattr(b, "sigma", None), b.calibration)
    assert b.calibration[0] in ("zheng-2020", "gaussian-channel", "zheng-2020-alg5", "zheng-2020-alg3")


def test_an_old_calibration_tag_gets_the_same_lint():
    from types import SimpleNamespace

    from dpaudit.accounting import calibration_lints

    for old, new in deprecations.CALIBRATION_TAGS.items():
        lint = [calibration_lints(SimpleNamespace(local_channel=SimpleNamespace(calibration=(tag, 2.0, 1e-5))))
                for tag in (old, new)]
        assert lint[0] == lint[1] and lint[0], old
    assert calibration_lints(SimpleNamespace(local_channel=SimpleNamespace(calibration=("gaussian-channel", 2.0, 0.1))))[0][
        "rule"].startswith("Gaussian channel")


def test_the_renamed_output_key_is_the_new_one_and_documented(capsys):
    [(command, (old, new, fmt))] = deprecations.OUTPUT_KEYS.items()
    assert main(["account", "lint", "--epsilon", "2", "--delta", "0.1", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["format"] == fmt and new in obj and old not in obj
    assert obj[new]["rule"].startswith("Gaussian channel") and obj[new]["flagged"]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    section = changelog[changelog.index("### Renamed"):]
    section = section[:section.index("\n### ")]
    assert f"`{old}`" in section and f"`{new}`" in section and f"`{fmt}`" in section
    for old_name, new_name in [*deprecations.SPECS.items(), *deprecations.CALIBRATIONS.items(),
                               *deprecations.CALIBRATION_TAGS.items()]:
        assert f"`{old_name}`" in section and f"`{new_name}`" in section
    for cls, names in deprecations.METHODS.items():
        for old_name, new_name in names.items():
            assert f"{cls}.{old_name}" in section and f".{new_name}" in section
    assert "CHANGELOG.md" in (ROOT / "docs" / "reference.md").read_text()
