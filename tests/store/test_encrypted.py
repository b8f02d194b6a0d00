"""The encrypting store view (SEC2) over both backends: plaintext to its users, ciphertext below."""

from __future__ import annotations

from pathlib import Path

import pytest

from drods.security.envelope import DecryptionFailed, Envelope, Keyring
from drods.store import Store
from drods.store.base import CasFailed, Compare, EventType, Get, Put
from drods.store.encrypted import EncryptingStore, reencrypt

SECRET = b'{"data": {"password": "hunter2"}}'


@pytest.fixture
async def enc(store: Store, tmp_path: Path) -> EncryptingStore:
    await store.delete_prefix("/")
    return EncryptingStore(store, Envelope(Keyring.load(tmp_path)), ["/s/"])


async def test_values_under_the_prefixes_are_ciphertext_below_and_plaintext_above(enc: EncryptingStore) -> None:
    rev = await enc.put("/s/a", SECRET)
    await enc.put("/p/a", b"plain")
    raw = await enc.inner.get("/s/a")
    assert raw is not None and b"hunter2" not in raw.value and enc.envelope.kek_of(raw.value) == "k1"
    assert (await enc.inner.get("/p/a")).value == b"plain"  # type: ignore[union-attr]
    assert (await enc.get("/s/a")).value == SECRET  # type: ignore[union-attr]
    kvs, _ = await enc.range("/s/")
    assert [kv.value for kv in kvs] == [SECRET]
    # A conflict reports the current value in plaintext.
    with pytest.raises(CasFailed) as failed:
        await enc.put("/s/a", b"x", expect_revision=rev + 100)
    assert failed.value.current is not None and failed.value.current.value == SECRET
    res = await enc.txn([Compare("/s/a", "mod", "=", rev)], [Put("/s/b", SECRET), Get("/s/a")])
    assert res.succeeded and res.responses[1][0].value == SECRET  # type: ignore[index]
    with pytest.raises(ValueError, match="value compare"):
        await enc.txn([Compare("/s/a", "value", "=", SECRET)], [])
    # A ciphertext moved to another key does not open (the key is authenticated).
    await enc.inner.put("/s/moved", raw.value)
    with pytest.raises(DecryptionFailed):
        await enc.get("/s/moved")


async def test_watch_sees_plaintext(enc: EncryptingStore) -> None:
    start = await enc.current_revision() + 1
    await enc.put("/s/w", SECRET)
    await enc.delete("/s/w")
    events = []
    async for ev in enc.watch("/s/", start_revision=start):
        events.append(ev)
        if len(events) == 2:
            break
    assert events[0].type is EventType.PUT and events[0].kv.value == SECRET
    assert events[1].type is EventType.DELETE and events[1].prev_kv is not None
    assert events[1].prev_kv.value == SECRET


async def test_rotation_reencrypts_old_and_plaintext_values(enc: EncryptingStore) -> None:
    await enc.put("/s/old", SECRET)
    await enc.inner.put("/s/legacy", b"stored before encryption")  # read as it is, sealed by rotation
    assert (await enc.get("/s/legacy")).value == b"stored before encryption"  # type: ignore[union-attr]
    assert enc.envelope.keyring.rotate() == "k2"
    assert await reencrypt(enc) == (2, 0, 0)
    for key in ("/s/old", "/s/legacy"):
        assert enc.envelope.kek_of((await enc.inner.get(key)).value) == "k2"  # type: ignore[union-attr]
    assert (await enc.get("/s/old")).value == SECRET  # type: ignore[union-attr]
    assert await reencrypt(enc) == (0, 0, 0)
    # Another process's keyring (same file) follows the rotation.
    other = Keyring.load(enc.envelope.keyring.path.parent)  # type: ignore[union-attr]
    assert Envelope(other).open((await enc.inner.get("/s/old")).value, b"/s/old") == SECRET  # type: ignore[union-attr]
    assert oct(enc.envelope.keyring.path.stat().st_mode & 0o777) == "0o600"  # type: ignore[union-attr]


async def test_a_prefix_taken_off_the_list_stays_readable_and_rotation_unseals_it(enc: EncryptingStore) -> None:
    await enc.put("/s/kept", SECRET)
    await enc.put("/t/was-sealed", SECRET)  # not listed: plaintext
    assert (await enc.inner.get("/t/was-sealed")).value == SECRET  # type: ignore[union-attr]
    wider = EncryptingStore(enc.inner, enc.envelope, ["/s/", "/t/"])  # /t/ listed now
    await wider.put("/t/sealed", SECRET)
    assert (await enc.get("/t/sealed")).value == SECRET  # type: ignore[union-attr]  # read by any list
    assert (await wider.get("/t/was-sealed")).value == SECRET  # type: ignore[union-attr]  # plaintext read-through
    assert await reencrypt(wider, ["/t/"]) == (1, 0, 0)  # sealed what was stored before /t/ was listed
    assert enc.envelope.kek_of((await enc.inner.get("/t/was-sealed")).value) == "k1"  # type: ignore[union-attr]
    # /t/ off the list again: rotation (scanning it) stores its sealed values in plaintext.
    kvs, _ = await enc.range("/t/")
    assert [kv.value for kv in kvs] == [SECRET, SECRET]
    assert await reencrypt(enc, ["/t/", "/"]) == (0, 2, 0)
    assert [kv.value for kv in (await enc.inner.range("/t/"))[0]] == [SECRET, SECRET]
    assert enc.envelope.kek_of((await enc.inner.get("/s/kept")).value) == "k1"  # type: ignore[union-attr]
    assert await reencrypt(enc, ["/"]) == (0, 0, 0)


def test_a_data_key_serves_many_values_and_is_replaced_on_rotation_or_after_its_uses(tmp_path: Path) -> None:
    ring = Keyring.load(tmp_path)
    env = Envelope(ring)
    header = len(b"\x00drods-env1\x00") + 1 + len("k1") + 12 + 32 + 16
    a, b = env.seal(b"one", b"/s/a"), env.seal(b"two", b"/s/b")
    assert a[:header] == b[:header] and a[header:header + 12] != b[header:header + 12]  # one DEK, fresh nonces
    assert Envelope(ring).open(a, b"/s/a") == b"one" and env.open(b, b"/s/b") == b"two"
    env.DEK_USES = 3
    c = env.seal(b"three", b"/s/c")
    assert c[:header] == a[:header]
    assert env.seal(b"four", b"/s/d")[:header] != a[:header]  # used up: a new DEK
    ring.rotate()
    rotated = env.seal(b"five", b"/s/e")
    assert env.kek_of(rotated) == "k2" and env.open(rotated, b"/s/e") == b"five"
    assert env.open(a, b"/s/a") == b"one"  # the old KEK still opens what it wrapped
    with pytest.raises(DecryptionFailed):
        env.open(a, b"/s/other")  # the store key is authenticated, cached DEK or not
