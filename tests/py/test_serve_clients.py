"""Real clients against a running `kiln serve` (started by tests/cli/serve_clients.sh with the tiny model):
Python's `openai` package (b64_json and url), a websocket client following ComfyUI's message sequence for a
queued graph, auth with the bearer token, determinism, and concurrent submitters (no lost or duplicated job).

Environment: KILN_URL (http://127.0.0.1:PORT), KILN_TOKEN, KILN_SOURCE_DIR.
"""
import base64
import concurrent.futures
import copy
import json
import os
import struct
import time
import uuid

import openai
import pytest
import requests
import websocket

URL = os.environ["KILN_URL"]
TOKEN = os.environ["KILN_TOKEN"]
SRC = os.environ["KILN_SOURCE_DIR"]
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:16]
    return struct.unpack(">II", data[16:24])


def template(width=64, height=64, steps=2, seed=1, prefix="py/t"):
    with open(os.path.join(SRC, "tests/data/graphs/flux2_klein_t2i_template_api.json")) as f:
        g = json.load(f)
    g["75:66"]["inputs"].update(width=width, height=height)
    g["75:62"]["inputs"].update(width=width, height=height, steps=steps)
    g["75:73"]["inputs"]["noise_seed"] = seed
    g["9"]["inputs"]["filename_prefix"] = prefix
    return g


def submit(graph, client_id=None):
    r = requests.post(f"{URL}/prompt", json={"prompt": graph, "client_id": client_id}, headers=AUTH, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["prompt_id"]


def wait(pid, timeout=120):
    t = time.time()
    while time.time() - t < timeout:
        h = requests.get(f"{URL}/history/{pid}", headers=AUTH, timeout=30).json()
        if h:
            assert h[pid]["status"]["status_str"] == "success", h[pid]["status"]["messages"][-1]
            return h[pid]
        time.sleep(0.05)
    raise AssertionError(f"{pid} did not finish")


def client():
    return openai.OpenAI(base_url=f"{URL}/v1", api_key=TOKEN, max_retries=0, timeout=120)


def test_openai_b64_json():
    r = client().images.generate(model="flux-2-klein-4b.safetensors", prompt="a red fox", size="64x64", n=2,
                                 response_format="b64_json", extra_body={"num_inference_steps": 2, "seed": 7})
    assert len(r.data) == 2
    for d in r.data:
        assert png_size(base64.b64decode(d.b64_json)) == (64, 64)
    assert r.created > 1_600_000_000


def test_openai_url():
    r = client().images.generate(prompt="a lighthouse", size="80x64", response_format="url",
                                 extra_body={"num_inference_steps": 1, "seed": 3})
    assert len(r.data) == 1 and r.data[0].url.startswith("http://")
    img = requests.get(r.data[0].url, headers=AUTH, timeout=30)
    assert img.status_code == 200 and png_size(img.content) == (80, 64)


def test_openai_extensions_and_timings():
    r = requests.post(f"{URL}/v1/images/generations", headers=AUTH, timeout=120,
                      json={"prompt": "x", "size": "64x64", "num_inference_steps": 1, "seed": 1})
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["inference_time_s"] > 0 and j["peak_memory_mb"] > 0
    assert png_size(base64.b64decode(j["data"][0]["b64_json"])) == (64, 64)


def test_openai_errors():
    with pytest.raises(openai.BadRequestError) as e:
        client().images.generate(prompt="x", size="64x64", n=0)
    assert e.value.status_code == 400 and e.value.body["param"] == "n"
    with pytest.raises(openai.BadRequestError):
        client().images.generate(prompt="x", size="huge")
    bad = openai.OpenAI(base_url=f"{URL}/v1", api_key="wrong-" + TOKEN, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.images.generate(prompt="x", size="64x64")
    models = client().models.list()
    # the model ids kiln detects from the files come first, then the files themselves (docs/server.md)
    assert [m.id for m in models.data] == ["flux.2-klein-4b", "flux-2-klein-4b.safetensors"]


def test_websocket_message_sequence():
    cid = str(uuid.uuid4())
    ws = websocket.create_connection(f"{URL.replace('http', 'ws')}/ws?clientId={cid}", header=AUTH, timeout=60)
    first = json.loads(ws.recv())
    assert first["type"] == "status" and first["data"]["sid"] == cid
    assert "queue_remaining" in first["data"]["status"]["exec_info"]
    pid = submit(template(steps=3, prefix="py/ws"), client_id=cid)
    seen = []
    while True:
        msg = ws.recv()
        if isinstance(msg, bytes):
            continue  # previews
        m = json.loads(msg)
        if m["type"] == "status":
            continue
        assert m["data"]["prompt_id"] == pid, m
        seen.append(m)
        if m["type"] == "executing" and m["data"]["node"] is None:
            break
    ws.close()
    types = [m["type"] for m in seen]
    assert types[:2] == ["execution_start", "execution_cached"], types
    # ComfyUI's order: execution_success, then (history committed) executing null = prompt done
    assert types[-2:] == ["execution_success", "executing"], types
    assert seen[-1]["data"]["node"] is None
    progress = [m["data"] for m in seen if m["type"] == "progress"]
    assert [p["value"] for p in progress] == [1, 2, 3] and all(p["max"] == 3 for p in progress)
    assert all(p["node"] == "75:64" for p in progress)  # reported on the sampler node
    executing = [m["data"]["node"] for m in seen if m["type"] == "executing"][:-1]  # without the final null
    assert len(executing) == 13 and executing[-1] == "9" and len(set(executing)) == 13
    executed = [m["data"] for m in seen if m["type"] == "executed"]
    assert len(executed) == 1 and executed[0]["node"] == "9"
    assert executed[0]["output"]["images"][0]["subfolder"] == "py"
    h = wait(pid)
    assert h["outputs"]["9"] == executed[0]["output"]


def test_determinism_same_graph_same_bytes():
    a = wait(submit(template(seed=11, prefix="py/det")))
    b = wait(submit(template(seed=11, prefix="py/det")))
    fa, fb = a["outputs"]["9"]["images"][0], b["outputs"]["9"]["images"][0]
    assert fa["filename"] != fb["filename"]
    ga = requests.get(f"{URL}/view", params=fa, headers=AUTH, timeout=30).content
    gb = requests.get(f"{URL}/view", params=fb, headers=AUTH, timeout=30).content
    assert ga == gb
    c = wait(submit(template(seed=12, prefix="py/det")))
    gc = requests.get(f"{URL}/view", params=c["outputs"]["9"]["images"][0], headers=AUTH, timeout=30).content
    assert gc != ga


def test_concurrent_submitters_lose_nothing():
    n_clients = int(os.environ.get("KILN_LOAD_CLIENTS", "12"))
    per_client = 2

    def one(i):
        ids = []
        for k in range(per_client):
            g = template(steps=1, seed=1000 + i * 10 + k, prefix=f"py/load{i}")
            ids.append(submit(g))
            requests.get(f"{URL}/queue", headers=AUTH, timeout=60)
        return ids

    with concurrent.futures.ThreadPoolExecutor(n_clients) as ex:
        ids = [pid for r in ex.map(one, range(n_clients)) for pid in r]
    assert len(ids) == len(set(ids)) == n_clients * per_client
    for pid in ids:
        assert wait(pid, timeout=300)["status"]["status_str"] == "success"
    hist = requests.get(f"{URL}/history", headers=AUTH, timeout=60).json()
    assert all(pid in hist for pid in ids)
    files = [i["filename"] for pid in ids for i in hist[pid]["outputs"]["9"]["images"]]
    assert len(files) == len(ids)
    q = requests.get(f"{URL}/queue", headers=AUTH, timeout=30).json()
    assert q == {"queue_running": [], "queue_pending": []}


def test_bad_token_and_prompt_front():
    r = requests.get(f"{URL}/queue", headers={"Authorization": "Bearer nope"}, timeout=10)
    assert r.status_code == 401 and r.json()["error"]["type"] == "unauthorized"
    pid = str(uuid.uuid4())
    g = template(prefix="py/front")
    r = requests.post(f"{URL}/prompt", json={"prompt": g, "prompt_id": pid, "front": True}, headers=AUTH)
    assert r.status_code == 200 and r.json()["prompt_id"] == pid
    r = requests.post(f"{URL}/prompt", json={"prompt": g, "prompt_id": pid}, headers=AUTH)
    assert r.status_code == 400  # the id is taken
    assert wait(pid)["status"]["status_str"] == "success"
