"""The run directory's files and records (`rundir`: names, summary.json, failed.json) and
writing them whole or not at all (`atomic`), and never through a link out of a run or sweep
directory (`links`)."""
