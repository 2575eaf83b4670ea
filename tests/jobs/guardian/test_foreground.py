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


def test_the_foreground_guardian_parks_with_the_users_google_token_not_the_metadata_servers(monkeypatch):
    """In the cluster the guardian's Google token comes from the metadata server (incluster/guardian/command.py
    main's default); from a laptop there is none, so the foreground form hands it the user's (gcloud's), as
    `python -m jobs park` uses."""
    from incluster.google_token import Credential, metadata_credential
    from incluster.guardian import command

    asked: list[dict] = []
    monkeypatch.setattr(foreground, "user_credential", lambda user: asked.append(user) or Credential("ya29.user"))
    handed = {}
    monkeypatch.setattr(foreground, "guardian_main", lambda argv, from_stack, credential: handed.update(
        argv=argv, from_stack=from_stack, credential=credential) or 0)  # fmt: skip
    assert foreground.main(["--stack", "dev"]) == 0
    assert handed["from_stack"] is foreground.from_stack and handed["credential"]() == Credential("ya29.user")
    assert asked == [{}]
    assert command.main.__defaults__[-1] is metadata_credential
