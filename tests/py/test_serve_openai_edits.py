"""/v1/images/edits, the `model` ids and the `lora` extension as the real `openai` SDK uses them, against
`kiln serve` on the tiny models (started by tests/cli/serve_openai_edits.sh with a models folder holding the tiny
FLUX.2 [klein] files, the tiny FLUX.1 [dev] and [schnell] ComfyUI files and a LoRA in models/loras).

The checks on refused requests (bad uploads, mask, limits, field types, model and lora validation) need no
model to run; test_e2e_* run the edits and FLUX.1/LoRA graphs through the engine.

Environment: KILN_URL, KILN_TOKEN, KILN_SCRATCH (no error may name it), KILN_INPUT (the server's input folder:
bad uploads must leave nothing there), KILN_IMAGES (tests/data/images).
"""
import base64
import hashlib
import io
import os
import struct
import uuid

import openai as _oa
import openai
import pytest
import requests

URL = os.environ["KILN_URL"]
TOKEN = os.environ["KILN_TOKEN"]
SCRATCH = os.environ["KILN_SCRATCH"]
INPUT = os.environ["KILN_INPUT"]
IMAGES = os.environ["KILN_IMAGES"]
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FAST = {"num_inference_steps": 1, "seed": 3}


def client():
    return openai.OpenAI(base_url=f"{URL}/v1", api_key=TOKEN, max_retries=0, timeout=120,
                         http_client=_oa.DefaultHttpxClient(timeout=120))


def img(name):
    with open(os.path.join(IMAGES, name), "rb") as f:
        return f.read()


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:16]
    return struct.unpack(">II", data[16:24])


def idat(data):
    """The PNG's pixel data (its IDAT chunks), without the text chunks that carry the job's graph."""
    out, b = b"", data[8:]
    while b:
        n, = struct.unpack(">I", b[:4])
        out += b[8:8 + n] if b[4:8] == b"IDAT" else b""
        b = b[12 + n:]
    assert out, "no pixel data"
    return out


def n_jobs():
    return len(requests.get(f"{URL}/history", headers=AUTH, timeout=60).json())


def inputs():
    return sorted(os.listdir(INPUT))


def edit_raw(files, data, headers=None):
    return requests.post(f"{URL}/v1/images/edits", files=files, data=data, headers={**AUTH, **(headers or {})},
                         timeout=120)


def refused(r, param, words, status=400):
    assert r.status_code == status, r.text
    e = r.json()["error"]
    assert e["param"] == param and words in e["message"], e
    assert r.headers.get("x-should-retry") == "false"
    assert SCRATCH not in r.text and "/tmp/" not in r.text, r.text
    return e


# ---- refused uploads: a clear error naming image, nothing written, no job ------------------------------------

@pytest.mark.parametrize("name,words", [
    ("bad-truncated.png", "image 1 is not usable: png:"),
    ("bad-30000x30000.png", "30000x30000 is over the limit"),
    ("bad-not-an-image.png", "not an image"),
    ("bad-truncated.jpg", "image 1 is not usable: jpeg"),
    ("bad-truncated.webp", "image 1 is not usable: webp"),
])
def test_bad_upload_is_refused_and_nothing_written(name, words):
    before, files_before = n_jobs(), inputs()
    with pytest.raises(openai.BadRequestError) as e:
        client().images.edit(image=(name, img(name), "image/png"), prompt="make it red", extra_body=FAST)
    assert e.value.param == "image" and words in e.value.message, e.value.message
    assert e.value.response.headers.get("x-should-retry") == "false"
    assert SCRATCH not in e.value.message and "/tmp/" not in e.value.message
    assert inputs() == files_before and n_jobs() == before


def test_bad_second_image_writes_not_the_first():
    files_before = inputs()
    r = edit_raw([("image[]", ("a.png", img("ref-90x70.png"), "image/png")),
                  ("image[]", ("b.png", img("bad-truncated.png"), "image/png"))], {"prompt": "x"})
    refused(r, "image", "image 2 is not usable")
    assert inputs() == files_before


def test_small_and_elongated_references_are_refused():
    tiny = img("rgb.png")  # under the pipeline's 64-pixel minimum side
    w, h = png_size(tiny)
    assert min(w, h) < 64, (w, h)
    refused(edit_raw({"image": ("t.png", tiny, "image/png")}, {"prompt": "x"}), "image", "image 1 is not usable")


def test_mask_is_refused_by_name():
    before = n_jobs()
    with pytest.raises(openai.BadRequestError) as e:
        client().images.edit(image=("a.png", img("ref-90x70.png"), "image/png"),
                             mask=("m.png", img("ref-90x70.png"), "image/png"), prompt="x")
    assert e.value.param == "mask" and "does not inpaint" in e.value.message
    assert n_jobs() == before


@pytest.mark.parametrize("files,data,param,words", [
    ([("prompt", (None, "x", None))], {}, "image", "image is required"),
    ([("image", ("a.txt", b"hello", "text/plain"))], {"prompt": "x"}, "image", "content type 'text/plain'"),
    ([("image[]", (f"{i}.png", b"x", "image/png")) for i in range(11)], {"prompt": "x"}, "image", "at most 10 images"),
    ([("image", ("a.png", b"", "image/png"))], {"prompt": "x"}, "image", "empty file"),
    ([("image", ("a.png", "REF", "image/png"))], {}, "prompt", "prompt is required"),
    ([("image", ("a.png", "REF", "image/png"))], {"prompt": "x", "n": "two"}, "n", "n must be an integer"),
    ([("image", ("a.png", "REF", "image/png"))], {"prompt": "x", "size": "100x100"}, "size", "multiples of 16"),
    # typed as the JSON API's fields: a valid n, stream, guidance_scale and seed pass, then size is refused
    ([("image", ("a.png", "REF", "image/png"))], {"prompt": "x", "n": "2", "stream": "false", "guidance_scale": "1.5",
                                                  "seed": "4", "num_inference_steps": "1", "size": "100x100"}, "size",
     "multiples of 16"),
    ([("image", ("a.png", "REF", "image/png"))], {"prompt": "x", "stream": "maybe"}, "stream", "true or false"),
    ([("image", ("a.png", "REF", "image/png"))], {"prompt": "x", "bogus": "1"}, "bogus", "Unrecognized request argument"),
    ([("image", ("a.png", "REF", "image/png")), ("prompt", (None, "y", None))], {"prompt": "x"}, "prompt", "given twice"),
    ([("image", ("a.png", "REF", "image/png")), ("seed", ("s.txt", b"1", "text/plain"))], {"prompt": "x"}, "seed",
     "only image takes files"),
    ([("image", ("a.png", "REF", "image/png"))], {"prompt": "x", "model": "flux.1-dev"}, "model",
     "no reference-image editing"),
    ([("image", ("a.png", "REF", "image/png"))], {"prompt": "x", "lora": "[{\"name\": "}, "lora", "not valid JSON"),
    ([("image", ("a.png", "REF", "image/png"))], {"prompt": "x", "lora[][strength]": "1"}, "lora", "without its name"),
    ([("image", ("a.png", "REF", "image/png")), ("size", (None, b"64x64\xff", None))], {"prompt": "x"}, "size",
     "not valid UTF-8"),
    ([("image", ("a.png", "REF", "image/png")), ("a b", (None, "1", None))], {"prompt": "x"}, None,
     "form field name must be"),
])
def test_form_errors_name_the_param(files, data, param, words):
    files = [(k, (n, img("ref-90x70.png") if b == "REF" else b, t)) for k, (n, b, t) in files]
    before, files_before = n_jobs(), inputs()
    refused(edit_raw(files, data), param, words)
    assert n_jobs() == before and inputs() == files_before


def test_json_body_is_refused():
    r = requests.post(f"{URL}/v1/images/edits", json={"prompt": "x", "image": "a.png"}, headers=AUTH, timeout=60)
    assert r.status_code == 400 and "multipart/form-data" in r.json()["error"]["message"], r.text


def test_unterminated_multipart_is_refused():
    b = b"--XyZ\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nx\r\n--XyZ\r\n" \
        b"Content-Disposition: form-data; name=\"image\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n" + \
        img("ref-90x70.png") + b"\r\n"  # no closing --XyZ--: the body was cut
    files_before = inputs()
    r = requests.post(f"{URL}/v1/images/edits", data=b, timeout=60,
                      headers={**AUTH, "Content-Type": "multipart/form-data; boundary=XyZ"})
    assert r.status_code == 400 and "closing boundary" in r.json()["error"]["message"], r.text
    assert inputs() == files_before


# ---- model ids and lora, validated before any job -----------------------------------------------------------

def test_models_lists_the_ids():
    ids = [m.id for m in client().models.list().data]
    assert ids[:3] == ["flux.2-klein-4b", "flux.1-dev", "flux.1-schnell"], ids  # ids first, in file order
    assert "flux-2-klein-4b.safetensors" in ids and "flux1-dev.safetensors" in ids, ids


def post(body):
    return requests.post(f"{URL}/v1/images/generations", json=body, headers=AUTH, timeout=120)


@pytest.mark.parametrize("body,param,words", [
    ({"prompt": "x", "model": "flux.1-pro"}, "model",
     "Supported values are: 'flux.2-klein-4b', 'flux.1-dev', 'flux.1-schnell', 'flux-2-klein-4b', 'flux1-dev'"),
    ({"prompt": "x", "model": "flux.1-dev", "negative_prompt": "y"}, "negative_prompt", "FluxGuidance"),
    ({"prompt": "x", "lora": "nope.safetensors"}, "lora", "'nope.safetensors' is not installed (models/loras has "
     "'lora-kohya.safetensors')"),
    ({"prompt": "x", "lora": "../loras/lora-kohya.safetensors"}, "lora", "no path"),
    ({"prompt": "x", "lora": "/etc/passwd"}, "lora", "no path"),
    ({"prompt": "x", "lora": 3}, "lora", "a file name from models/loras"),
    ({"prompt": "x", "lora": [{"name": "lora-kohya.safetensors", "strength": 1000}]}, "lora", "from -100 to 100"),
    ({"prompt": "x", "lora": [{"name": "lora-kohya.safetensors", "strength": "1"}]}, "lora", "from -100 to 100"),
    ({"prompt": "x", "lora": [{"name": "lora-kohya.safetensors", "weight": 1}]}, "lora", "'weight' is not one"),
    ({"prompt": "x", "lora": ["lora-kohya.safetensors"] * 9}, "lora", "at most 8 adapters"),
])
def test_model_and_lora_errors(body, param, words):
    before = n_jobs()
    refused(post(body), param, words)
    assert n_jobs() == before


# ---- end to end (the engine runs the graphs) ----------------------------------------------------------------

def b64png(resp, i=0):
    return base64.b64decode(resp.data[i].b64_json)


def test_e2e_edit_one_image_sdk():
    before = n_jobs()
    ref = img("ref-100x72.png")
    r = client().images.edit(image=("ref.png", ref, "image/png"), prompt="make it red", extra_body=FAST)
    assert png_size(b64png(r)) == (96, 64)  # "auto": the reference's prepared size (center-cropped to 16s)
    assert r.size == "96x64"
    assert n_jobs() == before + 1
    name = "openai-" + hashlib.sha256(ref).hexdigest()[:32] + ".png"
    assert name in inputs(), inputs()  # the server-chosen name the graph's LoadImage reads
    hist = requests.get(f"{URL}/history", headers=AUTH, timeout=60).json()
    assert any(name in str(h.get("prompt")) for h in hist.values())


def test_e2e_edit_three_images_sdk():
    refs = [("a.png", img("ref-100x72.png"), "image/png"), ("b.png", img("ref-70x150.png"), "image/png"),
            ("c.png", img("ref-90x70.png"), "image/png")]
    r = client().images.edit(image=refs, prompt="all three together", size="64x64", n=2, extra_body=FAST)
    assert len(r.data) == 2 and all(png_size(b64png(r, i)) == (64, 64) for i in range(2))
    one = client().images.edit(image=refs[:1], prompt="all three together", size="64x64", extra_body=FAST)
    assert idat(b64png(one)) != idat(b64png(r)), "the other references changed nothing"
    plain = client().images.generate(prompt="all three together", size="64x64", extra_body=FAST)
    assert idat(b64png(one)) != idat(b64png(plain)), "the reference changed nothing"


def test_e2e_edit_is_idempotent():
    before = n_jobs()
    key = "k-" + uuid.uuid4().hex
    ref = ("a.png", img("ref-90x70.png"), "image/png")
    a = client().images.edit(image=ref, prompt="x", extra_body=FAST, extra_headers={"Idempotency-Key": key})
    b = client().images.edit(image=ref, prompt="x", extra_body=FAST, extra_headers={"Idempotency-Key": key})
    assert a.data[0].b64_json == b.data[0].b64_json and n_jobs() == before + 1
    # the same key with another image is another body
    with pytest.raises(openai.BadRequestError) as e:
        client().images.edit(image=("b.png", img("ref-100x72.png"), "image/png"), prompt="x", extra_body=FAST,
                             extra_headers={"Idempotency-Key": key})
    assert e.value.code == "idempotency_key_reused"


@pytest.mark.parametrize("model", ["flux.1-dev", "flux.1-schnell", "flux1-dev"])
def test_e2e_flux1_model_returns_an_image(model):
    r = client().images.generate(model=model, prompt="a red fox", size="80x64", extra_body={**FAST, "num_inference_steps": 2})
    assert png_size(b64png(r)) == (80, 64)


def test_e2e_flux1_and_flux2_differ():
    g = lambda m: idat(b64png(client().images.generate(model=m, prompt="a red fox", size="64x64", extra_body=FAST)))
    assert g("flux.1-dev") != g("flux.1-schnell") != g("flux.2-klein-4b")


def test_e2e_lora_changes_the_image():
    g = lambda **kw: idat(b64png(client().images.generate(prompt="a red fox", size="64x64",
                                                          extra_body={**FAST, **kw})))
    plain = g()
    one = g(lora="lora-kohya.safetensors")
    assert one != plain
    assert g(lora=[{"name": "lora-kohya.safetensors", "strength": 1}]) == one
    assert g(lora=[{"name": "lora-kohya.safetensors", "strength": 0.5}]) not in (one, plain)
    assert g(lora=[{"name": "lora-kohya.safetensors", "strength": 0}]) == plain
    # the SDK's multipart form carries it too (lora[][name], lora[][strength])
    e = lambda **kw: idat(b64png(client().images.edit(image=("a.png", img("ref-90x70.png"), "image/png"),
                                                      prompt="x", extra_body={**FAST, **kw})))
    assert e(lora=[{"name": "lora-kohya.safetensors", "strength": 0.8}]) != e()


def test_e2e_edit_streams_like_generations():
    ref = ("a.png", img("ref-90x70.png"), "image/png")
    events = list(client().images.edit(image=ref, prompt="x", stream=True, partial_images=1,
                                       extra_body={"num_inference_steps": 2, "seed": 3}))
    assert [e.type for e in events] == ["image_generation.partial_image", "image_generation.completed"], events
    plain = client().images.edit(image=ref, prompt="x", extra_body={"num_inference_steps": 2, "seed": 3})
    assert events[-1].b64_json == plain.data[0].b64_json and events[-1].size == "80x64"
