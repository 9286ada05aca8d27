"""Folded stacks to a self-contained flame graph and to speedscope's format, and hostile profiles refused naming
the line."""

from __future__ import annotations

import json
import re

import pytest

from myolo.coordinator.profiling.flamegraph import ProfileError, flamegraph_html, parse_folded, speedscope

FOLDED = """<module> (train.py:9);run (loop.py:181);train_step (loop.py:93);forward (model.py:40) 30
<module> (train.py:9);run (loop.py:181);train_step (loop.py:93);backward (autograd.py:12) 50
<module> (train.py:9);run (loop.py:181);optimizer_step (loop.py:120) 20
"""


def test_the_call_tree_adds_each_stacks_samples_to_every_frame_on_its_way() -> None:
    root = parse_folded(FOLDED)
    assert root.value == 100
    run = root.children["<module> (train.py:9)"].children["run (loop.py:181)"]
    assert run.value == 100 and run.children["train_step (loop.py:93)"].value == 80
    assert run.children["optimizer_step (loop.py:120)"].value == 20


def test_the_flame_graph_page_carries_its_data_and_code_and_nothing_from_outside() -> None:
    page = flamegraph_html(FOLDED, "job j rank 0 </script>")
    assert page.startswith("<!doctype html>") and "train_step (loop.py:93)" in page
    assert "</script>" not in page.split("<script>", 1)[1].split("</script>")[0]  # the title cannot end it
    assert "&lt;/script&gt;" in page
    assert not re.search(r"(src|href)=\"https?://", page)  # self-contained
    data = json.loads(page.split("const root=", 1)[1].split(";\n", 1)[0])
    assert data["v"] == 100 and data["c"][0]["n"] == "<module> (train.py:9)"


def test_speedscope_has_one_sampled_profile_with_the_frames_shared() -> None:
    doc = speedscope(FOLDED, "p")
    frames = [f["name"] for f in doc["shared"]["frames"]]
    assert frames.count("run (loop.py:181)") == 1 and len(frames) == 6
    (prof,) = doc["profiles"]
    assert prof["type"] == "sampled" and prof["weights"] == [30, 50, 20] and prof["endValue"] == 100
    assert [frames[i] for i in prof["samples"][1]][-1] == "backward (autograd.py:12)"


def test_samples_without_a_python_frame_count_at_the_root_only() -> None:
    root = parse_folded(FOLDED + " 7\n")  # py-spy writes a thread with no Python frame so
    assert root.value == 107 and set(root.children) == {"<module> (train.py:9)"}
    assert "train_step" in flamegraph_html(FOLDED + " 7\n", "t")


@pytest.mark.parametrize("bad", ["a;b", "a;b x", "a;b -3", "a;b 1.5"])
def test_a_profile_that_does_not_read_names_the_line(bad: str) -> None:
    with pytest.raises(ProfileError, match="line 2"):
        parse_folded("ok;fine 1\n" + bad)
