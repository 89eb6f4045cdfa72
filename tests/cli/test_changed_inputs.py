"""Damaged or changed inputs are found, by the tools a user runs: a checkpoint whose bytes no
longer match the CRC-32 its zip recorded (it used to load without a word and evaluate to NaN
with exit status 0) is refused by zoo-eval, zoo-generate, zoo-export and zoo-train, on one line;
a resume whose data file changed since its checkpoint was written (it used to train on the new
file without a word) is refused, or with `data.allow_changed_files=true` allowed and recorded."""

from __future__ import annotations

import json
import shutil
import struct
import zipfile
from pathlib import Path

import pytest

import zoo
from tests.cli.conftest import tiny_overrides


def _corpus(path: Path) -> Path:
    words = "the quick brown fox jumps over the lazy dog and the cat sat on the mat".split()
    path.write_text("\n".join(" ".join(words[(i * 7 + j) % len(words)] for j in range(12)) for i in range(400)) + "\n")
    return path


def _overrides(corpus: Path) -> list[str]:
    """The fixture run's command (less its directory): tiny, on a local data file, 3 steps."""
    return [o for o in tiny_overrides() if not o.startswith("trainer.max_steps=")] + [
        "trainer.max_steps=3",
        "data=local",
        f"data.path={corpus}",
    ]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """(run directory, corpus) of a finished 3-step run on a local file."""
    root = tmp_path_factory.mktemp("inputs")
    corpus = _corpus(root / "train.txt")
    run = root / "run"
    zoo.train(zoo.compose(_overrides(corpus)), run)
    return run, corpus


def rot(checkpoint: Path, target: Path) -> Path:
    """A copy of `checkpoint` with four bytes in the middle of its largest tensor set to 0xFF (a
    NaN as float32): the zip's directory is intact, only the member's CRC-32 no longer matches."""
    shutil.copyfile(checkpoint, target)
    with zipfile.ZipFile(target) as archive:
        member = max(archive.infolist(), key=lambda info: info.file_size)
    with open(target, "r+b") as f:
        f.seek(member.header_offset + 26)
        name_len, extra_len = struct.unpack("<HH", f.read(4))
        f.seek(member.header_offset + 30 + name_len + extra_len + member.file_size // 2)
        f.write(b"\xff\xff\xff\xff")
    return target


def zero_crcs(checkpoint: Path) -> Path:
    """`checkpoint` with the CRC-32 of every member set to 0, in its local headers and in the
    central directory (what a zip written without CRCs holds): nothing left for them to check."""
    data = bytearray(checkpoint.read_bytes())
    with zipfile.ZipFile(checkpoint) as archive:
        members = archive.infolist()
    for member in members:
        struct.pack_into("<I", data, member.header_offset + 14, 0)
    end = data.rfind(b"PK\x05\x06")
    (count,) = struct.unpack_from("<H", data, end + 10)
    (entry,) = struct.unpack_from("<I", data, end + 16)
    for _ in range(count):
        assert data[entry : entry + 4] == b"PK\x01\x02"
        struct.pack_into("<I", data, entry + 16, 0)
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, entry + 28)
        entry += 46 + name_len + extra_len + comment_len
    checkpoint.write_bytes(bytes(data))
    with zipfile.ZipFile(checkpoint) as archive:
        assert not any(info.CRC for info in archive.infolist())
    return checkpoint


def _one_line(result, *fragments) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout[-1000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def test_a_bit_rotted_checkpoint_is_refused_by_every_tool(finished, tmp_path, cli_here):
    run, corpus = finished
    good = run / "checkpoints" / "last.ckpt"
    bad = rot(good, tmp_path / "rotted.ckpt")
    out = tmp_path / "eval.json"
    assert cli_here("eval", f"ckpt={good}", f"out={out}").returncode == 0  # the same file, intact, evaluates
    damaged = f"checkpoint {bad} is damaged"
    _one_line(cli_here("eval", f"ckpt={bad}"), damaged, "CRC-32")
    _one_line(cli_here("generate", f"ckpt={bad}", "prompt=the quick"), damaged)
    _one_line(cli_here("export", f"ckpt={bad}", f"out={tmp_path / 'exported'}"), damaged)
    assert not (tmp_path / "exported").exists() or not any((tmp_path / "exported").iterdir())
    fresh = tmp_path / "fresh"
    _one_line(cli_here("train", *_overrides(corpus), f"ckpt_path={bad}", f"hydra.run.dir={fresh}"), damaged)
    assert not (fresh / "checkpoints").exists() and not (fresh / "summary.json").exists()  # nothing trained


def test_a_checkpoint_whose_crcs_were_zeroed_is_refused_by_every_tool(finished, tmp_path, cli_here):
    """Zeroing every CRC-32 used to switch the check off: changed weights evaluated (to another
    loss) with exit status 0. The checkpoint says it was written with them; zeros are refused."""
    run, corpus = finished
    good = run / "checkpoints" / "last.ckpt"
    bad = zero_crcs(rot(good, tmp_path / "zeroed.ckpt"))
    damaged = f"checkpoint {bad} is damaged: it was written with a CRC-32 for every member, and they are all zero"
    _one_line(cli_here("eval", f"ckpt={bad}"), damaged)
    _one_line(cli_here("generate", f"ckpt={bad}", "prompt=the quick"), damaged)
    fresh = tmp_path / "fresh"
    _one_line(cli_here("train", *_overrides(corpus), f"ckpt_path={bad}", f"hydra.run.dir={fresh}"), damaged)
    assert not (fresh / "checkpoints").exists() and not (fresh / "summary.json").exists()  # nothing trained


def test_a_run_whose_last_checkpoint_lost_its_crcs_is_not_resumed(finished, tmp_path, cli_here):
    run, corpus = finished
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    last = zero_crcs(copy / "checkpoints" / "last.ckpt")
    before = {p.name: p.read_bytes() for p in (copy / "metrics.csv", copy / "summary.json", last)}
    result = cli_here("train", *_overrides(corpus), "trainer.max_steps=6", f"hydra.run.dir={copy}")
    _one_line(result, f"checkpoint {last} is damaged", "all zero")
    assert {p.name: p.read_bytes() for p in (copy / "metrics.csv", copy / "summary.json", last)} == before


def test_a_run_whose_last_checkpoint_rotted_is_not_resumed(finished, tmp_path, cli_here):
    run, corpus = finished
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    last = copy / "checkpoints" / "last.ckpt"
    rot(last, tmp_path / "rotted.ckpt").replace(last)
    before = {p.name: p.read_bytes() for p in (copy / "metrics.csv", copy / "summary.json", last)}
    result = cli_here("train", *_overrides(corpus), "trainer.max_steps=6", f"hydra.run.dir={copy}")
    _one_line(result, f"checkpoint {last} is damaged")
    assert {p.name: p.read_bytes() for p in (copy / "metrics.csv", copy / "summary.json", last)} == before


def test_a_sharded_checkpoint_whose_shard_changed_is_refused(tmp_path):
    """A sharded directory's files are checked against the digests written beside them (the
    writer trainer=fsdp uses, `write_digests`); a directory whose record is intact reads."""
    import torch
    import torch.distributed.checkpoint as dcp

    from zoo.config.errors import CheckpointError
    from zoo.training.checkpoint.files import read_checkpoint
    from zoo.training.checkpoint.integrity import write_digests

    directory = tmp_path / "last.ckpt"
    dcp.save({"state_dict": {"w": torch.arange(64, dtype=torch.float32)}}, checkpoint_id=str(directory), no_dist=True)
    torch.save({"hyper_parameters": {"model": {}, "task": {}}, "global_step": 3}, directory / "meta.pt")
    write_digests(directory)
    assert read_checkpoint(directory)["state_dict"]["w"].sum() == 2016
    shard = next(p for p in directory.iterdir() if p.suffix == ".distcp")
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=rf"is damaged: {shard.name} does not match the SHA-256"):
        read_checkpoint(directory, weights=False)


def _sharded(directory: Path) -> Path:
    """A sharded checkpoint as trainer=fsdp writes one: shards, meta.pt carrying the record of
    its checks, then the digests of its files."""
    import torch
    import torch.distributed.checkpoint as dcp

    from zoo.training.checkpoint.integrity import with_record, write_digests

    dcp.save({"state_dict": {"w": torch.arange(64, dtype=torch.float32)}}, checkpoint_id=str(directory), no_dist=True)
    meta = with_record({"hyper_parameters": {"model": {}, "task": {}}, "global_step": 3}, sharded=True)
    torch.save(meta, directory / "meta.pt")
    write_digests(directory)
    return directory


def test_a_sharded_checkpoint_whose_digests_were_removed_is_refused(tmp_path):
    """Deleting zoo-digests.json used to switch the check off (a changed shard then loaded);
    meta.pt says the directory was written with it, so its absence is refused."""
    from zoo.config.errors import CheckpointError
    from zoo.training.checkpoint.files import read_checkpoint
    from zoo.training.checkpoint.integrity import DIGESTS

    directory = _sharded(tmp_path / "last.ckpt")
    assert read_checkpoint(directory)["state_dict"]["w"].sum() == 2016
    shard = next(p for p in directory.iterdir() if p.suffix == ".distcp")
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    (directory / DIGESTS).unlink()
    for weights in (False, True):
        with pytest.raises(CheckpointError, match=rf"is damaged: its {DIGESTS}, written with it, is missing"):
            read_checkpoint(directory, weights=weights)
    zero_crcs(directory / "meta.pt")  # what says so is itself checked
    with pytest.raises(CheckpointError, match=rf"is damaged: its {DIGESTS}, written with it, is missing"):
        read_checkpoint(directory, weights=False)


def test_a_checkpoint_written_without_the_record_is_read_as_before(finished, tmp_path, cli_here):
    """A checkpoint from before the record (or another program) with no CRCs still evaluates."""
    import torch

    from zoo.training.checkpoint.integrity import RECORD

    run, _ = finished
    data = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert data[RECORD] == {"crc32": True}
    del data[RECORD]
    old = tmp_path / "old.ckpt"
    torch.save(data, old)
    assert cli_here("eval", f"ckpt={zero_crcs(old)}").returncode == 0


def test_a_resume_whose_data_file_changed_is_refused(finished, tmp_path, cli_here):
    run, corpus = finished
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    kept = [copy / "metrics.csv", copy / "summary.json", copy / "checkpoints" / "last.ckpt"]
    before = [p.read_bytes() for p in kept]
    undo = _edit(corpus)
    try:
        result = cli_here("train", *_overrides(corpus), "trainer.max_steps=6", f"hydra.run.dir={copy}")
    finally:
        undo()
    _one_line(result, f"data.path file {corpus} changed", "since the checkpoint", "data.allow_changed_files=true")
    assert [p.read_bytes() for p in kept] == before and not (copy / "failed.json").exists()


def _edit(corpus: Path):
    """Add a line to the file the checkpoint recorded, as between a kill and its resume;
    returns the undo."""
    original = corpus.read_bytes()
    corpus.write_bytes(original + b"a line added between the kill and the resume\n")
    return lambda: corpus.write_bytes(original)


def test_a_resume_on_a_changed_data_file_is_allowed_by_its_key_and_recorded(finished, tmp_path, cli_here):
    run, corpus = finished
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    undo = _edit(corpus)
    try:
        result = cli_here(
            "train",
            *_overrides(corpus),
            "trainer.max_steps=6",
            "data.allow_changed_files=true",
            f"hydra.run.dir={copy}",
        )
    finally:
        undo()
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((copy / "summary.json").read_text())
    assert summary["global_step"] == 6
    (change,) = summary["data_files_changed"]
    assert change["path"] == str(corpus) and change["resumed_at_step"] == 3
    assert change["was"]["size"] < change["now"]["size"]
