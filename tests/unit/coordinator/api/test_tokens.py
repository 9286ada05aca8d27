"""The API's tokens file: the format, what is refused, hashes only, and a change seen without a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from myolo.common.errors import ConfigError
from myolo.coordinator.api import tokens
from myolo.coordinator.api.tokens import TokenStore, TokensUnavailable
from tests.support.api_auth import write_tokens


def test_a_token_is_256_random_bits_and_only_its_hash_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "api-tokens"
    made = write_tokens(path, {"alice": "operator", "bob": "viewer"})
    assert all(t.startswith("myolo_") and len(t) == len("myolo_") + 43 for t in made.values())  # 32 bytes, base64
    assert len(set(made.values())) == 2
    text = path.read_text()
    assert made["alice"] not in text and tokens.digest(made["alice"]).hex() in text
    assert path.stat().st_mode & 0o777 == 0o600
    entries = tokens.load(path)
    assert [(e.name, e.role) for e in entries] == [("alice", "operator"), ("bob", "viewer")]
    assert all(e.created.endswith("Z") for e in entries)


def test_match_finds_the_entry_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "api-tokens"
    made = write_tokens(path, {"alice": "admin"})
    store = TokenStore(path)
    assert store.match(made["alice"]).name == "alice"
    assert store.match(made["alice"] + "x") is None and store.match("") is None


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("alice operator", "expected <name> <role> sha256:<hex>"),
        ("alice root sha256:" + "0" * 64, "role 'root'"),
        ("al ice operator sha256:" + "0" * 64 + " created=x", "expected"),
        ("-x operator sha256:" + "0" * 64, "token name '-x'"),
        ("alice operator md5:" + "0" * 32, "is not sha256:"),
        ("alice operator sha256:" + "0" * 64 + " when=now", "created=<time>"),
    ],
)
def test_a_bad_line_is_named_with_its_number(tmp_path: Path, line: str, words: str) -> None:
    path = tmp_path / "api-tokens"
    path.write_text("# comment\n\n" + line + "\n")
    path.chmod(0o600)
    with pytest.raises(ConfigError) as exc:
        tokens.load(path)
    assert exc.value.key == "api.tokens_file" and "line 3" in exc.value.reason and words in exc.value.reason


def test_a_name_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "api-tokens"
    write_tokens(path, {"alice": "viewer"})
    with pytest.raises(ValueError, match="exists already"):
        tokens.add(path, "alice", "admin")
    path.write_text(path.read_text() + path.read_text().splitlines()[-1] + "\n")
    with pytest.raises(ConfigError, match="appears twice"):
        tokens.load(path)


@pytest.mark.parametrize(
    ("mode", "ok"),
    [(0o600, True), (0o640, True), (0o400, True), (0o644, False), (0o620, False), (0o602, False), (0o666, False)],
)
def test_a_file_others_may_write_or_everyone_read_is_refused(tmp_path: Path, mode: int, ok: bool) -> None:
    path = tmp_path / "api-tokens"
    write_tokens(path, {"alice": "viewer"})
    path.chmod(mode)
    if ok:
        assert len(tokens.load(path)) == 1
        return
    with pytest.raises(ConfigError) as exc:
        TokenStore(path)
    assert exc.value.key == "api.tokens_file" and f"chmod 600 {path}" in exc.value.reason


def test_revocation_and_new_tokens_apply_on_the_next_request_without_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "api-tokens"
    made = write_tokens(path, {"alice": "operator", "bob": "viewer"})
    store = TokenStore(path)
    assert store.match(made["bob"]).name == "bob"
    assert tokens.revoke(path, "bob") is True and tokens.revoke(path, "bob") is False
    assert store.match(made["bob"]) is None  # revoked: refused at once
    carol = tokens.add(path, "carol", "admin")
    assert store.match(carol).role == "admin" and store.match(made["alice"]).name == "alice"
    assert store.reloads == 3


def test_a_file_that_breaks_while_running_fails_closed_until_it_is_fixed(tmp_path: Path) -> None:
    path = tmp_path / "api-tokens"
    made = write_tokens(path, {"alice": "operator"})
    store = TokenStore(path)
    path.chmod(0o666)
    with pytest.raises(TokensUnavailable, match="chmod 600"):
        store.match(made["alice"])
    path.chmod(0o600)
    assert store.match(made["alice"]).name == "alice"
    good = path.read_text()
    path.write_text(good + "garbage\n")
    with pytest.raises(TokensUnavailable, match="line"):
        store.match(made["alice"])
    path.unlink()
    with pytest.raises(TokensUnavailable, match="cannot read"):
        store.match(made["alice"])


def test_the_local_stack_gets_one_admin_token_it_keeps(tmp_path: Path) -> None:
    tokens_file = tokens.ensure_local(tmp_path)
    _, token_file = tokens.local_paths(tmp_path)
    token = token_file.read_text().strip()
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert TokenStore(tokens_file).match(token).role == "admin"
    assert tokens.ensure_local(tmp_path) == tokens_file and token_file.read_text().strip() == token  # kept
    token_file.unlink()
    tokens.ensure_local(tmp_path)
    fresh = token_file.read_text().strip()
    assert fresh != token and TokenStore(tokens_file).match(fresh) is not None
    assert TokenStore(tokens_file).match(token) is None
