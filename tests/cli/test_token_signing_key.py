"""``drods token create`` never makes a signing key silently: a token signed with a key no server has is
refused by every server. Forgetting ``--data-dir`` (the server runs with another) is said on stderr, with
the key it made; a data dir whose server signs with ``DRODS_JWT_SECRET`` (it holds the server's store,
no key) is refused instead of getting a key of its own. With the server's data dir, as the README's
first steps run it, the token is printed alone and the server accepts it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from drods.api.auth import SECRET_ENV, TokenAuthority, load_or_create_signing_key
from drods.store.sqlite import SqliteStore
from tests.server_process import drods_command


def drods(*args: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The ``drods`` CLI as a user runs it: HOME is ``home`` (its default data dir ``home/.drods``), no
    data dir or secret in the environment unless ``env`` gives one."""
    base = {k: v for k, v in os.environ.items() if k not in ("DRODS_DATA_DIR", SECRET_ENV)}
    return subprocess.run([*drods_command(), *args], capture_output=True, text=True, timeout=60, check=False,
                          env={**base, "HOME": str(home), **(env or {})})


def server_data_dir(path: Path) -> Path:
    """What ``drods serve --data-dir PATH`` leaves there: its store and its signing key."""
    path.mkdir()
    SqliteStore(str(path / "drods.db"))  # the file and its tables (made as the store is opened)
    load_or_create_signing_key(path / "jwt.key")
    return path


def test_a_forgotten_data_dir_is_said_with_the_key_made(tmp_path: Path) -> None:
    server = server_data_dir(tmp_path / "srv")
    home = tmp_path / "home"
    made = drods("token", "create", "--role", "admin", home=home)
    assert made.returncode == 0, made.stderr
    key = home / ".drods" / "jwt.key"
    assert key.exists()
    assert f"made a new signing key in {key}" in made.stderr, made.stderr
    assert "another --data-dir will not" in made.stderr, made.stderr
    token = made.stdout.strip()
    assert token.count(".") == 2 and "\n" not in token  # stdout is the token alone: $(…) still captures it
    with pytest.raises(Exception, match="(?i)signature"):  # why it is said: the server refuses it
        TokenAuthority(load_or_create_signing_key(server / "jwt.key")).verify(token)
    again = drods("token", "create", "--role", "admin", home=home)  # the key is there now: nothing to say
    assert again.returncode == 0 and again.stderr == "", again.stderr


def test_the_servers_data_dir_signs_tokens_it_accepts_without_a_word(tmp_path: Path) -> None:
    server = server_data_dir(tmp_path / "srv")
    made = drods("token", "create", "--role", "admin", home=tmp_path / "home", env={"DRODS_DATA_DIR": str(server)})
    assert made.returncode == 0 and made.stderr == "", made.stderr
    principal = TokenAuthority(load_or_create_signing_key(server / "jwt.key")).verify(made.stdout.strip())
    assert principal.role.value == "admin"
    assert not (tmp_path / "home" / ".drods").exists()  # no key of its own anywhere


def test_a_data_dir_whose_server_signs_with_a_secret_is_refused_a_key_of_its_own(tmp_path: Path) -> None:
    server = tmp_path / "srv"
    server.mkdir()
    SqliteStore(str(server / "drods.db"))  # what `drods serve` with DRODS_JWT_SECRET leaves: no jwt.key
    refused = drods("token", "create", "--role", "admin", "--data-dir", str(server), home=tmp_path / "home")
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout  # no token printed
    assert "no signing key" in refused.stderr and SECRET_ENV in refused.stderr, refused.stderr
    assert not (server / "jwt.key").exists()
    secret = "s" * 40
    made = drods("token", "create", "--role", "admin", "--data-dir", str(server), home=tmp_path / "home",
                 env={SECRET_ENV: secret})
    assert made.returncode == 0 and made.stderr == "", made.stderr
    assert TokenAuthority(secret.encode()).verify(made.stdout.strip()).role.value == "admin"
    assert not (server / "jwt.key").exists()
