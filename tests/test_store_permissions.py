"""An embedded store is private to its owner: home 0700, store files 0600 whatever the umask; an exposed existing
store is reported with the chmod that fixes it; a home that cannot be created is a sentence, not a traceback."""

from __future__ import annotations

import os
import stat

from tests.conftest import CLI, ROOT


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_home_and_its_files_are_owner_only_whatever_the_umask(tmp_path):
    old = os.umask(0o000)  # the loosest umask: nothing may rely on it
    try:
        cli = CLI({"home": tmp_path / "ledger"})
        code, _out, err = cli("assert", "u1", "profile.city", "Paris")
    finally:
        os.umask(old)
    assert code == 0, err
    home = tmp_path / "ledger"
    assert mode(home) == 0o700
    files = {p.name: mode(p) for p in home.iterdir() if p.is_file() and p.name.split("-")[0].endswith(".db")}
    assert {"events.db", "projections.db", "keys.db"} <= set(files)
    assert set(files.values()) == {0o600}, files


def test_an_exposed_existing_home_gets_a_warning_naming_the_fix(tmp_path):
    cli = CLI({"home": tmp_path / "ledger"})
    assert cli("assert", "u1", "profile.city", "Paris")[0] == 0
    home = tmp_path / "ledger"
    os.chmod(home, 0o755)
    os.chmod(home / "projections.db", 0o644)
    code, out, err = cli("profile", "u1")
    assert code == 0 and "Paris" in out
    assert "projections.db" in err and "can be read by other local accounts" in err
    assert f"fix with: chmod -R go-rwx {home}" in err
    os.chmod(home, 0o700)  # fixed as told: the warning goes
    code, _out, err = cli("profile", "u1")
    assert code == 0 and "other local accounts" not in err


def test_a_home_that_cannot_be_created_is_a_sentence(tmp_path):
    code, _out, err = CLI({"home": "/proc/nope/ledger"})("profile", "u1")
    assert code == 1
    assert "cannot create the ledger directory '/proc/nope/ledger'" in err
    assert "Traceback" not in err and "FileNotFoundError" not in err


def test_an_empty_existing_folder_becomes_private_and_so_does_the_index(tmp_path):
    home = tmp_path / "pre"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    cli = CLI({"home": home})
    assert cli("assert", "u1", "profile.city", "Paris")[0] == 0
    assert mode(home) == 0o700
    assert cli("search", "u1", "Paris")[0] == 0  # creates the semantic index's folder
    old = os.umask(0o000)  # the embedding cache's file is made owner-only whatever the umask
    try:
        assert cli("assert", "u1", "profile.city", "Lyon")[0] == 0
        assert cli("search", "u1", "Lyon")[0] == 0  # Paris left its row: its vector is the cache's first
    finally:
        os.umask(old)
    vectors = home / "vectors"
    assert [p.name for p in vectors.glob("*.db")] == ["embeddings.db"]
    assert {mode(p) for p in vectors.glob("*.db")} == {0o600}
    assert cli("profile", "u1")[0] == 0  # the next open makes the folder private too
    assert vectors.is_dir() and mode(vectors) == 0o700
    assert {mode(d) for d in vectors.rglob("*") if d.is_dir()} == {0o700}  # vectors/<model>/<copy>
    assert cli("remember", "u1", "I like tea")[0] == 0  # makes locks/
    assert cli("profile", "u1")[0] == 0
    assert mode(home / "locks") == 0o700 and {mode(p) for p in (home / "locks").iterdir()} == {0o600}


def test_a_folder_holding_other_things_is_left_alone_with_a_warning_once_readable(tmp_path):
    home = tmp_path / "busy"
    home.mkdir()
    os.chmod(home, 0o755)
    (home / "notes.txt").write_text("mine")
    cli = CLI({"home": home})
    assert cli("assert", "u1", "profile.city", "Paris")[0] == 0
    assert mode(home) == 0o755  # not ours to change
    assert mode(home / "events.db") == 0o600  # but the store's own files are private


def test_an_empty_home_or_dsn_is_refused(tmp_path):
    code, _out, err = CLI({"home": ""})("assert", "u", "a.b", "1")
    assert code == 2 and err.startswith("error: --home: is empty")
    assert not (ROOT / "events.db").exists()  # used to land in the current directory
    code, _out, err = CLI({"dsn": ""})("profile", "u")
    assert code == 2 and err.startswith("error: --dsn: is empty")
