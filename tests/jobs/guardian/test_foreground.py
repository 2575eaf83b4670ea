"""`python -m jobs guard --stack NAME`: the foreground guardian's settings and endpoint from the stack file."""

from __future__ import annotations

from jobs.guardian import foreground


def test_the_foreground_command_says_what_is_wrong_in_one_line_with_exit_2(make_stack, tmp_path, capsys, monkeypatch):
    name, directory = make_stack("guard-cli")
    cases = [
        ([], "one of the arguments --stack --settings is required"),
        (["--stack", "absent", "--dir", str(tmp_path)], "Pulumi.absent.yaml"),
        (["--stack", name, "--dir", str(directory), "--address", "http://127.0.0.1:9", "--data-root", str(tmp_path)],
         "cannot reach the Ray dashboard at http://127.0.0.1:9"),
    ]  # fmt: skip
    monkeypatch.setattr("core.names.DATA_MOUNT", str(tmp_path / "not-mounted"))
    cases.append((["--stack", name, "--dir", str(directory), "--address", "http://127.0.0.1:9"],
                  f"{tmp_path}/not-mounted is not mounted here: pass --data-root DIR"))  # fmt: skip
    for argv, message in cases:
        assert foreground.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1, err
