"""``myoloctl token create|list|revoke`` on a tokens file: the token printed once, only its hash kept."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from myolo.coordinator.api.tokens import TokenStore
from myolo.coordinator.cli.main import app


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"MYOLO_API_TOKENS_FILE": ""})


def test_create_list_revoke(tmp_path: Path) -> None:
    path = tmp_path / "etc" / "api-tokens"
    made = run("token", "create", "alice", "--role", "operator", "--tokens-file", str(path))
    assert made.exit_code == 0, made.output
    token = made.stdout.strip()
    assert token.startswith("myolo_") and "\n" not in token  # alone on stdout: `> ~/.config/myolo/token` works
    assert "shown only now" in made.stderr
    assert token not in path.read_text() and path.stat().st_mode & 0o777 == 0o600
    assert TokenStore(path).match(token).role == "operator"
    assert run("token", "create", "bob", "--role", "viewer", "--tokens-file", str(path)).exit_code == 0

    listed = run("token", "list", "--tokens-file", str(path))
    assert listed.exit_code == 0
    rows = [line.split() for line in listed.stdout.splitlines()]
    assert rows[0] == ["NAME", "ROLE", "CREATED", "SHA256"] and [r[:2] for r in rows[1:]] == [
        ["alice", "operator"],
        ["bob", "viewer"],
    ]

    revoked = run("token", "revoke", "alice", "--tokens-file", str(path))
    assert revoked.exit_code == 0 and "revoked" in revoked.stdout
    assert TokenStore(path).match(token) is None
    again = run("token", "revoke", "alice", "--tokens-file", str(path))
    assert again.exit_code == 2 and "no token named 'alice'" in again.output


def test_bad_names_roles_and_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "api-tokens"
    role = run("token", "create", "alice", "--role", "root", "--tokens-file", str(path))
    assert role.exit_code == 2 and "one of scrape, viewer, operator, admin" in role.output and not path.exists()
    name = run("token", "create", "al ice", "--role", "admin", "--tokens-file", str(path))
    assert name.exit_code == 2 and "token name" in name.output
    assert run("token", "create", "alice", "--role", "admin", "--tokens-file", str(path)).exit_code == 0
    twice = run("token", "create", "alice", "--role", "viewer", "--tokens-file", str(path))
    assert twice.exit_code == 2 and "exists already" in twice.output
    path.chmod(0o666)
    loose = run("token", "create", "bob", "--role", "viewer", "--tokens-file", str(path))
    assert loose.exit_code == 2 and "chmod 600" in loose.output
    assert run("token", "list", "--tokens-file", str(path)).exit_code == 1
