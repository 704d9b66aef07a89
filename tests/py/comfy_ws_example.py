"""A client written the way ComfyUI's own API examples are (script_examples/websockets_api_example.py and
websockets_api_example_ws_images.py), run against kiln RUNS times in a row; any failure fails the test.

Each run: open /ws?clientId=..., queue the graph with that client_id, read messages until `executing` with
node None for our prompt_id, then (a) read /history/{prompt_id} and fetch every image through /view - the
history must already hold the job when that message arrives; or (b) the SaveImageWebsocket variant: the PNG
comes as binary frames (8-byte header: event 1, format 2) while that node is executing, nothing from /history.

usage: comfy_ws_example.py KILN_URL GRAPH_JSON RUNS
"""
import json
import struct
import sys
import time
import urllib.parse
import urllib.request
import uuid

import websocket

server, graph_file, runs = sys.argv[1].replace("http://", ""), sys.argv[2], int(sys.argv[3])
with open(graph_file) as f:
    base = json.load(f)


def queue_prompt(prompt, client_id):
    data = json.dumps({"prompt": prompt, "client_id": client_id}).encode("utf-8")
    req = urllib.request.Request(f"http://{server}/prompt", data=data)
    return json.loads(urllib.request.urlopen(req).read())


def get_image(filename, subfolder, folder_type):
    q = urllib.parse.urlencode({"filename": filename, "subfolder": subfolder, "type": folder_type})
    with urllib.request.urlopen(f"http://{server}/view?{q}") as response:
        return response.read()


def get_history(prompt_id):
    with urllib.request.urlopen(f"http://{server}/history/{prompt_id}") as response:
        return json.loads(response.read())


def wait_done(ws, prompt_id, ws_node=None):
    frames, current, order = [], None, []
    while True:
        out = ws.recv()
        if isinstance(out, str):
            message = json.loads(out)
            order.append(message["type"])
            if message["type"] == "executing":
                data = message["data"]
                if data["prompt_id"] == prompt_id:
                    if data["node"] is None:
                        return frames, order
                    current = data["node"]
        elif ws_node is not None and current == ws_node:
            frames.append(out)


def history_images(ws, prompt):
    client_id = str(uuid.uuid4())
    ws.connect(f"ws://{server}/ws?clientId={client_id}")
    prompt_id = queue_prompt(prompt, client_id)["prompt_id"]
    _, order = wait_done(ws, prompt_id)
    assert "execution_success" in order, order
    history = get_history(prompt_id)[prompt_id]  # KeyError here is the race the example hits
    images = []
    for node_id, node_output in history["outputs"].items():
        for image in node_output.get("images", []):
            images.append(get_image(image["filename"], image["subfolder"], image["type"]))
    ws.close()
    return images


def websocket_images(ws, prompt, node):
    client_id = str(uuid.uuid4())
    ws.connect(f"ws://{server}/ws?clientId={client_id}")
    prompt_id = queue_prompt(prompt, client_id)["prompt_id"]
    frames, _ = wait_done(ws, prompt_id, node)
    ws.close()
    return frames


t0 = time.time()
for i in range(runs):
    prompt = json.loads(json.dumps(base))
    prompt["75:73"]["inputs"]["noise_seed"] = i
    ws = websocket.WebSocket()
    ws.settimeout(60)
    if i % 2 == 0:
        images = history_images(ws, prompt)
        assert len(images) == 1 and images[0][:8] == b"\x89PNG\r\n\x1a\n", f"run {i}: {len(images)} images"
    else:
        images_in = prompt["9"]["inputs"]["images"]
        del prompt["9"]
        prompt["save_image_websocket_node"] = {"class_type": "SaveImageWebsocket", "inputs": {"images": images_in}}
        frames = websocket_images(ws, prompt, "save_image_websocket_node")
        assert len(frames) == 1, f"run {i}: {len(frames)} frames"
        event, fmt = struct.unpack(">II", frames[0][:8])
        assert (event, fmt) == (1, 2) and frames[0][8:16] == b"\x89PNG\r\n\x1a\n", f"run {i}: header {event} {fmt}"
        assert struct.unpack(">II", frames[0][24:32]) == (64, 64), f"run {i}: size"
print(f"comfy_ws_example: {runs} runs ok ({runs - runs // 2} /history+/view, {runs // 2} SaveImageWebsocket) "
      f"in {time.time() - t0:.1f} s")
