"""ComfyUI's official web frontend (comfyui-frontend-package) served by kiln, in headless Chromium over the
DevTools protocol, with the official FLUX.2 [klein] text-to-image template from comfyui-workflow-templates:

  - the frontend loads from kiln with no JavaScript exception, no console.error and no failed request to kiln
    beyond the optional files every fresh ComfyUI also lacks (user.css, userdata/user.css, comfy.templates.json,
    workflows/.index.json, the not-yet-created workflows/ and subgraphs/ listings); requests to other hosts (api.comfy.org) are not
    kiln's and are ignored (the test machine has no network);
  - the template is loaded as the frontend loads it (app.loadGraphData), its two subgraphs (base and distilled)
    both enabled, sizes set to 64x64 and 1 step; the API-format export (app.graphToPrompt) is written out;
  - it is queued with the Run command; the images appear on the canvas (each SaveImage node's image loaded, 64
    wide), in the job queue overlay and in the assets sidebar;
  - a setting set through the frontend survives a reload; a workflow saved through the frontend appears in the
    workflows sidebar (and in user/default/workflows/).
Screenshots go to SHOT_DIR.

usage: frontend_chromium.py KILN_URL TEMPLATE_JSON SHOT_DIR API_EXPORT_OUT USER_DIR
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp_browser import Browser  # noqa: E402

kiln, template_file, shots, export_out, user_dir = sys.argv[1:6]
os.makedirs(shots, exist_ok=True)
ALLOWED_404 = ("/user.css", "/api/userdata/user.css", "/api/userdata/comfy.templates.json",
               "/api/userdata/workflows%2F.index.json", "/api/userdata?dir=workflows&", "/api/userdata?dir=subgraphs&")

with open(template_file) as f:
    wf = json.load(f)
for n in wf["nodes"]:
    n["mode"] = 0  # the template ships with the distilled subgraph muted: run both
for sg in wf["definitions"]["subgraphs"]:
    for n in sg["nodes"]:
        if n["type"] == "PrimitiveInt":
            n["widgets_values"][0] = 64
        if n["type"] == "Flux2Scheduler":
            n["widgets_values"][0] = 1

b = Browser()
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def kiln_errors():
    bad = []
    for e in b.errors():
        if e.startswith("log: ") and "beforeunload" in e:
            continue  # Chromium's own notice about the test's reload of a page with an unsaved workflow
        if e.startswith("log: ") and " http" in e:
            url = e.rsplit(" ", 1)[-1]
            if not url.startswith(kiln):
                continue  # another host (no network here)
            path = url[len(kiln):]
            if "404" in e and any(path.startswith(a) for a in ALLOWED_404):
                continue
        bad.append(e)
    return bad


def open_frontend():
    b.call("Page.navigate", url=kiln + "/")
    b.wait("window.app && window.app.graph && window.app.extensionManager && document.querySelector('canvas') && 1",
           180, "the frontend's app")
    time.sleep(1)
    b.call("Input.dispatchKeyEvent", type="keyDown", key="Escape", code="Escape", windowsVirtualKeyCode=27)
    b.call("Input.dispatchKeyEvent", type="keyUp", key="Escape", code="Escape", windowsVirtualKeyCode=27)
    time.sleep(0.5)


try:
    b.call("Runtime.enable")
    b.call("Log.enable")
    b.call("Page.enable")
    open_frontend()
    b.shot(f"{shots}/1-loaded.png")
    check(b.js("app.loadGraphData(%s).then(() => true)" % json.dumps(wf), True), "template loaded (loadGraphData)")
    time.sleep(1)
    prompt = json.loads(b.js("app.graphToPrompt().then(p => JSON.stringify(p.output))", True))
    with open(export_out, "w") as f:
        json.dump(prompt, f, indent=1, sort_keys=True)
        f.write("\n")
    classes = sorted({n["class_type"] for n in prompt.values()})
    check("SaveImage" in classes and "PrimitiveInt" in classes and sum(c["class_type"] == "SaveImage" for c in prompt.values()) == 2,
          f"API export has both subgraphs' outputs ({len(prompt)} nodes: {classes})")
    b.js("app.extensionManager.command.execute('Comfy.QueuePrompt').then(() => true)", True)
    saves = b.js("JSON.stringify(app.graph.nodes.filter(n => n.type == 'SaveImage').map(n => n.id))")
    b.wait("(() => { const s = app.graph.nodes.filter(n => n.type == 'SaveImage');"
           " return s.length == 2 && s.every(n => n.imgs && n.imgs.length && n.imgs[0].complete && n.imgs[0].naturalWidth == 64) })()",
           600, "both SaveImage nodes showing their 64x64 image")
    check(True, f"images on the canvas (SaveImage nodes {saves})")
    b.shot(f"{shots}/2-canvas.png")
    view_img = "(() => Array.from(document.querySelectorAll('img')).filter(i => /Flux2-Klein_\\d+_\\.png/.test(decodeURIComponent(i.src)) && i.complete && i.naturalWidth > 0).length)()"
    b.js("app.extensionManager.command.execute('Comfy.Queue.ToggleOverlay').then(() => true)", True)
    try:
        n = b.wait(view_img, 60, "an output image in the job queue overlay")
        check(n >= 1, f"image in the job queue overlay ({n} img)")
    except AssertionError as e:
        check(False, str(e))
    b.shot(f"{shots}/3-queue.png")
    b.js("app.extensionManager.command.execute('Comfy.Queue.ToggleOverlay').then(() => true)", True)
    b.js("app.extensionManager.command.execute('Workspace.ToggleSidebarTab.assets').then(() => true)", True)
    try:
        n = b.wait(view_img, 60, "an output image in the assets sidebar")
        check(n >= 1, f"image in the assets sidebar ({n} img)")
    except AssertionError as e:
        check(False, str(e))
    b.shot(f"{shots}/4-assets.png")

    # settings survive a reload; a saved workflow shows in the workflows sidebar
    b.js("app.extensionManager.setting.set('Comfy.Graph.ZoomSpeed', 1.37).then(() => true)", True)
    b.js("(() => { const w = app.extensionManager.workflow; const n = w.saveAs(w.activeWorkflow, 'workflows/kiln-saved.json');"
         " return w.saveWorkflow(n).then(() => true) })()", True)
    errors_before_reload = kiln_errors()
    b.events.clear()
    open_frontend()
    check(b.js("app.extensionManager.setting.get('Comfy.Graph.ZoomSpeed')") == 1.37, "a setting survives a reload")
    check(os.path.exists(os.path.join(user_dir, "default", "workflows", "kiln-saved.json")),
          "the saved workflow is in user/default/workflows/")
    b.js("app.extensionManager.command.execute('Workspace.ToggleSidebarTab.workflows').then(() => true)", True)
    try:
        b.wait("document.body.innerText.includes('kiln-saved')", 60, "kiln-saved in the workflows sidebar")
        check(True, "the saved workflow appears in the workflows sidebar")
    except AssertionError as e:
        check(False, str(e))
    b.shot(f"{shots}/5-workflows.png")
    errs = errors_before_reload + kiln_errors()
    check(not errs, "no console errors" + ("" if not errs else ": " + "; ".join(errs[:8])))
finally:
    b.close()
if failures:
    sys.exit(f"FAIL: {len(failures)} check(s): {failures}")
print("frontend_chromium: all checks passed")
