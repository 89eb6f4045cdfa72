"""Verse classification: which testament of the King James Bible a verse comes from
("old": Genesis-Malachi, "new": Matthew-Revelation). About 3:1 old:new, so a majority-class
baseline scores about 0.74 accuracy."""

from __future__ import annotations

from zoo.data.corpora.kjv import load_kjv


def load_testament():
    """Dataset of verses; columns text, label ("old"/"new")."""
    kjv = load_kjv()
    return kjv.select_columns(["text", "testament"]).rename_column("testament", "label")
