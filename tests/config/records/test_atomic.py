"""Records written whole or not at all (zoo.config.records.atomic): a process killed while writing
leaves the previous record; a link planted at a record's name is not written through; the file
gets the umask's permissions; an error while writing keeps the old record."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zoo.config.records.atomic import replacing, write_text

ROOT = Path(__file__).resolve().parents[3]


def test_a_kill_during_the_write_leaves_the_previous_record(tmp_path):
    target = tmp_path / "summary.json"
    target.write_text('{"old": true}\n')
    # 400 MB of text: the kill lands while the temporary file is being filled
    script = "import sys; from zoo.config.records.atomic import write_text; write_text(sys.argv[1], 'x' * (400 << 20))"
    proc = subprocess.Popen([sys.executable, "-c", script, str(target)], cwd=ROOT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        temps = list(tmp_path.glob(".summary.json.*.tmp"))
        if temps and temps[0].stat().st_size > 0:
            break
        assert proc.poll() is None, "the writer ended before it could be stopped"
        time.sleep(0.005)
    else:
        pytest.fail("no temporary file appeared")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert target.read_text() == '{"old": true}\n'
    write_text(target, '{"new": true}\n')
    assert target.read_text() == '{"new": true}\n'


def test_an_error_while_writing_keeps_the_record_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "report.md"
    target.write_text("the last report\n")
    with pytest.raises(RuntimeError):
        with replacing(target) as handle:
            handle.write("half a rep")
            raise RuntimeError("the table could not be made")
    assert target.read_text() == "the last report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


def test_a_link_planted_at_the_record_is_refused_and_its_target_kept(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("someone's file\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "failed.json").symlink_to(outside)
    with pytest.raises(OSError, match="symbolic link"):
        write_text(run / "failed.json", "{}")
    assert outside.read_text() == "someone's file\n"


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_the_record_has_the_permissions_of_the_umask(tmp_path, umask, mode):
    script = (
        f"import os, sys; os.umask({umask}); from zoo.config.records.atomic import write_text; "
        f"write_text(sys.argv[1], 'x')"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "r.json")], cwd=ROOT, check=True, timeout=60)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == mode


def test_every_record_writer_goes_through_the_atomic_writer():
    """No module of zoo writes a record with Path.write_text or open(..., 'w') on its target.
    Left out: the CSV logger (it appends rows), the modules that write a temporary file of their
    own and rename it (cache digests, prepared shards), and the pictures
    zoo-generate draws at the user's path."""
    import re

    allowed = {
        "zoo/config/records/atomic.py",
        "zoo/training/tracking/loggers.py",
        "zoo/data/integrity.py",
        "zoo/data/prepared.py",
        "zoo/models/visualize.py",
    }
    found = []
    for path in sorted((ROOT / "zoo").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in allowed:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\.write_text\(|\.open\([\"']w|savefig\(path", line):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert found == []
