#!/usr/bin/env python3
"""A ComfyUI workflow file (the frontend's format, as comfyui-workflow-templates ships it) as the API-format
prompt the official frontend's graphToPrompt sends to POST /prompt, for tests that run templates unmodified
without a browser (serve_frontend_chromium.sh checks the real frontend's export of the klein template).

    python3 workflow_api.py WORKFLOW.json http://127.0.0.1:PORT > prompt.json

The rules (the frontend's, read from its behaviour on the templates): widget values fill a node's widget inputs
in /object_info's input order, skipping the control_after_generate value that follows a seed; a linked input is
[source_id, slot]; nodes in mode 2 (muted) or 4 (bypassed) and virtual nodes (notes, reroutes) are
left out, a bypassed node passing its same-typed input through; a subgraph instance is expanded with ids
"outer:inner", its inputs (links or the instance's own widget values) wired to the inner nodes, its outputs
resolved to the inner node that feeds them, its node ids made unique as the frontend makes them on load.
"""
import json
import sys
import urllib.request

CONTROL = {"fixed", "increment", "decrement", "randomize"}
WIDGET_TYPES = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}
VIRTUAL = {"Note", "MarkdownNote", "Reroute", "PrimitiveNode"}  # frontend-only nodes, never sent


def is_widget(spec):
    t = spec[0]
    return isinstance(t, list) or t in WIDGET_TYPES


def widget_names(info):
    order = info.get("input_order") or {}
    names = []
    for part in ("required", "optional"):
        specs = info["input"].get(part, {})
        for name in order.get(part, list(specs)):
            if name in specs and is_widget(specs[name]):
                names.append(name)
    return names


def norm_links(links):
    out = {}
    for l in links:
        if isinstance(l, list):
            out[l[0]] = {"origin_id": l[1], "origin_slot": l[2], "target_id": l[3], "target_slot": l[4]}
        else:
            out[l["id"]] = l
    return out


class Converter:
    def __init__(self, workflow, object_info):
        self.info = object_info
        defs = workflow.get("definitions", {}).get("subgraphs", [])
        self.subgraphs = {s["id"]: s for s in defs}
        self.prompt = {}
        # the frontend, loading a workflow, gives a subgraph's node a fresh id (last_node_id + 1, in definition
        # order) when the id is taken by the root graph or an earlier definition; the API ids follow
        used = {n["id"] for n in workflow["nodes"]}
        last = max([workflow.get("last_node_id") or 0] + list(used))
        for sg in defs:
            remap = {}
            for n in sg["nodes"]:
                if n["id"] in used:
                    last += 1
                    remap[n["id"]] = last
                    n["id"] = last
                used.add(n["id"])
            for l in sg["links"]:
                l["origin_id"] = remap.get(l["origin_id"], l["origin_id"])
                l["target_id"] = remap.get(l["target_id"], l["target_id"])

    def level(self, nodes, links, prefix, outer_inputs):
        return {"nodes": {n["id"]: n for n in nodes}, "links": norm_links(links), "prefix": prefix,
                "outer": outer_inputs}

    def resolve(self, lv, link_id):
        """The source of a link: ("link", [id, slot]), ("value", v), or None (cut)."""
        l = lv["links"].get(link_id)
        if l is None:
            return None
        oid, slot = l["origin_id"], l["origin_slot"]
        if oid == -10:  # the subgraph's input node
            return lv["outer"][slot]
        n = lv["nodes"].get(oid)
        if n is None or n.get("mode", 0) == 2:
            return None
        if n.get("mode", 0) == 4 or n["type"] == "Reroute":  # pass the same-typed input through
            otype = n["outputs"][slot]["type"] if n.get("outputs") else None
            for i in n.get("inputs", []):
                if i.get("link") is not None and (n["type"] == "Reroute" or i.get("type") == otype):
                    return self.resolve(lv, i["link"])
            return None
        if n["type"] in self.subgraphs:
            inner = self.instance_level(lv, n)
            sg = self.subgraphs[n["type"]]
            return self.resolve(inner, sg["outputs"][slot]["linkIds"][0])
        return ("link", [lv["prefix"] + str(oid), slot])

    def instance_level(self, lv, n):
        sg = self.subgraphs[n["type"]]
        values = list(n.get("widgets_values") or [])
        by_name = {i["name"]: i for i in n.get("inputs", [])}
        outer = []
        k = 0
        for si in sg["inputs"]:  # the instance's widget values are its widget-typed inputs', in order
            entry = by_name.get(si["name"])
            src = None
            if entry is not None and entry.get("link") is not None:
                src = self.resolve(lv, entry["link"])
            if si.get("type") in WIDGET_TYPES:
                if src is None and k < len(values):
                    src = ("value", values[k])
                k += 1
                if si["type"] == "INT" and k < len(values) and isinstance(values[k], str) and values[k] in CONTROL:
                    k += 1
            outer.append(src)
        return self.level(sg["nodes"], sg["links"], lv["prefix"] + str(n["id"]) + ":", outer)

    def emit(self, lv):
        for n in lv["nodes"].values():
            if n.get("mode", 0) in (2, 4):
                continue
            if n["type"] in self.subgraphs:
                self.emit(self.instance_level(lv, n))
                continue
            if n["type"] in VIRTUAL:
                continue
            info = self.info.get(n["type"]) or {"input": {}}  # a class the server lacks: its links only
            inputs = {}
            values = list(n.get("widgets_values") or []) if isinstance(n.get("widgets_values"), list) else []
            k = 0
            for name in widget_names(info):
                if k >= len(values):
                    break
                inputs[name] = values[k]
                k += 1
                if k < len(values) and isinstance(values[k], str) and values[k] in CONTROL and name in (
                        "seed", "noise_seed"):
                    k += 1
            for i in n.get("inputs", []):
                if i.get("link") is None:
                    continue
                src = self.resolve(lv, i["link"])
                if src is not None:  # else (a subgraph widget nobody set): the node's own widget value
                    inputs[i["name"]] = src[1]
            self.prompt[lv["prefix"] + str(n["id"])] = {"class_type": n["type"], "inputs": inputs}

    def run(self, workflow):
        self.emit(self.level(workflow["nodes"], workflow["links"], "", []))
        return self.prompt


def main():
    workflow = json.load(open(sys.argv[1]))
    with urllib.request.urlopen(sys.argv[2].rstrip("/") + "/object_info", timeout=30) as r:
        info = json.load(r)
    json.dump(Converter(workflow, info).run(workflow), sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
