"""Folded stacks (py-spy's ``raw`` format: ``frame;frame;frame count`` a line) to a self-contained HTML flame
graph, or to speedscope's JSON. No network, no external script: the page carries its data and its code.

The HTML draws the call tree with the root at the top (an icicle): a frame's width is its share of the
samples; clicking one zooms to it, the search box marks every frame whose name matches, hovering shows the
frame, its samples and its share.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field

MAX_LINES = 1_000_000
MAX_DEPTH = 512


class ProfileError(ValueError):
    """The profile cannot be read; says which line and why."""


@dataclass
class Frame:
    name: str
    value: int = 0
    children: dict[str, Frame] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"n": self.name, "v": self.value, "c": [c.to_json() for c in self.children.values()]}


def parse_folded(text: str) -> Frame:
    """The call tree of folded stacks; every stack's count adds to each frame on its way."""
    root = Frame("all")
    for number, line in enumerate(text.splitlines(), 1):
        if number > MAX_LINES:
            raise ProfileError(f"over {MAX_LINES} lines: not a profile py-spy writes")
        line = line.strip()
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        try:
            n = int(count)
        except ValueError:
            raise ProfileError(f"line {number}: no sample count at its end: {line[:80]!r}") from None
        if n < 0:
            raise ProfileError(f"line {number}: expected 'frame;frame;... COUNT', got {line[:80]!r}")
        node = root
        root.value += n
        if not stack:  # samples of a thread with no Python frame (py-spy writes " COUNT"): the root's alone
            continue
        frames = stack.split(";")[:MAX_DEPTH]
        for name in frames:
            node = node.children.setdefault(name, Frame(name))
            node.value += n
    return root


def speedscope(text: str, name: str) -> dict:
    """The profile in speedscope's file format (one sampled profile; weights are sample counts)."""
    frames: list[dict] = []
    index: dict[str, int] = {}
    samples, weights = [], []
    for line in text.splitlines():
        stack, _, count = line.strip().rpartition(" ")
        if not stack:
            continue
        ids = []
        for frame in stack.split(";")[:MAX_DEPTH]:
            if frame not in index:
                index[frame] = len(frames)
                frames.append({"name": frame})
            ids.append(index[frame])
        samples.append(ids)
        weights.append(int(count))
    return {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": frames},
        "profiles": [
            {
                "type": "sampled",
                "name": name,
                "unit": "none",
                "startValue": 0,
                "endValue": sum(weights),
                "samples": samples,
                "weights": weights,
            }
        ],
        "name": name,
        "exporter": "myoloctl profile",
    }


def flamegraph_html(text: str, title: str) -> str:
    """A self-contained HTML page of the folded stacks ``text``."""
    tree = parse_folded(text)
    data = json.dumps(tree.to_json(), separators=(",", ":")).replace("</", "<\\/")
    return _PAGE.replace("__TITLE__", html.escape(title)).replace("__DATA__", data)


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
body{font:12px/1.3 system-ui,sans-serif;margin:12px;color:#222}
#bar{display:flex;gap:12px;align-items:center;margin-bottom:8px}
#graph{position:relative;width:100%}
.f{position:absolute;height:17px;box-sizing:border-box;border:1px solid #fff;overflow:hidden;white-space:nowrap;
 padding:0 3px;cursor:pointer;border-radius:2px}
.f.hit{background:#e05ad4 !important;color:#fff}
#info{min-height:1.3em;font-family:monospace}
</style></head><body>
<div id="bar"><strong>__TITLE__</strong><input id="q" placeholder="search frames" size="30">
<button id="reset">reset zoom</button><span id="total"></span></div>
<div id="info"></div><div id="graph"></div>
<script>
const root=__DATA__;
const graph=document.getElementById("graph"),info=document.getElementById("info"),q=document.getElementById("q");
document.getElementById("total").textContent=root.v+" samples";
let focus=root;
function color(name){let h=0;for(const c of name)h=(h*31+c.charCodeAt(0))>>>0;
 return "hsl("+(20+h%40)+","+(60+h%30)+"%,"+(60+h%15)+"%)";}
function draw(){graph.innerHTML="";const W=graph.clientWidth||1000;let rows=0;
 const term=q.value.toLowerCase();
 function place(node,x,depth,width){if(width<1)return;rows=Math.max(rows,depth+1);
  const d=document.createElement("div");d.className="f";d.style.left=x+"px";d.style.top=(depth*18)+"px";
  d.style.width=width+"px";d.style.background=color(node.n);d.textContent=width>30?node.n:"";
  if(term&&node.n.toLowerCase().includes(term))d.classList.add("hit");
  d.title=node.n+"\\n"+node.v+" samples ("+(100*node.v/root.v).toFixed(2)+" %)";
  d.onmouseover=()=>{info.textContent=d.title.replace("\\n"," | ");};
  d.onclick=()=>{focus=node;draw();};graph.appendChild(d);let cx=x;
  for(const c of node.c){const w=width*c.v/node.v;place(c,cx,depth+1,w);cx+=w;}}
 place(focus,0,0,W);graph.style.height=(rows*18+4)+"px";}
q.oninput=draw;document.getElementById("reset").onclick=()=>{focus=root;draw();};
window.onresize=draw;draw();
</script></body></html>
"""
